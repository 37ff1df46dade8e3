//! Classifies HTTP-level failures (refused, TLS, 401, 403/421, HTML pages, 404) into `ClientError`s.
//! Imports no transport: the transports (`sse`, `connect`'s Streamable HTTP) call it.

use std::error::Error as StdError;

use http::{HeaderMap, StatusCode};
use reqwest::Url;
use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};

use crate::error::ClientError;

/// The SSE transport's error: a POST to its message endpoint that failed or was refused. Defined
/// here, not in `sse`, so `from_error_chain` can recognise it without importing the transport.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseTransportError {
    #[error("POST {endpoint} failed")]
    Http {
        endpoint: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("POST {endpoint} answered HTTP {status}")]
    Status {
        endpoint: String,
        status: u16,
        content_type: Option<String>,
    },
}

/// `err: cause: cause…` on one line.
pub(crate) fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The innermost cause alone: what went wrong without the layers around it (rmcp's transport
/// errors name their Rust types, which mean nothing to the person reading).
pub(crate) fn root_cause(err: &(dyn StdError + 'static)) -> String {
    let mut current = err;
    while let Some(cause) = current.source() {
        current = cause;
    }
    current.to_string()
}

/// Looks through an error's causes for something we can name precisely.
pub(crate) fn from_error_chain(
    target: &str,
    err: &(dyn StdError + 'static),
    token_sent: bool,
) -> Option<ClientError> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(e) = e.downcast_ref::<reqwest::Error>() {
            return Some(from_reqwest(target, e));
        }
        if let Some(SseTransportError::Status {
            status,
            content_type,
            ..
        }) = e.downcast_ref()
        {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY);
            return from_status(target, status, content_type.as_deref(), token_sent);
        }
        if e.downcast_ref::<AuthRequiredError>().is_some() {
            return Some(ClientError::Unauthorized {
                url: target.into(),
                token_sent,
            });
        }
        if e.downcast_ref::<InsufficientScopeError>().is_some() {
            return Some(ClientError::Forbidden {
                url: target.into(),
                status: 403,
            });
        }
        current = e.source();
    }
    None
}

/// Refused, DNS, TLS, timeout: failures before any HTTP status.
pub(crate) fn from_reqwest(target: &str, err: &reqwest::Error) -> ClientError {
    let text = chain(err);
    let lower = text.to_lowercase();
    let refused = io_kind(err) == Some(std::io::ErrorKind::ConnectionRefused)
        || lower.contains("connection refused");
    if refused {
        return ClientError::Connect {
            target: target.into(),
            reason: "connection refused".into(),
        };
    }
    const TLS_MARKERS: [&str; 7] = [
        "certificate",
        "tls",
        "ssl",
        "handshake",
        "corrupt message",
        "peer misbehaved",
        "unknownissuer",
    ];
    if target.starts_with("https") && TLS_MARKERS.iter().any(|m| lower.contains(m)) {
        return ClientError::Tls {
            url: target.into(),
            reason: text,
        };
    }
    if err.is_timeout() {
        return ClientError::Connect {
            target: target.into(),
            reason: format!("timed out: {text}"),
        };
    }
    if err.is_connect() || err.is_request() {
        return ClientError::Connect {
            target: target.into(),
            reason: text,
        };
    }
    ClientError::Protocol(text)
}

fn io_kind(err: &(dyn StdError + 'static)) -> Option<std::io::ErrorKind> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        current = e.source();
    }
    None
}

/// An HTTP answer that is not the start of an MCP conversation, or `None` if it looks fine.
pub(crate) fn from_status(
    target: &str,
    status: StatusCode,
    content_type: Option<&str>,
    token_sent: bool,
) -> Option<ClientError> {
    let url = target.to_owned();
    let is_html = content_type.is_some_and(|ct| ct.to_ascii_lowercase().starts_with("text/html"));
    match status {
        StatusCode::UNAUTHORIZED => Some(ClientError::Unauthorized { url, token_sent }),
        StatusCode::FORBIDDEN | StatusCode::MISDIRECTED_REQUEST => Some(ClientError::Forbidden {
            url,
            status: status.as_u16(),
        }),
        _ if is_html => Some(ClientError::NotMcp {
            url,
            what: format!("an HTML page (HTTP {status}) instead of JSON"),
        }),
        StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => Some(ClientError::NotMcp {
            url,
            what: format!("HTTP {status}"),
        }),
        s if !s.is_success() => Some(ClientError::Protocol(format!("{url} answered HTTP {s}"))),
        _ => match content_type {
            Some(ct)
                if ct.starts_with("application/json") || ct.starts_with("text/event-stream") =>
            {
                None
            }
            Some(ct) => Some(ClientError::NotMcp {
                url,
                what: format!("content type `{ct}`"),
            }),
            None => Some(ClientError::NotMcp {
                url,
                what: "no content type".into(),
            }),
        },
    }
}

pub(crate) fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// One plain `initialize` POST with the same headers, to name why rmcp's handshake failed.
pub(crate) async fn probe_streamable(
    client: &reqwest::Client,
    url: &Url,
    headers: &HeaderMap,
) -> Option<ClientError> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "pyrun-mcp-client-probe", "version": env!("CARGO_PKG_VERSION") }
        }
    });
    let response = client
        .post(url.clone())
        .headers(headers.clone())
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .json(&body)
        .send()
        .await;
    let token_sent = headers.contains_key(http::header::AUTHORIZATION);
    match response {
        Err(e) => Some(from_reqwest(url.as_str(), &e)),
        Ok(r) => from_status(
            url.as_str(),
            r.status(),
            content_type(r.headers()).as_deref(),
            token_sent,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "https://abc.example/mcp";

    #[test]
    fn statuses_map_to_errors_a_person_understands() {
        let html = Some("text/html; charset=utf-8");
        assert!(matches!(
            from_status(URL, StatusCode::UNAUTHORIZED, None, false),
            Some(ClientError::Unauthorized {
                token_sent: false,
                ..
            })
        ));
        assert!(matches!(
            from_status(URL, StatusCode::MISDIRECTED_REQUEST, None, false),
            Some(ClientError::Forbidden { status: 421, .. })
        ));
        // A tunnel's interstitial page answers 200 with HTML.
        assert!(matches!(
            from_status(URL, StatusCode::OK, html, false),
            Some(ClientError::NotMcp { .. })
        ));
        assert!(matches!(
            from_status(URL, StatusCode::BAD_GATEWAY, html, false),
            Some(ClientError::NotMcp { .. })
        ));
        assert!(matches!(
            from_status(URL, StatusCode::NOT_FOUND, None, false),
            Some(ClientError::NotMcp { .. })
        ));
        assert!(from_status(URL, StatusCode::OK, Some("application/json"), false).is_none());
        assert!(from_status(URL, StatusCode::OK, Some("text/event-stream"), false).is_none());
    }
}

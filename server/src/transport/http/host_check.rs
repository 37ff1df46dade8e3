//! DNS-rebinding protection: the Host and Origin checks every route passes before any handler runs.
//!
//! A browser page on `evil.example` can make the victim's browser talk to `127.0.0.1:8000` by
//! rebinding its DNS name; such requests carry `Host: evil.example` (and a foreign `Origin`).
//! Loopback names are allowed by default; `--allowed-host` adds e.g. a tunnel's hostname.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{header, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::client_message::ClientMessage;

/// Host names accepted without configuration.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// One allowed host, optionally pinned to a port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AllowedHost {
    host: String,
    port: Option<u16>,
}

/// The hosts (and therefore origins) this server answers to.
#[derive(Clone, Debug)]
pub struct HostPolicy {
    allowed: Arc<[AllowedHost]>,
}

impl HostPolicy {
    /// Loopback names plus `extra` entries (`host` or `host:port`, IPv6 in brackets).
    pub fn new(extra: &[String]) -> Self {
        let allowed = LOOPBACK_HOSTS
            .iter()
            .map(|host| AllowedHost {
                host: (*host).to_owned(),
                port: None,
            })
            .chain(extra.iter().filter_map(|entry| parse_allowed(entry)))
            .collect();
        Self { allowed }
    }

    /// True when a `Host` header value names one of our hosts.
    pub fn allows_host(&self, value: &str) -> bool {
        let Ok(authority) = value.parse::<Authority>() else {
            return false;
        };
        let host = normalize(authority.host());
        self.allowed.iter().any(|allowed| {
            allowed.host == host && allowed.port.is_none_or(|p| Some(p) == authority.port_u16())
        })
    }

    /// True when an `Origin` header value is `http(s)://` one of our hosts.
    pub fn allows_origin(&self, value: &str) -> bool {
        let Ok(uri) = value.parse::<Uri>() else {
            return false;
        };
        let Some(authority) = uri.authority() else {
            return false;
        };
        let default_port = match uri.scheme_str() {
            Some("http") => 80,
            Some("https") => 443,
            _ => return false,
        };
        let host = normalize(authority.host());
        let port = authority.port_u16().unwrap_or(default_port);
        self.allowed
            .iter()
            .any(|allowed| allowed.host == host && allowed.port.is_none_or(|p| p == port))
    }

    /// The same policy in the form rmcp's Streamable HTTP service takes for its Host check.
    pub fn rmcp_allowed_hosts(&self) -> Vec<String> {
        self.allowed
            .iter()
            .map(|allowed| match allowed.port {
                Some(port) => format!("{}:{port}", bracketed(&allowed.host)),
                None => allowed.host.clone(),
            })
            .collect()
    }

    /// The same policy in the form rmcp's Streamable HTTP service takes for its Origin check.
    pub fn rmcp_allowed_origins(&self) -> Vec<String> {
        self.allowed
            .iter()
            .flat_map(|allowed| {
                let host = bracketed(&allowed.host);
                let port = allowed
                    .port
                    .map_or_else(|| "*".to_owned(), |p| p.to_string());
                ["http", "https"].map(|scheme| format!("{scheme}://{host}:{port}"))
            })
            .collect()
    }
}

fn parse_allowed(entry: &str) -> Option<AllowedHost> {
    let entry = entry.trim();
    if entry.is_empty() {
        return None;
    }
    match entry.parse::<Authority>() {
        Ok(authority) => Some(AllowedHost {
            host: normalize(authority.host()),
            port: authority.port_u16(),
        }),
        Err(_) => Some(AllowedHost {
            host: normalize(entry),
            port: None,
        }),
    }
}

fn normalize(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// Middleware: 403 for a foreign Host, whatever the Origin (for endpoints any page may call).
pub async fn check_host(
    State(policy): State<HostPolicy>,
    request: Request,
    next: Next,
) -> Response {
    match foreign_host(&policy, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// The most of a refused header a log line shows: anyone may send these, before any token is
/// checked, and a header may be hundreds of KB.
const SHOWN_HEADER: usize = 256;

/// A refused header as the log shows it: its first [`SHOWN_HEADER`] characters.
fn shown_header(value: &str) -> String {
    match value.char_indices().nth(SHOWN_HEADER) {
        Some((end, _)) => format!("{}… ({} bytes)", &value[..end], value.len()),
        None => value.to_owned(),
    }
}

/// The 403 for a request whose Host is not ours.
fn foreign_host(policy: &HostPolicy, request: &Request) -> Option<Response> {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    if host.as_deref().is_some_and(|host| policy.allows_host(host)) {
        return None;
    }
    let shown = host.as_deref().map(shown_header);
    tracing::warn!(host = ?shown, "rejected a request for a foreign Host (DNS rebinding?)");
    Some(
        (
            StatusCode::FORBIDDEN,
            ClientMessage::new("Forbidden: Host header is not allowed"),
        )
            .into_response(),
    )
}

/// Middleware: 403 for a foreign Host or Origin, before any route sees the request.
pub async fn check_host_and_origin(
    State(policy): State<HostPolicy>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(refusal) = foreign_host(&policy, &request) {
        return refusal;
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin_ok = origin
            .to_str()
            .is_ok_and(|origin| policy.allows_origin(origin));
        if !origin_ok {
            let shown = shown_header(&String::from_utf8_lossy(origin.as_bytes()));
            tracing::warn!(origin = ?shown, "rejected a request from a foreign Origin");
            let message = ClientMessage::new("Forbidden: Origin is not allowed");
            return (StatusCode::FORBIDDEN, message).into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HostPolicy {
        HostPolicy::new(&["Tunnel.Example.com".into(), "pinned.example:8443".into()])
    }

    #[test]
    fn loopback_hosts_pass_on_any_port() {
        let policy = HostPolicy::new(&[]);
        for host in ["localhost", "localhost:8000", "127.0.0.1:1", "[::1]:8000"] {
            assert!(policy.allows_host(host), "{host}");
        }
    }

    #[test]
    fn foreign_hosts_fail() {
        let policy = policy();
        for host in [
            "evil.example",
            "evil.example:8000",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "pinned.example:80",
            "",
            "not a host",
        ] {
            assert!(!policy.allows_host(host), "{host}");
        }
    }

    #[test]
    fn configured_hosts_pass_case_insensitively() {
        let policy = policy();
        assert!(policy.allows_host("tunnel.example.com"));
        assert!(policy.allows_host("TUNNEL.example.com:443"));
        assert!(policy.allows_host("pinned.example:8443"));
    }

    #[test]
    fn origins_follow_the_hosts() {
        let policy = policy();
        assert!(policy.allows_origin("http://localhost:6274"));
        assert!(policy.allows_origin("https://tunnel.example.com"));
        assert!(policy.allows_origin("https://pinned.example:8443"));
        assert!(!policy.allows_origin("https://pinned.example"));
        assert!(!policy.allows_origin("http://evil.example"));
        assert!(!policy.allows_origin("null"));
        assert!(!policy.allows_origin("file://localhost"));
    }

    #[test]
    fn rmcp_forms_keep_ports_and_brackets() {
        let policy = policy();
        let hosts = policy.rmcp_allowed_hosts();
        assert!(hosts.contains(&"::1".to_owned()));
        assert!(hosts.contains(&"pinned.example:8443".to_owned()));
        let origins = policy.rmcp_allowed_origins();
        assert!(origins.contains(&"http://[::1]:*".to_owned()));
        assert!(origins.contains(&"https://pinned.example:8443".to_owned()));
    }
}

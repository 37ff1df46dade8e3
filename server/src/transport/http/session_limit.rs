//! The cap on live sessions (Streamable HTTP and SSE together): past it, new sessions get 503.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::client_message::ClientMessage;
use crate::transport::sse::SseSessions;

/// Counts the live sessions of both transports against one maximum.
#[derive(Clone)]
pub struct SessionLimit {
    max: usize,
    max_body_bytes: usize,
    mcp: Arc<LocalSessionManager>,
    sse: Arc<SseSessions>,
}

impl SessionLimit {
    pub fn new(
        max: usize,
        max_body_bytes: usize,
        mcp: Arc<LocalSessionManager>,
        sse: Arc<SseSessions>,
    ) -> Self {
        Self {
            max,
            max_body_bytes,
            mcp,
            sse,
        }
    }

    async fn is_full(&self) -> bool {
        let live = self.mcp.sessions.read().await.len() + self.sse.len();
        live >= self.max
    }

    fn refuse(&self) -> Response {
        tracing::warn!(max = self.max, "refused a new session: limit reached");
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            ClientMessage::new("Service Unavailable: ")
                .number(self.max)
                .then(" live sessions is this server's limit (--max-sessions); retry later"),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        response
    }
}

/// Middleware for `/sse`: every GET opens a session.
pub async fn limit_sse_sessions(
    State(limit): State<SessionLimit>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET && limit.is_full().await {
        return limit.refuse();
    }
    next.run(request).await
}

/// Middleware for `/mcp`: a POSTed `initialize` without a session id opens a session.
pub async fn limit_mcp_sessions(
    State(limit): State<SessionLimit>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST || request.headers().contains_key(HEADER_SESSION_ID) {
        return next.run(request).await;
    }
    // Peek at the body; rmcp enforces the same size limit when it reads it again.
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, limit.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let message = ClientMessage::new("Payload Too Large");
            return (StatusCode::PAYLOAD_TOO_LARGE, message).into_response();
        }
    };
    if is_initialize(&bytes) && limit.is_full().await {
        return limit.refuse();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method<'_>>(body)
        .ok()
        .and_then(|m| m.method)
        .is_some_and(|method| method == "initialize")
}

#[cfg(test)]
mod tests {
    use super::is_initialize;

    #[test]
    fn only_initialize_requests_open_sessions() {
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!is_initialize(b"not json"));
    }
}

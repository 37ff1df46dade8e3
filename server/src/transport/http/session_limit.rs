//! The caps on live sessions (Streamable HTTP and SSE together): past the server's cap, or past
//! one caller's share of it (`--max-sessions-per-caller`), a new session gets 503. The share
//! keeps one caller from taking every slot while others wait. Sessions being opened count too:
//! a request that may open one holds a [`Reservation`] from its check until its answer, taken
//! under the same lock as the check, so concurrent opens cannot all pass one free slot.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;

use super::session_owner::{Reservation, SessionBook};
use crate::client_message::ClientMessage;
use crate::transport::sse::SseSessions;
use pyrun_run::caller::Caller;

/// Counts the live sessions of both transports against one maximum, and each caller's against
/// its share.
#[derive(Clone)]
pub struct SessionLimit {
    max: usize,
    per_caller: usize,
    max_body_bytes: usize,
    mcp: Arc<SessionBook>,
    sse: Arc<SseSessions>,
}

/// Which cap a new session would pass.
enum Full {
    Server,
    Caller,
}

impl SessionLimit {
    pub fn new(
        (max, per_caller): (usize, usize),
        max_body_bytes: usize,
        mcp: Arc<SessionBook>,
        sse: Arc<SseSessions>,
    ) -> Self {
        Self {
            max,
            per_caller,
            max_body_bytes,
            mcp,
            sse,
        }
    }

    /// A place for one more session of `caller`, or the cap it would pass.
    fn reserve(&self, caller: Option<&Caller>) -> Result<Reservation, Full> {
        let caller = caller.cloned();
        let mut book = self.mcp.lock();
        if book.mcp_and_opening() + self.sse.len() >= self.max {
            return Err(Full::Server);
        }
        let own = book.of_caller(&caller) + caller.as_ref().map_or(0, |c| self.sse.count(c));
        if own >= self.per_caller {
            return Err(Full::Caller);
        }
        Ok(self.mcp.reserve(&mut book, caller))
    }

    fn refuse(&self, full: Full) -> Response {
        let message = match full {
            Full::Server => {
                tracing::warn!(max = self.max, "refused a new session: limit reached");
                ClientMessage::new("Service Unavailable: ")
                    .number(self.max)
                    .then(" live sessions is this server's limit (--max-sessions); retry later")
            }
            Full::Caller => {
                tracing::warn!(
                    max = self.per_caller,
                    "refused a new session: the caller's share is taken"
                );
                ClientMessage::new("Service Unavailable: ")
                    .number(self.per_caller)
                    .then(
                        " live sessions of yours is this server's limit per caller \
                         (--max-sessions-per-caller); close one or retry later",
                    )
            }
        };
        let mut response = (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
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
    if request.method() != Method::GET {
        return next.run(request).await;
    }
    match limit.reserve(request.extensions().get::<Caller>()) {
        // Held until the stream's session is in the SSE map (the handler puts it there before
        // it answers).
        Ok(_opening) => next.run(request).await,
        Err(full) => limit.refuse(full),
    }
}

/// Middleware for `/mcp`: a POSTed `initialize` without a session id opens a session (one with a
/// session id, even an unreadable one, never does: see `session_owner`).
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
    let _opening = if is_initialize(&bytes) {
        match limit.reserve(parts.extensions.get::<Caller>()) {
            Ok(opening) => Some(opening),
            Err(full) => return limit.refuse(full),
        }
    } else {
        None
    };
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

//! `DELETE /mcp` (a client ending its session) answers `204 No Content`, and `404` for a session
//! that does not exist. rmcp's Streamable HTTP service answers `202 Accepted` to both, and the
//! Python SDK, which expects 200 or 204, logs "Session termination failed: 202" on every close.
//!
//! Only the status changes: rmcp still closes the session, and answers every other DELETE (no
//! session id, a bad protocol version header) itself.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;

use crate::client_message::ClientMessage;

/// Middleware for `/mcp`: a DELETE of a live session gets 204, of an unknown one 404 (the status
/// rmcp gives any other request naming a session it does not know).
pub async fn close_with_no_content(
    State(sessions): State<Arc<LocalSessionManager>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::DELETE {
        return next.run(request).await;
    }
    let session: Option<Arc<str>> = request
        .headers()
        .get("mcp-session-id")
        .and_then(|id| id.to_str().ok())
        .map(Into::into);
    if let Some(session) = session {
        if !sessions.has_session(&session).await.unwrap_or(true) {
            let message = ClientMessage::new("Not Found: Session not found");
            return (StatusCode::NOT_FOUND, message).into_response();
        }
    }
    let response = next.run(request).await;
    if response.status() != StatusCode::ACCEPTED {
        return response;
    }
    let (mut parts, _empty) = response.into_parts();
    parts.status = StatusCode::NO_CONTENT;
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::empty())
}

//! `DELETE /mcp` (a client ending its session) answers `204 No Content`, and `404` for a session
//! that does not exist. rmcp's Streamable HTTP service answers `202 Accepted` to both, and the
//! Python SDK, which expects 200 or 204, logs "Session termination failed: 202" on every close.
//!
//! Only the status of an accepted close changes: rmcp still closes the session, and its other
//! answers (no session id, a bad protocol version header, 405 on the stateless protocol) pass.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::session::SessionManager;

use super::session_owner::CallerSessions;
use crate::client_message::ClientMessage;

/// Middleware for `/mcp`: a DELETE that rmcp accepted gets 204 for a live session and 404 for an
/// unknown one (the status rmcp gives any other request naming a session it does not know).
pub async fn close_with_no_content(
    State(sessions): State<Arc<CallerSessions>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::DELETE {
        return next.run(request).await;
    }
    let session: Option<Arc<str>> = request
        .headers()
        .get(HEADER_SESSION_ID)
        .and_then(|id| id.to_str().ok())
        .map(Into::into);
    let live = match &session {
        Some(id) => sessions.has_session(id).await.unwrap_or(true),
        None => true,
    };
    let response = next.run(request).await;
    if response.status() != StatusCode::ACCEPTED {
        return response;
    }
    if !live {
        let message = ClientMessage::new("Not Found: Session not found");
        return (StatusCode::NOT_FOUND, message).into_response();
    }
    let (mut parts, _empty) = response.into_parts();
    parts.status = StatusCode::NO_CONTENT;
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::empty())
}

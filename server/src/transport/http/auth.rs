//! Bearer-token authentication for every route but `/health`, compared in constant time.

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::client_message::ClientMessage;
use crate::run::caller::Caller;

/// The token clients must send as `Authorization: Bearer TOKEN`; `None` turns the check off.
#[derive(Clone)]
pub struct RequiredToken(Option<Arc<[u8]>>);

impl RequiredToken {
    pub fn new(token: Option<&str>) -> Self {
        Self(token.map(|token| Arc::from(token.as_bytes())))
    }

    /// True when the request's `Authorization` header carries the token (or none is required).
    fn admits(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(expected) = &self.0 else {
            return true;
        };
        let Some(presented) = authorization.and_then(|value| bearer(value.as_bytes())) else {
            return false;
        };
        // Only the length can leak through timing; the content cannot.
        bool::from(presented.ct_eq(expected))
    }
}

impl fmt::Debug for RequiredToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.0.is_some() { "set" } else { "off" };
        f.debug_tuple("RequiredToken").field(&state).finish()
    }
}

/// The credentials of a `Bearer` authorization value (scheme matched case-insensitively).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let start = rest.iter().position(|b| *b != b' ')?;
    let end = rest.iter().rposition(|b| *b != b' ')? + 1;
    Some(&rest[start..end])
}

/// Middleware: 401 with `WWW-Authenticate: Bearer` unless the request carries the token. An
/// admitted request carries its [`Caller`] in its extensions from here on (rmcp hands them to
/// the tools with the request's parts; the SSE transport does the same).
pub async fn require_token(
    State(token): State<RequiredToken>,
    mut request: Request,
    next: Next,
) -> Response {
    if token.admits(request.headers().get(header::AUTHORIZATION)) {
        let caller = match token.0 {
            Some(_) => Caller::BearerToken,
            None => Caller::Anonymous,
        };
        request.extensions_mut().insert(caller);
        return next.run(request).await;
    }
    let mut response = (
        StatusCode::UNAUTHORIZED,
        ClientMessage::new(
            "Unauthorized: send Authorization: Bearer <token> (the server's --auth-token / MCP_AUTH_TOKEN)",
        ),
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"pyrun-mcp\""),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(token: Option<&str>, header: Option<&'static str>) -> bool {
        let header = header.map(HeaderValue::from_static);
        RequiredToken::new(token).admits(header.as_ref())
    }

    #[test]
    fn no_token_configured_admits_everyone() {
        assert!(admits(None, None));
    }

    #[test]
    fn the_right_token_is_admitted() {
        assert!(admits(Some("s3cret"), Some("Bearer s3cret")));
        assert!(admits(Some("s3cret"), Some("bearer  s3cret ")));
    }

    #[test]
    fn missing_wrong_or_malformed_credentials_are_refused() {
        for header in [
            None,
            Some("Bearer wrong"),
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("Basic s3cret"),
            Some("s3cret"),
            Some("Bearer "),
            Some("Bearers3cret"),
        ] {
            assert!(!admits(Some("s3cret"), header), "{header:?}");
        }
    }
}

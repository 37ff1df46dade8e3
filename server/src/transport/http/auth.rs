//! Bearer authentication for every route but `/health` (and the OAuth endpoints): the server's
//! static token, compared in constant time, or with `--oauth` an access token its authorization
//! server issued, looked up on every request (a revoked token fails at once). Without `--oauth`
//! the 401 is exactly what it always was; with it, the 401 points at the protected-resource
//! metadata (RFC 9728 §5.1) so clients can discover how to get a token.

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::unauthenticated::Unauthenticated;
use crate::client_message::ClientMessage;
use crate::oauth::OAuth;
use pyrun_run::caller::Caller;

/// The token clients must send as `Authorization: Bearer TOKEN`; `None` turns the check off.
#[derive(Clone)]
pub struct RequiredToken(Option<Arc<[u8]>>);

/// What a request must present: the static token, an OAuth access token, or (neither
/// configured) nothing.
#[derive(Clone, Debug)]
pub struct Authenticator {
    token: RequiredToken,
    oauth: Option<Arc<OAuth>>,
}

impl Authenticator {
    pub fn new(token: Option<&str>, oauth: Option<Arc<OAuth>>) -> Self {
        Self {
            token: RequiredToken::new(token),
            oauth,
        }
    }

    /// The caller a request's credentials stand for, or `None` (401).
    fn caller(&self, authorization: Option<&HeaderValue>) -> Option<Caller> {
        match (&self.token.0, &self.oauth) {
            (None, None) => return Some(Caller::Anonymous),
            (Some(_), _) if self.token.admits(authorization) => return Some(Caller::BearerToken),
            _ => {}
        }
        let oauth = self.oauth.as_ref()?;
        let presented = authorization.and_then(|value| bearer(value.as_bytes()))?;
        oauth.authenticate(std::str::from_utf8(presented).ok()?)
    }
}

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

/// The 401 of a server with `--oauth`: `WWW-Authenticate` names the protected-resource
/// metadata of the endpoint asked for (`/sse` and `/messages` have the SSE form), the scope,
/// and `invalid_token` when a token was sent but is not (or no longer) valid.
fn oauth_challenge(oauth: &OAuth, path: &str, token_presented: bool) -> Response {
    let suffix = if path.starts_with("/sse") || path.starts_with("/messages") {
        "/sse"
    } else {
        "/mcp"
    };
    let metadata = oauth
        .endpoints
        .url(&format!("/.well-known/oauth-protected-resource{suffix}"));
    let mut challenge = format!(
        "Bearer resource_metadata=\"{metadata}\", scope=\"{}\"",
        crate::oauth::SCOPE
    );
    let message = if token_presented {
        challenge.push_str(", error=\"invalid_token\", error_description=\"the access token is invalid, expired or revoked\"");
        ClientMessage::new("Unauthorized: the access token is invalid, expired or revoked; get a new one through OAuth")
    } else {
        ClientMessage::new("Unauthorized: connect through OAuth (see the resource_metadata in WWW-Authenticate), or send the server's bearer token")
    };
    let mut response = (StatusCode::UNAUTHORIZED, message).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        headers.insert(header::WWW_AUTHENTICATE, value);
    }
    // The refusal goes out before the request's body is read, and hyper then closes the
    // connection; saying so keeps an OAuth client (which asks for the metadata right after this
    // 401, on its pooled connection) from sending into a closing socket.
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
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
    State(auth): State<Authenticator>,
    mut request: Request,
    next: Next,
) -> Response {
    let authorization = request.headers().get(header::AUTHORIZATION);
    if let Some(caller) = auth.caller(authorization) {
        // The connection no longer counts against its address's unauthenticated ones.
        if let Some(place) = request.extensions().get::<Arc<Unauthenticated>>() {
            place.authenticated();
        }
        request.extensions_mut().insert(caller);
        return next.run(request).await;
    }
    if let Some(oauth) = &auth.oauth {
        let presented = authorization.is_some();
        return oauth_challenge(oauth, request.uri().path(), presented);
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

//! `/oauth/token` (authorization code with PKCE S256, refresh with rotation) and
//! `/oauth/revoke` (RFC 7009). Replays are treated as theft: a code or refresh token presented
//! twice ends every token of its grant. Tokens are bound to this server's one resource.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::store::{IssuedHashes, Redeemed, TokenGrant};
use super::{
    form_pairs, now, secrets, OAuth, ProtocolError, ACCESS_PREFIX, ACCESS_TOKEN_SECS,
    REFRESH_PREFIX, REFRESH_TOKEN_SECS,
};

/// Largest token or revocation request, in bytes.
pub const MAX_BODY_BYTES: usize = 8 * 1024;

/// `POST /oauth/token`.
pub async fn token(State(oauth): State<Arc<OAuth>>, body: Bytes) -> Response {
    match exchange(&oauth, &body) {
        Ok(response) => response,
        Err(error) => {
            tracing::info!(
                error = error.body.error,
                why = error.body.error_description,
                "refused a token request"
            );
            error.into_response()
        }
    }
}

fn exchange(oauth: &OAuth, body: &[u8]) -> Result<Response, ProtocolError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(
            ProtocolError::new("invalid_request", "the request is too large")
                .with_status(StatusCode::PAYLOAD_TOO_LARGE),
        );
    }
    let form = form_pairs(body)
        .ok_or_else(|| ProtocolError::new("invalid_request", "a parameter was given twice"))?;
    let field = |name: &str| form.get(name).map(String::as_str).filter(|v| !v.is_empty());
    if let Some(resource) = field("resource") {
        if !oauth.endpoints.names_this_resource(resource) {
            return Err(ProtocolError::new(
                "invalid_target",
                "the resource is not this server",
            ));
        }
    }
    let grant = match field("grant_type") {
        Some("authorization_code") => redeem_code(oauth, &field)?,
        Some("refresh_token") => redeem_refresh(oauth, &field)?,
        Some(_) => {
            return Err(ProtocolError::new(
                "unsupported_grant_type",
                "grant_type must be authorization_code or refresh_token",
            ))
        }
        None => {
            return Err(ProtocolError::new(
                "invalid_request",
                "grant_type is missing",
            ))
        }
    };
    issue(oauth, &grant)
}

fn redeem_code<'a>(
    oauth: &OAuth,
    field: &impl Fn(&str) -> Option<&'a str>,
) -> Result<TokenGrant, ProtocolError> {
    let (Some(code), Some(verifier)) = (field("code"), field("code_verifier")) else {
        return Err(ProtocolError::new(
            "invalid_request",
            "code and code_verifier are required",
        ));
    };
    let grant = match oauth.store.redeem_code(&secrets::token_hash(code), now())? {
        Redeemed::Fresh(grant) => grant,
        Redeemed::Replayed => {
            tracing::warn!("an authorization code was presented twice; its tokens are revoked");
            return Err(ProtocolError::new(
                "invalid_grant",
                "the code was already used",
            ));
        }
        Redeemed::Invalid => {
            return Err(ProtocolError::new(
                "invalid_grant",
                "the code is unknown or expired",
            ))
        }
    };
    // The code is spent whatever follows: a wrong verifier does not get a second try.
    if field("client_id") != Some(grant.client_id.as_str()) {
        return Err(ProtocolError::new(
            "invalid_grant",
            "the code was issued to another client",
        ));
    }
    if field("redirect_uri").is_some_and(|uri| uri != grant.redirect_uri) {
        return Err(ProtocolError::new(
            "invalid_grant",
            "redirect_uri does not match the authorization request",
        ));
    }
    if !secrets::pkce_matches(verifier, &grant.code_challenge) {
        return Err(ProtocolError::new(
            "invalid_grant",
            "code_verifier does not match the code_challenge",
        ));
    }
    let client_name = oauth
        .store
        .client(&grant.client_id)?
        .filter(|client| !client.revoked)
        .map(|client| client.name)
        .ok_or_else(|| ProtocolError::new("invalid_grant", "the client was revoked"))?;
    Ok(TokenGrant {
        client_id: grant.client_id,
        client_name,
        family: grant.family,
        scope: grant.scope,
        resource: grant.resource,
    })
}

fn redeem_refresh<'a>(
    oauth: &OAuth,
    field: &impl Fn(&str) -> Option<&'a str>,
) -> Result<TokenGrant, ProtocolError> {
    let Some(refresh) = field("refresh_token") else {
        return Err(ProtocolError::new(
            "invalid_request",
            "refresh_token is required",
        ));
    };
    let grant = match oauth
        .store
        .redeem_refresh(&secrets::token_hash(refresh), now())?
    {
        Redeemed::Fresh(grant) => grant,
        Redeemed::Replayed => {
            tracing::warn!("a refresh token was presented twice; its grant is revoked");
            return Err(ProtocolError::new(
                "invalid_grant",
                "the refresh token was already used",
            ));
        }
        Redeemed::Invalid => {
            return Err(ProtocolError::new(
                "invalid_grant",
                "the refresh token is unknown, expired or revoked",
            ))
        }
    };
    if field("client_id").is_some_and(|id| id != grant.client_id) {
        return Err(ProtocolError::new(
            "invalid_grant",
            "the refresh token was issued to another client",
        ));
    }
    if field("scope")
        .is_some_and(|scope| scope.split(' ').any(|s| !s.is_empty() && s != super::SCOPE))
    {
        return Err(ProtocolError::new("invalid_scope", "the only scope is mcp"));
    }
    if grant.resource != oauth.endpoints.resource() {
        return Err(ProtocolError::new(
            "invalid_target",
            "the grant is bound to another resource",
        ));
    }
    Ok(grant)
}

fn issue(oauth: &OAuth, grant: &TokenGrant) -> Result<Response, ProtocolError> {
    let no_randomness = |error: getrandom::Error| {
        tracing::error!(%error, "no randomness");
        ProtocolError::server_error()
    };
    let access = secrets::random_token(ACCESS_PREFIX).map_err(no_randomness)?;
    let refresh = secrets::random_token(REFRESH_PREFIX).map_err(no_randomness)?;
    let now = now();
    oauth.store.insert_tokens(
        grant,
        &IssuedHashes {
            access_hash: &secrets::token_hash(&access),
            access_expires: now + ACCESS_TOKEN_SECS,
            refresh_hash: &secrets::token_hash(&refresh),
            refresh_expires: now + REFRESH_TOKEN_SECS,
        },
    )?;
    tracing::info!(client_id = %grant.client_id, "issued tokens");
    let mut response = Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ACCESS_TOKEN_SECS,
        "refresh_token": refresh,
        "scope": grant.scope,
    }))
    .into_response();
    super::no_store(&mut response);
    Ok(response)
}

/// `POST /oauth/revoke` (RFC 7009): ends the token's whole grant. Answers 200 whether or not
/// the token was known (§2.2), so it tells nothing to someone guessing.
pub async fn revoke(State(oauth): State<Arc<OAuth>>, body: Bytes) -> Response {
    if body.len() > MAX_BODY_BYTES {
        return ProtocolError::new("invalid_request", "the request is too large")
            .with_status(StatusCode::PAYLOAD_TOO_LARGE)
            .into_response();
    }
    let Some(form) = form_pairs(&body) else {
        return ProtocolError::new("invalid_request", "a parameter was given twice")
            .into_response();
    };
    let Some(token) = form.get("token").filter(|t| !t.is_empty()) else {
        return ProtocolError::new("invalid_request", "token is required").into_response();
    };
    match oauth.store.revoke_token(&secrets::token_hash(token)) {
        Ok(Some(client_id)) => tracing::info!(%client_id, "revoked a grant"),
        Ok(None) => tracing::debug!("revocation of an unknown token"),
        Err(error) => return ProtocolError::from(error).into_response(),
    }
    let mut response = StatusCode::OK.into_response();
    super::no_store(&mut response);
    response
}

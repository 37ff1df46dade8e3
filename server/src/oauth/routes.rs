//! The OAuth endpoints as one router, merged into the HTTP transport's only when `--oauth` is on.
//! Discovery, registration, token and revocation answer browser clients from any origin (CORS:
//! web-based MCP clients call them from their page; no cookies are involved there). The
//! consent page is for people: same-origin only, with its own headers.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, Method};
use axum::routing::{get, post};
use axum::Router;
use tower_http::cors::{Any, CorsLayer};

use super::{authorize, metadata, register, token, OAuth};

/// Largest consent form, in bytes.
const MAX_FORM_BYTES: usize = 8 * 1024;

pub fn routes(oauth: Arc<OAuth>) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            header::HeaderName::from_static("mcp-protocol-version"),
        ])
        .max_age(std::time::Duration::from_secs(3600));
    let for_browsers = Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/sse",
            get(metadata::protected_resource_sse),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata::authorization_server),
        )
        .route(
            "/.well-known/openid-configuration",
            get(metadata::authorization_server),
        )
        .route(
            "/oauth/register",
            post(register::register).layer(DefaultBodyLimit::max(register::MAX_BODY_BYTES)),
        )
        .route(
            "/oauth/token",
            post(token::token).layer(DefaultBodyLimit::max(token::MAX_BODY_BYTES)),
        )
        .route(
            "/oauth/revoke",
            post(token::revoke).layer(DefaultBodyLimit::max(token::MAX_BODY_BYTES)),
        )
        .layer(cors);
    let consent = Router::new().route(
        "/oauth/authorize",
        get(authorize::show)
            .post(authorize::decide)
            .layer(DefaultBodyLimit::max(MAX_FORM_BYTES)),
    );
    for_browsers.merge(consent).with_state(oauth)
}

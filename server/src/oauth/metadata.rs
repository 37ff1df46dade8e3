//! Discovery: RFC 9728 protected-resource metadata (root form and the `/mcp` and `/sse`
//! suffixed forms) and RFC 8414 authorization-server metadata (also at the OpenID path, which
//! 2025-11-25 clients try). Both are fixed by the public URL.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::{OAuth, SCOPE};

/// RFC 9728 for `/mcp` (and the root form): the one protected resource.
pub async fn protected_resource(State(oauth): State<Arc<OAuth>>) -> Json<Value> {
    Json(resource_document(&oauth, oauth.endpoints.resource()))
}

/// RFC 9728 for `/sse`: clients check that the document names the URL they asked about; the
/// token they get is still bound to the one resource.
pub async fn protected_resource_sse(State(oauth): State<Arc<OAuth>>) -> Json<Value> {
    Json(resource_document(&oauth, oauth.endpoints.url("/sse")))
}

fn resource_document(oauth: &OAuth, resource: String) -> Value {
    json!({
        "resource": resource,
        "authorization_servers": [oauth.endpoints.issuer()],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "pyrun-mcp",
    })
}

/// RFC 8414.
pub async fn authorization_server(State(oauth): State<Arc<OAuth>>) -> Json<Value> {
    let e = &oauth.endpoints;
    Json(json!({
        "issuer": e.issuer(),
        "authorization_endpoint": e.url("/oauth/authorize"),
        "token_endpoint": e.url("/oauth/token"),
        "registration_endpoint": e.url("/oauth/register"),
        "revocation_endpoint": e.url("/oauth/revoke"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": [SCOPE],
        "client_id_metadata_document_supported": true,
        "authorization_response_iss_parameter_supported": true,
    }))
}

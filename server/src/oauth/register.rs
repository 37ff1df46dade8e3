//! RFC 7591 dynamic registration of public clients. Every field is checked before anything is
//! stored; the response echoes what was registered. Bounded: the body (a few KiB), the number of
//! redirect URIs, the name's length, the number of clients kept, and registrations per minute,
//! from everyone and from one address.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde_json::{json, Value};

use super::store::{ClientKind, ClientRecord};
use super::PeerKey;
use super::{now, redirect_uri, secrets, OAuth, ProtocolError};

/// Largest registration request, in bytes.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Redirect URIs one client may register.
const MAX_REDIRECT_URIS: usize = 10;
/// Characters of a client name shown on the consent page.
pub const MAX_NAME_CHARS: usize = 100;
/// Clients kept at once; past it, registration fails until the owner cleans up.
pub const MAX_CLIENTS: u64 = 1000;
/// Age after which a registered client that never received a code may be forgotten (longer
/// than a consent page and its code live).
const UNUSED_CLIENT_SECS: i64 = 900;
/// Registrations accepted per [`WINDOW`] (from everyone: behind a tunnel one address is many).
const PER_WINDOW: usize = 30;
/// Registrations accepted per [`WINDOW`] from one address (an IPv6 /64): one address cannot
/// take every registration of the minute from the others.
const PER_ADDRESS_PER_WINDOW: usize = 10;
const WINDOW: Duration = Duration::from_secs(60);

/// Sliding windows of recent registrations: everyone's, and each address's.
#[derive(Debug, Default)]
pub struct RegistrationLimit {
    recent: Mutex<Windows>,
}

#[derive(Debug, Default)]
struct Windows {
    all: VecDeque<Instant>,
    by_address: HashMap<IpAddr, VecDeque<Instant>>,
}

fn expire(window: &mut VecDeque<Instant>, now: Instant) {
    while window
        .front()
        .is_some_and(|t| now.duration_since(*t) >= WINDOW)
    {
        window.pop_front();
    }
}

impl RegistrationLimit {
    /// Takes a slot, or says no when [`PER_WINDOW`] were taken in the last [`WINDOW`], or
    /// [`PER_ADDRESS_PER_WINDOW`] from `peer` (when the transport knows it).
    fn admit(&self, peer: Option<PeerKey>) -> bool {
        let mut windows = self
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        expire(&mut windows.all, now);
        windows.by_address.retain(|_, window| {
            expire(window, now);
            !window.is_empty()
        });
        if windows.all.len() >= PER_WINDOW {
            return false;
        }
        if let Some(PeerKey(ip)) = peer {
            let mine = windows.by_address.entry(ip).or_default();
            if mine.len() >= PER_ADDRESS_PER_WINDOW {
                return false;
            }
            mine.push_back(now);
        }
        windows.all.push_back(now);
        true
    }
}

/// What a registration asks for, validated.
#[derive(Debug, PartialEq, Eq)]
pub struct Registration {
    pub name: String,
    pub redirect_uris: Vec<String>,
}

/// Checks a registration request (RFC 7591 §2): redirect URIs by [`redirect_uri::check`],
/// grant and response types this server serves, and a plain name.
pub fn validate(body: &[u8]) -> Result<Registration, ProtocolError> {
    let invalid = |description| ProtocolError::new("invalid_client_metadata", description);
    let value: Value =
        serde_json::from_slice(body).map_err(|_| invalid("the body is not a JSON object"))?;
    let Value::Object(fields) = value else {
        return Err(invalid("the body is not a JSON object"));
    };
    let uris = match fields.get("redirect_uris") {
        Some(Value::Array(uris)) if !uris.is_empty() => uris,
        _ => {
            return Err(ProtocolError::new(
                "invalid_redirect_uri",
                "redirect_uris must be a non-empty array",
            ))
        }
    };
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(ProtocolError::new(
            "invalid_redirect_uri",
            "at most 10 redirect_uris",
        ));
    }
    let mut redirect_uris = Vec::with_capacity(uris.len());
    for uri in uris {
        let Value::String(uri) = uri else {
            return Err(ProtocolError::new(
                "invalid_redirect_uri",
                "every redirect_uri must be a string",
            ));
        };
        redirect_uri::check(uri).map_err(|why| ProtocolError::new("invalid_redirect_uri", why))?;
        redirect_uris.push(uri.clone());
    }
    let list_of = |key: &str, allowed: &[&str], description| -> Result<(), ProtocolError> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Array(items))
                if items
                    .iter()
                    .all(|i| i.as_str().is_some_and(|s| allowed.contains(&s))) =>
            {
                Ok(())
            }
            Some(_) => Err(invalid(description)),
        }
    };
    list_of(
        "grant_types",
        &["authorization_code", "refresh_token"],
        "grant_types may only be authorization_code and refresh_token",
    )?;
    list_of(
        "response_types",
        &["code"],
        "response_types may only be code",
    )?;
    let name = match fields.get("client_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(clean_name(name).ok_or_else(|| {
            invalid("client_name must be 1 to 100 characters without control characters")
        })?),
        Some(_) => return Err(invalid("client_name must be a string")),
    };
    // A confidential method is answered with "none": this server issues no client secrets,
    // PKCE protects the code instead (RFC 7591 §3.2.1 lets the server replace values).
    if let Some(method) = fields.get("token_endpoint_auth_method") {
        if !method.is_string() {
            return Err(invalid("token_endpoint_auth_method must be a string"));
        }
    }
    Ok(Registration {
        name: name.unwrap_or_else(|| "unnamed client".to_owned()),
        redirect_uris,
    })
}

/// A name fit for the consent page: trimmed, 1–100 characters, no control characters.
pub fn clean_name(name: &str) -> Option<String> {
    let name = name.trim();
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && !name.chars().any(char::is_control);
    ok.then(|| name.to_owned())
}

/// `POST /oauth/register`.
pub async fn register(
    State(oauth): State<Arc<OAuth>>,
    peer: Option<Extension<PeerKey>>,
    body: Bytes,
) -> Response {
    match register_client(&oauth, peer.map(|Extension(peer)| peer), &body) {
        Ok(response) => response,
        Err(error) => {
            tracing::info!(
                error = error.body.error,
                why = error.body.error_description,
                "refused a client registration"
            );
            error.into_response()
        }
    }
}

fn register_client(
    oauth: &OAuth,
    peer: Option<PeerKey>,
    body: &[u8],
) -> Result<Response, ProtocolError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ProtocolError::new(
            "invalid_client_metadata",
            "the registration request is larger than 16 KiB",
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE));
    }
    let registration = validate(body)?;
    if !oauth.registrations.admit(peer) {
        return Err(ProtocolError::new(
            "temporarily_unavailable",
            "too many registrations; try again in a minute",
        )
        .with_status(StatusCode::TOO_MANY_REQUESTS));
    }
    if oauth.store.client_count()? >= MAX_CLIENTS {
        // Registrations that never led to a consent are garbage after a quarter of an hour.
        let purged = oauth
            .store
            .purge_unused_clients(now() - UNUSED_CLIENT_SECS)?;
        tracing::info!(
            purged,
            "the client cap was reached; forgot clients that never got a code"
        );
    }
    if oauth.store.client_count()? >= MAX_CLIENTS {
        return Err(ProtocolError::new(
            "temporarily_unavailable",
            "the server keeps no more clients; its owner can remove some with `pyrun-mcp-server oauth revoke`",
        )
        .with_status(StatusCode::SERVICE_UNAVAILABLE));
    }
    let client_id = secrets::random_token("pyc_").map_err(|error| {
        tracing::error!(%error, "no randomness");
        ProtocolError::server_error()
    })?;
    let issued_at = now();
    oauth.store.insert_client(&ClientRecord {
        client_id: client_id.clone(),
        name: registration.name.clone(),
        redirect_uris: registration.redirect_uris.clone(),
        kind: ClientKind::Registered,
        created: issued_at,
        last_used: None,
        revoked: false,
    })?;
    tracing::info!(%client_id, name = %registration.name, "registered an OAuth client");
    let body = json!({
        "client_id": client_id,
        "client_id_issued_at": issued_at,
        "client_name": registration.name,
        "redirect_uris": registration.redirect_uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "scope": super::SCOPE,
    });
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    super::no_store(&mut response);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(body: &str) -> &'static str {
        validate(body.as_bytes()).unwrap_err().body.error
    }

    #[test]
    fn claude_registers() {
        let body = r#"{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],
            "grant_types":["authorization_code","refresh_token"],"response_types":["code"],
            "token_endpoint_auth_method":"none"}"#;
        assert_eq!(
            validate(body.as_bytes()).unwrap(),
            Registration {
                name: "Claude".into(),
                redirect_uris: vec!["https://claude.ai/api/mcp/auth_callback".into()],
            }
        );
    }

    #[test]
    fn malformed_and_dangerous_registrations_get_the_rfc_errors() {
        for (body, error) in [
            ("not json", "invalid_client_metadata"),
            ("[1,2]", "invalid_client_metadata"),
            ("{}", "invalid_redirect_uri"),
            (r#"{"redirect_uris":[]}"#, "invalid_redirect_uri"),
            (
                r#"{"redirect_uris":"https://a.example/cb"}"#,
                "invalid_redirect_uri",
            ),
            (r#"{"redirect_uris":[42]}"#, "invalid_redirect_uri"),
            (
                r#"{"redirect_uris":["javascript:alert(1)"]}"#,
                "invalid_redirect_uri",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb#x"]}"#,
                "invalid_redirect_uri",
            ),
            (
                r#"{"redirect_uris":["http://evil.example/cb"]}"#,
                "invalid_redirect_uri",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}"#,
                "invalid_client_metadata",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}"#,
                "invalid_client_metadata",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"client_name":"a\u0000b"}"#,
                "invalid_client_metadata",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"client_name":42}"#,
                "invalid_client_metadata",
            ),
        ] {
            assert_eq!(error_of(body), error, "{body}");
        }
        let many: Vec<String> = (0..11)
            .map(|i| format!("\"https://a.example/{i}\""))
            .collect();
        let body = format!(r#"{{"redirect_uris":[{}]}}"#, many.join(","));
        assert_eq!(error_of(&body), "invalid_redirect_uri");
        let long = format!(
            r#"{{"redirect_uris":["https://a.example/cb"],"client_name":"{}"}}"#,
            "x".repeat(101)
        );
        assert_eq!(error_of(&long), "invalid_client_metadata");
    }

    #[test]
    fn sql_ish_names_are_just_names() {
        let body = r#"{"redirect_uris":["https://a.example/cb"],"client_name":"x'); DROP TABLE clients;--"}"#;
        assert_eq!(
            validate(body.as_bytes()).unwrap().name,
            "x'); DROP TABLE clients;--"
        );
    }

    #[test]
    fn the_window_caps_registrations() {
        let limit = RegistrationLimit::default();
        for _ in 0..PER_WINDOW {
            assert!(limit.admit(None));
        }
        assert!(!limit.admit(None));
    }

    #[test]
    fn one_address_gets_its_share_of_the_window_and_the_others_the_rest() {
        let limit = RegistrationLimit::default();
        let peer = |last: u8| Some(PeerKey(IpAddr::from([192, 0, 2, last])));
        for _ in 0..PER_ADDRESS_PER_WINDOW {
            assert!(limit.admit(peer(1)));
        }
        assert!(!limit.admit(peer(1)));
        for n in 0..(PER_WINDOW - PER_ADDRESS_PER_WINDOW) {
            let last = 2 + u8::try_from(n / PER_ADDRESS_PER_WINDOW).unwrap();
            assert!(limit.admit(peer(last)));
        }
        assert!(!limit.admit(peer(200)), "the overall window still holds");
    }
}

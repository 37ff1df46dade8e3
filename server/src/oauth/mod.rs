//! `--oauth`: the server is its own OAuth 2.1 authorization server and protected resource, so
//! Claude's connectors (which accept OAuth, not static headers) can reach it through its public
//! URL. One resource (`{base}/mcp`; a token for it opens `/mcp`, `/sse` and `/messages`), public
//! clients only (PKCE S256), and the owner approves every client on a consent page with their
//! secret. State that must survive a restart (clients, token hashes, failed-secret counts) is in
//! [`store`]; nothing here caches a token's validity, so a revocation takes effect at once.
//!
//! The endpoints, in the order a client meets them: [`metadata`] (RFC 9728 and RFC 8414),
//! [`register`] (RFC 7591) or a Client ID Metadata Document ([`cimd`]), [`authorize`] (the
//! consent page, [`consent_page`]), [`token`] (codes and refresh, and RFC 7009 revocation).

pub mod admin;
pub mod authorize;
pub mod cimd;
pub mod consent_page;
pub mod metadata;
mod peer_key;
pub mod redirect_uri;
pub mod register;
pub mod routes;
pub mod secrets;
pub mod store;
pub mod throttle;
pub mod token;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use authorize::PendingRequests;
pub use peer_key::PeerKey;
use pyrun_run::caller::{Caller, OAuthClient};
use register::RegistrationLimit;
use store::Store;

/// The one scope: running the tools of this server.
pub const SCOPE: &str = "mcp";
/// Lifetimes, in seconds.
pub const ACCESS_TOKEN_SECS: i64 = 3600;
pub const REFRESH_TOKEN_SECS: i64 = 30 * 86_400;
pub const CODE_SECS: i64 = 60;
/// Prefixes of what the server hands out.
pub const ACCESS_PREFIX: &str = "pyat_";
pub const REFRESH_PREFIX: &str = "pyrt_";
pub const CODE_PREFIX: &str = "pyac_";

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("cannot hash the owner secret: {0}")]
    Hash(String),
    #[error(transparent)]
    Cimd(#[from] cimd::CimdError),
}

/// The public side: where the server is reached, which fixes the issuer and the resource.
#[derive(Clone, Debug)]
pub struct Endpoints {
    /// `https://host[:port]`, no trailing slash: the issuer.
    pub base: String,
}

impl Endpoints {
    pub fn issuer(&self) -> &str {
        &self.base
    }

    /// The one protected resource, `{base}/mcp`: what tokens are bound to.
    pub fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// Resource indicators (RFC 8707) a client may send for this server: the resource, the
    /// legacy SSE endpoint and the bare base all name it. Anything else is another server's.
    pub fn names_this_resource(&self, resource: &str) -> bool {
        let resource = resource.strip_suffix('/').unwrap_or(resource);
        resource == self.base
            || resource == self.resource()
            || resource == format!("{}/sse", self.base)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// What the owner types on the consent page.
#[derive(Clone)]
pub struct OwnerSecret {
    pub secret: String,
    /// `--oauth-owner-password` (else the server's auth token stands in).
    pub is_password: bool,
}

impl std::fmt::Debug for OwnerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerSecret")
            .field("secret", &"<set>")
            .field("is_password", &self.is_password)
            .finish()
    }
}

/// Everything the OAuth endpoints share.
#[derive(Debug)]
pub struct OAuth {
    pub endpoints: Endpoints,
    pub store: Store,
    /// The owner secret's Argon2id hash (also in the store).
    owner_secret: String,
    /// True when the owner secret is `--oauth-owner-password` (else the auth token).
    secret_is_password: bool,
    pub pending: PendingRequests,
    pub registrations: RegistrationLimit,
    pub documents: cimd::CimdFetcher,
    /// When each client's "last used" time was last written (see [`OAuth::touch_due`]).
    touched: std::sync::Mutex<std::collections::HashMap<String, i64>>,
    /// Owner-secret verifications running at once (see [`MAX_VERIFICATIONS`]).
    verifications: Arc<tokio::sync::Semaphore>,
}

/// Argon2id verifications at once: each holds 19 MiB for tens of milliseconds, so the memory a
/// burst can take is this many times that, whatever the throttle lets through.
const MAX_VERIFICATIONS: usize = 2;

impl OAuth {
    /// Opens the state, stores the owner secret's hash (re-hashed only when it changed), and
    /// forgets codes and tokens long expired.
    pub fn open(
        endpoints: Endpoints,
        store: Store,
        owner: &OwnerSecret,
        documents: cimd::CimdFetcher,
    ) -> Result<Arc<Self>, OAuthError> {
        let owner_secret = owner.secret.as_str();
        let stored = store
            .owner_secret_hash()?
            .filter(|phc| secrets::owner_secret_matches(owner_secret, phc));
        let owner_secret = match stored {
            Some(phc) => phc,
            None => {
                let phc = secrets::hash_owner_secret(owner_secret).map_err(OAuthError::Hash)?;
                store.set_owner_secret_hash(&phc)?;
                phc
            }
        };
        store.purge_expired(now())?;
        Ok(Arc::new(Self {
            endpoints,
            store,
            owner_secret,
            secret_is_password: owner.is_password,
            pending: PendingRequests::default(),
            registrations: RegistrationLimit::default(),
            documents,
            touched: std::sync::Mutex::default(),
            verifications: Arc::new(tokio::sync::Semaphore::new(MAX_VERIFICATIONS)),
        }))
    }

    /// The caller an access token stands for, or `None` when it is not a live token of this
    /// server's resource (unknown, expired, revoked, its client cut off, or bound elsewhere).
    pub fn authenticate(&self, token: &str) -> Option<Caller> {
        let now = now();
        let grant = match self.store.access_grant(&secrets::token_hash(token), now) {
            Ok(grant) => grant?,
            Err(error) => {
                tracing::error!(%error, "cannot check an access token");
                return None;
            }
        };
        if grant.resource != self.endpoints.resource() {
            tracing::warn!(
                client_id = %grant.client_id,
                "refused an access token bound to another resource"
            );
            return None;
        }
        if self.touch_due(&grant.client_id, now) {
            if let Err(error) = self.store.touch_client(&grant.client_id, now) {
                tracing::warn!(%error, "cannot note when a client was last used");
            }
        }
        Some(Caller::OAuthClient(OAuthClient {
            id: grant.client_id.into(),
            name: grant.client_name.into(),
        }))
    }

    /// True at most once a minute per client: when its "last used" time is worth a write (a
    /// write transaction on every request would cost more than the token check itself).
    fn touch_due(&self, client_id: &str, now: i64) -> bool {
        let mut touched = self
            .touched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match touched.get(client_id) {
            Some(last) if now - last < 60 => false,
            _ => {
                touched.insert(client_id.to_owned(), now);
                true
            }
        }
    }

    pub fn owner_secret_is_password(&self) -> bool {
        self.secret_is_password
    }

    /// True when `secret` is the owner's (Argon2id, off the async threads, at most
    /// [`MAX_VERIFICATIONS`] at once; the permit lives as long as the hashing, even when the
    /// request that asked is dropped).
    pub async fn is_owner_secret(&self, secret: String) -> bool {
        let Ok(permit) = Arc::clone(&self.verifications).acquire_owned().await else {
            return false;
        };
        let phc = self.owner_secret.clone();
        tokio::task::spawn_blocking(move || {
            let matches = secrets::owner_secret_matches(&secret, &phc);
            drop(permit);
            matches
        })
        .await
        .unwrap_or(false)
    }
}

/// Unix seconds now.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// An OAuth error response body (RFC 6749 §5.2, RFC 7591 §3.2.2): a code from the RFC and a
/// fixed description (never echoing what the client sent).
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    pub error: &'static str,
    pub error_description: &'static str,
}

/// An OAuth error with its HTTP status.
#[derive(Debug)]
pub struct ProtocolError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ProtocolError {
    pub fn new(error: &'static str, description: &'static str) -> Self {
        let status = if error == "invalid_client" {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::BAD_REQUEST
        };
        Self {
            status,
            body: ErrorBody {
                error,
                error_description: description,
            },
        }
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn server_error() -> Self {
        Self::new("server_error", "the server could not complete the request")
            .with_status(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl IntoResponse for ProtocolError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        no_store(&mut response);
        response
    }
}

impl From<store::StoreError> for ProtocolError {
    fn from(error: store::StoreError) -> Self {
        tracing::error!(%error, "OAuth store error");
        Self::server_error()
    }
}

/// RFC 6749 §5.1: token responses (and errors) must not be cached.
pub fn no_store(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}

/// Parses an `application/x-www-form-urlencoded` body or query into its pairs, refusing a
/// parameter given twice (RFC 6749 §3.1: parameters must not repeat).
/// `None` when a parameter repeats.
pub fn form_pairs(text: &[u8]) -> Option<std::collections::HashMap<String, String>> {
    let mut pairs = std::collections::HashMap::new();
    for (key, value) in url::form_urlencoded::parse(text) {
        if pairs.insert(key.into_owned(), value.into_owned()).is_some() {
            return None;
        }
    }
    Some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_indicators_name_this_server_or_another() {
        let endpoints = Endpoints {
            base: "https://pyrun.ngrok.app".into(),
        };
        for ok in [
            "https://pyrun.ngrok.app/mcp",
            "https://pyrun.ngrok.app/mcp/",
            "https://pyrun.ngrok.app/sse",
            "https://pyrun.ngrok.app",
            "https://pyrun.ngrok.app/",
        ] {
            assert!(endpoints.names_this_resource(ok), "{ok}");
        }
        for other in [
            "https://evil.example/mcp",
            "https://pyrun.ngrok.app.evil.example/mcp",
            "http://pyrun.ngrok.app/mcp",
            "https://pyrun.ngrok.app/mcp/other",
            "",
        ] {
            assert!(!endpoints.names_this_resource(other), "{other}");
        }
    }

    #[test]
    fn repeated_form_parameters_are_refused() {
        assert!(form_pairs(b"a=1&b=2").is_some());
        assert!(form_pairs(b"a=1&a=2").is_none());
        assert_eq!(form_pairs(b"a=x%20y").unwrap()["a"], "x y");
    }
}

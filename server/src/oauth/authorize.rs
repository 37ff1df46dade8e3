//! `/oauth/authorize`: the owner's consent. GET checks the request and shows the page; POST
//! takes the owner's decision. Until the client and its redirect URI are proven (registered, or
//! read from the client's metadata document, and matched exactly), every error is a page here,
//! never a redirect: an open redirector would hand codes or phishing to anyone. After that,
//! errors go back to the client as RFC 6749 §4.1.2.1 redirects, with `iss` (RFC 9207).
//!
//! The form carries the pending request's id and a CSRF token that is bound to that request and
//! also set as a `SameSite=Strict` cookie: a page elsewhere can neither read the token nor make
//! the browser send the cookie with a cross-site post. Wrong secrets are slowed by [`throttle`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use subtle::ConstantTimeEq;
use url::Url;

use super::consent_page::{self, ConsentView};
use super::store::{ClientKind, CodeGrant};
use super::{
    cimd, form_pairs, now, redirect_uri, register, secrets, throttle, OAuth, CODE_PREFIX,
    CODE_SECS, SCOPE,
};

/// How long a consent page stays valid.
const PENDING_TTL: Duration = Duration::from_secs(600);
/// Consent pages open at once.
const MAX_PENDING: usize = 256;
/// Longest `state` passed through.
const MAX_STATE_LEN: usize = 2048;
/// The CSRF cookie.
pub const CSRF_COOKIE: &str = "pyrun_oauth_csrf";

/// An authorization request waiting for the owner.
#[derive(Clone, Debug)]
struct Pending {
    csrf: String,
    client_id: String,
    client_name: String,
    kind: ClientKind,
    /// A metadata document's redirect URIs (stored when approved).
    document_redirect_uris: Vec<String>,
    redirect_uri: String,
    state: Option<String>,
    code_challenge: String,
    scope: String,
    created: Instant,
}

/// The consent pages open now, by request id.
#[derive(Debug, Default)]
pub struct PendingRequests {
    by_id: Mutex<HashMap<String, Pending>>,
}

impl PendingRequests {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a request; when [`MAX_PENDING`] are open, the oldest gives way (a flood of
    /// requests then costs its sender a steady stream, not the owner a ten-minute lockout).
    fn insert(&self, id: String, pending: Pending) {
        let mut by_id = self.lock();
        by_id.retain(|_, p| p.created.elapsed() < PENDING_TTL);
        if by_id.len() >= MAX_PENDING {
            let oldest = by_id
                .iter()
                .min_by_key(|(_, p)| p.created)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                by_id.remove(&oldest);
            }
        }
        by_id.insert(id, pending);
    }

    fn get(&self, id: &str) -> Option<Pending> {
        self.lock()
            .get(id)
            .filter(|p| p.created.elapsed() < PENDING_TTL)
            .cloned()
    }

    fn remove(&self, id: &str) -> Option<Pending> {
        self.lock()
            .remove(id)
            .filter(|p| p.created.elapsed() < PENDING_TTL)
    }
}

/// A page in answer to a request that cannot be trusted with a redirect.
fn error_page(status: StatusCode, message: &str) -> Response {
    consent_page::html(status, consent_page::error_page(message), None)
}

/// The client behind a `client_id`: registered here, or described by its metadata document.
struct KnownClient {
    name: String,
    kind: ClientKind,
    redirect_uris: Vec<String>,
}

async fn find_client(oauth: &OAuth, client_id: &str) -> Result<KnownClient, Response> {
    let stored = oauth.store.client(client_id).map_err(|error| {
        tracing::error!(%error, "OAuth store error");
        error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The server could not read its state.",
        )
    })?;
    if cimd::looks_like_cimd(client_id) {
        let document = oauth.documents.fetch(client_id).await.map_err(|error| {
            tracing::warn!(%error, client_id, "cannot use a client metadata document");
            error_page(
                StatusCode::BAD_REQUEST,
                "The application's client metadata document could not be fetched or is not valid.",
            )
        })?;
        let name = document
            .client_name()
            .and_then(register::clean_name)
            .unwrap_or_else(|| redirect_uri::display_host(client_id));
        let redirect_uris = document
            .redirect_uris()
            .iter()
            .filter(|uri| redirect_uri::check(uri).is_ok())
            .cloned()
            .collect();
        return Ok(KnownClient {
            name,
            kind: ClientKind::MetadataDocument,
            redirect_uris,
        });
    }
    match stored {
        Some(client) if client.revoked => Err(error_page(
            StatusCode::BAD_REQUEST,
            "The server's owner revoked this client. Remove the connection and add it again.",
        )),
        Some(client) => Ok(KnownClient {
            name: client.name,
            kind: client.kind,
            redirect_uris: client.redirect_uris,
        }),
        None => Err(error_page(
            StatusCode::BAD_REQUEST,
            "This application is not registered with the server (unknown client_id).",
        )),
    }
}

/// Where an error goes once the redirect URI is proven: back to the client (RFC 6749
/// §4.1.2.1), with `state` and `iss`.
fn redirect_with(redirect: &str, pairs: &[(&str, &str)]) -> Response {
    let Ok(mut url) = Url::parse(redirect) else {
        return error_page(StatusCode::BAD_REQUEST, "The redirect URI is not valid.");
    };
    url.query_pairs_mut().extend_pairs(pairs);
    let mut response = consent_page::html(StatusCode::SEE_OTHER, String::new(), None);
    if let Ok(location) = HeaderValue::from_str(url.as_str()) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

fn redirect_error(
    oauth: &OAuth,
    redirect: &str,
    state: Option<&str>,
    error: &str,
    description: &str,
) -> Response {
    let mut pairs = vec![("error", error), ("error_description", description)];
    if let Some(state) = state {
        pairs.push(("state", state));
    }
    pairs.push(("iss", oauth.endpoints.issuer()));
    redirect_with(redirect, &pairs)
}

/// `GET /oauth/authorize`.
pub async fn show(State(oauth): State<Arc<OAuth>>, RawQuery(query): RawQuery) -> Response {
    let Some(params) = form_pairs(query.unwrap_or_default().as_bytes()) else {
        return error_page(StatusCode::BAD_REQUEST, "A parameter was given twice.");
    };
    let param = |name: &str| {
        params
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let Some(client_id) = param("client_id") else {
        return error_page(StatusCode::BAD_REQUEST, "The request names no client_id.");
    };
    if client_id.len() > redirect_uri::MAX_LEN {
        return error_page(StatusCode::BAD_REQUEST, "The client_id is too long.");
    }
    let client = match find_client(&oauth, client_id).await {
        Ok(client) => client,
        Err(page) => return page,
    };
    let redirect = match param("redirect_uri") {
        Some(given) => client.redirect_uris.iter().find(|uri| *uri == given),
        None if client.redirect_uris.len() == 1 => client.redirect_uris.first(),
        None => None,
    };
    let Some(redirect) = redirect.cloned() else {
        tracing::warn!(
            client_id,
            "refused an authorization request: redirect_uri not registered"
        );
        return error_page(
            StatusCode::BAD_REQUEST,
            "The redirect_uri does not match one the application registered.",
        );
    };
    // From here the redirect URI is the client's own: errors go back to it.
    let state = param("state");
    if state.is_some_and(|s| s.len() > MAX_STATE_LEN) {
        return error_page(StatusCode::BAD_REQUEST, "The state parameter is too long.");
    }
    let fail = |error, description| redirect_error(&oauth, &redirect, state, error, description);
    if param("response_type") != Some("code") {
        return fail(
            "unsupported_response_type",
            "only response_type=code is served",
        );
    }
    let Some(challenge) = param("code_challenge") else {
        return fail(
            "invalid_request",
            "PKCE is required: send code_challenge (S256)",
        );
    };
    if param("code_challenge_method") != Some("S256") {
        return fail(
            "invalid_request",
            "only code_challenge_method=S256 is served",
        );
    }
    if !secrets::is_valid_challenge(challenge) {
        return fail("invalid_request", "code_challenge is not an S256 challenge");
    }
    if param("scope").is_some_and(|scope| scope.split(' ').any(|s| !s.is_empty() && s != SCOPE)) {
        return fail("invalid_scope", "the only scope is mcp");
    }
    if param("resource").is_some_and(|r| !oauth.endpoints.names_this_resource(r)) {
        return fail("invalid_target", "the resource is not this server");
    }
    let (Ok(request_id), Ok(csrf)) = (secrets::random_token(""), secrets::random_token("")) else {
        return error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The server has no randomness.",
        );
    };
    let pending = Pending {
        csrf: csrf.clone(),
        client_id: client_id.to_owned(),
        client_name: client.name,
        kind: client.kind,
        document_redirect_uris: match client.kind {
            ClientKind::MetadataDocument => client.redirect_uris,
            ClientKind::Registered => Vec::new(),
        },
        redirect_uri: redirect,
        state: state.map(str::to_owned),
        code_challenge: challenge.to_owned(),
        scope: SCOPE.to_owned(),
        created: Instant::now(),
    };
    oauth.pending.insert(request_id.clone(), pending.clone());
    let mut response = render(&oauth, &request_id, &pending, StatusCode::OK, None);
    let cookie = format!(
        "{CSRF_COOKIE}={csrf}; Path=/oauth; HttpOnly; SameSite=Strict; Max-Age=600{}",
        if oauth.endpoints.base.starts_with("https://") {
            "; Secure"
        } else {
            ""
        }
    );
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

fn render(
    oauth: &OAuth,
    request_id: &str,
    pending: &Pending,
    status: StatusCode,
    error: Option<&str>,
) -> Response {
    let view = ConsentView {
        request_id,
        csrf: &pending.csrf,
        client_name: &pending.client_name,
        client_host: &match pending.kind {
            ClientKind::MetadataDocument => redirect_uri::display_host(&pending.client_id),
            ClientKind::Registered => "registered with this server".to_owned(),
        },
        redirect_host: &redirect_uri::display_host(&pending.redirect_uri),
        scope: &pending.scope,
        secret_is_password: oauth.owner_secret_is_password(),
    };
    let origin = redirect_uri::origin(&pending.redirect_uri);
    consent_page::html(
        status,
        consent_page::consent(&view, error),
        origin.as_deref(),
    )
}

/// The CSRF cookie's value, if the request has it.
fn csrf_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == CSRF_COOKIE)
        .map(|(_, value)| value.to_owned())
}

fn same(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// `POST /oauth/authorize`: the owner's decision.
pub async fn decide(State(oauth): State<Arc<OAuth>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(form) = form_pairs(&body) else {
        return error_page(StatusCode::BAD_REQUEST, "A form field was given twice.");
    };
    let field = |name: &str| form.get(name).map(String::as_str).unwrap_or_default();
    let request_id = field("request");
    let Some(pending) = oauth.pending.get(request_id) else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "This consent page expired or was already used.",
        );
    };
    let cookie = csrf_cookie(&headers).unwrap_or_default();
    if !same(field("csrf"), &pending.csrf) || !same(&cookie, &pending.csrf) {
        tracing::warn!(client_id = %pending.client_id, "refused a consent without a valid CSRF token");
        return error_page(
            StatusCode::FORBIDDEN,
            "The form could not be verified. Reload the page from the application and try again.",
        );
    }
    let state = pending.state.as_deref();
    match field("decision") {
        "deny" => {
            oauth.pending.remove(request_id);
            tracing::info!(client_id = %pending.client_id, "the owner denied a client");
            redirect_error(
                &oauth,
                &pending.redirect_uri,
                state,
                "access_denied",
                "the owner denied access",
            )
        }
        "approve" => approve(&oauth, request_id, &pending, field("secret")).await,
        _ => error_page(StatusCode::BAD_REQUEST, "Choose Approve or Deny."),
    }
}

async fn approve(oauth: &OAuth, request_id: &str, pending: &Pending, secret: &str) -> Response {
    let client_key = throttle::client_key(&pending.client_id);
    let keys = [throttle::OVERALL, client_key.as_str()];
    let now = now();
    // Counted before the slow verification, so a burst of parallel posts cannot all pass the
    // check while none has been counted yet; a right secret clears the count below.
    let wait = match count_attempt(oauth, &keys, now) {
        Ok(wait) => wait,
        Err(error) => {
            tracing::error!(%error, "OAuth store error");
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "The server could not read its state.",
            );
        }
    };
    if wait > 0 {
        let message = format!("Too many wrong secrets. Wait {wait} seconds, then try again.");
        let mut page = render(
            oauth,
            request_id,
            pending,
            StatusCode::TOO_MANY_REQUESTS,
            Some(&message),
        );
        if let Ok(value) = HeaderValue::from_str(&wait.to_string()) {
            page.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return page;
    }
    if secret.is_empty() || secret.len() > 1024 || !oauth.is_owner_secret(secret.to_owned()).await {
        tracing::warn!(client_id = %pending.client_id, "a wrong owner secret on the consent page");
        return render(
            oauth,
            request_id,
            pending,
            StatusCode::UNAUTHORIZED,
            Some("That is not the owner secret."),
        );
    }
    // One approval per page: a second post of the same form finds nothing.
    if oauth.pending.remove(request_id).is_none() {
        return error_page(
            StatusCode::BAD_REQUEST,
            "This consent page expired or was already used.",
        );
    }
    match issue_code(oauth, pending, &keys, now) {
        Ok(code) => {
            tracing::info!(client_id = %pending.client_id, name = %pending.client_name, "the owner approved a client");
            let mut pairs = vec![("code", code.as_str())];
            if let Some(state) = &pending.state {
                pairs.push(("state", state));
            }
            pairs.push(("iss", oauth.endpoints.issuer()));
            redirect_with(&pending.redirect_uri, &pairs)
        }
        Err(error) => {
            tracing::error!(%error, "cannot issue an authorization code");
            redirect_error(
                oauth,
                &pending.redirect_uri,
                pending.state.as_deref(),
                "server_error",
                "the server could not issue a code",
            )
        }
    }
}

/// Counts one attempt under `keys` (overall, then the client's) unless the counters say to
/// wait; returns the wait, the longer of the overall one and the client's.
fn count_attempt(
    oauth: &OAuth,
    keys: &[&str; 2],
    now: i64,
) -> Result<i64, super::store::StoreError> {
    oauth.store.count_attempt(keys, now, |counters| {
        let free = [throttle::FREE_OVERALL, throttle::FREE_PER_CLIENT];
        counters
            .iter()
            .zip(free)
            .map(|(&(count, last), free)| throttle::wait_left(count, last, free, now))
            .max()
            .unwrap_or(0)
    })
}

fn issue_code(
    oauth: &OAuth,
    pending: &Pending,
    keys: &[&str],
    now: i64,
) -> Result<String, Box<dyn std::error::Error>> {
    oauth.store.clear_failures(keys)?;
    if pending.kind == ClientKind::MetadataDocument {
        oauth.store.remember_document_client(
            &pending.client_id,
            &pending.client_name,
            &pending.document_redirect_uris,
            now,
        )?;
    }
    let code = secrets::random_token(CODE_PREFIX)?;
    let family = secrets::random_token("")?;
    oauth.store.insert_code(
        &secrets::token_hash(&code),
        &CodeGrant {
            client_id: pending.client_id.clone(),
            redirect_uri: pending.redirect_uri.clone(),
            code_challenge: pending.code_challenge.clone(),
            scope: pending.scope.clone(),
            resource: oauth.endpoints.resource(),
            family,
        },
        now + CODE_SECS,
    )?;
    Ok(code)
}

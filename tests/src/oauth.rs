//! The OAuth side of a `--oauth` server as a test sees it over plain HTTP: register a client
//! (RFC 7591), build an authorization request with PKCE, exchange a code at the token endpoint, and
//! check that a token is refused on `/mcp` the way RFC 6750 and RFC 9728 say (401 with
//! `WWW-Authenticate: Bearer resource_metadata="…", error="invalid_token"`).
//!
//! The flows themselves are driven by clients we did not write (the Python SDK, a real browser);
//! these helpers only set them up and look at the server's answers.

use reqwest::{StatusCode, Url};
use serde_json::{json, Value};

use crate::http::{http, initialize_request};
use crate::server::HttpServer;

/// A PKCE pair (RFC 7636): `PKCE_CHALLENGE` is BASE64URL(SHA-256(`PKCE_VERIFIER`)) without
/// padding, computed once (`python3 -c 'import hashlib,base64; …'`). The flows under test are
/// the browser's and the server's, not our hashing.
pub const PKCE_VERIFIER: &str =
    "pyrun-browser-test-code-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
pub const PKCE_CHALLENGE: &str = "UvwqX2AgQSOPikTcO2qQD7F-gIpBxuFkDwHvxggbCQI";

/// The one scope the server offers.
pub const SCOPE: &str = "mcp";

/// `application/x-www-form-urlencoded` for `pairs`.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut url = Url::parse("form:").expect("a constant URL");
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap_or_default().to_owned()
}

/// The value of query parameter `name` in `url`, if present.
pub fn query_param(url: &str, name: &str) -> Option<String> {
    Url::parse(url).ok().and_then(|u| {
        u.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    })
}

/// The protected resource a token is for: `{base}/mcp`.
pub fn resource(server: &HttpServer) -> String {
    server.mcp_url()
}

/// Registers a public client named `name` with one redirect URI (RFC 7591); its `client_id`.
pub async fn register_client(server: &HttpServer, name: &str, redirect_uri: &str) -> String {
    let body = json!({
        "client_name": name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    let resp = http()
        .post(server.url("/oauth/register"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("POST /oauth/register");
    let status = resp.status();
    let reply = json_body(resp).await;
    assert_eq!(status, StatusCode::CREATED, "registration: {reply}");
    reply["client_id"]
        .as_str()
        .unwrap_or_else(|| panic!("registration gave no client_id: {reply}"))
        .to_owned()
}

/// `/oauth/authorize?…` for the code flow with [`PKCE_CHALLENGE`] (S256), scope and resource.
pub fn authorize_url(
    server: &HttpServer,
    client_id: &str,
    redirect_uri: &str,
    state: &str,
) -> String {
    let mut url = Url::parse(&server.url("/oauth/authorize")).expect("the server's URL");
    url.query_pairs_mut().extend_pairs([
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("code_challenge", PKCE_CHALLENGE),
        ("code_challenge_method", "S256"),
        ("state", state),
        ("scope", SCOPE),
        ("resource", &resource(server)),
    ]);
    url.into()
}

/// POSTs `pairs` to `/oauth/token`; the status and the JSON reply.
pub async fn token_request(server: &HttpServer, pairs: &[(&str, &str)]) -> (StatusCode, Value) {
    let resp = http()
        .post(server.url("/oauth/token"))
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form(pairs))
        .send()
        .await
        .expect("POST /oauth/token");
    (resp.status(), json_body(resp).await)
}

/// Exchanges an authorization code (with [`PKCE_VERIFIER`]) for tokens; the token response.
pub async fn exchange_code(
    server: &HttpServer,
    client_id: &str,
    redirect_uri: &str,
    code: &str,
) -> Value {
    let resource = resource(server);
    let (status, reply) = token_request(
        server,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", client_id),
            ("code_verifier", PKCE_VERIFIER),
            ("resource", &resource),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "code exchange: {reply}");
    assert_eq!(
        reply["token_type"]
            .as_str()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("bearer"),
        "{reply}"
    );
    reply
}

/// Asserts that `token` does not open `/mcp`: 401 with a Bearer challenge naming the protected
/// resource metadata (RFC 9728) and `error="invalid_token"` (RFC 6750).
pub async fn assert_token_refused(server: &HttpServer, token: &str) {
    let resp = http()
        .post(server.mcp_url())
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(initialize_request(0).to_string())
        .send()
        .await
        .expect("POST /mcp");
    assert_eq!(
        resp.status(),
        StatusCode::UNAUTHORIZED,
        "a refused token on /mcp"
    );
    let challenge = resp
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let metadata = server.url("/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.starts_with("Bearer ")
            && challenge.contains(&format!("resource_metadata=\"{metadata}\""))
            && challenge.contains("error=\"invalid_token\""),
        "WWW-Authenticate of a refused token: {challenge:?}"
    );
}

/// Opens the consent page for `client_id` and approves it with `owner_secret` over plain HTTP,
/// as a browser without JavaScript would (the page's hidden fields, its CSRF cookie, the form
/// post); the authorization code from the redirect to `redirect_uri`.
pub async fn approve(
    server: &HttpServer,
    client_id: &str,
    redirect_uri: &str,
    owner_secret: &str,
) -> String {
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("reqwest client");
    let page = browser
        .get(authorize_url(server, client_id, redirect_uri, "bench"))
        .send()
        .await
        .expect("GET /oauth/authorize");
    assert_eq!(page.status(), StatusCode::OK, "the consent page");
    let cookie = page
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("the consent page sets its CSRF cookie")
        .to_owned();
    let html = page.text().await.expect("the consent page's text");
    let field = |name: &str| {
        let marker = format!("name=\"{name}\" value=\"");
        let start = html.find(&marker).expect("a hidden field") + marker.len();
        html[start..]
            .split('"')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let (request, csrf) = (field("request"), field("csrf"));
    let decided = browser
        .post(server.url("/oauth/authorize"))
        .header(reqwest::header::COOKIE, cookie)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form(&[
            ("request", &request),
            ("csrf", &csrf),
            ("secret", owner_secret),
            ("decision", "approve"),
        ]))
        .send()
        .await
        .expect("POST /oauth/authorize");
    assert_eq!(decided.status(), StatusCode::SEE_OTHER, "the approval");
    let location = decided
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    query_param(location, "code").expect("a code in the redirect")
}

async fn json_body(resp: reqwest::Response) -> Value {
    let bytes = resp.bytes().await.unwrap_or_default();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}

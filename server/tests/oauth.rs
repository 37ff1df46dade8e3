//! `--oauth` end to end against the real binary: the whole authorization-code flow by hand (as
//! a browser and a client would), then every attack the issue lists, each asserting the RFC's
//! error, no redirect where none is allowed, and a store that still works afterwards. A server
//! without `--oauth` advertises nothing.

use std::collections::HashMap;

use crate::util::http::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use reqwest::header::{HeaderMap, HeaderValue, LOCATION, SET_COOKIE, WWW_AUTHENTICATE};
use reqwest::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const OWNER: &str = "correct horse battery";
const REDIRECT: &str = "http://127.0.0.1:9/callback";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";

fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A server with `--oauth`, its state folder and a client that never follows redirects.
struct OAuthServer {
    server: HttpServer,
    state: tempfile::TempDir,
    _projects: TempProjects,
    http: reqwest::Client,
}

fn start(extra: &[&str]) -> OAuthServer {
    let projects = projects();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().join("state");
    let mut args = vec![
        "--oauth",
        "--oauth-owner-password",
        OWNER,
        "--state-dir",
        state_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let server = HttpServer::start(projects.path(), &args);
    OAuthServer {
        server,
        state,
        _projects: projects,
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    }
}

/// What the consent page's form carries.
struct Consent {
    request: String,
    csrf: String,
    cookie: String,
}

/// The value of `name="NAME" value="…"` in the page.
fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {page}"))
        + marker.len();
    page[start..].split('"').next().unwrap().to_owned()
}

fn query_of(location: &str) -> HashMap<String, String> {
    let url = url::Url::parse(location).unwrap();
    url.query_pairs().into_owned().collect()
}

impl OAuthServer {
    fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    fn state_dir(&self) -> std::path::PathBuf {
        self.state.path().join("state")
    }

    async fn register(&self, body: Value) -> (StatusCode, Value) {
        let response = self
            .http
            .post(self.url("/oauth/register"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn client(&self) -> String {
        let (status, body) = self
            .register(json!({"client_name": "Test client", "redirect_uris": [REDIRECT]}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["client_id"].as_str().unwrap().to_owned()
    }

    fn authorize_url(&self, client_id: &str, extra: &[(&str, &str)]) -> String {
        let challenge = challenge(VERIFIER);
        let mut params = vec![
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", "st4te"),
            ("scope", "mcp"),
        ];
        for (key, value) in extra {
            params.retain(|(k, _)| k != key);
            if !value.is_empty() {
                params.push((key, value));
            }
        }
        let mut url = url::Url::parse(&self.url("/oauth/authorize")).unwrap();
        url.query_pairs_mut().extend_pairs(params);
        url.to_string()
    }

    async fn consent_page(&self, url: &str) -> (HeaderMap, String) {
        let response = self.http.get(url).send().await.unwrap();
        let headers = response.headers().clone();
        (headers, response.text().await.unwrap())
    }

    async fn open_consent(&self, client_id: &str) -> Consent {
        let response = self
            .http
            .get(self.authorize_url(client_id, &[]))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let cookie = response
            .headers()
            .get(SET_COOKIE)
            .expect("the page sets the CSRF cookie")
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let page = response.text().await.unwrap();
        Consent {
            request: hidden(&page, "request"),
            csrf: hidden(&page, "csrf"),
            cookie,
        }
    }

    async fn decide(&self, consent: &Consent, secret: &str, decision: &str) -> reqwest::Response {
        self.http
            .post(self.url("/oauth/authorize"))
            .header("cookie", &consent.cookie)
            .form(&[
                ("request", consent.request.as_str()),
                ("csrf", consent.csrf.as_str()),
                ("secret", secret),
                ("decision", decision),
            ])
            .send()
            .await
            .unwrap()
    }

    /// Registration, consent and approval: the code.
    async fn code(&self) -> (String, String) {
        let client_id = self.client().await;
        let consent = self.open_consent(&client_id).await;
        let response = self.decide(&consent, OWNER, "approve").await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let location = response.headers()[LOCATION].to_str().unwrap().to_owned();
        assert!(location.starts_with(REDIRECT), "{location}");
        let query = query_of(&location);
        assert_eq!(query["state"], "st4te");
        assert_eq!(query["iss"], self.url("").trim_end_matches('/'));
        (client_id, query["code"].clone())
    }

    async fn token(&self, form: &[(&str, &str)]) -> (StatusCode, Value) {
        let response = self
            .http
            .post(self.url("/oauth/token"))
            .form(form)
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(response.headers()["cache-control"], "no-store");
        (status, response.json().await.unwrap())
    }

    async fn exchange(&self, client_id: &str, code: &str) -> (StatusCode, Value) {
        self.token(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
        ])
        .await
    }

    /// A fresh access + refresh token pair: `(client_id, tokens)`.
    async fn tokens(&self) -> (String, Value) {
        let (client_id, code) = self.code().await;
        let (status, tokens) = self.exchange(&client_id, &code).await;
        assert_eq!(status, StatusCode::OK, "{tokens}");
        (client_id, tokens)
    }

    async fn refresh(&self, client_id: &str, refresh: &str) -> (StatusCode, Value) {
        self.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", client_id),
        ])
        .await
    }

    /// The status of an MCP `initialize` with this bearer token.
    async fn mcp_status(&self, token: &str) -> (StatusCode, Option<String>) {
        let response = mcp_post(
            &self.http,
            &self.server.mcp_url(),
            &token_headers(token),
            &initialize_request(1),
        )
        .await;
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status(), challenge)
    }

    fn cli(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"))
            .args(args)
            .arg("--state-dir")
            .arg(self.state_dir())
            .env_clear()
            .output()
            .unwrap()
    }
}

fn token_headers(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    headers
}

fn s(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[tokio::test]
async fn claude_style_flow_from_discovery_to_revocation() {
    let server = start(&[]);
    let base = server.url("").trim_end_matches('/').to_owned();

    // Discovery: the 401 names the metadata, which names the authorization server.
    let (status, challenge) = server.mcp_status("").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let challenge = challenge.unwrap();
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    let resource: Value = server
        .http
        .get(&metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resource["resource"], format!("{base}/mcp"));
    let issuer = s(&resource["authorization_servers"][0]).to_owned();
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let meta: Value = server
            .http
            .get(format!("{issuer}{path}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(meta["issuer"], issuer);
        assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(meta["client_id_metadata_document_supported"], json!(true));
        assert_eq!(
            meta["token_endpoint_auth_methods_supported"],
            json!(["none"])
        );
        assert_eq!(meta["scopes_supported"], json!(["mcp"]));
    }
    let sse_meta: Value = server
        .http
        .get(format!("{base}/.well-known/oauth-protected-resource/sse"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sse_meta["resource"], format!("{base}/sse"));

    // The consent page: headers, fields, the names shown.
    let client_id = server.client().await;
    let (headers, page) = server
        .consent_page(&server.authorize_url(&client_id, &[]))
        .await;
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    assert!(
        page.contains("Test client") && page.contains("127.0.0.1:9"),
        "{page}"
    );
    assert!(page.contains("name=\"secret\"") && page.contains("id=\"approve\""));

    // Wrong secret: the page again, no redirect; then the right one.
    let consent = server.open_consent(&client_id).await;
    let wrong = server.decide(&consent, "wrong horse", "approve").await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.headers().get(LOCATION).is_none());
    assert!(wrong.text().await.unwrap().contains("id=\"error\""));
    let approved = server.decide(&consent, OWNER, "approve").await;
    assert_eq!(approved.status(), StatusCode::SEE_OTHER);
    let query = query_of(approved.headers()[LOCATION].to_str().unwrap());
    let (status, tokens) = server.exchange(&client_id, &query["code"]).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    let access = s(&tokens["access_token"]).to_owned();
    assert!(access.len() >= 43, "at least 256 bits: {access}");

    // The token opens /mcp and /sse alike, and the run is the client's.
    let mcp = McpSession::open(&server.server, Some(&access)).await;
    let response = mcp.call(&run_python(2, "hello_world.py", None)).await;
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    let mut sse = SseSession::open(&server.server, Some(&access)).await;
    let (response, _) = sse.call(&run_python(3, "hello_world.py", None)).await;
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    let caller = format!("caller=oauth:{client_id}");
    assert!(
        eventually(|| server.server.logs().matches(&caller).count() == 2).await,
        "{}",
        server.server.logs()
    );

    // The audit log names the client (id and name) for both runs, and nothing secret.
    let audit = std::fs::read_to_string(server.state_dir().join("audit.jsonl")).unwrap();
    let runs: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|entry: &Value| entry["tool"] == "run_python")
        .collect();
    assert_eq!(runs.len(), 2, "{audit}");
    for entry in &runs {
        assert_eq!(entry["principal"]["kind"], "oauth", "{entry}");
        assert_eq!(entry["principal"]["client_id"], client_id.as_str());
        assert_eq!(entry["principal"]["client_name"], "Test client");
    }
    assert!(!audit.contains(&access));

    // Refresh rotates: the old access token ends, the new one works.
    let (status, refreshed) = server
        .refresh(&client_id, s(&tokens["refresh_token"]))
        .await;
    assert_eq!(status, StatusCode::OK, "{refreshed}");
    assert_eq!(server.mcp_status(&access).await.0, StatusCode::UNAUTHORIZED);
    let access2 = s(&refreshed["access_token"]).to_owned();
    assert_eq!(server.mcp_status(&access2).await.0, StatusCode::OK);

    // Revocation: the next request is refused, with invalid_token.
    let revoked = server
        .http
        .post(server.url("/oauth/revoke"))
        .form(&[("token", s(&refreshed["refresh_token"]))])
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::OK);
    let (status, challenge) = server.mcp_status(&access2).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(challenge.unwrap().contains("error=\"invalid_token\""));

    // Nothing secret reached the log or the state file.
    let logs = server.server.logs();
    let db = std::fs::read(server.state_dir().join("oauth.sqlite3")).unwrap();
    let wal = std::fs::read(server.state_dir().join("oauth.sqlite3-wal")).unwrap_or_default();
    for secret in [
        access.as_str(),
        access2.as_str(),
        s(&tokens["refresh_token"]),
        query["code"].as_str(),
        OWNER,
    ] {
        assert!(!logs.contains(secret), "a secret in the log");
        let bytes = secret.as_bytes();
        for file in [&db, &wal] {
            assert!(
                !file.windows(bytes.len()).any(|w| w == bytes),
                "a secret in the store"
            );
        }
    }
}

#[tokio::test]
async fn a_server_without_oauth_advertises_nothing_and_answers_as_before() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let http = reqwest::Client::new();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
        "/oauth/authorize",
    ] {
        let response = http.get(server.url(path)).send().await.unwrap();
        assert_ne!(response.status(), StatusCode::OK, "{path}");
        assert!(response
            .headers()
            .get("access-control-allow-origin")
            .is_none());
    }
    let response = mcp_post(
        &http,
        &server.mcp_url(),
        &HeaderMap::new(),
        &initialize_request(1),
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers()[WWW_AUTHENTICATE],
        "Bearer realm=\"pyrun-mcp\""
    );
}

#[tokio::test]
async fn an_oauth_401_tells_the_client_the_connection_closes() {
    // The 401 goes out before the body is read and hyper closes the connection after it: a
    // client that reuses the connection for discovery must know.
    let server = start(&[]);
    let response = mcp_post(
        &server.http,
        &server.server.mcp_url(),
        &HeaderMap::new(),
        &initialize_request(1),
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers()["connection"], "close");
}

#[tokio::test]
async fn the_static_token_keeps_working_beside_oauth() {
    let server = start(&["--auth-token", TOKEN]);
    assert_eq!(server.mcp_status(TOKEN).await.0, StatusCode::OK);
    let (status, challenge) = server.mcp_status("not-the-token").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(challenge.unwrap().contains("invalid_token"));
}

#[tokio::test]
async fn pkce_is_required_and_only_s256_with_the_right_verifier_passes() {
    let server = start(&[]);
    let client_id = server.client().await;
    // `plain`, no method, no challenge: errors back to the (proven) redirect URI.
    for extra in [
        vec![
            ("code_challenge_method", "plain"),
            ("code_challenge", VERIFIER),
        ],
        vec![("code_challenge_method", "")],
        vec![("code_challenge", "")],
    ] {
        let response = server
            .http
            .get(server.authorize_url(&client_id, &extra))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{extra:?}");
        let query = query_of(response.headers()[LOCATION].to_str().unwrap());
        assert_eq!(query["error"], "invalid_request", "{extra:?}");
        assert_eq!(query["state"], "st4te");
    }
    // Wrong or missing verifier: invalid_grant, and the code is spent.
    let (client_id, code) = server.code().await;
    let (status, body) = server
        .token(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("client_id", &client_id),
            ("redirect_uri", REDIRECT),
            (
                "code_verifier",
                "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXj",
            ),
        ])
        .await;
    assert_eq!(
        (status, s(&body["error"])),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    let (status, body) = server.exchange(&client_id, &code).await;
    assert_eq!(
        (status, s(&body["error"])),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    let (client_id, code) = server.code().await;
    let (_, body) = server
        .token(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("client_id", &client_id),
            ("redirect_uri", REDIRECT),
        ])
        .await;
    assert_eq!(body["error"], "invalid_request");
}

#[tokio::test]
async fn a_reused_code_fails_and_revokes_what_it_issued() {
    let server = start(&[]);
    let (client_id, code) = server.code().await;
    let (status, tokens) = server.exchange(&client_id, &code).await;
    assert_eq!(status, StatusCode::OK);
    let access = s(&tokens["access_token"]);
    assert_eq!(server.mcp_status(access).await.0, StatusCode::OK);
    let (status, body) = server.exchange(&client_id, &code).await;
    assert_eq!(
        (status, s(&body["error"])),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    assert_eq!(server.mcp_status(access).await.0, StatusCode::UNAUTHORIZED);
    let (_, body) = server
        .refresh(&client_id, s(&tokens["refresh_token"]))
        .await;
    assert_eq!(body["error"], "invalid_grant");
}

#[tokio::test]
async fn a_reused_refresh_token_revokes_the_whole_family() {
    let server = start(&[]);
    let (client_id, tokens) = server.tokens().await;
    let old_refresh = s(&tokens["refresh_token"]);
    let (status, rotated) = server.refresh(&client_id, old_refresh).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = server.refresh(&client_id, old_refresh).await;
    assert_eq!(
        (status, s(&body["error"])),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    assert_eq!(
        server.mcp_status(s(&rotated["access_token"])).await.0,
        StatusCode::UNAUTHORIZED
    );
    let (_, body) = server
        .refresh(&client_id, s(&rotated["refresh_token"]))
        .await;
    assert_eq!(body["error"], "invalid_grant");
}

#[tokio::test]
async fn unknown_clients_and_unregistered_redirects_get_a_page_never_a_redirect() {
    let server = start(&[]);
    let client_id = server.client().await;
    let cases: Vec<Vec<(&str, &str)>> = vec![
        vec![("client_id", "pyc_nobody")],
        vec![("client_id", "x'; DROP TABLE clients; --")],
        vec![("client_id", "")],
        vec![("redirect_uri", "https://evil.example/callback")],
        vec![("redirect_uri", "http://127.0.0.1:9/callback/../evil")],
        vec![("redirect_uri", "http://127.0.0.1:9/callbackx")],
        vec![(
            "redirect_uri",
            "http://127.0.0.1:9/callback?next=https://evil.example",
        )],
        vec![("redirect_uri", "http://127.0.0.1:9/callback#frag")],
        vec![("redirect_uri", "//evil.example/callback")],
        vec![("redirect_uri", "javascript:alert(1)")],
    ];
    for extra in cases {
        let url = server.authorize_url(&client_id, &extra);
        let response = server.http.get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{extra:?}");
        assert!(response.headers().get(LOCATION).is_none(), "{extra:?}");
        assert!(response.text().await.unwrap().contains("id=\"error\""));
    }
    // A repeated parameter is refused too.
    let url = format!(
        "{}&redirect_uri=https://evil.example/cb",
        server.authorize_url(&client_id, &[])
    );
    let response = server.http.get(&url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.headers().get(LOCATION).is_none());
    // And the store still works.
    server.tokens().await;
}

#[tokio::test]
async fn expired_and_foreign_resource_tokens_are_refused() {
    let server = start(&[]);
    // Asking for another server's resource fails at authorize and at the token endpoint.
    let client_id = server.client().await;
    let response = server
        .http
        .get(server.authorize_url(&client_id, &[("resource", "https://evil.example/mcp")]))
        .send()
        .await
        .unwrap();
    let query = query_of(response.headers()[LOCATION].to_str().unwrap());
    assert_eq!(query["error"], "invalid_target");
    let (client_id, code) = server.code().await;
    let (_, body) = server
        .token(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("client_id", &client_id),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
            ("resource", "https://evil.example/mcp"),
        ])
        .await;
    assert_eq!(body["error"], "invalid_target");

    let (_, tokens) = server.tokens().await;
    let access = s(&tokens["access_token"]).to_owned();
    assert_eq!(server.mcp_status(&access).await.0, StatusCode::OK);
    let db = rusqlite::Connection::open(server.state_dir().join("oauth.sqlite3")).unwrap();
    // A token bound to another resource (another server's, or this one's old URL).
    db.execute(
        "UPDATE tokens SET resource = 'https://other.example/mcp'",
        [],
    )
    .unwrap();
    assert_eq!(server.mcp_status(&access).await.0, StatusCode::UNAUTHORIZED);
    db.execute(
        "UPDATE tokens SET resource = ?1",
        [format!("{}/mcp", server.url("").trim_end_matches('/'))],
    )
    .unwrap();
    assert_eq!(server.mcp_status(&access).await.0, StatusCode::OK);
    // Expired: refused at once (nothing is cached).
    db.execute("UPDATE tokens SET expires = 1", []).unwrap();
    assert_eq!(server.mcp_status(&access).await.0, StatusCode::UNAUTHORIZED);
    let (_, body) = server.refresh("", s(&tokens["refresh_token"])).await;
    assert_eq!(body["error"], "invalid_grant");
}

#[tokio::test]
async fn consent_without_or_with_a_stale_csrf_token_is_refused() {
    let server = start(&[]);
    let client_id = server.client().await;
    let first = server.open_consent(&client_id).await;
    let second = server.open_consent(&client_id).await;
    let forged = [
        // No cookie (a cross-site post).
        Consent {
            request: first.request.clone(),
            csrf: first.csrf.clone(),
            cookie: String::new(),
        },
        // The token of another request.
        Consent {
            request: first.request.clone(),
            csrf: second.csrf.clone(),
            cookie: second.cookie.clone(),
        },
        // No token.
        Consent {
            request: first.request.clone(),
            csrf: String::new(),
            cookie: first.cookie.clone(),
        },
    ];
    for consent in &forged {
        let response = server.decide(consent, OWNER, "approve").await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert!(response.headers().get(LOCATION).is_none());
    }
    let unknown = Consent {
        request: "nope".into(),
        csrf: first.csrf.clone(),
        cookie: first.cookie.clone(),
    };
    assert_eq!(
        server.decide(&unknown, OWNER, "approve").await.status(),
        StatusCode::BAD_REQUEST
    );
    // The real form still works, once.
    assert_eq!(
        server.decide(&first, OWNER, "approve").await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        server.decide(&first, OWNER, "approve").await.status(),
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn deny_goes_back_with_access_denied() {
    let server = start(&[]);
    let client_id = server.client().await;
    let consent = server.open_consent(&client_id).await;
    let response = server.decide(&consent, "", "deny").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let query = query_of(response.headers()[LOCATION].to_str().unwrap());
    assert_eq!(query["error"], "access_denied");
    assert_eq!(query["state"], "st4te");
    assert!(query.contains_key("iss"));
    assert!(!query.contains_key("code"));
}

#[tokio::test]
async fn guessing_the_owner_secret_slows_down_and_oauth_unlock_clears_it() {
    let server = start(&[]);
    let client_id = server.client().await;
    let consent = server.open_consent(&client_id).await;
    // The throttle counts in whole seconds (a 1 s wait after the third failure): start at the top
    // of a second, so the guesses and the right secret after them fall in the same one.
    let into_second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_millis();
    tokio::time::sleep(std::time::Duration::from_millis(
        u64::from(1000 - into_second) + 5,
    ))
    .await;
    for _ in 0..3 {
        assert_eq!(
            server.decide(&consent, "guess", "approve").await.status(),
            StatusCode::UNAUTHORIZED
        );
    }
    // Now even the right secret waits: the delay is checked before the secret.
    let throttled = server.decide(&consent, OWNER, "approve").await;
    assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(throttled.headers().get("retry-after").is_some());
    assert!(throttled.text().await.unwrap().contains("id=\"error\""));
    let unlock = server.cli(&["oauth", "unlock"]);
    assert!(unlock.status.success(), "{unlock:?}");
    assert_eq!(
        server.decide(&consent, OWNER, "approve").await.status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_wrong_secrets_on_one_form_is_counted_before_it_is_verified() {
    let server = std::sync::Arc::new(start(&[]));
    let client_id = server.client().await;
    let consent = std::sync::Arc::new(server.open_consent(&client_id).await);
    let before = crate::util::peak_rss_mib(server.server.pid());
    let started = std::time::Instant::now();
    let posts: Vec<_> = (0..40)
        .map(|i| {
            let (server, consent) = (server.clone(), consent.clone());
            tokio::spawn(async move {
                let guess = format!("wrong guess {i}");
                server.decide(&consent, &guess, "approve").await.status()
            })
        })
        .collect();
    let mut verified = 0u64;
    for post in posts {
        match post.await.unwrap() {
            StatusCode::UNAUTHORIZED => verified += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("a wrong secret got {other}"),
        }
    }
    let took = started.elapsed().as_secs();
    let peak = crate::util::peak_rss_mib(server.server.pid());
    eprintln!("burst: {verified} verified in {took} s, peak RSS {before} -> {peak} MiB");
    // Three free attempts, then one more each time the throttle's delay (1 s and growing) has
    // passed: 4 for a burst that lands within a second; on a loaded machine the 40 requests may
    // take a few seconds to arrive, and the rules then let one more through per second at most.
    assert!(
        verified <= 4 + took.min(6),
        "{verified} of 40 wrong secrets were verified in {took} s"
    );
    assert!(
        peak < 150,
        "the server's peak RSS went {before} -> {peak} MiB"
    );
    // The owner waits no longer than the throttle's rules say after those failures, and
    // the right secret then gets a code.
    let throttled = server.decide(&consent, OWNER, "approve").await;
    let wait = match throttled.status() {
        StatusCode::TOO_MANY_REQUESTS => throttled.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        StatusCode::SEE_OTHER => return,
        other => panic!("the owner's secret got {other}"),
    };
    // The throttle's delay doubles from 1 s after the third failure: a burst of which one more
    // was verified (a loaded machine spreads it over a second) leaves 2 s.
    let allowed = 1u64 << verified.saturating_sub(3).min(3);
    assert!(
        wait <= allowed,
        "the owner must wait {wait} s after {verified} failures"
    );
    tokio::time::sleep(std::time::Duration::from_millis(wait * 1000 + 50)).await;
    assert_eq!(
        server.decide(&consent, OWNER, "approve").await.status(),
        StatusCode::SEE_OTHER
    );
}

/// A `tools/call` of `tool` in `session`.
async fn tool(session: &McpSession, id: u64, tool: &str, arguments: Value) -> Value {
    let call = json!({"name": tool, "arguments": arguments});
    session.call(&request(id, "tools/call", call)).await
}

#[tokio::test]
async fn one_oauth_client_never_evicts_anothers_ended_runs_nor_takes_every_place() {
    let server = start(&[
        "--max-background-runs",
        "3",
        "--max-background-runs-per-caller",
        "2",
    ]);
    let (_, first) = server.tokens().await;
    let (_, second) = server.tokens().await;
    let victim = McpSession::open(&server.server, Some(s(&first["access_token"]))).await;
    let flooder = McpSession::open(&server.server, Some(s(&second["access_token"]))).await;
    let started = tool(
        &victim,
        1,
        "start_python",
        json!({"file_name": "hello_world.py"}),
    )
    .await;
    let ended = started["result"]["structuredContent"]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for id in 2..40 {
        let state = tool(
            &victim,
            id,
            "get_run",
            json!({"run_id": ended, "wait_seconds": 5}),
        )
        .await;
        if state["result"]["structuredContent"]["status"] == "exited" {
            break;
        }
    }
    // The victim has read its run to the end: only the retention may take it now.
    let mut refused = None;
    for id in 50..55 {
        let started = tool(
            &flooder,
            id,
            "start_python",
            json!({"file_name": "sleeper.py"}),
        )
        .await;
        if started["result"]["isError"] == json!(true) {
            refused = Some(result_text(&started));
            break;
        }
    }
    let refused = refused.expect("the flooder took every place");
    assert!(refused.contains("of yours"), "{refused}");
    let kept = tool(&victim, 60, "get_run", json!({"run_id": ended})).await;
    assert_eq!(
        kept["result"]["structuredContent"]["status"], "exited",
        "another caller's start evicted the victim's run: {kept}"
    );
    // And the victim still finds a place for a new run.
    let again = tool(
        &victim,
        61,
        "start_python",
        json!({"file_name": "hello_world.py"}),
    )
    .await;
    assert_eq!(again["result"]["isError"], json!(false), "{again}");
}

#[tokio::test]
async fn one_oauth_clients_queued_background_runs_never_hold_up_anothers() {
    // Two places in the background pool; the flooder asks for four runs that never end.
    let server = start(&["--max-background-concurrent", "2"]);
    let (_, first) = server.tokens().await;
    let (_, second) = server.tokens().await;
    let victim = McpSession::open(&server.server, Some(s(&first["access_token"]))).await;
    let flooder = McpSession::open(&server.server, Some(s(&second["access_token"]))).await;
    for id in 1..=4 {
        let started = tool(
            &flooder,
            id,
            "start_python",
            json!({"file_name": "sleeper.py"}),
        )
        .await;
        assert_eq!(started["result"]["isError"], json!(false), "{started}");
    }
    let started = tool(
        &victim,
        10,
        "start_python",
        json!({"file_name": "hello_world.py"}),
    )
    .await;
    let run_id = started["result"]["structuredContent"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    // It ends within 20 s (get_run answers early once there is output: poll until then).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut state = Value::Null;
    for id in 11.. {
        state = tool(
            &victim,
            id,
            "get_run",
            json!({"run_id": run_id, "wait_seconds": 2}),
        )
        .await;
        let status = &state["result"]["structuredContent"]["status"];
        if status == "exited" || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(
        state["result"]["structuredContent"]["status"], "exited",
        "the run waited behind another caller's queue of runs: {state}"
    );
}

#[tokio::test]
async fn one_oauth_clients_flood_of_run_python_calls_never_holds_up_anothers() {
    // Two places for runs; the flooder's six calls run until their 60 s timeout.
    let server = start(&["--max-concurrent", "2", "--timeout", "60"]);
    let (_, first) = server.tokens().await;
    let (_, second) = server.tokens().await;
    let victim = McpSession::open(&server.server, Some(s(&first["access_token"]))).await;
    let flooder = McpSession::open(&server.server, Some(s(&second["access_token"]))).await;
    let flooder = std::sync::Arc::new(flooder);
    let flood: Vec<_> = (1..=6)
        .map(|id| {
            let flooder = flooder.clone();
            tokio::spawn(async move {
                let args = json!({"file_name": "sleeper.py"});
                tool(&flooder, id, "run_python", args).await
            })
        })
        .collect();
    // Every call of the flooder is in the server before the victim's.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        tool(
            &victim,
            10,
            "run_python",
            json!({"file_name": "hello_world.py"}),
        ),
    )
    .await
    .expect("the run waited behind another caller's calls");
    let stdout = &answer["result"]["structuredContent"]["stdout"];
    assert_eq!(stdout, "Hello, World!\n", "{answer}");
    for call in flood {
        call.abort();
    }
}

#[tokio::test]
async fn registrations_are_limited_per_address_as_well_as_overall() {
    let server = start(&[]);
    let body = json!({"client_name": "Burst", "redirect_uris": [REDIRECT]});
    let mut statuses = Vec::new();
    for _ in 0..11 {
        statuses.push(server.register(body.clone()).await.0);
    }
    assert!(
        statuses[..10].iter().all(|s| *s == StatusCode::CREATED),
        "{statuses:?}"
    );
    assert_eq!(statuses[10], StatusCode::TOO_MANY_REQUESTS, "{statuses:?}");
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let response = elsewhere
        .post(server.url("/oauth/register"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED, "another address");
}

#[tokio::test]
async fn malformed_oversized_and_sql_ish_registrations() {
    let server = start(&[]);
    let (status, body) = server
        .register(json!({"redirect_uris": ["javascript:alert(1)"]}))
        .await;
    assert_eq!(
        (status, s(&body["error"])),
        (StatusCode::BAD_REQUEST, "invalid_redirect_uri")
    );
    let (status, body) = server.register(json!({"redirect_uris": "x"})).await;
    assert_eq!(
        (status, s(&body["error"])),
        (StatusCode::BAD_REQUEST, "invalid_redirect_uri")
    );
    let response = server
        .http
        .post(server.url("/oauth/register"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let big = json!({"redirect_uris": [REDIRECT], "client_name": "x", "pad": "y".repeat(20_000)});
    let (status, _) = server.register(big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // SQL-ish and markup in every field: stored as data, shown escaped.
    let evil = "x'); DROP TABLE clients; --<script>";
    let (status, body) = server.register(json!({"client_name": evil, "redirect_uris": [REDIRECT], "client_uri": evil, "software_id": evil})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let client_id = s(&body["client_id"]).to_owned();
    let (_, page) = server
        .consent_page(&server.authorize_url(&client_id, &[("state", evil)]))
        .await;
    assert!(
        !page.contains("<script>") && page.contains("DROP TABLE"),
        "{page}"
    );
    let list = server.cli(&["oauth", "list"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains(&client_id));
    // The token endpoint's errors.
    let (_, body) = server
        .token(&[("grant_type", "password"), ("username", evil)])
        .await;
    assert_eq!(body["error"], "unsupported_grant_type");
    let (_, body) = server
        .token(&[
            ("grant_type", "authorization_code"),
            ("code", evil),
            ("client_id", evil),
            ("code_verifier", VERIFIER),
        ])
        .await;
    assert_eq!(body["error"], "invalid_grant");
    server.tokens().await;
}

#[tokio::test]
async fn oauth_revoke_cuts_a_client_off_at_once() {
    let server = start(&[]);
    let (client_id, tokens) = server.tokens().await;
    let access = s(&tokens["access_token"]);
    assert_eq!(server.mcp_status(access).await.0, StatusCode::OK);
    let out = server.cli(&["oauth", "list"]);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        list.contains(&client_id) && list.contains("Test client") && list.contains("active"),
        "{list}"
    );
    let out = server.cli(&["oauth", "revoke", &client_id]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.mcp_status(access).await.0, StatusCode::UNAUTHORIZED);
    let (_, body) = server
        .refresh(&client_id, s(&tokens["refresh_token"]))
        .await;
    assert_eq!(body["error"], "invalid_grant");
    let list = String::from_utf8_lossy(&server.cli(&["oauth", "list"]).stdout).into_owned();
    assert!(list.contains("revoked"), "{list}");
}

#[tokio::test]
async fn browser_clients_get_cors_on_the_oauth_endpoints_but_mcp_keeps_its_origin_check() {
    let server = start(&[]);
    for path in [
        "/oauth/token",
        "/oauth/register",
        "/.well-known/oauth-authorization-server",
    ] {
        let response = server
            .http
            .request(reqwest::Method::OPTIONS, server.url(path))
            .header("origin", "https://claude.ai")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        assert_eq!(
            response.headers()["access-control-allow-origin"],
            "*",
            "{path}"
        );
    }
    let meta = server
        .http
        .get(server.url("/.well-known/oauth-protected-resource"))
        .header("origin", "https://claude.ai")
        .send()
        .await
        .unwrap();
    assert_eq!(meta.headers()["access-control-allow-origin"], "*");
    let mut headers = HeaderMap::new();
    headers.insert("origin", HeaderValue::from_static("https://claude.ai"));
    let response = mcp_post(
        &server.http,
        &server.server.mcp_url(),
        &headers,
        &initialize_request(1),
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn tokens_and_clients_survive_a_restart_and_the_state_is_owner_only() {
    let server = start(&[]);
    let (client_id, tokens) = server.tokens().await;
    let public = server.url("").trim_end_matches('/').to_owned();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&server.state_dir()), 0o700);
        assert_eq!(mode(&server.state_dir().join("oauth.sqlite3")), 0o600);
    }
    // The same state and public URL on a new process: the client stays connected.
    let state_dir = server.state_dir();
    let again = HttpServer::start(
        server._projects.path(),
        &[
            "--oauth",
            "--oauth-owner-password",
            OWNER,
            "--state-dir",
            state_dir.to_str().unwrap(),
            "--public-url",
            &public,
        ],
    );
    let response = mcp_post(
        &server.http,
        &again.mcp_url(),
        &token_headers(s(&tokens["access_token"])),
        &initialize_request(1),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let (status, _) = server
        .refresh(&client_id, s(&tokens["refresh_token"]))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[test]
fn oauth_refuses_unsafe_settings_with_a_hint() {
    let projects = projects();
    let state = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"))
            .args([
                "--projects-dir",
                projects.path().to_str().unwrap(),
                "--state-dir",
                state.path().to_str().unwrap(),
            ])
            .args(args)
            .env_clear()
            .output()
            .unwrap()
    };
    for (args, expected) in [
        (vec!["--oauth"], "owner secret"),
        (
            vec!["--oauth", "--oauth-owner-password", "short"],
            "8 to 256",
        ),
        (
            vec![
                "--oauth",
                "--auth-token",
                "t0k",
                "--public-url",
                "http://pyrun.example",
            ],
            "https",
        ),
        (
            vec![
                "--oauth",
                "--auth-token",
                "t0k",
                "--public-url",
                "https://pyrun.example/mcp",
            ],
            "path",
        ),
        (
            vec!["--oauth", "--auth-token", "t0k", "--transport", "stdio"],
            "HTTP transport",
        ),
        (
            vec!["--oauth", "--auth-token", "t0k", "--bind", "0.0.0.0:0"],
            "--public-url",
        ),
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(stderr.contains("hint:"), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn a_metadata_document_at_a_private_address_is_never_fetched_and_gets_a_page() {
    let server = start(&[]);
    for client_id in [
        "https://127.0.0.1/client.json",
        "https://localhost/client.json",
        "https://10.0.0.1/client.json",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/client.json",
        "http://claude.ai/client.json",
    ] {
        let response = server
            .http
            .get(server.authorize_url(client_id, &[]))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{client_id}");
        assert!(response.headers().get(LOCATION).is_none(), "{client_id}");
        let page = response.text().await.unwrap();
        assert!(page.contains("id=\"error\""), "{client_id}: {page}");
        assert!(!page.contains("169.254") || client_id.contains("169.254"));
    }
    // The log line may be written just after the answer.
    let logged = eventually(|| server.server.logs().contains("client metadata document")).await;
    assert!(logged, "{}", server.server.logs());
    // The test escape is refused on anything but loopback.
    let projects = projects();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"))
        .args(["--projects-dir", projects.path().to_str().unwrap()])
        .args(["--bind", "0.0.0.0:0", "--auth-token", TOKEN])
        .env_clear()
        .env("PYRUN_OAUTH_TEST_METADATA_CA", "/nonexistent.pem")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback address only"));
}

/// What a request naming a session gets: its status, its content type and its body.
async fn session_answer(
    server: &OAuthServer,
    method: reqwest::Method,
    token: &str,
    session: &str,
    last_event_id: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    let mut request = server
        .http
        .request(method.clone(), server.server.mcp_url())
        .headers(token_headers(token))
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .header("accept", "application/json, text/event-stream");
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    if method == reqwest::Method::POST {
        request = request
            .header("content-type", "application/json")
            .body(request_body(7, "tools/list"));
    }
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), request.send())
        .await
        .expect("an answer within 10 s")
        .unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    // A stream that opened would never end: read its body only when it is a refusal.
    let body = if status.is_success() {
        String::new()
    } else {
        response.text().await.unwrap()
    };
    (status, kind, body)
}

fn request_body(id: u64, method: &str) -> String {
    request(id, method, json!({})).to_string()
}

/// Every way a request can name a session: what `intruder` gets naming `victim_session` must
/// be exactly what it gets naming a session that never was, and the session lives on.
async fn assert_foreign_session_is_unknown(
    server: &OAuthServer,
    victim: &McpSession,
    intruder: &str,
) {
    let victim_session = victim.session_id().unwrap().to_owned();
    let never = "0123456789abcdef0123456789abcdef";
    for (method, last_event_id) in [
        (reqwest::Method::POST, None),
        (reqwest::Method::GET, None),
        (reqwest::Method::GET, Some("0")),
        (reqwest::Method::DELETE, None),
    ] {
        let foreign = session_answer(
            server,
            method.clone(),
            intruder,
            &victim_session,
            last_event_id,
        )
        .await;
        let unknown = session_answer(server, method.clone(), intruder, never, last_event_id).await;
        assert_eq!(
            foreign.0,
            StatusCode::NOT_FOUND,
            "{method} (Last-Event-ID {last_event_id:?}) with another caller's session: {foreign:?}"
        );
        assert_eq!(
            foreign, unknown,
            "{method} (Last-Event-ID {last_event_id:?}): another caller's session must look unknown"
        );
    }
    // The victim's session survived the DELETE and the rest.
    let listed = victim.call(&request(90, "tools/list", json!({}))).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
}

#[tokio::test]
async fn an_http_session_is_its_callers_alone_between_two_oauth_clients() {
    let server = start(&[]);
    let (_, first) = server.tokens().await;
    let (_, second) = server.tokens().await;
    let (a, b) = (s(&first["access_token"]), s(&second["access_token"]));
    let session_of_a = McpSession::open(&server.server, Some(a)).await;
    assert_foreign_session_is_unknown(&server, &session_of_a, b).await;
    // And the other way round: B's own session is A's to neither use nor end.
    let session_of_b = McpSession::open(&server.server, Some(b)).await;
    assert_foreign_session_is_unknown(&server, &session_of_b, a).await;
    // Its maker still ends it.
    let (status, _, _) = session_answer(
        &server,
        reqwest::Method::DELETE,
        a,
        session_of_a.session_id().unwrap(),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn an_http_session_is_its_callers_alone_between_the_static_token_and_an_oauth_client() {
    let server = start(&["--auth-token", TOKEN]);
    let (_, tokens) = server.tokens().await;
    let oauth = s(&tokens["access_token"]);
    let token_session = McpSession::open(&server.server, Some(TOKEN)).await;
    assert_foreign_session_is_unknown(&server, &token_session, oauth).await;
    let oauth_session = McpSession::open(&server.server, Some(oauth)).await;
    assert_foreign_session_is_unknown(&server, &oauth_session, TOKEN).await;
}

#[tokio::test]
async fn a_legacy_sse_session_takes_messages_from_its_caller_alone() {
    let server = start(&[]);
    let (_, first) = server.tokens().await;
    let (_, second) = server.tokens().await;
    let (a, b) = (s(&first["access_token"]), s(&second["access_token"]));
    let mut victim = SseSession::open(&server.server, Some(a)).await;
    let never = victim
        .message_url
        .rsplit_once('=')
        .map(|(base, _)| format!("{base}=0123456789abcdef0123456789abcdef"))
        .unwrap();
    let post = |url: &str| {
        server
            .http
            .post(url)
            .headers(token_headers(b))
            .header("content-type", "application/json")
            .body(request_body(5, "tools/list"))
            .send()
    };
    let foreign = post(&victim.message_url).await.unwrap();
    let (foreign_status, foreign_body) = (foreign.status(), foreign.text().await.unwrap());
    let unknown = post(&never).await.unwrap();
    assert_eq!(foreign_status, StatusCode::NOT_FOUND, "{foreign_body}");
    assert_eq!(
        (foreign_status, foreign_body),
        (unknown.status(), unknown.text().await.unwrap())
    );
    let (listed, _) = victim.call(&request(6, "tools/list", json!({}))).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
}

#[tokio::test]
async fn one_caller_cannot_take_every_http_session() {
    // A share of 2 in 4: the flooder's third session is refused, the other caller still gets in.
    let server = start(&["--max-sessions", "4"]);
    let (_, first) = server.tokens().await;
    let (_, second) = server.tokens().await;
    let (flooder, other) = (s(&first["access_token"]), s(&second["access_token"]));
    let _one = McpSession::open(&server.server, Some(flooder)).await;
    let _two = SseSession::open(&server.server, Some(flooder)).await;
    let refused = mcp_post(
        &server.http,
        &server.server.mcp_url(),
        &token_headers(flooder),
        &initialize_request(1),
    )
    .await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(refused.headers().contains_key("retry-after"));
    let text = refused.text().await.unwrap();
    assert!(text.contains("--max-sessions-per-caller"), "{text}");
    let sse_refused = server
        .http
        .get(server.server.url("/sse"))
        .headers(token_headers(flooder))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(sse_refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let _theirs = McpSession::open(&server.server, Some(other)).await;
    let _also_theirs = SseSession::open(&server.server, Some(other)).await;
}

/// A share of 2 in 4 (`--max-sessions 4` with `--oauth`): after whatever `flood` does with the
/// first caller's token, the second caller still opens both of its sessions.
async fn the_other_caller_keeps_its_share_after<F, Fut>(flood: F)
where
    F: FnOnce(OAuthServer, String) -> Fut,
    Fut: std::future::Future<Output = OAuthServer>,
{
    let server = start(&["--max-sessions", "4"]);
    let (_, first) = server.tokens().await;
    let (_, second) = server.tokens().await;
    let flooder = s(&first["access_token"]).to_owned();
    let other = s(&second["access_token"]).to_owned();
    let server = flood(server, flooder).await;
    let _one = McpSession::open(&server.server, Some(&other)).await;
    let _two = McpSession::open(&server.server, Some(&other)).await;
}

#[tokio::test]
async fn an_initialize_naming_an_unreadable_session_opens_none() {
    the_other_caller_keeps_its_share_after(|server, flooder| async move {
        for id in 0..6 {
            let mut headers = token_headers(&flooder);
            headers.insert("mcp-session-id", HeaderValue::from_bytes(b"\xff").unwrap());
            let answer = mcp_post(
                &server.http,
                &server.server.mcp_url(),
                &headers,
                &initialize_request(id),
            )
            .await;
            assert_eq!(answer.status(), StatusCode::NOT_FOUND, "initialize {id}");
        }
        server
    })
    .await;
}

#[tokio::test]
async fn concurrent_initializes_never_pass_a_callers_share() {
    the_other_caller_keeps_its_share_after(|server, flooder| async move {
        let (url, headers) = (server.server.mcp_url(), token_headers(&flooder));
        let requests: Vec<Value> = (0..24).map(initialize_request).collect();
        let opened = futures::future::join_all(
            requests
                .iter()
                .map(|request| mcp_post(&server.http, &url, &headers, request)),
        )
        .await
        .into_iter()
        .filter(|answer| answer.status() == StatusCode::OK)
        .count();
        assert!(opened <= 2, "{opened} sessions opened with a share of 2");
        server
    })
    .await;
}

#[tokio::test]
async fn initializes_whose_client_hangs_up_at_once_still_count_for_their_caller() {
    use tokio::io::AsyncWriteExt;

    the_other_caller_keeps_its_share_after(|server, flooder| async move {
        let body = initialize_request(1).to_string();
        let url = reqwest::Url::parse(&server.server.mcp_url()).unwrap();
        let address = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {flooder}\r\n\
             accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        // Hang up after a few hundred microseconds to a few milliseconds: some requests end
        // before the session is made, some after, none with an answer read.
        for attempt in 0..16u64 {
            let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
            stream.write_all(head.as_bytes()).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_micros(250 * attempt)).await;
            drop(stream);
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        server
    })
    .await;
}

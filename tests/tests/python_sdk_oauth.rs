//! The official Python MCP SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`, pinned in
//! `tests/clients/requirements.txt`) against a `--oauth` server over `/mcp` (both SDK modes) and
//! the legacy `/sse`, the way Claude's connectors log in: discovery from the 401 → registration
//! (dynamic, or a Client ID Metadata Document the test serves over https) → the consent form
//! filled over HTTP → PKCE code exchange → `run_python` → refresh → revoke → 401. The script
//! (`tests/clients/oauth_flow.py`) reports what it saw; the server's side is checked here over
//! HTTP (revoked tokens get the RFC 6750/9728 challenge, spent refresh tokens `invalid_grant`), in
//! `oauth list` and in its audit log.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pyrun_mcp_tests::oauth::{assert_token_refused, token_request};
use pyrun_mcp_tests::{
    args, bin_path, python_client, run_bounded, scrub_env, HttpServer, ServerLaunch,
};
use reqwest::StatusCode;
use serde_json::{json, Value};

const OWNER_SECRET: &str = "owner secret for the sdk test";

/// A `--oauth` server with an owner password and its state in `state`, plus `env`.
fn oauth_server(state: &Path, env: &[(&str, &Path)]) -> HttpServer {
    let mut launch = ServerLaunch::samples()
        .args([
            "--oauth",
            "--oauth-owner-password",
            OWNER_SECRET,
            "--state-dir",
        ])
        .args([state]);
    for (name, value) in env {
        launch = launch.env(name, value.as_os_str());
    }
    launch.http()
}

/// Where the SDK connects, and what its requests look like there.
#[derive(Debug, Clone, Copy)]
enum Endpoint {
    /// Streamable HTTP: every request is a POST to `/mcp`, answered 200.
    Mcp,
    /// The legacy SSE transport: GET `/sse` opens the stream, POSTs to `/messages` get 202.
    Sse,
}

impl Endpoint {
    fn path(self) -> &'static str {
        match self {
            Endpoint::Mcp => "/mcp",
            Endpoint::Sse => "/sse",
        }
    }

    /// The request that opens a session, with `status`.
    fn connect(self, status: u16) -> Value {
        match self {
            Endpoint::Mcp => exchange("POST", "/mcp", status),
            Endpoint::Sse => exchange("GET", "/sse", status),
        }
    }

    /// A request of a session that was let in.
    fn accepted_call(self) -> Value {
        match self {
            Endpoint::Mcp => exchange("POST", "/mcp", 200),
            Endpoint::Sse => exchange("POST", "/messages", 202),
        }
    }
}

/// Runs oauth_flow.py against `server`'s `endpoint` (on a blocking thread) and returns its report;
/// panics with the script's output and the server's log when it fails.
async fn run_flow(
    server: &HttpServer,
    mode: &str,
    endpoint: Endpoint,
    cimd: Option<&TestCa>,
) -> Value {
    let flag = match endpoint {
        Endpoint::Mcp => "--http",
        Endpoint::Sse => "--sse",
    };
    let url = server.url(endpoint.path());
    let mut argv = args(&["--mode", mode, flag, &url]);
    argv.extend(args(&["--secret", OWNER_SECRET]));
    if let Some(ca) = cimd {
        argv.extend(args(&[
            "--cimd-cert",
            &ca.leaf_cert(),
            "--cimd-key",
            &ca.leaf_key(),
        ]));
    }
    match tokio::task::spawn_blocking(move || python_client("oauth_flow.py", &argv)).await {
        Ok(report) => report,
        // The script failed: its output is in the panic; the server's log says its side.
        Err(failure) => panic!(
            "{}\n\nserver log:\n{}",
            failure
                .try_into_panic()
                .ok()
                .and_then(|p| p.downcast::<String>().ok())
                .map_or_else(|| "the client thread failed".to_owned(), |m| *m),
            server.logs()
        ),
    }
}

/// The `[method, path, status]` exchanges the script recorded under `key`.
fn exchanges<'a>(report: &'a Value, key: &str) -> &'a [Value] {
    report[key].as_array().map_or(&[], Vec::as_slice)
}

/// One exchange as the script records it.
fn exchange(method: &str, path: &str, status: u16) -> Value {
    json!([method, path, status])
}

/// What every flow must show, whichever way the client got its id.
async fn assert_whole_flow(server: &HttpServer, endpoint: Endpoint, report: &Value, state: &Path) {
    let ctx = serde_json::to_string_pretty(report).unwrap_or_default();

    // Discovery started from the 401 and found both metadata documents; the code bought tokens.
    let login = exchanges(report, "exchanges_until_first_call");
    assert_eq!(
        login.first(),
        Some(&endpoint.connect(401)),
        "the first request is refused: {ctx}"
    );
    let metadata = format!("/.well-known/oauth-protected-resource{}", endpoint.path());
    for expected in [
        exchange("GET", &metadata, 200),
        exchange("GET", "/.well-known/oauth-authorization-server", 200),
        exchange("POST", "/oauth/token", 200),
        endpoint.connect(200),
        endpoint.accepted_call(),
    ] {
        assert!(login.contains(&expected), "{expected}: {ctx}");
    }

    // The consent page as a browser got it, and the redirect it answered with.
    let visits = report["consent_visits"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(visits.len(), 1, "the owner was asked once: {ctx}");
    let visit = &visits[0];
    assert_eq!(visit["page_status"], 200, "{ctx}");
    assert_eq!(visit["page_headers"]["x-frame-options"], "DENY", "{ctx}");
    let csp = visit["page_headers"]["content-security-policy"]
        .as_str()
        .unwrap_or_default();
    assert!(csp.contains("frame-ancestors 'none'"), "{ctx}");
    assert_eq!(visit["csrf_cookie"], true, "{ctx}");
    for field in ["csrf", "request", "secret"] {
        assert!(
            visit["form_fields"]
                .as_array()
                .is_some_and(|f| f.iter().any(|v| v == field)),
            "the form has {field}: {ctx}"
        );
    }
    for param in [
        "code_challenge",
        "code_challenge_method",
        "resource",
        "state",
    ] {
        assert!(
            visit["authorize_params"]
                .as_array()
                .is_some_and(|p| p.iter().any(|v| v == param)),
            "the SDK sent {param}: {ctx}"
        );
    }
    assert_eq!(visit["answer_status"], 303, "{ctx}");
    assert_eq!(visit["location_origin"], report["redirect_uri"], "{ctx}");

    // run_python ran under the OAuth token, before and after the refresh.
    for key in ["first_call", "after_refresh_call"] {
        let call = &report[key];
        assert_eq!(call["is_error"], false, "{key}: {ctx}");
        assert!(
            call["text"]
                .as_str()
                .unwrap_or_default()
                .contains("Hello, World!"),
            "{key}: {ctx}"
        );
    }
    let first = &report["first_tokens"];
    assert_eq!(
        first["expires_in"], 3600,
        "access tokens live one hour: {ctx}"
    );

    // The refresh: a token request before the next call, new tokens of both kinds (rotation).
    let refresh = exchanges(report, "exchanges_of_refresh");
    // Over SSE the 202 of the previous call's POST may be recorded after its result came back on
    // the stream, so only the order of the refresh and a call after it is asserted.
    let token_at = refresh
        .iter()
        .position(|e| *e == exchange("POST", "/oauth/token", 200));
    let called_after = token_at.is_some_and(|t| {
        refresh[t + 1..]
            .iter()
            .any(|e| *e == endpoint.accepted_call())
    });
    assert!(called_after, "the SDK refreshed before calling: {ctx}");
    let refreshed = &report["refreshed_tokens"];
    assert_ne!(
        refreshed["access"], first["access"],
        "a new access token: {ctx}"
    );
    assert_ne!(
        refreshed["refresh"], first["refresh"],
        "the refresh token rotates: {ctx}"
    );

    // Revocation (RFC 7009 answers 200), and the next session is turned away with 401.
    assert_eq!(report["revoke_statuses"], json!([200, 200]), "{ctx}");
    assert!(
        report["after_revoke_call"].is_null(),
        "no call after revocation: {ctx}"
    );
    assert!(report["after_revoke_error"].is_string(), "{ctx}");
    assert_eq!(
        exchanges(report, "exchanges_after_revoke").first(),
        Some(&endpoint.connect(401)),
        "the revoked token is refused: {ctx}"
    );

    // The server's side: the revoked access token gets the Bearer challenge; both refresh
    // tokens (the rotated-away one and the revoked one) are spent.
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    assert_token_refused(server, &text(&refreshed["access"])).await;
    let client_id = text(&report["client_id"]);
    for refresh_token in [text(&first["refresh"]), text(&refreshed["refresh"])] {
        let (status, reply) = token_request(
            server,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh_token),
                ("client_id", &client_id),
            ],
        )
        .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "a spent refresh token: {reply}"
        );
        assert_eq!(
            reply["error"], "invalid_grant",
            "a spent refresh token: {reply}"
        );
    }

    // The owner's view (`oauth list` on the state folder): the SDK's client by its name, used.
    let mut list = Command::new(bin_path("pyrun-mcp-server"));
    scrub_env(&mut list)
        .args(["oauth", "list", "--state-dir"])
        .arg(state);
    let listed = run_bounded(&mut list, Duration::from_secs(30));
    assert!(listed.success(), "oauth list: {}", listed.describe());
    let row = listed.stdout.lines().find(|l| l.contains(&client_id));
    let name = text(&report["client_name"]);
    assert!(
        row.is_some_and(|r| r.contains(&name) && !r.contains("never")),
        "oauth list shows the SDK's client, used: {}",
        listed.describe()
    );

    // Who did what: both runs are in the audit log under the OAuth client, without the tokens.
    let audit = std::fs::read_to_string(state.join("audit.jsonl")).unwrap_or_default();
    let runs: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|entry| entry.to_string().contains("hello_world.py"))
        .collect();
    assert_eq!(runs.len(), 2, "two runs in the audit log:\n{audit}");
    for run in &runs {
        assert!(
            run.to_string().contains(&client_id),
            "the OAuth client is the principal: {run}"
        );
    }
    for secret in [&first["access"], &first["refresh"], &refreshed["access"]] {
        assert!(
            !audit.contains(&text(secret)),
            "a token in the audit log:\n{audit}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_registers_dynamically_logs_in_refreshes_and_is_cut_off_by_revocation() {
    let state = tempfile::tempdir().expect("state dir");
    let server = oauth_server(state.path(), &[]);
    let report = run_flow(&server, "legacy", Endpoint::Mcp, None).await;
    let ctx = serde_json::to_string_pretty(&report).unwrap_or_default();
    assert!(
        exchanges(&report, "exchanges_until_first_call").contains(&exchange(
            "POST",
            "/oauth/register",
            201
        )),
        "dynamic client registration: {ctx}"
    );
    assert_whole_flow(&server, Endpoint::Mcp, &report, state.path()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_in_auto_mode_completes_the_same_flow() {
    let state = tempfile::tempdir().expect("state dir");
    let server = oauth_server(state.path(), &[]);
    let report = run_flow(&server, "auto", Endpoint::Mcp, None).await;
    assert_whole_flow(&server, Endpoint::Mcp, &report, state.path()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_over_legacy_sse_completes_the_same_flow() {
    let state = tempfile::tempdir().expect("state dir");
    let server = oauth_server(state.path(), &[]);
    let report = run_flow(&server, "legacy", Endpoint::Sse, None).await;
    assert_whole_flow(&server, Endpoint::Sse, &report, state.path()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_with_a_client_id_metadata_document_skips_registration() {
    let ca = TestCa::new();
    let state = tempfile::tempdir().expect("state dir");
    let server = oauth_server(
        state.path(),
        &[(
            "PYRUN_OAUTH_TEST_METADATA_CA",
            &ca.dir.path().join("ca.pem"),
        )],
    );
    let report = run_flow(&server, "legacy", Endpoint::Mcp, Some(&ca)).await;
    let ctx = serde_json::to_string_pretty(&report).unwrap_or_default();
    assert_eq!(
        report["client_id"], report["metadata_url"],
        "the URL is the client id: {ctx}"
    );
    assert!(
        report["metadata_fetches"].as_u64().is_some_and(|n| n >= 1),
        "the server fetched the document: {ctx}"
    );
    assert!(
        !exchanges(&report, "exchanges")
            .iter()
            .any(|e| e[1] == "/oauth/register"),
        "no dynamic registration: {ctx}"
    );
    assert_whole_flow(&server, Endpoint::Mcp, &report, state.path()).await;
}

/// A throw-away certificate authority and a server certificate for `127.0.0.1` it signed, made
/// with the openssl CLI: the server trusts the CA (its test-only metadata setting), the script
/// serves the metadata document with the leaf.
struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    fn new() -> TestCa {
        let dir = tempfile::tempdir().expect("a folder for the test CA");
        let leaf_ext = dir.path().join("leaf.ext");
        std::fs::write(
            &leaf_ext,
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n",
        )
        .expect("write leaf.ext");
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        let steps = [
            format!(
                "req -x509 {ec} -days 2 -keyout ca.key -out ca.pem -subj /CN=pyrun-mcp-test-CA \
                 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign"
            ),
            format!("req {ec} -keyout leaf.key -out leaf.csr -subj /CN=127.0.0.1"),
            "x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem \
             -days 2 -extfile leaf.ext"
                .to_owned(),
        ];
        for step in steps {
            let out = run_bounded(
                Command::new("openssl")
                    .args(step.split_whitespace())
                    .current_dir(dir.path()),
                Duration::from_secs(30),
            );
            assert!(
                out.success(),
                "openssl {step:?} failed (the metadata-document test needs the openssl CLI):\n{}",
                out.describe()
            );
        }
        TestCa { dir }
    }

    fn leaf_cert(&self) -> String {
        self.dir.path().join("leaf.pem").display().to_string()
    }

    fn leaf_key(&self) -> String {
        self.dir.path().join("leaf.key").display().to_string()
    }
}

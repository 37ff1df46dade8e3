//! The consent page of `--oauth` in a real browser: Debian's headless chromium, driven through
//! WebDriver, does what the owner does on a phone. A client registered over HTTP sends the browser
//! to `/oauth/authorize` with PKCE; the owner approves with the right secret (the browser lands on
//! the client's loopback redirect URI with `code`, `state` and `iss`, and the code buys a token
//! that opens `/mcp`), denies (`error=access_denied`), or types a wrong secret (the page says so,
//! nothing is redirected, and the same page then takes the right one). A screenshot of the page
//! is left at `target/oauth-consent.png`. Linux only: it needs `chromium` and `chromium-driver`
//! (scripts/test.sh installs them).
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use pyrun_mcp_tests::browser::screenshot_path;
use pyrun_mcp_tests::http::{result_text, run_python, McpSession};
use pyrun_mcp_tests::oauth::{authorize_url, exchange_code, query_param, register_client};
use pyrun_mcp_tests::{Browser, HttpServer, ServerLaunch};

const OWNER_SECRET: &str = "correct horse battery staple";
const CLIENT_NAME: &str = "Browser Test Client";
/// How long a redirect may take to reach the callback listener after a click.
const REDIRECT_WAIT: Duration = Duration::from_secs(15);

/// The client's side of the redirect: a loopback HTTP listener that records the path and query of
/// every request it gets (the browser lands here after the consent page) and answers with a
/// small page.
struct Callback {
    uri: String,
    requests: mpsc::Receiver<String>,
}

impl Callback {
    fn listen() -> Callback {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the callback listener");
        let port = listener.local_addr().expect("its address").port();
        let (tx, requests) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut request_line = String::new();
                let mut reader = BufReader::new(&mut stream);
                if reader.read_line(&mut request_line).is_err() {
                    continue;
                }
                // The headers, up to the blank line; a GET has no body.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let target = request_line
                    .split(' ')
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                let page = "<!doctype html><title>callback</title><p id=\"landed\">ok</p>";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{page}",
                    page.len()
                );
                if !target.starts_with("/favicon") && tx.send(target).is_err() {
                    break;
                }
            }
        });
        Callback {
            uri: format!("http://127.0.0.1:{port}/callback"),
            requests,
        }
    }

    /// The full URL of the next request the browser made to the callback.
    fn next(&self) -> String {
        let target = self
            .requests
            .recv_timeout(REDIRECT_WAIT)
            .expect("the browser reached the redirect URI");
        let origin = self.uri.trim_end_matches("/callback");
        format!("{origin}{target}")
    }

    fn nothing_arrived(&self) -> bool {
        self.requests
            .recv_timeout(Duration::from_millis(500))
            .is_err()
    }
}

/// A `--oauth` server with an owner password, its state in a temporary folder.
fn oauth_server(state: &tempfile::TempDir) -> HttpServer {
    ServerLaunch::samples()
        .args([
            "--oauth",
            "--oauth-owner-password",
            OWNER_SECRET,
            "--state-dir",
        ])
        .args([state.path()])
        .http()
}

/// Registers a client for `callback` and opens the consent page for it in `browser`; the client id.
async fn open_consent(
    server: &HttpServer,
    browser: &Browser,
    callback: &Callback,
    state: &str,
) -> String {
    let client_id = register_client(server, CLIENT_NAME, &callback.uri).await;
    browser
        .goto(&authorize_url(server, &client_id, &callback.uri, state))
        .await;
    client_id
}

#[tokio::test(flavor = "multi_thread")]
async fn approving_with_the_owner_secret_redirects_with_a_code_that_opens_mcp() {
    let state_dir = tempfile::tempdir().expect("state dir");
    let server = oauth_server(&state_dir);
    let callback = Callback::listen();
    let browser = Browser::start().await;
    let client_id = open_consent(&server, &browser, &callback, "state-approve-1").await;

    // What the owner reads before deciding: who asks, from where, for what.
    let name = browser.expect("#client-name").await;
    assert_eq!(browser.text(&name).await, CLIENT_NAME);
    let redirect_host = browser.expect("#redirect-host").await;
    let callback_host = callback
        .uri
        .trim_start_matches("http://")
        .trim_end_matches("/callback");
    assert_eq!(browser.text(&redirect_host).await, callback_host);
    let scope = browser.expect("#scope").await;
    assert!(
        browser.text(&scope).await.starts_with("mcp"),
        "the scope is shown"
    );
    browser
        .screenshot(&screenshot_path("oauth-consent.png"))
        .await;

    let secret = browser.expect("#secret").await;
    browser.type_into(&secret, OWNER_SECRET).await;
    browser.click(&browser.expect("#approve").await).await;

    let landed = callback.next();
    assert!(
        landed.starts_with(&format!("{}?", callback.uri)),
        "landed on {landed}"
    );
    assert_eq!(
        query_param(&landed, "state").as_deref(),
        Some("state-approve-1"),
        "{landed}"
    );
    assert_eq!(
        query_param(&landed, "iss").as_deref(),
        Some(server.base.as_str()),
        "{landed}"
    );
    assert_eq!(query_param(&landed, "error"), None, "{landed}");
    let code = query_param(&landed, "code").unwrap_or_else(|| panic!("no code in {landed}"));
    // The browser shows the client's page.
    browser.expect("#landed").await;
    browser.quit().await;

    let tokens = exchange_code(&server, &client_id, &callback.uri, &code).await;
    let access = tokens["access_token"].as_str().expect("an access token");
    let session = McpSession::open(&server, Some(access)).await;
    let reply = session.call(&run_python(1, "hello_world.py", None)).await;
    assert!(
        result_text(&reply).contains("Hello, World!"),
        "run_python with the browser-approved token: {reply}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn denying_redirects_with_access_denied_and_no_code() {
    let state_dir = tempfile::tempdir().expect("state dir");
    let server = oauth_server(&state_dir);
    let callback = Callback::listen();
    let browser = Browser::start().await;
    open_consent(&server, &browser, &callback, "state-deny-1").await;

    browser.click(&browser.expect("#deny").await).await;

    let landed = callback.next();
    assert!(
        landed.starts_with(&format!("{}?", callback.uri)),
        "landed on {landed}"
    );
    assert_eq!(
        query_param(&landed, "error").as_deref(),
        Some("access_denied"),
        "{landed}"
    );
    assert_eq!(
        query_param(&landed, "state").as_deref(),
        Some("state-deny-1"),
        "{landed}"
    );
    assert_eq!(
        query_param(&landed, "iss").as_deref(),
        Some(server.base.as_str()),
        "{landed}"
    );
    assert_eq!(
        query_param(&landed, "code"),
        None,
        "a denial carries no code: {landed}"
    );
    browser.quit().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_secret_shows_an_error_redirects_nowhere_and_the_owner_can_try_again() {
    let state_dir = tempfile::tempdir().expect("state dir");
    let server = oauth_server(&state_dir);
    let callback = Callback::listen();
    let browser = Browser::start().await;
    open_consent(&server, &browser, &callback, "state-wrong-1").await;

    let secret = browser.expect("#secret").await;
    browser.type_into(&secret, "not the owner secret").await;
    browser.click(&browser.expect("#approve").await).await;

    let error = browser.expect("#error").await;
    assert!(
        !browser.text(&error).await.trim().is_empty(),
        "the error says something"
    );
    let here = browser.current_url().await;
    assert!(
        here.starts_with(&server.url("/oauth/authorize")),
        "the browser stays on the consent page: {here}"
    );
    assert!(
        callback.nothing_arrived(),
        "a wrong secret must not redirect"
    );

    // The owner tries again on the page shown with the error: its form still works.
    let secret = browser.expect("#secret").await;
    browser.type_into(&secret, OWNER_SECRET).await;
    browser.click(&browser.expect("#approve").await).await;
    let landed = callback.next();
    assert_eq!(
        query_param(&landed, "state").as_deref(),
        Some("state-wrong-1"),
        "{landed}"
    );
    assert!(
        query_param(&landed, "code").is_some(),
        "the right secret after a wrong one gives a code: {landed}"
    );
    browser.quit().await;
}

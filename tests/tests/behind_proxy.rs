//! The server behind a real reverse proxy (nginx, started here on loopback), reached under a
//! public Host name the way a tunnel presents it: the allowed host works, another is refused,
//! progress of a slow run arrives while it runs (nothing buffers it), and SSE keep-alives flow.
//! Linux only: it runs Debian's nginx (installed with apt-get when missing and running as root:
//! the `real-clients` step).
#![cfg(target_os = "linux")]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use pyrun_mcp_tests::{
    bin_path, free_port, HttpServer, RunningChild, ServerLaunch, SseReader, TempProjects,
};
use serde_json::{json, Value};

const PUBLIC_HOST: &str = "tunnel.example.test";
const TOKEN: &str = "proxy-test-token-1234";
/// Longest wait for any one read; the SSE keep-alive interval (15 s) plus a margin.
const READ_TIMEOUT: Duration = Duration::from_secs(40);

/// Debian's nginx: found, or installed with apt-get when this test runs as root (once per test
/// binary; apt waits for another apt's lock).
fn nginx() -> PathBuf {
    static NGINX: OnceLock<PathBuf> = OnceLock::new();
    NGINX.get_or_init(find_or_install_nginx).clone()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn find_or_install_nginx() -> PathBuf {
    let found = || {
        [
            "/usr/sbin/nginx",
            "/usr/local/sbin/nginx",
            "/usr/local/bin/nginx",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
    };
    if let Some(path) = found() {
        return path;
    }
    assert!(
        is_root(),
        "nginx is not installed and this test is not running as root, so it cannot install it: \
         run `sudo apt-get install -y nginx` (Debian/Ubuntu) and run the test again"
    );
    let install = || {
        Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=300", "install", "-y"])
            .args(["--no-install-recommends", "nginx"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
    };
    let ok = |out: &std::io::Result<std::process::Output>| {
        out.as_ref().is_ok_and(|o| o.status.success()) && found().is_some()
    };
    let mut out = install();
    if !ok(&out) {
        let _ = Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=300", "update"])
            .stdin(Stdio::null())
            .output();
        out = install();
    }
    assert!(ok(&out), "apt-get install nginx failed: {out:?}");
    found().expect("nginx installed")
}

/// pyrun-mcp-server on a free loopback port, with a token and the public name allowed.
fn start_server(projects: &Path) -> (HttpServer, u16) {
    let server = ServerLaunch::new(bin_path("pyrun-mcp-server"), projects)
        .args(["--auth-token", TOKEN, "--allowed-host", PUBLIC_HOST])
        .http();
    let port = server.base.rsplit(':').next().unwrap().parse().unwrap();
    (server, port)
}

/// nginx in the foreground, one process, everything in `dir`, proxying to `upstream_port` with
/// the client's Host header and nginx's default (buffering) settings.
fn start_nginx(dir: &Path, upstream_port: u16) -> (RunningChild, u16) {
    let port = free_port();
    let d = dir.display();
    let config = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log info;\nevents {{ worker_connections 64; }}\n\
         http {{\n  access_log {d}/access.log;\n  client_body_temp_path {d}/body;\n  \
         proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  \
         scgi_temp_path {d}/scgi;\n  server {{\n    listen 127.0.0.1:{port} default_server;\n    \
         location / {{\n      proxy_pass http://127.0.0.1:{upstream_port};\n      \
         proxy_http_version 1.1;\n      proxy_set_header Host $host;\n      \
         proxy_set_header Connection \"\";\n      proxy_read_timeout 1h;\n    }}\n  }}\n}}\n"
    );
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config).unwrap();
    let child = Command::new(nginx())
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let nginx = RunningChild(child);
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (nginx, port);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    panic!("nginx did not listen on {port}: {log}");
}

/// A response from nginx; its body is read as it arrives.
struct Response(reqwest::Response);

impl Response {
    fn status(&self) -> u16 {
        self.0.status().as_u16()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.0.headers().get(name).and_then(|v| v.to_str().ok())
    }

    async fn text(self) -> String {
        self.0.text().await.unwrap_or_default()
    }

    /// Its body as server-sent events, each wait bounded by the read timeout.
    fn events(self) -> SseReader {
        SseReader::with_deadline(self.0, READ_TIMEOUT)
    }
}

/// One request to nginx under the Host name `host`.
async fn request(
    port: u16,
    method: &str,
    path: &str,
    host: &str,
    extra: &[(&str, &str)],
    body: &str,
) -> Response {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = reqwest::Client::new()
        .request(method, format!("http://127.0.0.1:{port}{path}"))
        // Sent as given: the client adds a Host only when there is none.
        .header("Host", host);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    if !body.is_empty() {
        request = request
            .header("Content-Type", "application/json")
            .body(body.to_owned());
    }
    let response = tokio::time::timeout(READ_TIMEOUT, request.send())
        .await
        .expect("nginx answers in time")
        .expect("a response from nginx");
    Response(response)
}

fn auth() -> String {
    format!("Bearer {TOKEN}")
}

/// A running setup: server, nginx in front, and the projects folder the server serves.
struct Proxied {
    port: u16,
    projects: TempProjects,
    _nginx: RunningChild,
    _server: HttpServer,
    _dir: tempfile::TempDir,
}

fn proxied() -> Proxied {
    // wait_for_go.py finishes only once the test has SEEN a progress notification (then it
    // writes go.flag): a proxy that held the stream back until the run ended would make it give
    // up instead.
    let projects = TempProjects::named("p")
        .file("hello_world.py", "print('Hello, World!')\n")
        .file(
            "wait_for_go.py",
            "import os, sys, time\n\
             deadline = time.time() + 30\n\
             while not os.path.exists('go.flag'):\n\
             \x20   if time.time() > deadline:\n\
             \x20       print('gave up: no progress reached the client while the run went on')\n\
             \x20       sys.exit(3)\n\
             \x20   time.sleep(0.05)\n\
             print('released by the client')\n",
        );
    let (server, upstream) = start_server(projects.path());
    let dir = tempfile::tempdir().unwrap();
    let (nginx, port) = start_nginx(dir.path(), upstream);
    Proxied {
        port,
        projects,
        _nginx: nginx,
        _server: server,
        _dir: dir,
    }
}

/// POST a JSON-RPC message to /mcp under `host`.
async fn post_mcp(p: &Proxied, host: &str, session: Option<&str>, message: &Value) -> Response {
    let auth = auth();
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    if let Some(id) = session {
        headers.push(("Mcp-Session-Id", id));
    }
    request(p.port, "POST", "/mcp", host, &headers, &message.to_string()).await
}

/// The JSON-RPC message answering `id` in a JSON or SSE response body.
async fn answer(response: Response, id: u64) -> Value {
    let is_sse = response
        .header("content-type")
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        return serde_json::from_str(&response.text().await).unwrap();
    }
    match response.events().try_response_to(&json!(id)).await {
        Ok((message, _)) => message,
        Err(_) => panic!("no answer to request {id}"),
    }
}

async fn initialize(p: &Proxied) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "behind-proxy-test", "version": "0"}}});
    let response = post_mcp(p, PUBLIC_HOST, None, &init).await;
    assert_eq!(response.status(), 200, "initialize through nginx");
    let session = response
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    assert!(answer(response, 1).await["result"]["serverInfo"].is_object());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post_mcp(p, PUBLIC_HOST, Some(&session), &initialized).await;
    assert_eq!(response.status(), 202);
    session
}

#[tokio::test]
async fn the_allowed_public_host_works_and_another_is_refused() {
    let p = proxied();
    let health = request(p.port, "GET", "/health", PUBLIC_HOST, &[], "").await;
    assert_eq!(health.status(), 200);
    assert!(health.text().await.contains("\"status\":\"ok\""));

    let session = initialize(&p).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"file_name": "hello_world.py"}}});
    let result = answer(post_mcp(&p, PUBLIC_HOST, Some(&session), &call).await, 2).await;
    assert!(result.to_string().contains("Hello, World!"), "{result}");

    // Without the token, through the proxy: 401, not a run.
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    let accept = [("Accept", "application/json, text/event-stream")];
    let anonymous = request(
        p.port,
        "POST",
        "/mcp",
        PUBLIC_HOST,
        &accept,
        &ping.to_string(),
    )
    .await;
    assert_eq!(anonymous.status(), 401);

    // Another name pointing at the same proxy (DNS rebinding, a stranger's tunnel): refused
    // before MCP, even with the right token.
    for path in ["/health", "/sse"] {
        let auth = auth();
        let refused = request(
            p.port,
            "GET",
            path,
            "evil.example",
            &[("Authorization", &auth)],
            "",
        )
        .await;
        assert!(
            matches!(refused.status(), 403 | 421),
            "{path} under Host evil.example gave {}",
            refused.status()
        );
    }
    let refused = post_mcp(&p, "evil.example", None, &ping).await;
    assert!(
        matches!(refused.status(), 403 | 421),
        "/mcp gave {}",
        refused.status()
    );
}

#[tokio::test]
async fn progress_reaches_the_client_through_the_proxy_while_the_run_goes_on() {
    let p = proxied();
    let session = initialize(&p).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"file_name": "wait_for_go.py"},
        "_meta": {"progressToken": "slow-run"}}});
    let stream = post_mcp(&p, PUBLIC_HOST, Some(&session), &call).await;
    assert_eq!(stream.status(), 200);
    assert_eq!(
        stream
            .header("content-type")
            .map(|v| v.starts_with("text/event-stream")),
        Some(true)
    );
    let mut stream = stream.events();
    let mut progress_seen = 0;
    let result = loop {
        let message = stream
            .next_message()
            .await
            .expect("the stream ended without the result");
        if message["method"] == "notifications/progress" {
            assert_eq!(message["params"]["progressToken"], "slow-run");
            progress_seen += 1;
            if progress_seen == 1 {
                // The run is still waiting for this: release it.
                std::fs::write(p.projects.path().join("go.flag"), "").unwrap();
            }
        } else if message["id"] == 7 {
            break message;
        }
    };
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        progress_seen >= 1,
        "no progress before the result: {result}"
    );
    assert!(text.contains("released by the client"), "{result}");
    assert_eq!(
        result["result"]["structuredContent"]["exit_code"], 0,
        "{result}"
    );
}

#[tokio::test]
async fn sse_streams_get_keep_alives_through_the_proxy() {
    let p = proxied();
    let auth = auth();
    let sse = request(
        p.port,
        "GET",
        "/sse",
        PUBLIC_HOST,
        &[("Authorization", &auth), ("Accept", "text/event-stream")],
        "",
    )
    .await;
    assert_eq!(sse.status(), 200);
    assert_eq!(sse.header("cache-control"), Some("no-cache"));
    let mut sse = sse.events();
    let endpoint = sse.next_event().await.expect("the endpoint event").data;
    assert!(endpoint.contains("/messages"), "{endpoint}");
    // Nothing else happens on this session: the next thing on the wire must be a keep-alive
    // comment (every 15 s), which arrives within the read timeout or the read fails.
    assert!(
        sse.next_is_keep_alive().await,
        "expected a keep-alive comment before the read timeout and before any event"
    );
}

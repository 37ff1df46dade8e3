//! The server behind a real reverse proxy (nginx, started here on loopback), reached under a
//! public Host name the way a tunnel presents it: the allowed host works, another is refused,
//! progress of a slow run arrives while it runs (nothing buffers it), and SSE keep-alives flow.
//! Linux only: it runs Debian's nginx.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};

const PUBLIC_HOST: &str = "tunnel.example.test";
const TOKEN: &str = "proxy-test-token-1234";
/// Longest wait for any one read; the SSE keep-alive interval (15 s) plus a margin.
const READ_TIMEOUT: Duration = Duration::from_secs(40);

/// A child process stopped on drop: SIGTERM first (the server then removes what it set up, such
/// as its cgroups), SIGKILL if it is still there after 5 s.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let pid = i32::try_from(self.0.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            for _ in 0..50 {
                if matches!(self.0.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debian's nginx: found, or installed with apt-get when this test runs as root (once per test
/// binary; apt waits for another apt's lock).
fn nginx() -> PathBuf {
    static NGINX: OnceLock<PathBuf> = OnceLock::new();
    NGINX.get_or_init(find_or_install_nginx).clone()
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
        rustix::process::geteuid().is_root(),
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

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// pyrun-mcp-server on a free loopback port, with a token and the public name allowed.
fn start_server(projects: &Path) -> (Running, u16) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"));
    for name in pyrun_mcp_server::config::ENV_VARS {
        command.env_remove(name);
    }
    let mut child = command
        .args(["--transport", "http", "--bind", "127.0.0.1:0"])
        .arg("--projects-dir")
        .arg(projects)
        .args(["--auth-token", TOKEN, "--allowed-host", PUBLIC_HOST])
        .current_dir(projects)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = line.split("listening on http://").nth(1) {
                let _ = tx.send(addr.trim().to_owned());
            }
        }
    });
    let server = Running(child);
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("server prints its address");
    let port = addr.rsplit(':').next().unwrap().parse().unwrap();
    (server, port)
}

/// nginx in the foreground, one process, everything in `dir`, proxying to `upstream_port` with
/// the client's Host header and nginx's default (buffering) settings.
fn start_nginx(dir: &Path, upstream_port: u16) -> (Running, u16) {
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
    let nginx = Running(child);
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (nginx, port);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    panic!("nginx did not listen on {port}: {log}");
}

/// An HTTP/1.1 response whose body is read as it arrives.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Box<dyn BufRead>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(mut self) -> String {
        let mut text = String::new();
        let _ = self.body.read_to_string(&mut text);
        text
    }

    /// The next SSE event: its `data` (joined), and whether a `:` comment came before it.
    fn next_event(&mut self) -> Option<(String, bool)> {
        let (mut data, mut comment) = (Vec::new(), false);
        loop {
            let mut line = String::new();
            if self.body.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !data.is_empty() {
                    return Some((data.join("\n"), comment));
                }
            } else if line.starts_with(':') {
                comment = true;
                if data.is_empty() {
                    return Some((String::new(), true));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push(value.trim_start().to_owned());
            }
        }
    }
}

/// One request on a fresh connection to nginx.
fn request(
    port: u16,
    method: &str,
    path: &str,
    host: &str,
    extra: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();

    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<u64>().ok());
    let body: Box<dyn BufRead> = match (chunked, length) {
        (true, _) => Box::new(BufReader::new(Chunked {
            inner: reader,
            left: 0,
            done: false,
        })),
        (false, Some(n)) => Box::new(BufReader::new(reader.take(n))),
        (false, None) => Box::new(reader),
    };
    Response {
        status,
        headers,
        body,
    }
}

/// Decodes `Transfer-Encoding: chunked` as the chunks arrive.
struct Chunked<R> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let mut size = String::new();
            self.inner.read_line(&mut size)?;
            let size = size.trim().split(';').next().unwrap_or("");
            self.left = usize::from_str_radix(size, 16)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n;
        if self.left == 0 {
            let mut crlf = String::new();
            self.inner.read_line(&mut crlf)?;
        }
        Ok(n)
    }
}

fn auth() -> String {
    format!("Bearer {TOKEN}")
}

/// A running setup: server, nginx in front, and the projects folder the server serves.
struct Proxied {
    port: u16,
    projects: tempfile::TempDir,
    _nginx: Running,
    _server: Running,
    _dir: tempfile::TempDir,
}

fn proxied() -> Proxied {
    let projects = tempfile::tempdir().unwrap();
    std::fs::write(
        projects.path().join("hello_world.py"),
        "print('Hello, World!')\n",
    )
    .unwrap();
    // Finishes only once the test has SEEN a progress notification (then it writes go.flag):
    // a proxy that held the stream back until the run ended would make it give up instead.
    std::fs::write(
        projects.path().join("wait_for_go.py"),
        "import os, sys, time\n\
         deadline = time.time() + 30\n\
         while not os.path.exists('go.flag'):\n\
         \x20   if time.time() > deadline:\n\
         \x20       print('gave up: no progress reached the client while the run went on')\n\
         \x20       sys.exit(3)\n\
         \x20   time.sleep(0.05)\n\
         print('released by the client')\n",
    )
    .unwrap();
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
fn post_mcp(p: &Proxied, host: &str, session: Option<&str>, message: &Value) -> Response {
    let auth = auth();
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    if let Some(id) = session {
        headers.push(("Mcp-Session-Id", id));
    }
    request(p.port, "POST", "/mcp", host, &headers, &message.to_string())
}

/// The JSON-RPC message answering `id` in a JSON or SSE response body.
fn answer(mut response: Response, id: u64) -> Value {
    let is_sse = response
        .header("content-type")
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        return serde_json::from_str(&response.text()).unwrap();
    }
    while let Some((data, _)) = response.next_event() {
        if let Ok(message) = serde_json::from_str::<Value>(&data) {
            if message["id"] == id {
                return message;
            }
        }
    }
    panic!("no answer to request {id}");
}

fn initialize(p: &Proxied) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "behind-proxy-test", "version": "0"}}});
    let response = post_mcp(p, PUBLIC_HOST, None, &init);
    assert_eq!(response.status, 200, "initialize through nginx");
    let session = response
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    assert!(answer(response, 1)["result"]["serverInfo"].is_object());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post_mcp(p, PUBLIC_HOST, Some(&session), &initialized);
    assert_eq!(response.status, 202);
    session
}

#[test]
fn the_allowed_public_host_works_and_another_is_refused() {
    let p = proxied();
    let health = request(p.port, "GET", "/health", PUBLIC_HOST, &[], "");
    assert_eq!(health.status, 200);
    assert!(health.text().contains("\"status\":\"ok\""));

    let session = initialize(&p);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"file_name": "hello_world.py"}}});
    let result = answer(post_mcp(&p, PUBLIC_HOST, Some(&session), &call), 2);
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
    );
    assert_eq!(anonymous.status, 401);

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
        );
        assert!(
            matches!(refused.status, 403 | 421),
            "{path} under Host evil.example gave {}",
            refused.status
        );
    }
    let refused = post_mcp(&p, "evil.example", None, &ping);
    assert!(
        matches!(refused.status, 403 | 421),
        "/mcp gave {}",
        refused.status
    );
}

#[test]
fn progress_reaches_the_client_through_the_proxy_while_the_run_goes_on() {
    let p = proxied();
    let session = initialize(&p);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"file_name": "wait_for_go.py"},
        "_meta": {"progressToken": "slow-run"}}});
    let mut stream = post_mcp(&p, PUBLIC_HOST, Some(&session), &call);
    assert_eq!(stream.status, 200);
    assert_eq!(
        stream
            .header("content-type")
            .map(|v| v.starts_with("text/event-stream")),
        Some(true)
    );
    let mut progress_seen = 0;
    let result = loop {
        let (data, _) = stream
            .next_event()
            .expect("the stream ended without the result");
        let Ok(message) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
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

#[test]
fn sse_streams_get_keep_alives_through_the_proxy() {
    let p = proxied();
    let auth = auth();
    let mut sse = request(
        p.port,
        "GET",
        "/sse",
        PUBLIC_HOST,
        &[("Authorization", &auth), ("Accept", "text/event-stream")],
        "",
    );
    assert_eq!(sse.status, 200);
    assert_eq!(sse.header("cache-control"), Some("no-cache"));
    let (endpoint, _) = sse.next_event().expect("the endpoint event");
    assert!(endpoint.contains("/messages"), "{endpoint}");
    // Nothing else happens on this session: the next thing on the wire must be a keep-alive
    // comment (every 15 s), which arrives within the read timeout or the read fails.
    let (data, comment) = sse
        .next_event()
        .expect("a keep-alive before the read timeout");
    assert!(
        comment && data.is_empty(),
        "expected a keep-alive comment, got {data:?}"
    );
}

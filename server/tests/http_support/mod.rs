//! Test driver for the HTTP transport: starts the real binary on a free port and speaks raw
//! JSON-RPC over Streamable HTTP (`/mcp`) and legacy SSE (`/sse` + `/messages`) with reqwest.
#![allow(dead_code)] // each test file uses a different part of this support module

#[cfg(target_os = "linux")]
pub mod procs;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Longest any single wait in these tests may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub const TOKEN: &str = "test-token-0123456789";

/// A projects folder with the scripts the tests run, inside a temp dir that also holds
/// `outside.py` next to it (the target of the path-escape tests).
pub struct Projects {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Projects {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

pub fn projects() -> Projects {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("projects");
    std::fs::create_dir(&path).expect("projects dir");
    std::fs::write(dir.path().join("outside.py"), "print('ESCAPED')\n").expect("outside.py");
    let scripts = [
        ("hello_world.py", "print('Hello, World!')\n"),
        // Waits until the test creates `go`, so a test can prove it saw progress mid-run.
        (
            "wait_for_go.py",
            "import os, time\nfor _ in range(600):\n    if os.path.exists(os.path.join(os.path.dirname(__file__), 'go')):\n        break\n    time.sleep(0.05)\nprint('went')\n",
        ),
        // Runs until killed; tests give it a token argument to find its process (`procs`).
        ("sleeper.py", "import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n"),
    ];
    for (name, text) in scripts {
        std::fs::write(path.join(name), text).expect("write script");
    }
    Projects { _dir: dir, path }
}

/// The server binary, running until dropped.
pub struct Server {
    child: Child,
    pub base: String,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    /// Starts `--transport http --bind 127.0.0.1:0` plus `extra` flags on `projects`.
    pub fn start(projects: &Path, extra: &[&str]) -> Self {
        Self::start_logging(projects, extra, "info")
    }

    /// Like [`Server::start`], with the given `PYRUN_LOG` filter.
    pub fn start_logging(projects: &Path, extra: &[&str], log: &str) -> Self {
        let mut child = spawn_logging(projects, "127.0.0.1:0", extra, log);
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = Vec::new();
        let base = loop {
            match rx.recv_timeout(DEADLINE) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("pyrun-mcp listening on ") {
                        break addr.trim().to_owned();
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "server did not report its address; stderr:\n{}",
                        seen.join("\n")
                    );
                }
            }
        };
        Self {
            child,
            base,
            stderr: rx,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit (after a signal), returning whether it did in time.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < within {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns the binary without waiting for it; settings come only from flags (no variable of the
/// developer's shell leaks in).
pub fn spawn(projects: &Path, bind: &str, extra: &[&str]) -> Child {
    spawn_logging(projects, bind, extra, "info")
}

fn spawn_logging(projects: &Path, bind: &str, extra: &[&str], log: &str) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"));
    for name in pyrun_mcp_server::config::ENV_VARS {
        cmd.env_remove(name);
    }
    cmd.current_dir(projects)
        .args(["--transport", "http", "--bind", bind, "--projects-dir"])
        .arg(projects)
        .args(extra)
        .env("PYRUN_LOG", log)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd.spawn().expect("spawn pyrun-mcp-server")
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("reqwest client")
}

pub fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let value = HeaderValue::from_str(&format!("Bearer {token}")).expect("header value");
    headers.insert(reqwest::header::AUTHORIZATION, value);
    headers
}

pub fn initialize_request(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "pyrun-http-tests", "version": "0"}
        }
    })
}

pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

pub fn run_python(id: u64, file: &str, progress_token: Option<&str>) -> Value {
    let mut params = json!({"name": "run_python", "arguments": {"file_name": file}});
    if let Some(token) = progress_token {
        params["_meta"] = json!({"progressToken": token});
    }
    request(id, "tools/call", params)
}

/// One server-sent event.
#[derive(Debug)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Splits a `text/event-stream` body into events.
pub struct SseReader {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>,
    buf: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            body: Box::pin(response.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next event with data (comments and keep-alives skipped); `None` when the stream ends.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut event = SseEvent {
                    event: "message".into(),
                    data: String::new(),
                };
                for line in block.lines() {
                    if let Some(name) = line.strip_prefix("event:") {
                        event.event = name.trim().to_owned();
                    } else if let Some(data) = line.strip_prefix("data:") {
                        if !event.data.is_empty() {
                            event.data.push('\n');
                        }
                        event.data.push_str(data.strip_prefix(' ').unwrap_or(data));
                    }
                }
                if !event.data.is_empty() {
                    return Some(event);
                }
                continue;
            }
            match tokio::time::timeout(DEADLINE, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self
                    .buf
                    .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n")),
                Ok(Some(Err(_))) | Ok(None) => return None,
                Err(_) => panic!("no SSE event within {DEADLINE:?}"),
            }
        }
    }

    /// The next JSON-RPC message (skips events that are not JSON).
    pub async fn next_message(&mut self) -> Option<Value> {
        while let Some(event) = self.next_event().await {
            if let Ok(value) = serde_json::from_str::<Value>(&event.data) {
                return Some(value);
            }
        }
        None
    }

    /// Reads until the response to `id`, returning it and the messages seen before it.
    pub async fn response_to(&mut self, id: u64) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        while let Some(message) = self.next_message().await {
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return (message, before);
            }
            before.push(message);
        }
        panic!("stream ended before the response to {id}; saw {before:?}");
    }
}

/// A Streamable HTTP session on `/mcp`.
pub struct McpSession {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
}

impl McpSession {
    /// Initializes a session (and sends `notifications/initialized`).
    pub async fn open(server: &Server, token: Option<&str>) -> Self {
        let client = http();
        let mut headers = token.map(bearer).unwrap_or_default();
        let url = server.url("/mcp");
        let response = mcp_post(&client, &url, &headers, &initialize_request(0)).await;
        assert_eq!(response.status(), StatusCode::OK, "initialize");
        let session = response
            .headers()
            .get("mcp-session-id")
            .expect("mcp-session-id header")
            .clone();
        let (init, _) = SseReader::new(response).response_to(0).await;
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        headers.insert("mcp-session-id", session);
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-06-18"),
        );
        let this = Self {
            client,
            url,
            headers,
        };
        let status = this
            .send(&notification("notifications/initialized", json!({})))
            .await
            .status();
        assert_eq!(status, StatusCode::ACCEPTED, "notifications/initialized");
        this
    }

    /// POSTs one message in this session.
    pub async fn send(&self, message: &Value) -> reqwest::Response {
        mcp_post(&self.client, &self.url, &self.headers, message).await
    }

    /// Sends a request and returns its response stream.
    pub async fn stream(&self, message: &Value) -> SseReader {
        let response = self.send(message).await;
        assert_eq!(response.status(), StatusCode::OK, "{message}");
        SseReader::new(response)
    }

    /// Sends a request and returns its response.
    pub async fn call(&self, message: &Value) -> Value {
        let id = message["id"].as_u64().expect("request id");
        self.stream(message).await.response_to(id).await.0
    }
}

/// POST a JSON-RPC message to `/mcp` with the headers Streamable HTTP requires.
pub async fn mcp_post(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    message: &Value,
) -> reqwest::Response {
    client
        .post(url)
        .headers(headers.clone())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(message.to_string())
        .send()
        .await
        .expect("POST /mcp")
}

/// A legacy HTTP+SSE session: the `/sse` stream and the message URL it announced.
pub struct SseSession {
    client: reqwest::Client,
    pub events: SseReader,
    pub message_url: String,
    headers: HeaderMap,
}

impl SseSession {
    /// Opens `/sse` and reads the `endpoint` event, without initializing.
    pub async fn connect(server: &Server, token: Option<&str>) -> Self {
        let client = http();
        let headers = token.map(bearer).unwrap_or_default();
        let response = client
            .get(server.url("/sse"))
            .headers(headers.clone())
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("GET /sse");
        assert_eq!(response.status(), StatusCode::OK, "GET /sse");
        let mut events = SseReader::new(response);
        let endpoint = events.next_event().await.expect("endpoint event");
        assert_eq!(endpoint.event, "endpoint");
        Self {
            client,
            events,
            message_url: server.url(&endpoint.data),
            headers,
        }
    }

    /// Connects and completes the initialize handshake.
    pub async fn open(server: &Server, token: Option<&str>) -> Self {
        let mut session = Self::connect(server, token).await;
        assert_eq!(
            session.post(&initialize_request(0)).await,
            StatusCode::ACCEPTED
        );
        let (init, _) = session.events.response_to(0).await;
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        let initialized = notification("notifications/initialized", json!({}));
        assert_eq!(session.post(&initialized).await, StatusCode::ACCEPTED);
        session
    }

    /// POSTs one message to the announced endpoint.
    pub async fn post(&self, message: &Value) -> StatusCode {
        self.post_raw(&self.message_url, message.to_string()).await
    }

    pub async fn post_raw(&self, url: &str, body: String) -> StatusCode {
        self.client
            .post(url)
            .headers(self.headers.clone())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("POST /messages")
            .status()
    }

    /// Sends a request and reads the stream until its response.
    pub async fn call(&mut self, message: &Value) -> (Value, Vec<Value>) {
        let id = message["id"].as_u64().expect("request id");
        assert_eq!(self.post(message).await, StatusCode::ACCEPTED, "{message}");
        self.events.response_to(id).await
    }
}

/// Text of a tools/call result's content.
pub fn result_text(response: &Value) -> String {
    response["result"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Polls until `check` holds or the deadline passes.
pub async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < DEADLINE {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check()
}

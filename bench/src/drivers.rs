//! Minimal MCP clients for measuring: raw JSON-RPC over stdio, Streamable HTTP and legacy SSE.
//! Deliberately thin, so the figures show the server's cost rather than a client library's.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

const PROTOCOL: &str = "2025-06-18";
const WAIT: Duration = Duration::from_secs(60);

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "pyrun-mcp-bench", "version": "1"}}})
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

pub fn run_call(id: u64, file: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "run_python", "arguments": {"file_name": file}}})
}

/// Fails unless a tools/call reply is a successful result.
fn check_result(reply: &Value) -> anyhow::Result<()> {
    match reply.get("result") {
        Some(r) if r.get("isError") != Some(&Value::Bool(true)) => Ok(()),
        _ => bail!("call failed: {reply}"),
    }
}

/// Any MCP session the bench can drive.
#[allow(async_fn_in_trait)]
pub trait Session {
    async fn request(&mut self, message: Value) -> anyhow::Result<Value>;

    /// One run_python call, checked for success.
    async fn run(&mut self, id: u64, file: &str) -> anyhow::Result<()> {
        let reply = self.request(run_call(id, file)).await?;
        check_result(&reply)
    }
}

pub struct StdioSession {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl StdioSession {
    pub async fn start(bin: &Path, projects: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let mut child = Command::new(bin)
            .args(["--transport", "stdio", "--projects-dir"])
            .arg(projects)
            .args(extra)
            .env("PYRUN_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().context("stdin")?;
        let lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        let mut session = Self {
            child,
            stdin,
            lines,
        };
        session.request(initialize(0)).await?;
        session.send(&initialized()).await?;
        Ok(session)
    }

    async fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        Ok(())
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }
}

impl Session for StdioSession {
    async fn request(&mut self, message: Value) -> anyhow::Result<Value> {
        let id = message["id"].clone();
        self.send(&message).await?;
        tokio::time::timeout(WAIT, async {
            while let Some(line) = self.lines.next_line().await? {
                let reply: Value = serde_json::from_str(&line)?;
                if reply.get("id") == Some(&id) {
                    return Ok(reply);
                }
            }
            bail!("server closed stdout")
        })
        .await?
    }
}

/// Finds the JSON-RPC reply with `id` in a body that is either JSON or an SSE stream.
fn reply_in_body(body: &str, id: &Value) -> anyhow::Result<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return Ok(value);
    }
    for data in body.lines().filter_map(|l| l.strip_prefix("data:")) {
        if let Ok(value) = serde_json::from_str::<Value>(data.trim()) {
            if value.get("id") == Some(id) {
                return Ok(value);
            }
        }
    }
    bail!("no reply to {id} in: {body}")
}

pub struct StreamableHttpSession {
    client: reqwest::Client,
    url: String,
    session_id: Option<String>,
    headers: Vec<(String, String)>,
}

impl StreamableHttpSession {
    pub async fn start(url: &str, headers: &[(String, String)]) -> anyhow::Result<Self> {
        let mut session = Self {
            client: reqwest::Client::new(),
            url: url.to_owned(),
            session_id: None,
            headers: headers.to_vec(),
        };
        session.request(initialize(0)).await?;
        session.post(&initialized()).await?;
        Ok(session)
    }

    async fn post(&mut self, message: &Value) -> anyhow::Result<reqwest::Response> {
        let mut req = self
            .client
            .post(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(message.to_string());
        if let Some(id) = &self.session_id {
            req = req
                .header("Mcp-Session-Id", id)
                .header("MCP-Protocol-Version", PROTOCOL);
        }
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        let resp = req.send().await?;
        if !resp.status().is_success() {
            bail!("HTTP {} from {}", resp.status(), self.url);
        }
        if let Some(id) = resp.headers().get("mcp-session-id") {
            self.session_id = Some(id.to_str()?.to_owned());
        }
        Ok(resp)
    }
}

impl Session for StreamableHttpSession {
    async fn request(&mut self, message: Value) -> anyhow::Result<Value> {
        let id = message["id"].clone();
        let resp = self.post(&message).await?;
        let body = tokio::time::timeout(WAIT, resp.text()).await??;
        reply_in_body(&body, &id)
    }
}

pub struct SseSession {
    client: reqwest::Client,
    post_url: String,
    messages: mpsc::UnboundedReceiver<Value>,
    _reader: tokio::task::JoinHandle<()>,
}

impl SseSession {
    pub async fn start(base: &str, sse_path: &str) -> anyhow::Result<Self> {
        let client = reqwest::Client::new();
        let resp = client
            .get(format!("{base}{sse_path}"))
            .header("Accept", "text/event-stream")
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("HTTP {} from {base}{sse_path}", resp.status());
        }
        let (endpoint_tx, endpoint_rx) = tokio::sync::oneshot::channel();
        let (tx, messages) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_events(resp, endpoint_tx, tx));
        let endpoint = tokio::time::timeout(WAIT, endpoint_rx)
            .await
            .context("no endpoint event")??;
        let post_url = if endpoint.starts_with("http") {
            endpoint
        } else {
            format!("{base}{endpoint}")
        };
        let mut session = Self {
            client,
            post_url,
            messages,
            _reader: reader,
        };
        session.request(initialize(0)).await?;
        session.post(&initialized()).await?;
        Ok(session)
    }

    async fn post(&self, message: &Value) -> anyhow::Result<()> {
        let resp = self
            .client
            .post(&self.post_url)
            .header("Content-Type", "application/json")
            .body(message.to_string())
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("HTTP {} from {}", resp.status(), self.post_url);
        }
        Ok(())
    }
}

impl Session for SseSession {
    async fn request(&mut self, message: Value) -> anyhow::Result<Value> {
        let id = message["id"].clone();
        self.post(&message).await?;
        tokio::time::timeout(WAIT, async {
            while let Some(reply) = self.messages.recv().await {
                if reply.get("id") == Some(&id) {
                    return Ok(reply);
                }
            }
            bail!("SSE stream closed")
        })
        .await?
    }
}

/// Splits an SSE body into events: the first `endpoint` goes to `endpoint`, JSON `message`s to `tx`.
async fn read_events(
    resp: reqwest::Response,
    endpoint: tokio::sync::oneshot::Sender<String>,
    tx: mpsc::UnboundedSender<Value>,
) {
    let mut endpoint = Some(endpoint);
    let mut stream = resp.bytes_stream();
    let mut buffer = String::new();
    while let Some(Ok(chunk)) = stream.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        let normalized = buffer.replace("\r\n", "\n");
        buffer = normalized;
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let mut kind = "message";
            let mut data = String::new();
            for line in event.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    kind = if v.trim() == "endpoint" {
                        "endpoint"
                    } else {
                        "message"
                    };
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if kind == "endpoint" {
                if let Some(sender) = endpoint.take() {
                    let _ = sender.send(data);
                }
            } else if let Ok(value) = serde_json::from_str(&data) {
                if tx.send(value).is_err() {
                    return;
                }
            }
        }
    }
}

/// Opens an SSE stream and keeps it open (for the idle-sessions memory figure).
pub async fn open_idle_sse(
    client: &reqwest::Client,
    url: &str,
) -> anyhow::Result<reqwest::Response> {
    let resp = client
        .get(url)
        .header("Accept", "text/event-stream")
        .send()
        .await?;
    if !resp.status().is_success() {
        bail!("HTTP {}", resp.status());
    }
    Ok(resp)
}

//! Minimal MCP clients for measuring: raw JSON-RPC over stdio, Streamable HTTP and legacy SSE.
//! Deliberately thin, so the figures show the server's cost rather than a client library's.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use pyrun_mcp_tests::{ServerLaunch, SseReader, StdioServer};
use serde_json::{json, Value};
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

/// The harness's stdio JSON-RPC driver (a reader thread per server); requests block this task,
/// which the bench's one-at-a-time calls allow.
pub struct StdioSession {
    server: StdioServer,
    /// The launch of a server started with [`StdioSession::start_with`]: it holds the server's
    /// temporary state folder, kept as long as the server.
    _launch: Option<ServerLaunch>,
}

impl StdioSession {
    pub async fn start(bin: &Path, projects: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let server = ServerLaunch::new(bin, projects)
            .args(extra)
            .log("warn")
            .try_stdio()?;
        Ok(Self {
            server,
            _launch: None,
        })
    }

    /// Like [`StdioSession::start`], with `env` added to the server's environment and its log
    /// (`PYRUN_LOG=log`) written to `log_file` when one is given.
    pub async fn start_with(
        bin: &Path,
        projects: &Path,
        extra: &[&str],
        env: &[(&str, &Path)],
        log: &str,
        log_file: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let mut launch = ServerLaunch::new(bin, projects).args(extra).log(log);
        for (name, value) in env {
            launch = launch.env(name, value.as_os_str());
        }
        let mut cmd = launch.command("stdio", None);
        let stderr = match log_file {
            Some(file) => std::process::Stdio::from(std::fs::File::create(file)?),
            None => std::process::Stdio::null(),
        };
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr);
        let server = StdioServer::attach(cmd.spawn()?).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Self {
            server,
            _launch: Some(launch),
        })
    }

    /// Takes over a server started some other way (stdin and stdout piped), e.g. the FastMCP
    /// baseline over stdio, and completes the initialize handshake.
    pub fn attach(child: std::process::Child) -> anyhow::Result<Self> {
        let server = StdioServer::attach(child).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Self {
            server,
            _launch: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.server.pid()
    }
}

impl Session for StdioSession {
    async fn request(&mut self, message: Value) -> anyhow::Result<Value> {
        self.server.try_request(message).map_err(anyhow::Error::msg)
    }
}

/// The JSON-RPC reply with `id` in a response that is either JSON or an SSE stream.
async fn reply_in(resp: reqwest::Response, id: &Value) -> anyhow::Result<Value> {
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        return Ok(serde_json::from_str(&resp.text().await?)?);
    }
    match SseReader::with_deadline(resp, WAIT)
        .try_response_to(id)
        .await
    {
        Ok((reply, _)) => Ok(reply),
        Err(before) => bail!("no reply to {id}; saw {before:?}"),
    }
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
        tokio::time::timeout(WAIT, reply_in(resp, &id)).await?
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
        Self::start_on(reqwest::Client::new(), base, sse_path).await
    }

    /// Like [`SseSession::start`] on a given client: sessions that share one client share its
    /// pool of keep-alive connections for their POSTs.
    pub async fn start_on(
        client: reqwest::Client,
        base: &str,
        sse_path: &str,
    ) -> anyhow::Result<Self> {
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

/// Reads an SSE body: the first `endpoint` event goes to `endpoint`, JSON messages to `tx`.
async fn read_events(
    resp: reqwest::Response,
    endpoint: tokio::sync::oneshot::Sender<String>,
    tx: mpsc::UnboundedSender<Value>,
) {
    let mut endpoint = Some(endpoint);
    // Sessions stay idle for as long as the bench wants.
    let mut events = SseReader::with_deadline(resp, Duration::from_secs(24 * 3600));
    while let Some(event) = events.next_event().await {
        if event.event == "endpoint" {
            if let Some(sender) = endpoint.take() {
                let _ = sender.send(event.data);
            }
        } else if let Ok(value) = serde_json::from_str(&event.data) {
            if tx.send(value).is_err() {
                return;
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

/// A `tools/call` request.
pub fn call_tool(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// A tool result's structured content; an error for a failed call.
pub fn structured(reply: &Value) -> anyhow::Result<&Value> {
    match reply.pointer("/result/structuredContent") {
        Some(s) if reply.pointer("/result/isError") != Some(&Value::Bool(true)) => Ok(s),
        _ => bail!("call failed: {reply}"),
    }
}

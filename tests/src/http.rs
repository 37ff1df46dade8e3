//! Raw JSON-RPC over the HTTP transports of a running server ([`HttpServer`]), with reqwest:
//! Streamable HTTP (`/mcp`) and legacy SSE (`/sse` + `/messages`); event streams are read with the
//! `sse-stream` crate (the one the client uses), never a parser of our own.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::StatusCode;
use serde_json::{json, Value};
use sse_stream::SseStream;

use crate::server::HttpServer;

/// Longest any single wait in these tests may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

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
    /// The `event:` field (`message` when absent).
    pub event: String,
    pub data: String,
}

type EventStream = Pin<Box<dyn Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send>>;

/// The events of a `text/event-stream` response, as they arrive.
pub struct SseReader {
    events: EventStream,
    /// Set when a chunk carrying a `:` comment line (a keep-alive) arrived; `sse-stream` drops
    /// comments, so the bytes are looked at on their way in.
    comment_seen: Arc<AtomicBool>,
    deadline: Duration,
}

impl SseReader {
    /// Reads `response`'s body; a wait longer than [`DEADLINE`] for one event fails the test.
    pub fn new(response: reqwest::Response) -> Self {
        Self::with_deadline(response, DEADLINE)
    }

    /// Like [`SseReader::new`], with another bound on the wait for one event.
    pub fn with_deadline(response: reqwest::Response, deadline: Duration) -> Self {
        let comment_seen = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&comment_seen);
        let bytes = response.bytes_stream().inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                if chunk.starts_with(b":") || chunk.windows(2).any(|w| w == b"\n:") {
                    seen.store(true, Ordering::Relaxed);
                }
            }
        });
        Self {
            events: Box::pin(SseStream::from_bytes_stream(bytes)),
            comment_seen,
            deadline,
        }
    }

    /// The next event with data (keep-alives skipped); `None` when the stream ends or breaks.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            match tokio::time::timeout(self.deadline, self.events.next()).await {
                Ok(Some(Ok(sse))) => {
                    let Some(data) = sse.data.filter(|d| !d.is_empty()) else {
                        continue;
                    };
                    return Some(SseEvent {
                        event: sse.event.unwrap_or_else(|| "message".into()),
                        data,
                    });
                }
                Ok(Some(Err(_)) | None) => return None,
                Err(_) => panic!("no SSE event within {:?}", self.deadline),
            }
        }
    }

    /// Waits (at most the deadline) for the next thing on the wire; true if it is a keep-alive
    /// comment, false if an event or the end of the stream comes first.
    pub async fn next_is_keep_alive(&mut self) -> bool {
        self.comment_seen.store(false, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + self.deadline;
        while tokio::time::Instant::now() < deadline {
            // A comment yields no item: poll in short slices (dropping `next()` loses nothing)
            // and look at what the bytes carried in between.
            match tokio::time::timeout(Duration::from_millis(50), self.events.next()).await {
                Ok(_) => return false,
                Err(_) if self.comment_seen.load(Ordering::Relaxed) => return true,
                Err(_) => {}
            }
        }
        false
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
        self.try_response_to(&json!(id))
            .await
            .unwrap_or_else(|before| {
                panic!("stream ended before the response to {id}; saw {before:?}")
            })
    }

    /// Reads until the response to `id`; the messages seen before it as the error if the stream
    /// ends first.
    pub async fn try_response_to(&mut self, id: &Value) -> Result<(Value, Vec<Value>), Vec<Value>> {
        let mut before = Vec::new();
        while let Some(message) = self.next_message().await {
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return Ok((message, before));
            }
            before.push(message);
        }
        Err(before)
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
    pub async fn open(server: &HttpServer, token: Option<&str>) -> Self {
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

    /// The session id the server gave (`mcp-session-id`).
    pub fn session_id(&self) -> Option<&str> {
        self.headers
            .get("mcp-session-id")
            .and_then(|id| id.to_str().ok())
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
    pub async fn connect(server: &HttpServer, token: Option<&str>) -> Self {
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
    pub async fn open(server: &HttpServer, token: Option<&str>) -> Self {
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

//! A minimal JSON-RPC driver for the server binary over stdio: enough to test what real clients
//! rely on (responses by id, notifications as they arrive, cancellation), bounded in time. Start
//! one with [`ServerLaunch::stdio`](crate::ServerLaunch::stdio).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::paths::bin_path;
use crate::server::{ServerLaunch, StartError};

/// Longest wait for one response.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(180);

pub struct StdioServer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: u64,
    /// Notifications seen while waiting for responses.
    pub notifications: Vec<Value>,
    /// Temporary folders it owns (projects copy, state), removed with it.
    _owned: Vec<tempfile::TempDir>,
}

impl StdioServer {
    /// Starts the workspace's server over stdio on `projects` (plus `extra` flags) and completes
    /// the initialize handshake.
    pub fn start(projects: &Path, extra: &[&str]) -> Self {
        Self::start_as(projects, extra, None)
    }

    /// Like [`StdioServer::start`], with the server running as `uid` (and the same gid) when
    /// given: the caller, root, has made `projects` that user's.
    pub fn start_as(projects: &Path, extra: &[&str], uid: Option<u32>) -> Self {
        Self::start_with_env(projects, extra, uid, &[])
    }

    /// Like [`StdioServer::start_as`], with `env` added to the server's environment.
    pub fn start_with_env(
        projects: &Path,
        extra: &[&str],
        uid: Option<u32>,
        env: &[(&str, &str)],
    ) -> Self {
        let mut launch = ServerLaunch::new(bin_path("pyrun-mcp-server"), projects).args(extra);
        for (name, value) in env {
            launch = launch.env(name, *value);
        }
        if let Some(uid) = uid {
            launch = launch.uid(uid);
        }
        launch.stdio()
    }

    /// Takes over a server started some other way (stdin and stdout piped; e.g. exactly as an
    /// assistant's configuration says) and completes the initialize handshake.
    pub fn attach(child: Child) -> Result<Self, StartError> {
        Self::handshake(child, Vec::new())
    }

    /// Takes over a started server (stdin and stdout piped) and completes the initialize handshake.
    pub(crate) fn handshake(
        mut child: Child,
        owned: Vec<tempfile::TempDir>,
    ) -> Result<Self, StartError> {
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| StartError("stdout was not piped".into()))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line {line:?}: {e}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut server = Self {
            child,
            stdin,
            lines,
            // The handshake below is request 1.
            next_id: 1,
            notifications: Vec::new(),
            _owned: owned,
        };
        let init = server
            .try_request(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "stdio-test", "version": "1"}}}),
            )
            .map_err(StartError)?;
        if init.get("result").is_none() {
            return Err(StartError(format!("initialize failed: {init}")));
        }
        server
            .try_send(
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}),
            )
            .map_err(StartError)?;
        Ok(server)
    }

    /// The server process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, message: &Value) {
        self.try_send(message).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Writes one message as a line on the server's stdin.
    pub fn try_send(&mut self, message: &Value) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin is closed")?;
        writeln!(stdin, "{message}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("write to the server's stdin: {e}"))
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its id without waiting.
    pub fn start_request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Waits (at most 180 s: an install on a loaded machine takes minutes) for the response to
    /// `id`, keeping notifications seen meanwhile.
    pub fn response(&mut self, id: u64) -> Value {
        self.try_response(&json!(id))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits (at most 180 s: an install on a loaded machine takes minutes) for the response to
    /// `id`, keeping notifications seen meanwhile.
    pub fn try_response(&mut self, id: &Value) -> Result<Value, String> {
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .lines
                .recv_timeout(left)
                .map_err(|_| format!("no response to request {id}"))?;
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return Ok(message);
            }
            if message.get("id").is_none() {
                self.notifications.push(message);
            }
        }
    }

    /// Sends a whole request (its own `id`) and waits for its response.
    pub fn try_request(&mut self, message: Value) -> Result<Value, String> {
        let id = message.get("id").cloned().ok_or("a request needs an id")?;
        self.try_send(&message)?;
        self.try_response(&id)
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params);
        self.response(id)
    }

    /// Calls a tool and returns the `result` object (panics on a JSON-RPC error).
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let reply = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        reply
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call {tool} failed: {reply}"))
    }

    /// Closes stdin and waits (bounded) for the server to exit.
    pub fn close(mut self) -> std::process::ExitStatus {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of a tool result's first content block.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

//! A minimal JSON-RPC driver for the server binary over stdio: enough to test what real clients
//! rely on (responses by id, notifications as they arrive, cancellation), bounded in time.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub struct StdioServer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: u64,
    /// Notifications seen while waiting for responses.
    pub notifications: Vec<Value>,
}

impl StdioServer {
    /// Starts the server on `projects` and completes the initialize handshake.
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
        let mut command = Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"));
        #[cfg(unix)]
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(uid);
        }
        #[cfg(not(unix))]
        assert!(uid.is_none(), "another user's server is a Unix test");
        // Settings come only from `extra`: none of the developer's shell may change the test.
        for name in pyrun_mcp_server::config::ENV_VARS {
            command.env_remove(name);
        }
        let mut child = command
            .envs(env.iter().copied())
            .args(["--transport", "stdio", "--projects-dir"])
            .arg(projects)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("server binary starts");
        let stdout = child.stdout.take().unwrap();
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
            next_id: 0,
            notifications: Vec::new(),
        };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "stdio-test", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        server.notify("notifications/initialized", json!({}));
        server
    }

    /// The server process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
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

    /// Waits (at most 60 s) for the response to `id`, keeping notifications seen meanwhile.
    pub fn response(&mut self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no response to request {id}"));
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            if message.get("id").is_none() {
                self.notifications.push(message);
            }
        }
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
            if let Some(status) = self.child.try_wait().unwrap() {
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

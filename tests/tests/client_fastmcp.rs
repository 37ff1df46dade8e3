//! `pyrun-mcp-client` is a general MCP client: against a tiny FastMCP server (Python, from PyPI — a
//! server we did not write) over legacy SSE and Streamable HTTP.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::client;
use predicates::prelude::*;
use pyrun_mcp_tests::{python_env, wait_for_listening};
use serde_json::Value;

/// Binds port 0 itself (no race for a port), says where, then serves `sse` or `http`.
const TINY_SERVER: &str = r#"
import asyncio, socket, sys
import uvicorn
from fastmcp import FastMCP

mcp = FastMCP("tiny-fastmcp")

@mcp.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

@mcp.tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text

async def main() -> None:
    app = mcp.http_app(transport=sys.argv[1])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    await server.serve(sockets=[sock])

asyncio.run(main())
"#;

/// The FastMCP server process, killed on drop.
struct FastMcp {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl FastMcp {
    fn start(transport: &str) -> Self {
        let python = python_env();
        let dir = tempfile::tempdir().expect("temp dir");
        let script = dir.path().join("tiny_fastmcp.py");
        std::fs::write(&script, TINY_SERVER).expect("write the server script");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(transport)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the FastMCP server");
        match wait_for_listening(&mut child, Duration::from_secs(120)) {
            Ok((url, _log)) => Self {
                child,
                url,
                _dir: dir,
            },
            Err(e) => panic!("the FastMCP server did not start: {e}"),
        }
    }
}

impl Drop for FastMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn session_against(url: &str) {
    client()
        .args(["--server", url, "tools"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("add").and(predicate::str::contains("Echo the text back.")),
        );
    // `--arg` values follow the tool's schema: integers for `add`, a string for `echo`.
    client()
        .args([
            "--server", url, "call", "add", "--arg", "a=2", "--arg", "b=40",
        ])
        .assert()
        .success()
        .stdout("42\n");
    client()
        .args(["--server", url, "call", "echo", "--arg", "text=123"])
        .assert()
        .success()
        .stdout("123\n");
    let out = client()
        .args([
            "--server",
            url,
            "--json",
            "call",
            "add",
            "--args-json",
            r#"{"a": 1, "b": 2}"#,
        ])
        .assert()
        .success();
    let result: Value =
        serde_json::from_slice(&out.get_output().stdout).expect("--json prints JSON");
    assert_eq!(result["content"][0]["text"], "3", "{result}");
    client()
        .args(["--server", url, "call", "nope"])
        .assert()
        .code(16);
    client()
        .args([
            "--server", url, "call", "add", "--arg", "a=x", "--arg", "b=1",
        ])
        .assert()
        .code(17);
    client()
        .args(["--server", url, "ping", "-n", "2"])
        .assert()
        .success();
}

#[test]
fn fastmcp_over_sse() {
    let server = FastMcp::start("sse");
    session_against(&format!("{}/sse", server.url));
}

#[test]
fn fastmcp_over_streamable_http() {
    let server = FastMcp::start("http");
    session_against(&format!("{}/mcp", server.url));
}

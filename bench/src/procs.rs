//! Processes under test: servers started on free loopback ports, and their memory as the kernel
//! reports it.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use pyrun_mcp_tests::{HttpServer, ServerLaunch};
use tokio::process::{Child, Command};

/// A server under measurement, stopped when dropped.
pub struct Server {
    pid: u32,
    pub base_url: String,
    _process: Process,
}

/// Held only to be dropped with the `Server`: the harness stops pyrun (SIGTERM), tokio kills the
/// baseline (`kill_on_drop`).
#[allow(dead_code)]
enum Process {
    Pyrun(HttpServer),
    Baseline(Child),
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// Starts pyrun-mcp-server over HTTP on a free port (the harness reads its `listening on` line).
pub fn start_pyrun_http(bin: &Path, projects: &Path, extra: &[&str]) -> anyhow::Result<Server> {
    let server = ServerLaunch::new(bin, projects)
        .args(extra)
        .log("warn")
        .try_http()?;
    Ok(Server {
        pid: server.pid(),
        base_url: server.base.clone(),
        _process: Process::Pyrun(server),
    })
}

/// Starts the FastMCP baseline (`transport` is "http" or "sse") and waits until its port answers.
pub async fn start_fastmcp(
    python: &Path,
    script: &Path,
    projects: &Path,
    transport: &str,
    interpreter: &Path,
) -> anyhow::Result<Server> {
    let port = pyrun_mcp_tests::free_port();
    let child = Command::new(python)
        .arg(script)
        .args([transport, &port.to_string()])
        .arg(projects)
        .arg(interpreter)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the FastMCP baseline")?;
    let base_url = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(Server {
                pid: child.id().unwrap_or(0),
                base_url,
                _process: Process::Baseline(child),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("FastMCP baseline did not listen on port {port} within 10 s")
}

/// Resident and peak resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets a process's peak RSS counter (Linux: write 5 to clear_refs), so a later VmHWM reading
/// shows the peak of what came after.
pub fn reset_peak(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

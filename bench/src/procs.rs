//! Processes under test: servers started on free loopback ports, and their memory as the kernel
//! reports it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A server process, killed when dropped.
pub struct Server {
    pub child: Child,
    pub base_url: String,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }
}

/// Starts pyrun-mcp-server over HTTP on a free port and waits for its `listening on` line.
pub async fn start_pyrun_http(
    bin: &Path,
    projects: &Path,
    extra: &[&str],
) -> anyhow::Result<Server> {
    let mut child = Command::new(bin)
        .args([
            "--transport",
            "http",
            "--bind",
            "127.0.0.1:0",
            "--projects-dir",
        ])
        .arg(projects)
        .args(extra)
        .env("PYRUN_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let stderr = child.stderr.take().context("stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let addr = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.split("listening on ").nth(1) {
                return Ok::<_, anyhow::Error>(rest.trim().to_owned());
            }
        }
        bail!("server exited before listening")
    })
    .await
    .context("server did not report its address in 20 s")??;
    // Keep draining stderr so the server never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Server {
        child,
        base_url: addr.trim_end_matches('/').to_owned(),
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
    let port = free_port()?;
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
            return Ok(Server { child, base_url });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("FastMCP baseline did not listen on port {port} within 10 s")
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
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

/// The real interpreter behind `python3` (a pyenv shim otherwise costs ~100 ms a start).
pub fn resolve_python(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let candidate = given.unwrap_or_else(|| PathBuf::from("python3"));
    let out = std::process::Command::new(&candidate)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .with_context(|| format!("running {}", candidate.display()))?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

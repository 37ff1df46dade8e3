//! Starting `pyrun-mcp-server` for a test: over HTTP on a free loopback port (killed on drop), or as
//! the command line a stdio client spawns itself.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::paths::{bin_path, projects_copy};

/// How long a server may take to print its `listening on` line.
const START_TIMEOUT: Duration = Duration::from_secs(30);

// `ENV_VARS`: every variable the server reads as a setting (the server's `config::ENV_VARS`, from
// the one file that lists them, checked against config.rs by its unit test). A developer's shell
// may hold any of them (`PYRUN_SANDBOX=off`...); a test server must not pick them up.
include!("../../server/src/env_vars.rs");

/// A `pyrun-mcp-server --transport http` on `127.0.0.1:<free port>`, serving a private copy of
/// `python_projects/`. The process is killed when this is dropped.
pub struct HttpServer {
    /// `http://127.0.0.1:PORT` (no trailing slash); clients add `/mcp`, `/sse`, `/health`.
    pub url: String,
    pub child: Child,
    /// Everything the server wrote to stderr so far (its logs), for assertion messages.
    pub log: Arc<Mutex<String>>,
    /// The projects folder it serves (removed on drop).
    pub projects: tempfile::TempDir,
}

impl HttpServer {
    /// Starts the normal server binary with `--transport http --bind 127.0.0.1:0` plus `args`.
    pub fn start(args: &[&str]) -> HttpServer {
        Self::start_binary(bin_path("pyrun-mcp-server"), args)
    }

    /// Like [`HttpServer::start`] with another build of the server (e.g. the conformance one).
    pub fn start_binary(binary: PathBuf, args: &[&str]) -> HttpServer {
        let projects = projects_copy();
        let mut cmd = Command::new(&binary);
        cmd.args([
            "--transport",
            "http",
            "--bind",
            "127.0.0.1:0",
            "--projects-dir",
        ])
        .arg(projects.path())
        .args(args)
        // No `.env` of the developer's may be read: run from the (empty of it) temp folder.
        .current_dir(projects.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        for name in ENV_VARS {
            cmd.env_remove(name);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let log = Arc::new(Mutex::new(String::new()));
        let (found, addr) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr was piped");
        let sink = Arc::clone(&log);
        // Reads stderr for as long as the server runs: it must never block on a full pipe.
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.split("listening on ").nth(1) {
                    if let Some(found) = found.take() {
                        let _ = found.send(url.trim().trim_end_matches('/').to_owned());
                    }
                }
                if let Ok(mut log) = sink.lock() {
                    log.push_str(&line);
                    log.push('\n');
                }
            }
        });
        match addr.recv_timeout(START_TIMEOUT) {
            Ok(url) => HttpServer {
                url,
                child,
                log,
                projects,
            },
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().ok();
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "{} did not print `listening on` within {START_TIMEOUT:?} (exit status: \
                     {status:?}). Its stderr:\n{}",
                    binary.display(),
                    log.lock().map(|l| l.clone()).unwrap_or_default()
                );
            }
        }
    }

    /// The Streamable HTTP endpoint, `…/mcp`.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.url)
    }

    /// The legacy HTTP+SSE endpoint, `…/sse`.
    pub fn sse_url(&self) -> String {
        format!("{}/sse", self.url)
    }

    /// The server's stderr so far, for assertion messages.
    pub fn logs(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Drop for HttpServer {
    /// SIGTERM first, so the server shuts down as a user's would (killing its runs, removing its
    /// cgroups); SIGKILL if it is still there after a grace period.
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            let _ = Command::new("kill")
                .arg(self.child.id().to_string())
                .stderr(Stdio::null())
                .status();
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The command line a stdio client spawns: `pyrun-mcp-server --transport stdio --projects-dir COPY`.
pub struct StdioCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The projects folder it serves (removed on drop).
    pub projects: tempfile::TempDir,
}

impl StdioCommand {
    pub fn new(extra: &[&str]) -> StdioCommand {
        let projects = projects_copy();
        let mut args = vec![
            "--transport".to_owned(),
            "stdio".to_owned(),
            "--projects-dir".to_owned(),
            projects.path().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        StdioCommand {
            program: bin_path("pyrun-mcp-server"),
            args,
            projects,
        }
    }
}

//! RunPod on loopback, for the RunPod backend's tests: the shipped worker handler
//! (`runpod/handler.py`) served by RunPod's own SDK and its local test API (`--rp_serve_api`),
//! and a stand-in of RunPod's cloud API (`tests/clients/runpod_standin.py`) for what the SDK's
//! server does not mimic: `/cancel`, `/health`, status and stream by GET under `/v2/{endpoint}/`,
//! and a stream that hands out output while the job runs. Nothing listens beyond 127.0.0.1.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::clients::client_script;
use crate::deps::runpod_env;
use crate::net::free_port;
use crate::paths::workspace_root;
use crate::process::RunningChild;

/// How long a worker or the stand-in may take to listen.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A loopback HTTP server the test started, stopped when dropped.
#[derive(Debug)]
pub struct LoopbackServer {
    child: RunningChild,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl LoopbackServer {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Whether the process is still there.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.0.try_wait(), Ok(None))
    }

    /// What it wrote on stdout and stderr so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("output.log")).unwrap_or_default()
    }

    /// The stand-in's record of the requests it got, one JSON object each.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    fn start(mut cmd: Command, port: u16) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("pyrun-runpod-")
            .tempdir()
            .expect("a temp folder");
        let log = std::fs::File::create(dir.path().join("output.log")).expect("a log file");
        let log2 = log.try_clone().expect("a log file");
        cmd.env("PYRUN_STANDIN_LOG", dir.path().join("requests.jsonl"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        let child = RunningChild(cmd.spawn().expect("the RunPod stand-in starts"));
        let mut server = Self { child, port, dir };
        let deadline = Instant::now() + START_LIMIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                server.is_running() && Instant::now() < deadline,
                "the RunPod stand-in did not listen on {port}:\n{}",
                server.output()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }
}

/// The shipped handler, served by RunPod's SDK at the root of a loopback port, with `env` added
/// to the worker's environment (the SDK's own settings, or a key the handler must keep from runs).
pub fn sdk_worker(env: &[(&str, &str)]) -> LoopbackServer {
    let port = free_port();
    let mut cmd = Command::new(runpod_env());
    cmd.arg(handler_path())
        .args([
            "--rp_serve_api",
            "--rp_api_host",
            "127.0.0.1",
            "--rp_api_port",
        ])
        .arg(port.to_string())
        .current_dir(workspace_root().join("runpod"));
    for (name, value) in env {
        cmd.env(name, value);
    }
    LoopbackServer::start(cmd, port)
}

/// The stand-in of RunPod's cloud API (`/v2/{endpoint}/…`, answers as RunPod documents them),
/// accepting only `key` as the bearer.
pub fn cloud_standin(key: &str) -> LoopbackServer {
    let port = free_port();
    let mut cmd = Command::new(crate::python::python());
    cmd.arg(client_script("runpod_standin.py"))
        .arg(port.to_string())
        .env("STANDIN_KEY", key);
    LoopbackServer::start(cmd, port)
}

/// The worker handler this repository ships.
pub fn handler_path() -> PathBuf {
    workspace_root().join("runpod").join("handler.py")
}

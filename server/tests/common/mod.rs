//! Shared helpers for the server's integration tests: a temp projects folder, a runner on the real
//! interpreter, and process checks.
#![allow(dead_code)]

pub mod stdio;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pyrun_mcp_server::run::paths::ProjectRoot;
use pyrun_mcp_server::run::runner::{Runner, RunnerSettings};
use pyrun_sandbox::resolve_python;
use pyrun_sandbox::{Sandbox, SandboxMode, SandboxPolicy};
use tokio_util::sync::CancellationToken;

/// The real interpreter, resolved once per test binary (as the server does).
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| resolve_python(None).expect("python3 must be installed for these tests"))
        .clone()
}

/// A temp projects folder holding `files` (path, content).
pub fn project(files: &[(&str, &str)]) -> (tempfile::TempDir, ProjectRoot) {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let root = ProjectRoot::open(dir.path()).unwrap();
    (dir, root)
}

/// A runner with no kernel sandbox: these tests are about the runner's own guarantees.
pub fn runner(max_output_bytes: usize, max_concurrent: usize, pass_env: &[&str]) -> Runner {
    let sandbox = Sandbox::new(SandboxPolicy {
        allow_network: true,
        ..SandboxPolicy::bare(SandboxMode::Off)
    })
    .unwrap();
    Runner::new(
        RunnerSettings {
            python: python(),
            max_output_bytes,
            max_concurrent,
            pass_env: pass_env.iter().map(|s| s.to_string()).collect(),
        },
        sandbox,
        CancellationToken::new(),
    )
    .unwrap()
}

/// Whether a pid is still a live process (a zombie awaiting its reaper counts as dead).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
    }
}

/// Waits (bounded) until the process is gone; returns whether it is.
pub fn gone_within(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

/// Reads a pid a script wrote to `file` (waiting a bounded time for it to appear).
pub fn read_pid(file: &Path) -> u32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "pid file {} never appeared",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

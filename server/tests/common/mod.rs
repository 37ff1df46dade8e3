//! Shared helpers for the server's integration tests that need the server crate itself: a temp
//! projects folder and a runner on the real interpreter. Starting the binary, the JSON-RPC driver,
//! the interpreter and the process checks are the workspace's one harness (`pyrun_mcp_tests`).
#![allow(dead_code, unused_imports)] // each test binary uses its own subset

/// The stdio JSON-RPC driver (`StdioServer::start`, `text`).
pub mod stdio {
    pub use pyrun_mcp_tests::stdio::*;
}

pub use pyrun_mcp_tests::procs::{alive, gone_within, read_pid};
pub use pyrun_mcp_tests::python;

use pyrun_run::paths::ProjectRoot;
use pyrun_run::runner::{Runner, RunnerSettings};
use pyrun_sandbox::{Sandbox, SandboxMode, SandboxPolicy};
use tokio_util::sync::CancellationToken;

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
            max_background_concurrent: 1,
            pass_env: pass_env.iter().map(|s| s.to_string()).collect(),
        },
        sandbox,
        CancellationToken::new(),
    )
    .unwrap()
}

//! The HTTP tests' projects folder and token; the drivers (`HttpServer`, `McpSession`, `SseSession`,
//! `SseReader`) are the workspace's one harness (`pyrun_mcp_tests`).

use std::path::Path;
use std::process::{Child, Stdio};

pub use pyrun_mcp_tests::http::*;
pub use pyrun_mcp_tests::{HttpServer, TempProjects};

pub const TOKEN: &str = "test-token-0123456789";

/// A projects folder with the scripts the tests run, inside a temp dir that also holds
/// `outside.py` next to it (the target of the path-escape tests).
pub fn projects() -> TempProjects {
    // Waits until the test creates `go`, so a test can prove it saw progress mid-run.
    let wait_for_go = "import os, time\nfor _ in range(600):\n    if os.path.exists(os.path.join(os.path.dirname(__file__), 'go')):\n        break\n    time.sleep(0.05)\nprint('went')\n";
    // Runs until killed; tests give it a token argument to find its process (`procs`).
    let sleeper = "import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n";
    TempProjects::named("projects")
        .outside("outside.py", "print('ESCAPED')\n")
        .file("hello_world.py", "print('Hello, World!')\n")
        .file("wait_for_go.py", wait_for_go)
        .file("sleeper.py", sleeper)
}

/// Spawns the binary on `bind` without waiting for it (stderr piped); settings come only from
/// flags (no variable of the developer's shell leaks in). Its state folder lies beside `projects`
/// (one of [`projects()`]), in the same temp dir.
pub fn spawn(projects: &Path, bind: &str, extra: &[&str]) -> Child {
    let state = projects.with_file_name("state");
    pyrun_mcp_tests::ServerLaunch::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"), projects)
        .args([std::ffi::OsStr::new("--state-dir"), state.as_os_str()])
        .args(extra)
        .log("info")
        .command("http", Some(bind))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pyrun-mcp-server")
}

//! What several of the server's test modules share and the harness cannot (it does not link the
//! server): a temp projects folder with its [`ProjectRoot`], a runner on the real interpreter, and
//! [`run_alone`] for a test that must not share its process; the HTTP tests' folder and token are
//! in [`http`]. Starting the binary, the JSON-RPC driver, the interpreter and the process checks
//! are the workspace's one harness (`pyrun_mcp_tests`).

pub mod http;
#[cfg(target_os = "linux")]
pub mod warm;

use std::path::Path;
use std::process::Command;

use pyrun_mcp_tests::{python, TempProjects};
use pyrun_run::paths::ProjectRoot;
use pyrun_run::runner::{Runner, RunnerSettings};
use pyrun_sandbox::{Sandbox, SandboxMode, SandboxPolicy};
use tokio_util::sync::CancellationToken;

/// A temp projects folder holding `files` (path, content), and the run layer's root of it.
pub fn project(files: &[(&str, &str)]) -> (TempProjects, ProjectRoot) {
    let projects = TempProjects::named("p").files(files);
    let root = ProjectRoot::open(projects.path()).unwrap();
    (projects, root)
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

/// Runs `future` to completion on a runtime of its own (what `#[tokio::test]` does), for a test
/// body that [`run_alone`] takes as a closure.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Set in the environment of the process [`run_alone`] starts.
const ALONE: &str = "PYRUN_TEST_ALONE";

/// Runs `body` when this process is the one [`run_alone`] started; otherwise runs the test
/// `test` again, alone (`--exact --test-threads=1`), in a child process of this test binary, with
/// a private temp folder (`TMPDIR`, handed to `prepare` with the command), and asserts it passed.
///
/// For a test that measures or sweeps what belongs to the whole process (its peak memory, its
/// scratch roots in the temp folder): the other tests of this binary run in the same process at
/// the same time. `test` is the test's path, `concat!(module_path!(), "::NAME")` (the leading
/// crate name is dropped).
pub fn run_alone(test: &str, prepare: impl FnOnce(&mut Command, &Path), body: impl FnOnce()) {
    if std::env::var_os(ALONE).is_some() {
        return body();
    }
    let test = test.split_once("::").map_or(test, |(_, path)| path);
    let temp = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE, "1")
        .env("TMPDIR", temp.path());
    prepare(&mut child, temp.path());
    let out = child.output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("1 passed"),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The run status an answer names, read with the words client and server share (`pyrun_api`); a
/// missing or unknown status reads as `Unknown`, which no assertion expects.
pub fn run_status(answer: &serde_json::Value) -> pyrun_api::RunStatus {
    serde_json::from_value(answer["status"].clone()).unwrap_or(pyrun_api::RunStatus::Unknown)
}

/// The peak resident memory (`VmHWM`) of process `pid`, in MiB: what a test that floods a server
/// it started reads to prove the server's memory stayed bounded.
pub fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024
}

/// The Python side of attack scripts: `attempt(name, fn)` records how each call ended ("DONE" or
/// the errno's name), `write(path)` writes a file (making its folders), `report()` prints the
/// results as one JSON object on the last line. Prepend it to a script's body.
#[cfg(target_os = "linux")]
pub const ATTEMPT: &str = r##"
import errno, json, os, sys
_results = {}
def attempt(name, f):
    try:
        f()
        _results[name] = "DONE"
    except OSError as e:
        _results[name] = errno.errorcode.get(e.errno, str(e.errno))
def write(path, text="x\n", mode="w"):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, mode) as f:
        f.write(text)
def report():
    print(json.dumps(_results))
"##;

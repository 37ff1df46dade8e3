//! No process outlives the server: whatever it started for itself (the interpreter's start-up
//! questions, the bytecode fill) or for a caller (runs, background runs) is killed and reaped
//! before it exits, however early the session ends.
//!
//! Each test runs alone in a child of the test binary ([`run_alone`]) that makes itself a child
//! subreaper: a process the server leaves behind is re-parented to that child instead of init,
//! where the test finds it among its own children, and kills it.
#![cfg(target_os = "linux")]

use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pyrun_mcp_tests::paths::bin_path;
use pyrun_mcp_tests::procs::alive;
use pyrun_mcp_tests::ServerLaunch;
use serde_json::json;

use crate::util::http::*;
use crate::util::run_alone;

/// The first thing in each test body: orphans of the server come to this process.
pub(crate) fn become_subreaper() {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .expect("PR_SET_CHILD_SUBREAPER");
}

/// This process's live children but `except` (zombies have exited: they are not left running),
/// each with its command line.
pub(crate) fn live_children(except: &[u32]) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent != Some(me) || except.contains(&pid) || !alive(pid) {
            continue;
        }
        let line = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let line = String::from_utf8_lossy(&line).replace('\0', " ");
        children.push((pid, line.chars().take(120).collect()));
    }
    children
}

/// [`live_children`] as `pid: command line`; then kills them (they were the server's) and reaps
/// every zombie.
pub(crate) fn take_leftovers(except: &[u32]) -> Vec<String> {
    let mut left = Vec::new();
    for (pid, line) in live_children(except) {
        left.push(format!("{pid}: {line}"));
        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    std::thread::sleep(Duration::from_millis(if left.is_empty() { 0 } else { 50 }));
    while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
    left
}

/// Waits (bounded) for `child` to exit; fails the test if it does not.
fn wait_bounded(child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait for the server").is_none() {
        assert!(Instant::now() < deadline, "{what}: the server did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A stdio server on `projects` with a bytecode cache of its own (cold: its fill takes seconds,
/// the longest of the server's own processes).
fn stdio_server(projects: &Path, cache: &Path) -> Child {
    ServerLaunch::new(bin_path("pyrun-mcp-server"), projects)
        .env("XDG_CACHE_HOME", cache)
        .command("stdio", None)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server")
}

#[test]
fn a_stdio_session_closed_within_100_ms_leaves_no_process_behind_fifty_times_over() {
    run_alone(
        concat!(
            module_path!(),
            "::a_stdio_session_closed_within_100_ms_leaves_no_process_behind_fifty_times_over"
        ),
        |_, _| {},
        || {
            become_subreaper();
            let projects = projects();
            let cache = tempfile::tempdir().unwrap();
            let mut left = Vec::new();
            for i in 0..50u64 {
                let mut server = stdio_server(projects.path(), cache.path());
                // From at once to 100 ms: before, during and after the start-up probe begins.
                std::thread::sleep(Duration::from_millis(i * 2));
                drop(server.stdin.take());
                wait_bounded(&mut server, "stdin closed");
                left.extend(take_leftovers(&[]).into_iter().map(|l| format!("#{i} {l}")));
            }
            assert!(
                left.is_empty(),
                "processes outlived their server: {left:#?}"
            );
        },
    );
}

#[test]
fn a_stdio_session_that_lists_the_files_and_ends_leaves_no_process_behind() {
    run_alone(
        concat!(
            module_path!(),
            "::a_stdio_session_that_lists_the_files_and_ends_leaves_no_process_behind"
        ),
        |_, _| {},
        || {
            become_subreaper();
            let projects = projects();
            let cache = tempfile::tempdir().unwrap();
            let mut left = Vec::new();
            for i in 0..10 {
                let mut server = stdio_server(projects.path(), cache.path());
                let mut stdin = server.stdin.take().expect("stdin");
                let messages = [
                    initialize_request(1),
                    notification("notifications/initialized", json!({})),
                    request(
                        2,
                        "tools/call",
                        json!({"name": "list_python_files", "arguments": {}}),
                    ),
                ];
                for message in messages {
                    use std::io::Write;
                    writeln!(stdin, "{message}").expect("write to the server");
                }
                // The answer to the listing, then the end of the session.
                let mut stdout = server.stdout.take().expect("stdout");
                let mut said = Vec::new();
                let mut byte = [0u8; 1];
                while said.iter().filter(|&&b| b == b'\n').count() < 2 {
                    match stdout.read(&mut byte) {
                        Ok(1) => said.push(byte[0]),
                        _ => break,
                    }
                }
                assert!(
                    String::from_utf8_lossy(&said).contains("hello_world.py"),
                    "{}",
                    String::from_utf8_lossy(&said)
                );
                drop(stdin);
                wait_bounded(&mut server, "after a listing");
                left.extend(take_leftovers(&[]).into_iter().map(|l| format!("#{i} {l}")));
            }
            assert!(
                left.is_empty(),
                "processes outlived their server: {left:#?}"
            );
        },
    );
}

/// Starts a child that sleeps (the run's tree), writes `started` beside itself, sleeps.
pub(crate) const TREE: &str = r#"
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "started-" + sys.argv[1]), "w") as f:
    f.write(str(child.pid))
time.sleep(300)
"#;

/// An HTTP server in the middle of a run and a background run, each with a child of its own,
/// stopped with SIGTERM: nothing of it is left.
fn sigterm_during_runs_leaves_nothing(sandbox: &str) {
    become_subreaper();
    let projects = projects();
    std::fs::write(projects.path().join("tree.py"), TREE).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut server = ServerLaunch::new(bin_path("pyrun-mcp-server"), projects.path())
        .env("XDG_CACHE_HOME", cache.path())
        .args(["--sandbox", sandbox])
        .http();
    crate::util::block_on(async {
        let session = McpSession::open(&server, None).await;
        let started = |name: &str| projects.path().join(format!("started-{name}"));
        let call = |id: u64, tool: &str, marker: &str| {
            request(
                id,
                "tools/call",
                json!({"name": tool, "arguments": {"file_name": "tree.py", "args": [marker], "timeout_seconds": 300}}),
            )
        };
        let background = session.call(&call(1, "start_python", "background")).await;
        assert!(background.get("result").is_some(), "{background}");
        let foreground = call(2, "run_python", "foreground");
        // The answer's stream stays open (unread) while the server is stopped.
        let stop = async {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !(started("background").exists() && started("foreground").exists()) {
                assert!(Instant::now() < deadline, "the runs never started");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let pid =
                rustix::process::Pid::from_raw(server.pid() as i32).expect("the server's pid");
            rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
        };
        let (_answer, ()) = tokio::join!(session.send(&foreground), stop);
        assert!(
            server.wait_exit(Duration::from_secs(20)),
            "the server did not exit on SIGTERM"
        );
    });
    let left = take_leftovers(&[]);
    assert!(
        left.is_empty(),
        "processes outlived their server: {left:#?}"
    );
}

#[test]
fn an_http_server_stopped_with_sigterm_during_runs_leaves_no_process_behind() {
    run_alone(
        concat!(
            module_path!(),
            "::an_http_server_stopped_with_sigterm_during_runs_leaves_no_process_behind"
        ),
        |_, _| {},
        || sigterm_during_runs_leaves_nothing("standard"),
    );
}

#[test]
fn an_http_server_without_sandbox_stopped_with_sigterm_during_runs_leaves_no_process_behind() {
    run_alone(
        concat!(module_path!(), "::an_http_server_without_sandbox_stopped_with_sigterm_during_runs_leaves_no_process_behind"),
        |_, _| {},
        || sigterm_during_runs_leaves_nothing("off"),
    );
}

/// A stdio session that ends (stdin closed) while a background run and its child go on.
fn stdio_end_during_a_background_run_leaves_nothing(sandbox: &str) {
    become_subreaper();
    let projects = projects();
    std::fs::write(projects.path().join("tree.py"), TREE).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut server = ServerLaunch::new(bin_path("pyrun-mcp-server"), projects.path())
        .env("XDG_CACHE_HOME", cache.path())
        .args(["--sandbox", sandbox])
        .stdio();
    let started = server.call(
        "start_python",
        json!({"file_name": "tree.py", "args": ["background"], "timeout_seconds": 300}),
    );
    assert!(
        started.get("isError").is_none_or(|e| e == false),
        "{started}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !projects.path().join("started-background").exists() {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.close();
    let left = take_leftovers(&[]);
    assert!(
        left.is_empty(),
        "processes outlived their server: {left:#?}"
    );
}

#[test]
fn a_stdio_session_that_ends_during_a_background_run_leaves_no_process_behind() {
    run_alone(
        concat!(
            module_path!(),
            "::a_stdio_session_that_ends_during_a_background_run_leaves_no_process_behind"
        ),
        |_, _| {},
        || stdio_end_during_a_background_run_leaves_nothing("standard"),
    );
}

#[test]
fn a_stdio_session_without_sandbox_that_ends_during_a_background_run_leaves_no_process_behind() {
    run_alone(
        concat!(module_path!(), "::a_stdio_session_without_sandbox_that_ends_during_a_background_run_leaves_no_process_behind"),
        |_, _| {},
        || stdio_end_during_a_background_run_leaves_nothing("off"),
    );
}

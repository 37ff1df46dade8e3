//! Runs die with their server: a `kill -9` of the server ends every run it started (plain and
//! background), long before their timeout, and the next server sweeps what the dead one left.
//! The test finds the runs' processes by a marker of its own in their command lines and touches
//! no other process.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::util::http::*;
use serde_json::{json, Value};

/// Writes a heartbeat file beside itself every 50 ms until killed.
const BEAT: &str = r#"
import os, sys, time
path = os.path.join(os.path.dirname(__file__), "beat-" + sys.argv[2])
while True:
    with open(path, "w") as f:
        f.write(str(time.time()))
    time.sleep(0.05)
"#;

/// `(pid, state)` of every process whose command line holds `marker`.
fn holding(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline
            .split(|&b| b == 0)
            .any(|arg| arg == marker.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

/// The parent of `pid` as the host sees it.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether `pid` is a live process (a zombie is dead: it runs nothing).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_owned();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// SIGKILL to a process this test started (or one of its runs).
fn kill(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

fn beat_file(projects: &Path, marker: &str) -> PathBuf {
    projects.join(format!("beat-{marker}"))
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

#[tokio::test]
async fn a_killed_servers_plain_and_background_runs_die_within_3_seconds_and_the_next_server_sweeps_its_scratch(
) {
    let projects = projects();
    std::fs::write(projects.path().join("beat.py"), BEAT).expect("write beat.py");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let plain = format!("pyrun-death-{stamp}-plain");
    let background = format!("pyrun-death-{stamp}-background");
    let mut server = HttpServer::start(projects.path(), &["--timeout", "60"]);
    let server_pid = server.pid() as i32;
    let session = McpSession::open(&server, None).await;

    // The plain run never answers: its call is left hanging in a task of its own.
    let hanging = {
        let args = json!({"file_name": "beat.py", "args": ["--marker", plain]});
        let message = call(1, "run_python", args);
        let session = McpSession::open(&server, None).await;
        tokio::spawn(async move { session.send(&message).await })
    };
    let started = session
        .call(&call(
            2,
            "start_python",
            json!({"file_name": "beat.py", "args": ["--marker", background], "timeout_seconds": 60}),
        ))
        .await;
    assert!(started["result"]["isError"] != json!(true), "{started}");
    for marker in [&plain, &background] {
        let beat = beat_file(projects.path(), marker);
        until(&format!("{marker} to beat"), || beat.exists()).await;
    }
    // Each run's interpreter and its pid 1 (the interpreter's parent, in the server's memory).
    let mut pids = Vec::new();
    for marker in [&plain, &background] {
        let interpreters = holding(marker);
        assert!(!interpreters.is_empty(), "no process of {marker}");
        for pid in interpreters {
            pids.push(pid);
            if let Some(parent) = parent_of(pid).filter(|&p| p != server_pid && p > 1) {
                pids.push(parent);
            }
        }
    }

    kill(server_pid);
    assert!(
        server.wait_exit(Duration::from_secs(5)),
        "the server survived SIGKILL"
    );
    hanging.abort();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let survivors: Vec<i32> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    for &pid in &survivors {
        // Processes of this test's own runs (found by its marker), killed before failing.
        kill(pid);
    }
    assert!(
        survivors.is_empty(),
        "runs outlived their killed server by 3 s: {survivors:?} of {pids:?}"
    );
    for marker in [&plain, &background] {
        let beat = beat_file(projects.path(), marker);
        let before = std::fs::read_to_string(&beat).unwrap_or_default();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            before,
            std::fs::read_to_string(&beat).unwrap_or_default(),
            "{marker} still beats"
        );
    }

    // The next server removes the dead one's scratch root (`pyrun-mcp-<pid>-…` in the temp
    // folder) and, where it made them, its cgroups (`pyrun-mcp-<pid>-…` beside the server's own
    // cgroup, which is this test's): a live run would keep both busy.
    let left = |pid: i32| {
        let prefix = format!("pyrun-mcp-{pid}-");
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let parents = cgroups
            .lines()
            .filter_map(|line| {
                let mut fields = line.splitn(3, ':');
                let controller = fields.nth(1)?;
                let path = fields.next()?;
                ["pids", "memory"].contains(&controller).then(|| {
                    Path::new("/sys/fs/cgroup")
                        .join(controller)
                        .join(path.trim_start_matches('/'))
                })
            })
            .chain([std::env::temp_dir()])
            .collect::<Vec<_>>();
        parents.iter().any(|dir| {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        })
    };
    let next = HttpServer::start(projects.path(), &[]);
    let session = McpSession::open(&next, None).await;
    let answer = session.call(&run_python(3, "hello_world.py", None)).await;
    assert!(result_text(&answer).contains("Hello, World!"), "{answer}");
    until("the dead server's scratch and cgroups to be swept", || {
        !left(server_pid)
    })
    .await;
}

//! Runs die with their server: a `kill -9` of the server ends every run it started (plain and
//! background) and its installs, long before their timeout, and the next server sweeps what the dead one left.
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

/// Every live process whose command line (arguments joined by spaces) contains `needle`, and
/// the parent of each as the host sees it (a run's pid 1, in the server's memory), but never the
/// server itself or init.
fn run_processes(needle: &str, server: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let line = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let line = String::from_utf8_lossy(&line).replace('\0', " ");
        if line.contains(needle) && alive(pid) {
            pids.push(pid);
            if let Some(parent) = parent_of(pid).filter(|&p| p != server && p > 1) {
                pids.push(parent);
            }
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

fn alive(pid: i32) -> bool {
    u32::try_from(pid).is_ok_and(pyrun_mcp_tests::procs::alive)
}

/// Kills the server with SIGKILL, waits 3 s, and fails naming the processes of `pids` still
/// alive (killing them first: they are this test's own runs).
async fn kill_server_then_none_alive(server: &mut HttpServer, pids: &[i32]) {
    kill(server.pid() as i32);
    assert!(
        server.wait_exit(Duration::from_secs(5)),
        "the server survived SIGKILL"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let survivors: Vec<i32> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    for &pid in &survivors {
        kill(pid);
    }
    assert!(
        survivors.is_empty(),
        "processes outlived their killed server by 3 s: {survivors:?} of {pids:?}"
    );
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
    // A wait, not a timing: on a busy machine pip's fallback reaches the venv step late.
    let deadline = Instant::now() + Duration::from_secs(60);
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
async fn a_killed_servers_runs_background_runs_and_install_die_within_3_seconds_and_the_next_server_sweeps(
) {
    let projects = projects();
    std::fs::write(projects.path().join("beat.py"), BEAT).expect("write beat.py");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let plain = format!("pyrun-death-{stamp}-plain");
    let background = format!("pyrun-death-{stamp}-background");
    std::fs::create_dir(projects.path().join("app")).expect("make app/");
    let index = pyrun_mcp_tests::PackageIndex::start();
    // Runs without cgroups: a server starting elsewhere meanwhile (another test) kills what it
    // finds in a dead server's cgroups, which would hide whether the runs die by themselves.
    let mut server = HttpServer::start(
        projects.path(),
        &[
            "--timeout",
            "60",
            "--max-memory-mb",
            "0",
            "--max-processes",
            "0",
            "--allow-install",
            "--uv",
            "off",
            "--package-index",
            &index.url(),
        ],
    );
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
    // An install, whose every step names the venv it makes (pip's fallback takes seconds).
    let installing = {
        let message = call(
            3,
            "install_packages",
            json!({"project": "app", "packages": ["pyrunalpha"]}),
        );
        let session = McpSession::open(&server, None).await;
        tokio::spawn(async move { session.send(&message).await })
    };
    let venv = projects
        .path()
        .join("app/.venv")
        .to_string_lossy()
        .into_owned();
    until("the install to start", || {
        !run_processes(&venv, server_pid).is_empty()
    })
    .await;
    let mut pids = run_processes(&venv, server_pid);
    for marker in [&plain, &background] {
        let found = run_processes(marker, server_pid);
        assert!(!found.is_empty(), "no process of {marker}");
        pids.extend(found);
    }
    kill_server_then_none_alive(&mut server, &pids).await;
    hanging.abort();
    installing.abort();
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
    let answer = session.call(&run_python(4, "hello_world.py", None)).await;
    assert!(result_text(&answer).contains("Hello, World!"), "{answer}");
    until("the dead server's scratch and cgroups to be swept", || {
        !left(server_pid)
    })
    .await;
}

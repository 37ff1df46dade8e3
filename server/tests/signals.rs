//! SIGTERM, SIGINT and SIGHUP end the server gracefully on every transport (stdio, `/mcp`,
//! `/sse`) whatever its stdout and stderr are — read, closed pipes (before or after it started),
//! `/dev/full` — within the grace period, its runs killed and nothing of it left behind; a second
//! signal ends it at once; stdin's end still ends a stdio server whose stderr cannot be written.
//!
//! Each test runs alone as a child subreaper (see `no_process_left`): what the server leaves
//! behind comes to it and is counted.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pyrun_mcp_tests::paths::bin_path;
use pyrun_mcp_tests::{Outputs, ServerLaunch};
use rustix::process::{kill_process, Pid, Signal};
use serde_json::json;

use crate::no_process_left::{become_subreaper, live_children, take_leftovers, TREE};
use crate::util::http::*;
use crate::util::run_alone;

/// How long a signalled server may take: the HTTP transport's grace for open connections (5 s)
/// with room for a loaded machine. A server that ignores the signal never exits.
const WITHIN: Duration = Duration::from_secs(9);

const SIGNALS: [Signal; 3] = [Signal::TERM, Signal::INT, Signal::HUP];

fn signal(pid: u32, signal: Signal) {
    let pid = Pid::from_raw(pid as i32).expect("a pid");
    kill_process(pid, signal).expect("signal the server");
}

fn launch(projects: &Path, cache: &Path) -> ServerLaunch {
    ServerLaunch::new(bin_path("pyrun-mcp-server"), projects).env("XDG_CACHE_HOME", cache)
}

/// Waits for the run `name` of [`TREE`] to have started its child.
fn wait_started(projects: &Path, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !projects.join(format!("started-{name}")).exists() {
        assert!(Instant::now() < deadline, "the run {name} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start_call(id: u64, marker: &str) -> serde_json::Value {
    request(
        id,
        "tools/call",
        json!({"name": "start_python", "arguments": {"file_name": "tree.py", "args": [marker], "timeout_seconds": 300}}),
    )
}

/// One HTTP server per output and signal, with a session on `/mcp` or `/sse` and a background
/// run (and its child) going: the signal ends it in time and leaves nothing.
fn http_signals_end_it(transport: &str) {
    become_subreaper();
    let projects = projects();
    std::fs::write(projects.path().join("tree.py"), TREE).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for outputs in Outputs::ALL {
        for sig in SIGNALS {
            let case = format!("{transport} {outputs:?} {sig:?}");
            let mut server = launch(projects.path(), cache.path()).http_with_outputs(outputs);
            let marker = format!("{transport}-{outputs:?}-{sig:?}");
            crate::util::block_on(async {
                let answer = if transport == "sse" {
                    let mut session = SseSession::open(&server, None).await;
                    session.call(&start_call(1, &marker)).await.0
                } else {
                    McpSession::open(&server, None)
                        .await
                        .call(&start_call(1, &marker))
                        .await
                };
                assert!(answer.get("result").is_some(), "{case}: {answer}");
            });
            wait_started(projects.path(), &marker);
            let signalled = Instant::now();
            signal(server.pid(), sig);
            if !server.wait_exit(WITHIN) {
                failures.push(format!("{case}: still running {WITHIN:?} after the signal"));
            } else {
                eprintln!("{case}: ended in {:?}", signalled.elapsed());
            }
            drop(server);
            note_leftovers(&case, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn sigterm_sigint_and_sighup_end_an_http_server_with_an_mcp_session_whatever_its_outputs() {
    run_alone(
        concat!(
            module_path!(),
            "::sigterm_sigint_and_sighup_end_an_http_server_with_an_mcp_session_whatever_its_outputs"
        ),
        |_, _| {},
        || http_signals_end_it("mcp"),
    );
}

#[test]
fn sigterm_sigint_and_sighup_end_an_http_server_with_an_sse_session_whatever_its_outputs() {
    run_alone(
        concat!(
            module_path!(),
            "::sigterm_sigint_and_sighup_end_an_http_server_with_an_sse_session_whatever_its_outputs"
        ),
        |_, _| {},
        || http_signals_end_it("sse"),
    );
}

/// A stdio server with `outputs` as its stdout and stderr and stdin held open. Where stdout can
/// be read, a session starts a background run first.
fn stdio_server(projects: &Path, cache: &Path, outputs: Outputs, marker: &str) -> Child {
    let mut cmd = launch(projects, cache).command("stdio", None);
    let (stdout, stderr) = outputs.stdio();
    cmd.stdin(Stdio::piped()).stdout(stdout).stderr(stderr);
    if outputs == Outputs::Read {
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    }
    let mut server = cmd.spawn().expect("start the server");
    if matches!(outputs, Outputs::Read | Outputs::ClosedLater) {
        let stdin = server.stdin.as_mut().expect("stdin");
        for message in [
            initialize_request(0),
            notification("notifications/initialized", json!({})),
            start_call(1, marker),
        ] {
            writeln!(stdin, "{message}").expect("write to the server");
        }
        let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
        let answered = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|line| line.contains(r#""id":1"#));
        assert!(answered, "{marker}: no answer to start_python");
        if outputs == Outputs::Read {
            std::thread::spawn(move || lines.for_each(drop));
        }
        wait_started(projects, marker);
        // The reader goes away: both pipes are closed from here on.
        drop(server.stderr.take());
    } else {
        // It cannot answer; give it time to try, and to probe the sandbox and log.
        std::thread::sleep(Duration::from_millis(300));
    }
    server
}

/// Waits [`WITHIN`] for a stdio server to end after `after`: one still running is a failure of
/// `case`, and is killed. Whether it ended by itself.
fn end_stdio(case: &str, server: &mut Child, after: &str, failures: &mut Vec<String>) -> bool {
    let ended = wait_exit(server, WITHIN);
    if !ended {
        failures.push(format!("{case}: still running {WITHIN:?} after {after}"));
        let _ = server.kill();
    }
    let _ = server.wait();
    ended
}

/// The processes `case` left behind, as a failure of it.
fn note_leftovers(case: &str, failures: &mut Vec<String>) {
    let left = take_leftovers(&[]);
    if !left.is_empty() {
        failures.push(format!("{case}: left {left:?}"));
    }
}

fn wait_exit(child: &mut Child, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn sigterm_sigint_and_sighup_end_a_stdio_server_whatever_its_outputs() {
    run_alone(
        concat!(
            module_path!(),
            "::sigterm_sigint_and_sighup_end_a_stdio_server_whatever_its_outputs"
        ),
        |_, _| {},
        || {
            become_subreaper();
            let projects = projects();
            std::fs::write(projects.path().join("tree.py"), TREE).unwrap();
            let cache = tempfile::tempdir().unwrap();
            let mut failures = Vec::new();
            for outputs in Outputs::ALL {
                for sig in SIGNALS {
                    let case = format!("stdio {outputs:?} {sig:?}");
                    let marker = format!("stdio-{outputs:?}-{sig:?}");
                    let mut server = stdio_server(projects.path(), cache.path(), outputs, &marker);
                    let signalled = Instant::now();
                    signal(server.id(), sig);
                    if end_stdio(&case, &mut server, "the signal", &mut failures) {
                        eprintln!("{case}: ended in {:?}", signalled.elapsed());
                    }
                    note_leftovers(&case, &mut failures);
                }
            }
            assert!(failures.is_empty(), "{failures:#?}");
        },
    );
}

#[test]
fn stdins_end_ends_a_stdio_server_whatever_its_outputs() {
    run_alone(
        concat!(
            module_path!(),
            "::stdins_end_ends_a_stdio_server_whatever_its_outputs"
        ),
        |_, _| {},
        || {
            become_subreaper();
            let projects = projects();
            std::fs::write(projects.path().join("tree.py"), TREE).unwrap();
            let cache = tempfile::tempdir().unwrap();
            let mut failures = Vec::new();
            for outputs in Outputs::ALL {
                let case = format!("stdio {outputs:?}, stdin closed");
                let marker = format!("stdin-{outputs:?}");
                let mut server = stdio_server(projects.path(), cache.path(), outputs, &marker);
                drop(server.stdin.take());
                end_stdio(&case, &mut server, "stdin closed", &mut failures);
                note_leftovers(&case, &mut failures);
            }
            assert!(failures.is_empty(), "{failures:#?}");
        },
    );
}

/// A client holding a half-sent request keeps the graceful stop waiting (for the grace
/// period); a second SIGTERM ends the server at once, and still nothing is left.
#[test]
fn a_second_sigterm_ends_the_server_at_once() {
    run_alone(
        concat!(module_path!(), "::a_second_sigterm_ends_the_server_at_once"),
        |_, _| {},
        || {
            become_subreaper();
            let projects = projects();
            std::fs::write(projects.path().join("tree.py"), TREE).unwrap();
            let cache = tempfile::tempdir().unwrap();
            let mut server = launch(projects.path(), cache.path()).http_with_outputs(Outputs::Read);
            crate::util::block_on(async {
                let session = McpSession::open(&server, None).await;
                let answer = session.call(&start_call(1, "second")).await;
                assert!(answer.get("result").is_some(), "{answer}");
            });
            wait_started(projects.path(), "second");
            let addr = server.base.trim_start_matches("http://").to_owned();
            // One whole request first, so the connection is surely accepted and served.
            let mut stalled = std::net::TcpStream::connect(&addr).expect("connect");
            stalled
                .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .expect("a request");
            let mut answer = [0u8; 4096];
            let read = std::io::Read::read(&mut stalled, &mut answer).expect("an answer");
            assert!(answer[..read].starts_with(b"HTTP/1.1 200"), "/health");
            stalled
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-length: 100\r\n\r\n{")
                .expect("half a request");
            std::thread::sleep(Duration::from_millis(300));
            signal(server.pid(), Signal::TERM);
            std::thread::sleep(Duration::from_millis(1500));
            assert!(
                !server.wait_exit(Duration::ZERO),
                "the server did not wait for the half-sent request (the test's premise)"
            );
            let second = Instant::now();
            signal(server.pid(), Signal::TERM);
            assert!(
                server.wait_exit(Duration::from_secs(1)),
                "still running 1 s after the second SIGTERM"
            );
            eprintln!("ended {:?} after the second SIGTERM", second.elapsed());
            drop(stalled);
            drop(server);
            // Its runs die with it (their death signal), a moment later.
            let deadline = Instant::now() + Duration::from_secs(3);
            while !live_children(&[]).is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let left = take_leftovers(&[]);
            assert!(
                left.is_empty(),
                "processes outlived their server: {left:#?}"
            );
        },
    );
}

//! The sandbox end to end: attacks sent as `run_python` calls to the real server over stdio, and
//! the `sandbox` list each run reports checked against what the run could actually do.
#![cfg(target_os = "linux")]

use std::net::TcpListener;
use std::time::Duration;

use crate::util;
use pyrun_mcp_tests::stdio::StdioServer;
use serde_json::{json, Value};

fn layers(result: &Value) -> Vec<String> {
    serde_json::from_value(result["structuredContent"]["sandbox"].clone())
        .unwrap_or_else(|e| panic!("no sandbox list in {result}: {e}"))
}

fn stdout(result: &Value) -> String {
    result["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const READ_PASSWD: &str = r#"
try:
    open("/etc/passwd").read()
    print("READ")
except PermissionError:
    print("DENIED")
"#;

#[test]
fn each_run_reports_the_layers_that_actually_protect_it() {
    let (dir, _) = util::project(&[("attack.py", READ_PASSWD)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "attack.py"}));
    let layers = layers(&result);
    for always in ["rlimits", "process-group"] {
        assert!(layers.iter().any(|l| l == always), "{layers:?}");
    }
    let expected = if layers.iter().any(|l| l == "landlock") {
        "DENIED\n"
    } else {
        eprintln!("note: this kernel lacks landlock; only the report is checked");
        "READ\n"
    };
    assert_eq!(stdout(&result), expected, "{result}");
    server.close();
}

#[test]
fn sandbox_off_is_reported_as_such() {
    let (dir, _) = util::project(&[("attack.py", READ_PASSWD)]);
    let mut server = StdioServer::start(dir.path(), &["--sandbox", "off"]);
    let result = server.call("run_python", json!({"file_name": "attack.py"}));
    assert_eq!(layers(&result), ["process-group"]);
    assert_eq!(stdout(&result), "READ\n");
    server.close();
}

/// Appends a byte to `name` every 50 ms, forever: a process whose file stops growing is gone.
/// (Pids the script sees are its pid namespace's, not the host's: the files tell instead.)
const HEARTBEAT: &str = r#"
def beat(name):
    while True:
        with open(name, "a") as f:
            f.write(".")
        time.sleep(0.05)
"#;

#[test]
fn a_daemon_and_a_new_session_die_when_the_run_times_out() {
    let script = format!(
        r#"
import os, subprocess, sys, time
{HEARTBEAT}
try:
    subprocess.Popen([sys.executable, "-c", "import time\n" + {HEARTBEAT:?} + "\nbeat('session.beat')"],
                     start_new_session=True)
except OSError:
    pass
if os.fork() == 0:
    try:
        os.setsid()
    except OSError:
        pass
    if os.fork() == 0:
        beat("daemon.beat")
    os._exit(0)
time.sleep(120)
"#
    );
    let (dir, _) = util::project(&[("escape.py", &script)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call(
        "run_python",
        json!({"file_name": "escape.py", "timeout_seconds": 2}),
    );
    assert_eq!(result["structuredContent"]["timed_out"], true, "{result}");
    let size = |name: &str| std::fs::metadata(dir.path().join(name)).map_or(0, |m| m.len());
    assert!(
        size("daemon.beat") > 0,
        "the daemon never started: {result}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let before = (size("daemon.beat"), size("session.beat"));
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        (size("daemon.beat"), size("session.beat")),
        before,
        "a daemon or new-session child outlived the run"
    );
    server.close();
}

#[test]
fn network_is_closed_by_default_and_opened_by_allow_network() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        r#"
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    print("CONNECTED")
except OSError as e:
    print("REFUSED")
"#
    );
    let (dir, _) = util::project(&[("net.py", &script)]);

    let mut closed = StdioServer::start(dir.path(), &[]);
    let result = closed.call("run_python", json!({"file_name": "net.py"}));
    let reported = layers(&result);
    if ["seccomp", "user-netns", "landlock"]
        .iter()
        .any(|l| reported.iter().any(|x| x == l))
    {
        assert_eq!(stdout(&result), "REFUSED\n", "{result}");
    } else {
        eprintln!("SKIP network closed: this kernel lacks every network layer");
    }
    closed.close();

    let mut open = StdioServer::start(dir.path(), &["--allow-network"]);
    let result = open.call("run_python", json!({"file_name": "net.py"}));
    assert_eq!(stdout(&result), "CONNECTED\n", "{result}");
    assert!(!layers(&result).iter().any(|l| l == "user-netns"));
    open.close();
}

/// An interpreter under `/tmp` (a venv made there) would be hidden by the run's own view, where
/// `/tmp` is the run's scratch: the server runs it without the view (no `mount-ns`) instead of
/// failing every run.
#[test]
fn an_interpreter_under_tmp_runs_without_the_file_view() {
    let venv = tempfile::Builder::new()
        .prefix("pyrun-venv-")
        .tempdir_in("/tmp")
        .unwrap();
    let made = std::process::Command::new(pyrun_mcp_tests::python())
        .args(["-m", "venv", "--without-pip"])
        .arg(venv.path())
        .status()
        .unwrap();
    assert!(made.success(), "python -m venv failed");
    let python = venv.path().join("bin/python3");
    let (dir, _) = util::project(&[("hello.py", "import sys\nprint(sys.prefix)\n")]);
    let mut server = StdioServer::start(dir.path(), &["--python", python.to_str().unwrap()]);
    let result = server.call("run_python", json!({"file_name": "hello.py"}));
    assert_eq!(result["isError"], json!(false), "{result}");
    let layers = layers(&result);
    assert!(!layers.iter().any(|l| l == "mount-ns"), "{layers:?}");
    assert!(layers.iter().any(|l| l == "landlock"), "{layers:?}");
    assert_eq!(
        stdout(&result).trim(),
        venv.path().canonicalize().unwrap().to_str().unwrap(),
        "the venv's interpreter ran"
    );
}

//! The sandbox end to end: attacks sent as `run_python` calls to the real server over stdio, and
//! the `sandbox` list each run reports checked against what the run could actually do.
#![cfg(target_os = "linux")]

use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use crate::util;
use crate::util::warm::{self, Start};
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
except (PermissionError, FileNotFoundError):
    # Refused by Landlock, or not in the run's world at all (its file view).
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
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("escape.py", &script)]);
        let mut server = start.server(dir.path(), &[]);
        let warmup = json!({"file_name": warm::warmup_beside(dir.path(), "escape.py")});
        let result = start.call(
            &mut server,
            "run_python",
            json!({"file_name": "escape.py", "timeout_seconds": 2}),
            warmup,
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
            "{start:?}: a daemon or new-session child outlived the run"
        );
        server.close();
    }
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

/// Looks up each path given (never opens it): `ENOENT` when it is not in the run's world.
const LOOK_UP: &str = r#"
import errno, os, sys
for path in sys.argv[1:]:
    try:
        os.stat(path)
        print("FOUND", path)
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno), path)
print("PREFIX", os.path.realpath(sys.base_prefix))
print("HOSTNAME", os.uname().nodename)
print("PATH", os.environ.get("PATH", ""))
for folder in os.environ.get("PATH", "").split(":"):
    print("PATH-ENTRY", folder, os.path.isdir(folder))
"#;

#[test]
fn a_run_lives_in_a_minimal_world_where_host_paths_do_not_exist() {
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("look.py", LOOK_UP)]);
        let state = tempfile::tempdir().unwrap();
        let audit = state.path().join("audit.jsonl");
        let mut server = start.server(
            dir.path(),
            &[
                "--state-dir",
                state.path().to_str().unwrap(),
                "--audit-log",
                audit.to_str().unwrap(),
            ],
        );
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let binary = pyrun_mcp_tests::bin_path("pyrun-mcp-server");
        // The interpreter may live in the home folder (pyenv): its folder and the empty stub parents
        // on the way exist for the run, nothing else of the home does.
        let first = server.call("run_python", json!({"file_name": "look.py"}));
        let prefix = stdout(&first)
            .lines()
            .find_map(|l| l.strip_prefix("PREFIX ").map(str::to_owned))
            .unwrap_or_else(|| panic!("{first}"));
        let home_entries: Vec<String> = std::fs::read_dir(&home)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path().display().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let mut hidden = vec![
            "/home".to_owned(),
            "/etc/shadow".to_owned(),
            "/etc/passwd".to_owned(),
            "/var".to_owned(),
            state.path().display().to_string(),
            audit.display().to_string(),
            binary.display().to_string(),
            dir.path().display().to_string(),
        ];
        hidden.extend(
            home_entries
                .into_iter()
                .filter(|entry| !Path::new(&prefix).starts_with(entry))
                .take(20),
        );
        let mut args: Vec<String> = hidden.clone();
        // What a run needs is there.
        let present = [
            "/usr/lib",
            "/etc/ld.so.cache",
            "/dev/null",
            "/dev/shm",
            "/projects",
        ];
        args.extend(present.iter().map(|p| p.to_string()));
        let result = start.call(
            &mut server,
            "run_python",
            json!({"file_name": "look.py", "args": args}),
            json!({"file_name": "look.py"}),
        );
        if !layers(&result).iter().any(|l| l == "mount-ns") {
            eprintln!("SKIP: this kernel gives runs no file view");
            return;
        }
        let out = stdout(&result);
        for path in &hidden {
            assert!(
                out.contains(&format!("ENOENT {path}\n")),
                "{path} exists for the run: {result}"
            );
        }
        for path in present {
            assert!(out.contains(&format!("FOUND {path}\n")), "{path}: {result}");
        }
        // Its own UTS namespace, with a name that is not the machine's.
        assert!(out.contains("HOSTNAME pyrun\n"), "{result}");
        // PATH names only folders of that world: none is missing, none is the home folder's.
        let entries: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("PATH-ENTRY "))
            .collect();
        assert!(!entries.is_empty(), "{result}");
        for entry in entries {
            assert!(entry.ends_with(" True"), "{entry}: {result}");
            let folder = entry.split(' ').nth(1).unwrap_or_default();
            assert!(
                !folder.starts_with(&home) || folder.starts_with(&prefix),
                "{entry}: {result}"
            );
        }
        server.close();
    }
}

const MULTIPROCESSING: &str = r#"
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

def square(x):
    return x * x

if __name__ == "__main__":
    with mp.Pool(2) as pool:
        print("POOL", sum(pool.map(square, range(10))))
    q = mp.Queue()
    lock = mp.Lock()
    with lock:
        q.put("queued")
    print("QUEUE", q.get(timeout=10))
    with ProcessPoolExecutor(max_workers=2) as ex:
        print("EXECUTOR", sum(ex.map(square, range(5))))
"#;

#[test]
fn multiprocessing_pools_queues_locks_and_executors_work_in_a_run() {
    let (dir, _) = util::project(&[("mp.py", MULTIPROCESSING)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "mp.py"}));
    assert_eq!(
        stdout(&result),
        "POOL 285\nQUEUE queued\nEXECUTOR 30\n",
        "{result}"
    );
    server.close();
}

//! One hostile payload in every kind of process the server starts for a caller — a run, a
//! background run, inline code, a session — through the real binary over stdio: each kind is
//! built by the same sandbox profile, so each must refuse the same attacks, started cold
//! (`--warm off`) and handed to a warm interpreter (`util::warm`; sessions start cold). (An install's
//! processes get the payload from a planted `.pth`: `install_packages::code_planted_…`.)
#![cfg(target_os = "linux")]

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::util::warm::{self, Start};
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

/// `main(outside, home, port)` tries each attack and prints `RESULT name outcome`; never opens
/// anything outside what the test made.
const PAYLOAD: &str = r#"
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, attack):
    try:
        attack()
        print("RESULT", name, "worked", flush=True)
    except OSError as e:
        print("RESULT", name, errno.errorcode.get(e.errno, e.errno), flush=True)

def shm_attach(key):
    if libc.shmget(int(key), 0, 0) < 0:
        raise OSError(ctypes.get_errno(), "shmget")

def inotify_hog():
    held = []
    while len(held) < 10000:
        fd = libc.inotify_init1(0)
        if fd < 0:
            break
        held.append(fd)
    for fd in held:
        os.close(fd)
    print("INOTIFY", len(held), flush=True)
    if len(held) >= 64:
        return
    raise OSError(errno.EMFILE, "capped")

def main(outside, home, port, key):
    attempt("chmod", lambda: os.chmod(outside, 0o666))
    attempt("utime", lambda: os.utime(outside, (0, 0)))
    attempt("stat-outside", lambda: os.stat(outside))
    attempt("stat-home", lambda: os.listdir(home))
    attempt("connect", lambda: socket.create_connection(("127.0.0.1", int(port)), timeout=3).close())
    attempt("shm-attach", lambda: shm_attach(key))
    attempt("inotify-hog", inotify_hog)
"#;

/// Makes a SysV shared-memory segment under `key` (the test's own), or removes it.
const SEGMENT: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
key, remove = int(sys.argv[1]), sys.argv[2] == "remove"
shmid = libc.shmget(key, 0 if remove else 4096, 0 if remove else 0o1600)
if remove and shmid >= 0:
    libc.shmctl(shmid, 0, None)
elif not remove and shmid < 0:
    sys.exit("shmget failed")
"#;

fn segment(key: &str, action: &str) {
    let status = std::process::Command::new(pyrun_mcp_tests::python())
        .args(["-c", SEGMENT, key, action])
        .status()
        .unwrap();
    assert!(status.success(), "{action} the test's segment");
}

fn results(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .filter_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

fn assert_refused(kind: &str, out: &str) {
    let results = results(out);
    let names: Vec<&str> = results.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "chmod",
            "utime",
            "stat-outside",
            "stat-home",
            "connect",
            "shm-attach",
            "inotify-hog"
        ],
        "{kind}: the payload did not run whole: {out}"
    );
    for (name, outcome) in &results {
        assert_ne!(outcome, "worked", "{kind}: {name} worked: {out}");
    }
}

#[test]
fn every_kind_of_process_refuses_the_same_hostile_payload() {
    let (base, projects) = TempProjects::named("p")
        .file("app/payload.py", PAYLOAD)
        .outside_dir("outside")
        .into_parts();
    let outside = base.path().join("outside/owned.txt");
    std::fs::write(&outside, "mine").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mtime = std::fs::metadata(&outside).unwrap().modified().unwrap();
    let canary = TcpListener::bind("127.0.0.1:0").unwrap();
    canary.set_nonblocking(true).unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    // A key no one else uses: this test's pid in a range of its own.
    let key = (0x5059_1000_u32 | (std::process::id() & 0xfff)).to_string();
    segment(&key, "make");
    let args = [
        outside.display().to_string(),
        home,
        canary.local_addr().unwrap().port().to_string(),
        key.clone(),
    ];
    let call = format!(
        "import payload; payload.main({:?}, {:?}, {:?}, {:?})",
        args[0], args[1], args[2], args[3]
    );
    std::fs::write(projects.join("app/attack.py"), format!("{call}\n")).unwrap();
    for start in Start::BOTH {
        let mut server = start.server(&projects, &["--allow-inline-code"]);
        let warmup = json!({"file_name": warm::warmup_beside(&projects, "app/attack.py")});

        // A run.
        let run = start.call(
            &mut server,
            "run_python",
            json!({"file_name": "app/attack.py"}),
            warmup.clone(),
        );
        assert_refused(
            &format!("run_python, {start:?}"),
            run["structuredContent"]["stdout"].as_str().unwrap_or(""),
        );

        // A background run, followed to its end.
        if start == Start::Warm {
            warm::warm_up(&mut server, warmup.clone());
        }
        let started = server.call("start_python", json!({"file_name": "app/attack.py"}));
        let run_id = started["structuredContent"]["run_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{started}"))
            .to_owned();
        let deadline = Instant::now() + Duration::from_secs(60);
        let state = loop {
            let state = server.call("get_run", json!({"run_id": run_id, "wait_seconds": 10}));
            let status = state["structuredContent"]["status"].as_str().unwrap_or("");
            if !matches!(status, "running" | "queued") || Instant::now() > deadline {
                break state;
            }
        };
        start.check(&state["structuredContent"], &state);
        assert_refused(
            &format!("start_python, {start:?}"),
            state["structuredContent"]["stdout"].as_str().unwrap_or(""),
        );

        // Inline code, importing from its project.
        let inline = start.call(
            &mut server,
            "run_python_code",
            json!({"code": call, "project": "app"}),
            json!({"code": "pass", "project": "app"}),
        );
        assert_refused(
            &format!("run_python_code, {start:?}"),
            inline["structuredContent"]["stdout"].as_str().unwrap_or(""),
        );

        // A session.
        let session = server.call("session_start", json!({"project": "app"}));
        let id = session["structuredContent"]["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{session}"))
            .to_owned();
        let exec: Value = server.call("session_exec", json!({"session_id": id, "code": call}));
        assert_refused(
            &format!("session_exec, {start:?}"),
            exec["structuredContent"]["stdout"].as_str().unwrap_or(""),
        );
        server.close();
    }

    let after = std::fs::metadata(&outside).unwrap();
    assert_eq!(after.permissions().mode() & 0o7777, 0o600);
    assert_eq!(after.modified().unwrap(), mtime);
    assert!(canary.accept().is_err(), "the canary port was reached");
    segment(&key, "remove");
}

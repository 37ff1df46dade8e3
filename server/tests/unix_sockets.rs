//! UNIX sockets in a run, through the real binary: multiprocessing's `fork`, `spawn` and
//! `forkserver` start methods and a `Manager()` work (they need `socket(AF_UNIX)`), and a run
//! still reaches no socket it did not make: not the host's (path sockets in the host's `/tmp`
//! and the server's state folder, an abstract name), and not another run's going at the same
//! time (its abstract name, its path socket); and the server holds no named socket to reach.
//! Cold (`--warm off`) and warm, on a root server and an unprivileged one. Every socket aimed at
//! is the test's own, and the test checks on its side that nothing connected.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util;
use crate::util::warm::Start;
use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

/// The layers that give a run `AF_UNIX` (`pyrun_sandbox::unix_sockets_given`): a machine
/// without them would make these tests prove nothing.
const NEEDED: &[&str] = &["seccomp", "mount-ns", "landlock-scopes"];

/// Every start method set explicitly, each with a pool, then a `Manager()`'s dict filled from a
/// pool's workers: one JSON line of what each gave.
const MULTIPROCESSING: &str = r#"
import json, multiprocessing as mp

def square(x):
    return x * x

def put(item):
    shared, key = item
    shared[key] = key * key

if __name__ == "__main__":
    got = {}
    for method in ["fork", "spawn", "forkserver"]:
        mp.set_start_method(method, force=True)
        with mp.Pool(2) as pool:
            got[method] = pool.map(square, range(5))
    with mp.Manager() as manager:
        shared = manager.dict()
        with mp.Pool(2) as pool:
            pool.map(put, [(shared, k) for k in range(5)])
        got["manager"] = sorted(shared.items())
    print(json.dumps(got))
"#;

/// Connects to each target named in the JSON object of `argv[1]` (a path, or `@name` for an
/// abstract one) and says how each ended; a socket of its own, as the control that connecting
/// works at all.
const REACH: &str = r#"
import socket
targets = json.loads(sys.argv[1])
def connect(address):
    def go():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(address)
        s.close()
    return go
for name, address in targets.items():
    if address.startswith("@"):
        address = "\0" + address[1:]
    attempt(name, connect(address))
own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
own.bind("\0pyrun-test-own-" + str(os.getpid()))
own.listen()
attempt("own abstract", connect(own.getsockname()))
mine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
mine.bind("/tmp/mine.sock")
mine.listen()
attempt("own path in /tmp", connect("/tmp/mine.sock"))
attempt("bind in the project", lambda: socket.socket(socket.AF_UNIX).bind(
    os.path.join(os.getcwd(), "planted.sock")))
"#;

/// The first of two runs at once: listens on an abstract name and a path socket in its `/tmp`,
/// tries one in the project, writes where it listens to `ready.json`, then counts connections
/// until `done` appears (60 s at most).
const LISTENER: &str = r#"
import json, os, socket, time
name = "pyrun-test-peer-" + str(os.getpid())
abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
abstract.bind("\0" + name)
abstract.listen()
path = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
path.bind("/tmp/peer.sock")
path.listen()
try:
    socket.socket(socket.AF_UNIX).bind(os.path.join(os.getcwd(), "peer.sock"))
    in_project = "DONE"
except OSError as e:
    in_project = str(e.errno)
for s in (abstract, path):
    s.setblocking(False)
with open("ready.tmp", "w") as f:
    json.dump({"abstract": "@" + name, "tmp": "/tmp/peer.sock",
               "project": os.path.join(os.getcwd(), "peer.sock")}, f)
os.rename("ready.tmp", "ready.json")
accepted = 0
deadline = time.monotonic() + 60
while not os.path.exists("done") and time.monotonic() < deadline:
    for s in (abstract, path):
        try:
            s.accept()
            accepted += 1
        except BlockingIOError:
            pass
    time.sleep(0.02)
print(json.dumps({"accepted": accepted, "bind in project": in_project}))
"#;

/// The second: waits for the first's `ready.json`, tries what it names, writes `done`.
const PEER: &str = r#"
import json, time
while not os.path.exists("ready.json"):
    time.sleep(0.02)
with open("ready.json") as f:
    peer = json.load(f)
sys.argv[1:] = [json.dumps({"peer " + k: v for k, v in peer.items()})]
"#;
const PEER_END: &str = "open('done', 'w').close()\n";

/// Fails the test unless the run had every layer in [`NEEDED`].
fn require_layers(result: &Value) {
    let layers = &result["structuredContent"]["sandbox"];
    for layer in NEEDED {
        assert!(
            layers
                .as_array()
                .is_some_and(|l| l.iter().any(|x| x == layer)),
            "layer {layer} is not active; this test would prove nothing: {result}"
        );
    }
}

/// The attempts the script made: its last stdout line, a JSON object of name → "DONE" or errno.
fn attempts(result: &Value) -> BTreeMap<String, String> {
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no attempts in {result}: {e}"))
}

/// When the tests run as root, a uid no account uses for a second, unprivileged server.
fn other_user() -> Option<u32> {
    rustix::process::geteuid().is_root().then_some(61_235)
}

/// A server on a projects folder holding `files`, started as `start` says, as `uid` when given
/// (the folder and the state folder made that user's), with `state` as its state folder.
fn server(
    start: Start,
    files: &[(&str, &str)],
    uid: Option<u32>,
    state: &Path,
    extra: &[&str],
) -> (TempProjects, StdioServer) {
    let mut files = files.to_vec();
    files.push((util::warm::WARMUP_FILE, "pass\n"));
    let (dir, _) = util::project(&files);
    let mut flags = vec!["--state-dir", state.to_str().expect("utf-8 temp path")];
    flags.extend_from_slice(extra);
    let server = match uid {
        None => start.server(dir.path(), &flags),
        Some(uid) => {
            for path in [dir.path(), state] {
                let chown = Command::new("chown")
                    .args(["-R", &format!("{uid}:{uid}")])
                    .arg(path)
                    .status()
                    .expect("chown runs");
                assert!(chown.success());
            }
            let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
                .into_iter()
                .find(|p| Path::new(p).exists())
                .expect("a system python3 for the unprivileged server");
            flags.extend(["--python", python]);
            start.server_as(dir.path(), &flags, Some(uid))
        }
    };
    (dir, server)
}

/// The servers to try: root's (the test's own user) and an unprivileged one's.
fn users() -> Vec<Option<u32>> {
    std::iter::once(None)
        .chain(other_user().map(Some))
        .collect()
}

/// A listening socket of the test's own, writable by anyone (so that only the sandbox, not
/// the file's mode, keeps a run away), that must see no connection.
struct Bait(UnixListener, String);

impl Bait {
    fn path(path: &Path) -> Self {
        let listener = UnixListener::bind(path).expect("bind the test's socket");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        Self(listener, path.display().to_string())
    }

    fn abstract_name(name: &str) -> Self {
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixListener::bind_addr(&address).expect("bind the test's abstract socket");
        listener.set_nonblocking(true).unwrap();
        Self(listener, format!("@{name}"))
    }

    fn assert_untouched(&self) {
        match self.0.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!(
                "something connected to the test's socket {}: {other:?}",
                self.1
            ),
        }
    }
}

#[test]
fn fork_spawn_forkserver_and_a_manager_work_in_a_run() {
    for start in Start::BOTH {
        for uid in users() {
            let state = tempfile::tempdir().unwrap();
            let (dir, mut server) =
                server(start, &[("mp.py", MULTIPROCESSING)], uid, state.path(), &[]);
            let result = start.run(&mut server, dir.path(), "mp.py", &[]);
            let said = &result["structuredContent"];
            assert_eq!(said["exit_code"], 0, "{start:?} {uid:?}: {result}");
            let got: Value = serde_json::from_str(
                said["stdout"]
                    .as_str()
                    .unwrap_or("")
                    .lines()
                    .last()
                    .unwrap_or(""),
            )
            .unwrap_or_else(|e| panic!("{start:?} {uid:?}: no result line: {e}: {result}"));
            for method in ["fork", "spawn", "forkserver"] {
                assert_eq!(got[method], json!([0, 1, 4, 9, 16]), "{method}: {result}");
            }
            assert_eq!(
                got["manager"],
                json!([[0, 0], [1, 1], [2, 4], [3, 9], [4, 16]]),
                "{result}"
            );
        }
    }
}

#[test]
fn a_run_reaches_no_host_socket_path_or_abstract() {
    for start in Start::BOTH {
        for uid in users() {
            // With the network the run shares the host's network namespace, where the test's
            // abstract name lives: then only Landlock's scope stands between them.
            for network in [&[][..], &["--allow-network"][..]] {
                let state = tempfile::tempdir().unwrap();
                let host_tmp = tempfile::tempdir().unwrap();
                std::fs::set_permissions(host_tmp.path(), std::fs::Permissions::from_mode(0o777))
                    .unwrap();
                let (dir, mut server) = server(
                    start,
                    &[("reach.py", &script(REACH))],
                    uid,
                    state.path(),
                    network,
                );
                let nonce = format!("pyrun-test-host-{}-{}", std::process::id(), rand_suffix());
                let baits = [
                    ("host /tmp", Bait::path(&host_tmp.path().join("host.sock"))),
                    ("state folder", Bait::path(&state.path().join("state.sock"))),
                    ("host abstract", Bait::abstract_name(&nonce)),
                ];
                let mut targets: BTreeMap<&str, &str> = baits
                    .iter()
                    .map(|(name, b)| (*name, b.1.as_str()))
                    .collect();
                // A root server's runs (`run-uid`): a socket in the projects folder of another
                // owner than the folder's is refused, the idmapped view maps only the owner.
                // (One of the owner's is reachable: docs/security.md, "UNIX sockets".)
                let other_owner = uid.is_none().then(|| {
                    let path = dir.path().join("other-owner.sock");
                    let bait = Bait::path(&path);
                    std::os::unix::fs::chown(&path, Some(12_345), Some(12_345)).unwrap();
                    bait
                });
                if other_owner.is_some() {
                    targets.insert("projects, another owner", "/projects/other-owner.sock");
                }
                let targets = serde_json::to_string(&targets).unwrap();
                let result = start.run(&mut server, dir.path(), "reach.py", &[&targets]);
                require_layers(&result);
                let tried = attempts(&result);
                let case = format!("{start:?} {uid:?} {network:?}");
                for (name, bait) in &baits {
                    let got = tried.get(*name).map(String::as_str);
                    assert!(
                        matches!(got, Some("ENOENT" | "ECONNREFUSED" | "EPERM" | "EACCES")),
                        "{case}: {name} ended with {got:?}: {result}"
                    );
                    bait.assert_untouched();
                }
                if let Some(bait) = &other_owner {
                    let layers = result["structuredContent"]["sandbox"].to_string();
                    assert!(layers.contains("run-uid"), "{case}: {result}");
                    let got = &tried["projects, another owner"];
                    assert_eq!(got, "EACCES", "{case}: {result}");
                    bait.assert_untouched();
                }
                assert_eq!(tried["own abstract"], "DONE", "{case}: {result}");
                assert_eq!(tried["own path in /tmp"], "DONE", "{case}: {result}");
                assert_eq!(tried["bind in the project"], "EACCES", "{case}: {result}");
                assert!(!dir.path().join("planted.sock").exists(), "{case}");
                // The server's own: none has a name (a path or an abstract one) to connect to.
                assert_eq!(
                    named_unix_sockets(server.pid()),
                    Vec::<String>::new(),
                    "{case}"
                );
            }
        }
    }
}

#[test]
fn a_run_reaches_no_socket_of_another_run_going_at_the_same_time() {
    for start in Start::BOTH {
        for uid in users() {
            let state = tempfile::tempdir().unwrap();
            let peer = format!("{}{PEER}{REACH}{PEER_END}report()\n", util::ATTEMPT);
            let files = [("listener.py", LISTENER), ("peer.py", peer.as_str())];
            let (dir, mut server) = server(start, &files, uid, state.path(), &[]);
            let started = server.call("start_python", json!({"file_name": "listener.py"}));
            let run_id = started["structuredContent"]["run_id"]
                .as_str()
                .unwrap_or_else(|| panic!("no run id: {started}"))
                .to_owned();
            let result = start.run(&mut server, dir.path(), "peer.py", &[]);
            let case = format!("{start:?} {uid:?}");
            require_layers(&result);
            let tried = attempts(&result);
            assert_eq!(tried["peer abstract"], "EPERM", "{case}: {result}");
            assert_eq!(tried["peer tmp"], "ENOENT", "{case}: {result}");
            assert_eq!(tried["peer project"], "ENOENT", "{case}: {result}");
            assert_eq!(tried["own abstract"], "DONE", "{case}: {result}");
            let listener = ended(&mut server, &run_id);
            let said: Value = serde_json::from_str(
                listener["structuredContent"]["stdout"]
                    .as_str()
                    .unwrap_or("")
                    .lines()
                    .last()
                    .unwrap_or(""),
            )
            .unwrap_or_else(|e| panic!("{case}: the listener said nothing: {e}: {listener}"));
            assert_eq!(said["accepted"], 0, "{case}: {listener}");
            assert_eq!(said["bind in project"], "13", "{case}: {listener}"); // EACCES
        }
    }
}

/// The background run `run_id` once it has ended.
fn ended(server: &mut StdioServer, run_id: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        let state = server.call("get_run", json!({"run_id": run_id, "wait_seconds": 10}));
        if util::run_status(&state["structuredContent"]).has_ended() {
            return state;
        }
        assert!(Instant::now() < until, "run {run_id} never ended: {state}");
    }
}

/// The names (paths, `@abstract`) of the UNIX sockets process `pid` holds, from the host's
/// `/proc/net/unix` (the server lives in the host's network namespace).
fn named_unix_sockets(pid: u32) -> Vec<String> {
    let held: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the server's descriptors")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/unix").expect("/proc/net/unix");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = fields.get(7)?;
            held.iter()
                .any(|inode| Some(&inode.as_str()) == fields.get(6))
                .then(|| (*name).to_owned())
        })
        .collect()
}

fn script(body: &str) -> String {
    format!("{}\n{body}\nreport()\n", util::ATTEMPT)
}

/// A few bytes that differ between runs of the suite (abstract names are host-wide).
fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

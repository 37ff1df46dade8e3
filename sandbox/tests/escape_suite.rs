//! Sandbox escapes tried for real: Python scripts attack from inside [`Sandbox::spawn`], the one
//! way the server starts runs.
//!
//! Each test runs a script the way the runner does (own process group, scrubbed env, HOME/TMPDIR =
//! scratch, group killed at the end) and asserts the attack failed and ordinary work still works.
//! A test skips, printing why, only when the kernel lacks every layer that would stop the attack.
#![cfg(target_os = "linux")]

use std::ffi::OsStr;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pyrun_sandbox::{ResourceLimits, Sandbox, SandboxMode, SandboxPolicy, SandboxSlot};

mod support;
use support::{python, python_read_paths};

struct Fixture {
    _root: tempfile::TempDir,
    project: PathBuf,
    scratch: PathBuf,
    /// A directory no policy allows, holding `secret.txt`.
    outside: PathBuf,
    python: PathBuf,
    /// The scratch dir's lasting rules, reused by every run of the fixture as the runner reuses
    /// a slot; dropped before the sandbox.
    slot: SandboxSlot,
    sandbox: Sandbox,
}

struct Outcome {
    stdout: String,
    stderr: String,
    pid: i32,
}

impl Outcome {
    fn has(&self, line_start: &str) -> bool {
        self.stdout.lines().any(|l| l.starts_with(line_start))
    }

    fn value(&self, key: &str) -> Option<String> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} ")).map(str::to_string))
    }
}

const SECRET: &str = "top-secret-4711";

impl Fixture {
    fn new() -> Self {
        Self::with(ResourceLimits::default(), false, python())
    }

    fn with(limits: ResourceLimits, allow_network: bool, python: &Path) -> Self {
        Self::connecting(limits, allow_network, python, None)
    }

    /// With `ports`, the package installs' network rule: TCP connect to those ports only.
    fn connecting(
        limits: ResourceLimits,
        allow_network: bool,
        python: &Path,
        ports: Option<Vec<u16>>,
    ) -> Self {
        Self::in_dir(
            tempfile::tempdir().unwrap(),
            limits,
            allow_network,
            python,
            ports,
        )
    }

    /// The fixture's folders made in `root`.
    fn in_dir(
        root: tempfile::TempDir,
        limits: ResourceLimits,
        allow_network: bool,
        python: &Path,
        ports: Option<Vec<u16>>,
    ) -> Self {
        let project = root.path().join("projects");
        let scratch = root.path().join("scratch");
        let outside = root.path().join("outside");
        for dir in [&project, &scratch, &outside] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        let project = project.canonicalize().unwrap();
        let mut read_paths = python_read_paths(python).unwrap();
        read_paths.push(project.clone());
        let sandbox = Sandbox::new(SandboxPolicy {
            mode: SandboxMode::Standard,
            read_paths,
            write_paths: vec![project.clone()],
            allow_network,
            limits,
            projects: None,
            read_only_projects: false,
            write_scope: pyrun_sandbox::WriteScope::Project,
            pycache: None,
            support: None,
            tcp_connect_ports: ports,
        })
        .unwrap();
        let scratch = scratch.canonicalize().unwrap();
        Self {
            _root: root,
            project,
            slot: sandbox.slot(&scratch).unwrap(),
            scratch,
            outside: outside.canonicalize().unwrap(),
            python: python.to_path_buf(),
            sandbox,
        }
    }

    /// True when the layer is active; otherwise prints why the calling test is skipped.
    fn has_layer(&self, layer: &str, test: &str) -> bool {
        let ok = self.sandbox.layers().contains(&layer);
        if !ok {
            eprintln!("SKIP {test}: this kernel lacks the {layer} layer");
        }
        ok
    }

    /// Runs `script` as `main.py` in the project, kills its group after `timeout` or at exit.
    fn run(&self, script: &str, args: &[String], timeout: Duration) -> Outcome {
        self.run_watching(script, args, timeout, |_| {})
    }

    /// [`Fixture::run`], calling `watch` with the run's host pid (its pid 1) once it started.
    fn run_watching(
        &self,
        script: &str,
        args: &[String],
        timeout: Duration,
        watch: impl FnOnce(i32),
    ) -> Outcome {
        let path = self.project.join("main.py");
        std::fs::write(&path, script).unwrap();
        let arguments: Vec<&OsStr> = std::iter::once(path.as_os_str())
            .chain(args.iter().map(OsStr::new))
            .collect();
        let spec = pyrun_sandbox::spawn::Spec {
            program: &self.python,
            argv0: None,
            args: arguments,
            env: vec![
                (OsStr::new("HOME"), self.scratch.as_os_str()),
                (OsStr::new("TMPDIR"), self.scratch.as_os_str()),
                (OsStr::new("PATH"), OsStr::new("/usr/bin:/bin")),
            ],
            cwd: &self.project,
            stdin_piped: false,
        };
        let mut child = self
            .sandbox
            .spawn(&self.slot, &spec, &self.project)
            .expect("spawn the confined script");
        let pid = child.id().expect("a live child has a pid") as i32;
        watch(pid);
        let stdout = drain(child.stdout.take().unwrap());
        let stderr = drain(child.stderr.take().unwrap());
        let deadline = Instant::now() + timeout;
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(pid);
        let _ = child.wait();
        let collect = |rx: mpsc::Receiver<String>| {
            rx.recv_timeout(Duration::from_secs(10))
                .expect("output pipes close once the group is dead")
        };
        Outcome {
            stdout: collect(stdout),
            stderr: collect(stderr),
            pid,
        }
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

fn kill_group(pgid: i32) {
    // The runner does the same: SIGKILL to the whole process group.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// Live (not zombie) processes whose process group is `pgid`, from /proc.
fn live_members(pgid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the ")" of the command name: state ppid pgrp ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && !matches!(fields[0], "Z" | "X") {
            pids.push(pid);
        }
    }
    pids
}

fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// Prints `RESULT <path> ok|<errno name>` for reading each argument.
const TRY_READ: &str = r#"
import errno, os, sys
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read()
        print("RESULT", path, "ok")
    except OSError as e:
        print("RESULT", path, errno.errorcode.get(e.errno, e.errno))
"#;

fn result_of(out: &Outcome, path: &Path) -> String {
    out.value(&format!("RESULT {}", path.display()))
        .unwrap_or_else(|| panic!("no result for {}: {}", path.display(), out.stderr))
}

#[test]
fn secrets_outside_the_allowed_trees_cannot_be_read() {
    let fx = Fixture::new();
    if !fx.has_layer(
        "landlock",
        "secrets_outside_the_allowed_trees_cannot_be_read",
    ) {
        return;
    }
    std::fs::write(fx.project.join("data.csv"), "a,b\n1,2\n").unwrap();
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    let mut targets = vec![
        PathBuf::from("/etc/passwd"),
        fx.outside.join("secret.txt"),
        home.clone(),
        PathBuf::from(format!("/proc/{}/environ", std::process::id())),
    ];
    if home.join(".bashrc").exists() {
        targets.push(home.join(".bashrc"));
    }
    // The attack is real: the test process itself can read all of them.
    for t in &targets {
        assert!(
            std::fs::metadata(t).is_ok(),
            "{} should exist unconfined",
            t.display()
        );
    }
    let allowed = fx.project.join("data.csv");
    let args: Vec<String> = targets
        .iter()
        .chain([&allowed])
        .map(|p| p.display().to_string())
        .collect();
    let out = fx.run(TRY_READ, &args, Duration::from_secs(20));
    assert_eq!(result_of(&out, &allowed), "ok", "{}", out.stderr);
    for t in &targets {
        // Refused by Landlock, or not in the run's world at all.
        let refused = result_of(&out, t);
        assert!(
            ["ENOENT", "EACCES"].contains(&refused.as_str()),
            "reading {}: {refused}",
            t.display()
        );
    }
    assert!(!out.stdout.contains(SECRET));
}

#[test]
fn writes_outside_the_project_and_scratch_fail() {
    let fx = Fixture::new();
    if !fx.has_layer("landlock", "writes_outside_the_project_and_scratch_fail") {
        return;
    }
    let script = r#"
import errno, sys
for path in sys.argv[1:]:
    try:
        with open(path, "w") as f:
            f.write("pwned")
        print("RESULT", path, "ok")
    except OSError as e:
        print("RESULT", path, errno.errorcode.get(e.errno, e.errno))
"#;
    let escape_tmp = std::env::temp_dir().join(format!("pyrun-escape-{}", std::process::id()));
    let denied = [
        fx.outside.join("new.txt"),
        fx.outside.join("secret.txt"),
        fx.project.parent().unwrap().join("escape.txt"),
        escape_tmp.clone(),
    ];
    let allowed = [fx.project.join("result.txt"), fx.scratch.join("tmp.txt")];
    let args: Vec<String> = denied
        .iter()
        .chain(&allowed)
        .map(|p| p.display().to_string())
        .collect();
    let out = fx.run(script, &args, Duration::from_secs(20));
    for p in &allowed {
        assert_eq!(result_of(&out, p), "ok", "{}", out.stderr);
    }
    for p in &denied {
        let refused = result_of(&out, p);
        assert!(
            ["ENOENT", "EACCES", "EROFS"].contains(&refused.as_str()),
            "writing {}: {refused}",
            p.display()
        );
    }
    assert!(!escape_tmp.exists());
    assert!(!fx.outside.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(fx.outside.join("secret.txt")).unwrap(),
        SECRET
    );
}

#[test]
fn tcp_and_udp_to_a_local_listener_fail() {
    let fx = Fixture::new();
    let layers = fx.sandbox.layers();
    if !["seccomp", "user-netns", "landlock"]
        .iter()
        .any(|l| layers.contains(l))
    {
        eprintln!("SKIP tcp_and_udp_to_a_local_listener_fail: no network layer on this kernel");
        return;
    }
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let script = r#"
import socket, sys
tcp_port, udp_port = int(sys.argv[1]), int(sys.argv[2])
try:
    s = socket.create_connection(("127.0.0.1", tcp_port), timeout=3)
    s.sendall(b"leak")
    print("TCP connected")
except OSError as e:
    print("TCP failed", e)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"leak", ("127.0.0.1", udp_port))
    print("UDP sent")
except OSError as e:
    print("UDP failed", e)
"#;
    let args = vec![
        tcp.local_addr().unwrap().port().to_string(),
        udp.local_addr().unwrap().port().to_string(),
    ];
    let out = fx.run(script, &args, Duration::from_secs(20));
    assert!(out.has("TCP failed"), "{}\n{}", out.stdout, out.stderr);
    assert!(out.has("UDP failed"), "{}\n{}", out.stdout, out.stderr);
    assert!(tcp.accept().is_err(), "the listener got a connection");
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(udp.recv(&mut buf).is_err(), "the UDP socket got a datagram");
}

#[test]
fn every_run_is_outside_the_servers_namespaces_with_ipc_uts_and_cgroup_of_its_own() {
    let fx = Fixture::new();
    if !fx.has_layer(
        "user-netns",
        "every_run_is_outside_the_servers_namespaces_with_ipc_uts_and_cgroup_of_its_own",
    ) {
        return;
    }
    let ns = |pid: &str, kind: &str| {
        std::fs::read_link(format!("/proc/{pid}/ns/{kind}"))
            .map(|l| l.display().to_string())
            .unwrap_or_default()
    };
    // The run's own `/proc` holds no `self` (its view shows two files of it): its namespaces
    // are read from outside, on its pid 1, which entered them before starting the script.
    let script = r#"
import os, time
print("uid", os.getuid(), flush=True)
time.sleep(1)
"#;
    // Twice: the second run enters the user and network namespaces the first left (made once),
    // but gets IPC, UTS and cgroup namespaces of its own.
    let mut ipc = Vec::new();
    // Held open, the first run's IPC namespace outlives it: a freed namespace's number may be
    // given to the next one.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut seen = Vec::new();
        let out = fx.run_watching(script, &[], Duration::from_secs(20), |pid| {
            for kind in ["net", "user", "ipc", "uts", "cgroup"] {
                seen.push((kind, ns(&pid.to_string(), kind)));
            }
            held.extend(std::fs::File::open(format!("/proc/{pid}/ns/ipc")));
        });
        ipc.push(
            seen.iter()
                .find(|(k, _)| *k == "ipc")
                .map(|(_, v)| v.clone()),
        );
        for (kind, theirs) in seen {
            assert!(theirs.starts_with(&format!("{kind}:[")), "{}", out.stderr);
            assert_ne!(theirs, ns("self", kind), "run shares our {kind} ns");
        }
        // Unmapped in its user namespace: no identity (and so no capabilities) of the server's.
        assert_eq!(out.value("uid").as_deref(), Some("65534"), "{}", out.stderr);
    }
    assert_ne!(ipc[0], ipc[1], "two runs shared an IPC namespace");
}

#[test]
fn allow_network_opens_tcp_but_not_unix_sockets() {
    let fx = Fixture::with(ResourceLimits::default(), true, python());
    if !fx.has_layer("seccomp", "allow_network_opens_tcp_but_not_unix_sockets") {
        return;
    }
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let script = r#"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
print("TCP connected")
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    print("UNIX opened")
except OSError as e:
    print("UNIX failed", e)
"#;
    let args = vec![tcp.local_addr().unwrap().port().to_string()];
    let out = fx.run(script, &args, Duration::from_secs(20));
    assert!(out.has("TCP connected"), "{}\n{}", out.stdout, out.stderr);
    assert!(out.has("UNIX failed"), "{}\n{}", out.stdout, out.stderr);
}

/// The package installs' profile: the network namespace is the host's, but TCP reaches only the
/// index's port; any other port (a canary listener of the test's own, standing for a cloud
/// metadata service or a local daemon) is refused, and so is listening.
#[test]
fn the_install_profile_connects_only_to_the_allowed_port_and_never_binds() {
    let index = TcpListener::bind("127.0.0.1:0").unwrap();
    let canary = TcpListener::bind("127.0.0.1:0").unwrap();
    canary.set_nonblocking(true).unwrap();
    let index_port = index.local_addr().unwrap().port();
    if pyrun_sandbox::landlock_abi() < 4 {
        // The server refuses installs on such a kernel; `Sandbox::new` says so.
        let refused = Sandbox::new(SandboxPolicy {
            allow_network: true,
            tcp_connect_ports: Some(vec![index_port]),
            ..SandboxPolicy::bare(SandboxMode::Standard)
        });
        assert!(
            refused.is_err(),
            "port rules claimed without Landlock ABI 4"
        );
        eprintln!("SKIP the_install_profile...: Landlock ABI < 4 (installs are refused)");
        return;
    }
    let fx = Fixture::connecting(
        ResourceLimits::default(),
        true,
        python(),
        Some(vec![index_port]),
    );
    assert!(fx.sandbox.layers().contains(&"landlock-tcp-ports"));
    let script = r#"
import socket, sys
for name, port in (("index", int(sys.argv[1])), ("canary", int(sys.argv[2]))):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        print(name, "connected")
    except OSError as e:
        print(name, "refused", e.errno)
# Sockets Landlock's TCP rules do not see (MPTCP falls back to plain TCP; SCTP) are not opened.
for name, proto in (("mptcp", 262), ("sctp", socket.IPPROTO_SCTP)):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
        s.settimeout(5)
        s.connect(("127.0.0.1", int(sys.argv[2])))
        print(name, "connected")
    except OSError as e:
        print(name, "refused", e.errno)
# The resolver's files are readable: a name resolves.
try:
    print("resolved", socket.getaddrinfo("localhost", int(sys.argv[1]))[0][4][0])
except OSError as e:
    print("resolve failed", e)
try:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    print("bind ok")
except OSError as e:
    print("bind refused", e.errno)
"#;
    let canary_port = canary.local_addr().unwrap().port();
    let args = vec![index_port.to_string(), canary_port.to_string()];
    let out = fx.run(script, &args, Duration::from_secs(20));
    assert!(out.has("index connected"), "{}\n{}", out.stdout, out.stderr);
    assert!(out.has("canary refused"), "{}\n{}", out.stdout, out.stderr);
    assert!(out.has("mptcp refused"), "{}\n{}", out.stdout, out.stderr);
    assert!(out.has("sctp refused"), "{}\n{}", out.stdout, out.stderr);
    assert!(out.has("bind refused"), "{}\n{}", out.stdout, out.stderr);
    assert!(out.has("resolved"), "{}\n{}", out.stdout, out.stderr);
    // The canary never saw a connection.
    assert!(canary.accept().is_err(), "the canary port was reached");
}

#[test]
fn a_fork_bomb_is_contained_and_cleaned_up() {
    let limits = ResourceLimits {
        processes: 32,
        ..ResourceLimits::default()
    };
    let fx = Fixture::with(limits, false, python());
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    if root && !fx.has_layer("cgroup-pids", "a_fork_bomb_is_contained_and_cleaned_up") {
        return;
    }
    let script = r#"
import os, time
n = 0
try:
    while n < 10000:
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        n += 1
    print("FORKED_WITHOUT_LIMIT", n, flush=True)
except OSError as e:
    print("FORK_REFUSED", n, e.errno, flush=True)
time.sleep(120)
"#;
    let out = fx.run(script, &[], Duration::from_secs(4));
    let refused = out.value("FORK_REFUSED").unwrap_or_else(|| {
        panic!(
            "the fork bomb was not stopped: {}\n{}",
            out.stdout, out.stderr
        )
    });
    let forked: u32 = refused.split(' ').next().unwrap().parse().unwrap();
    assert!(forked < 32, "forked {forked} processes under a limit of 32");
    assert!(
        eventually(|| live_members(out.pid).is_empty()),
        "processes of the bomb survived the group kill: {:?}",
        live_members(out.pid)
    );
}

#[test]
fn allocating_4_gib_fails_under_a_512_mib_limit() {
    let limits = ResourceLimits {
        memory_bytes: 512 << 20,
        ..ResourceLimits::default()
    };
    let fx = Fixture::with(limits, false, python());
    let script = r#"
try:
    block = bytearray(4 << 30)
    block[::4096] = b"x" * len(block[::4096])
    print("ALLOCATED", len(block))
except MemoryError:
    print("MEMORY_ERROR")
"#;
    let out = fx.run(script, &[], Duration::from_secs(30));
    assert!(!out.has("ALLOCATED"), "4 GiB allocated: {}", out.stdout);
    assert!(out.has("MEMORY_ERROR"), "{}\n{}", out.stdout, out.stderr);
}

#[test]
fn daemons_and_new_sessions_die_with_the_run() {
    let fx = Fixture::new();
    if !fx.has_layer("seccomp", "daemons_and_new_sessions_die_with_the_run") {
        return;
    }
    // Runs have a pid namespace of their own, so the pids a script sees mean nothing here: each
    // process that tries to escape appends to a heartbeat file in the scratch folder instead.
    let script = r#"
import os, subprocess, sys, time
BEAT = "while True:\n    open(%r, 'a').write('.')\n    time.sleep(0.05)"
home = os.environ["HOME"]
try:
    p = subprocess.Popen([sys.executable, "-c", "import time\n" + BEAT % (home + "/session")],
                         start_new_session=True)
    print("NEW_SESSION_STARTED", flush=True)
except OSError as e:
    print("NEW_SESSION_REFUSED", e.errno, flush=True)
pid = os.fork()
if pid == 0:
    try:
        os.setsid()
        print("SETSID_OK", flush=True)
    except OSError as e:
        print("SETSID_REFUSED", e.errno, flush=True)
    try:
        os.setpgid(0, 0)
        print("SETPGID_OK", flush=True)
    except OSError as e:
        print("SETPGID_REFUSED", e.errno, flush=True)
    if os.fork() == 0:
        exec(BEAT % (home + "/daemon"))
    os._exit(0)
os.waitpid(pid, 0)
while not os.path.exists(home + "/daemon"):
    time.sleep(0.01)
print("DAEMON", flush=True)
time.sleep(120)
"#;
    let out = fx.run(script, &[], Duration::from_secs(4));
    assert!(
        out.has("DAEMON"),
        "no daemon: {}\n{}",
        out.stdout,
        out.stderr
    );
    let beats = ["daemon", "session"].map(|name| fx.scratch.join(name));
    let sizes = || {
        beats
            .each_ref()
            .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
    };
    let after_kill = sizes();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        sizes(),
        after_kill,
        "a process outlived the group kill (heartbeats of the daemon, the new session)"
    );
    assert!(out.has("NEW_SESSION_REFUSED"), "{}", out.stdout);
    assert!(out.has("SETSID_REFUSED"), "{}", out.stdout);
    assert!(out.has("SETPGID_REFUSED"), "{}", out.stdout);
}

#[test]
fn dangerous_syscalls_and_signals_to_the_server_are_refused() {
    let fx = Fixture::new();
    if !fx.has_layer(
        "seccomp",
        "dangerous_syscalls_and_signals_to_the_server_are_refused",
    ) {
        return;
    }
    let script = r#"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
server = int(sys.argv[1])
for spec in sys.argv[2:]:
    name, nr, a0 = spec.split("=")
    rc = libc.syscall(ctypes.c_long(int(nr)), ctypes.c_long(int(a0)), ctypes.c_long(server),
                      ctypes.c_long(0), ctypes.c_long(0))
    err = ctypes.get_errno()
    print("SYSCALL", name, "ok" if rc >= 0 else errno.errorcode.get(err, err), flush=True)
try:
    os.kill(server, 0)
    print("SIGNAL ok")
except OSError as e:
    print("SIGNAL", errno.errorcode.get(e.errno, e.errno))
"#;
    let calls: &[(&str, i64, i64)] = &[
        ("ptrace", libc::SYS_ptrace, libc::PTRACE_SEIZE as i64),
        ("unshare", libc::SYS_unshare, libc::CLONE_NEWUSER as i64),
        ("setns", libc::SYS_setns, 0),
        ("mount", libc::SYS_mount, 0),
        ("bpf", libc::SYS_bpf, 0),
        ("keyctl", libc::SYS_keyctl, 0),
        ("io_uring_setup", libc::SYS_io_uring_setup, 1),
        ("init_module", libc::SYS_init_module, 0),
        (
            "clone_newuser",
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as i64,
        ),
    ];
    let mut args = vec![std::process::id().to_string()];
    args.extend(calls.iter().map(|(n, nr, a0)| format!("{n}={nr}={a0}")));
    let out = fx.run(script, &args, Duration::from_secs(20));
    for (name, _, _) in calls {
        assert_eq!(
            out.value(&format!("SYSCALL {name}")).as_deref(),
            Some("EPERM"),
            "{name}: {}\n{}",
            out.stdout,
            out.stderr
        );
    }
    // Landlock refuses the signal (EPERM); in the run's own pid namespace the server's pid does
    // not even exist (ESRCH).
    if fx.has_layer("landlock", "signals to the server") || fx.has_layer("pid-ns", "signals") {
        let signal = out.value("SIGNAL");
        assert!(
            matches!(signal.as_deref(), Some("EPERM" | "ESRCH")),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn a_symlink_swapped_in_after_validation_still_cannot_read_outside() {
    let fx = Fixture::new();
    if !fx.has_layer(
        "landlock",
        "a_symlink_swapped_in_after_validation_still_cannot_read_outside",
    ) {
        return;
    }
    let data = fx.project.join("data.txt");
    std::fs::write(&data, "harmless").unwrap();
    // The server validated `data.txt` as a file inside the project; then it is swapped.
    std::fs::remove_file(&data).unwrap();
    std::os::unix::fs::symlink(fx.outside.join("secret.txt"), &data).unwrap();
    let passwd_link = fx.project.join("passwd");
    std::os::unix::fs::symlink("/etc/passwd", &passwd_link).unwrap();
    let args = vec![
        data.display().to_string(),
        passwd_link.display().to_string(),
    ];
    let out = fx.run(TRY_READ, &args, Duration::from_secs(20));
    for link in [&data, &passwd_link] {
        let refused = result_of(&out, link);
        assert!(
            ["ENOENT", "EACCES"].contains(&refused.as_str()),
            "{refused}"
        );
    }
    assert!(!out.stdout.contains(SECRET));
}

#[test]
fn ordinary_work_still_succeeds_in_a_venv() {
    let root = tempfile::tempdir().unwrap();
    let venv = root.path().join("venv");
    let made = Command::new(python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success(), "python -m venv failed");
    let venv_python = venv.join("bin/python");
    let site = Command::new(&venv_python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .unwrap();
    let site = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
    std::fs::create_dir_all(site.join("pyrun_probe_pkg")).unwrap();
    std::fs::write(site.join("pyrun_probe_pkg/__init__.py"), "ANSWER = 42\n").unwrap();

    let fx = Fixture::with(ResourceLimits::default(), false, &venv_python);
    std::fs::write(fx.project.join("data.csv"), "x,y\n1,2\n3,4\n").unwrap();
    let script = r#"
import os, struct, subprocess, sys, tempfile, threading, zlib
import pyrun_probe_pkg
print("IMPORT", pyrun_probe_pkg.ANSWER, flush=True)

results = []
def work(i):
    results.append(sum(range(i * 1000)))
threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
for t in threads: t.start()
for t in threads: t.join()
print("THREADS", len(results), flush=True)

child = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
print("SUBPROCESS", child.stdout.strip(), child.stderr.strip()[-200:], flush=True)

def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))
with open(os.path.join(os.path.dirname(__file__), "plot.png"), "wb") as f:
    f.write(png)
print("PNG written", flush=True)

with open("data.csv") as f:
    print("SIBLING", f.read().splitlines()[1], flush=True)
with tempfile.NamedTemporaryFile(dir=os.environ["TMPDIR"]) as f:
    f.write(b"scratch")
print("TMPDIR ok", flush=True)
"#;
    let out = fx.run(script, &[], Duration::from_secs(60));
    let context = format!("stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert_eq!(out.value("IMPORT").as_deref(), Some("42"), "{context}");
    assert_eq!(out.value("THREADS").as_deref(), Some("16"), "{context}");
    assert_eq!(
        out.value("SUBPROCESS")
            .map(|s| s.trim().to_string())
            .as_deref(),
        Some("42"),
        "{context}"
    );
    assert!(out.has("PNG written"), "{context}");
    assert!(std::fs::read(fx.project.join("plot.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));
    assert_eq!(out.value("SIBLING").as_deref(), Some("1,2"), "{context}");
    assert!(out.has("TMPDIR ok"), "{context}");
}

#[test]
fn off_mode_confines_nothing_and_says_so() {
    let sandbox = Sandbox::new(SandboxPolicy::bare(SandboxMode::Off)).unwrap();
    assert_eq!(sandbox.layers(), vec!["process-group"]);
    let slot = sandbox.slot(Path::new("/tmp")).unwrap();
    let spec = pyrun_sandbox::spawn::Spec {
        program: python(),
        argv0: None,
        args: ["-c", "print(open('/etc/passwd').read()[:5])"]
            .map(OsStr::new)
            .to_vec(),
        env: Vec::new(),
        cwd: Path::new("/"),
        stdin_piped: false,
    };
    let out = sandbox
        .spawn(&slot, &spec, Path::new("/"))
        .unwrap()
        .wait_with_output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        out.stdout, b"root:\n",
        "the script read /etc/passwd unconfined"
    );
}

#[test]
fn strict_mode_starts_only_when_every_layer_is_there() {
    let policy = SandboxPolicy::bare;
    let standard = Sandbox::new(policy(SandboxMode::Standard)).unwrap();
    let layers = standard.layers();
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    let complete = ["landlock", "seccomp", "user-netns", "rlimits"]
        .iter()
        .all(|l| layers.contains(l))
        && (!root || layers.contains(&"cgroup-pids"));
    let strict = Sandbox::new(policy(SandboxMode::Strict));
    match strict {
        Ok(s) => {
            assert!(complete, "strict started with only {layers:?}");
            assert_eq!(s.layers(), layers);
        }
        Err(e) => {
            assert!(!complete, "strict refused although {layers:?}: {e}");
            assert!(e.to_string().contains("--sandbox standard"));
        }
    }
}

/// The host side of the IPC test, run unconfined: makes a SysV shared-memory segment and message
/// queue and a POSIX message queue, each holding the secret in `argv[1]`, prints their ids and
/// waits for stdin to close; then says whether each still holds the secret, removes them, and
/// removes any segment left under the key `argv[2]` (a run's leftover).
const IPC_HOST: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 64)]
secret, key = sys.argv[1].encode(), int(sys.argv[2])
shm = libc.shmget(0, 4096, 0o1000 | 0o600)
addr = libc.shmat(shm, None, 0)
ctypes.memmove(addr, secret, len(secret))
msq = libc.msgget(0, 0o1000 | 0o600)
libc.msgsnd(msq, ctypes.byref(Msg(1, secret)), len(secret), 0)
name = ("/pyrun-canary-%d" % os.getpid()).encode()
mq = libc.mq_open(name, os.O_CREAT | os.O_RDWR | os.O_NONBLOCK, 0o600, None)
libc.mq_send(mq, secret, len(secret), 0)
print(shm, msq, name.decode(), flush=True)
sys.stdin.read()
print("shm", "intact" if ctypes.string_at(addr, len(secret)) == secret else "changed")
m = Msg()
print("msg", "intact" if libc.msgrcv(msq, ctypes.byref(m), 64, 0, 0o4000) == len(secret) else "taken")
buf = ctypes.create_string_buffer(8192)
print("mq", "intact" if libc.mq_receive(mq, buf, 8192, None) == len(secret) else "taken")
libc.shmdt(ctypes.c_void_p(addr))
libc.shmctl(shm, 0, None)
libc.msgctl(msq, 0, None)
libc.mq_unlink(name)
left = libc.shmget(key, 0, 0)
print("leftover", "yes" if left >= 0 else "no", flush=True)
if left >= 0:
    libc.shmctl(left, 0, None)
"#;

/// The run's side: attach, read and overwrite the host's segment, take its messages, open its
/// POSIX queue, and leave a 1 MiB segment of its own under the key `argv[5]`.
const IPC_RUN: &str = r#"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 64)]
shm, msq, name, secret, key = sys.argv[1:6]
shm, msq, key, secret = int(shm), int(msq), int(key), secret.encode()
def err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
res = {}
addr = libc.shmat(shm, None, 0)
if addr is None or addr == 2**64 - 1:
    res["shm_attach"] = err()
else:
    res["shm_attach"] = "read" if ctypes.string_at(addr, len(secret)) == secret else "other"
    ctypes.memmove(addr, b"X" * len(secret), len(secret))
m = Msg()
res["msg_receive"] = "took" if libc.msgrcv(msq, ctypes.byref(m), 64, 0, 0o4000) >= 0 else err()
buf = ctypes.create_string_buffer(8192)
mq = libc.mq_open(name.encode(), os.O_RDWR | os.O_NONBLOCK)
if mq < 0:
    res["mq_open"] = err()
else:
    res["mq_open"] = "took" if libc.mq_receive(mq, buf, 8192, None) >= 0 else "opened"
res["own_segment"] = "made" if libc.shmget(key, 1 << 20, 0o1000 | 0o600) >= 0 else err()
for name, outcome in res.items():
    print("IPC", name, outcome, flush=True)
"#;

#[test]
fn a_run_reaches_no_host_ipc_object_and_its_own_die_with_it() {
    let fx = Fixture::new();
    if !fx.has_layer(
        "user-netns",
        "a_run_reaches_no_host_ipc_object_and_its_own_die_with_it",
    ) {
        return;
    }
    // A key no one else uses: this test's pid in a range of its own.
    let key = (0x5059_0000 | (std::process::id() & 0xffff)).to_string();
    let mut host = Command::new(python())
        .args(["-c", IPC_HOST, SECRET, &key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the host side starts");
    let mut lines = std::io::BufReader::new(host.stdout.take().unwrap());
    let mut ids = String::new();
    std::io::BufRead::read_line(&mut lines, &mut ids).unwrap();
    let mut args: Vec<String> = ids.split_whitespace().map(str::to_owned).collect();
    assert_eq!(args.len(), 3, "host side: {ids}");
    args.extend([SECRET.to_owned(), key]);
    let out = fx.run(IPC_RUN, &args, Duration::from_secs(20));
    drop(host.stdin.take());
    let mut report = String::new();
    lines.read_to_string(&mut report).unwrap();
    let _ = host.wait();
    let tried = |name: &str| {
        out.value(&format!("IPC {name}"))
            .unwrap_or_else(|| panic!("{name} not tried: {}\n{}", out.stdout, out.stderr))
    };
    // In its own IPC namespace the host's ids and names do not exist.
    assert_eq!(tried("shm_attach"), "EINVAL", "{}", out.stdout);
    assert_eq!(tried("msg_receive"), "EINVAL", "{}", out.stdout);
    assert_eq!(tried("mq_open"), "ENOENT", "{}", out.stdout);
    // Its own IPC still works, and goes with it.
    assert_eq!(tried("own_segment"), "made", "{}", out.stdout);
    for line in ["shm intact", "msg intact", "mq intact", "leftover no"] {
        assert!(report.lines().any(|l| l == line), "{line}: {report}");
    }
}

/// The run's side: opens inotify instances until refused, tries to raise its cap, says so in a
/// `holding` file, and keeps them until the test writes `release`.
const INOTIFY_HOG: &str = r#"
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
held = []
while len(held) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    held.append(fd)
print("INSTANCES", len(held), errno.errorcode.get(ctypes.get_errno(), "?"), flush=True)
try:
    with open("/proc/sys/user/max_inotify_instances", "w") as f:
        f.write("100000")
    print("RAISE ok", flush=True)
except OSError as e:
    print("RAISE", errno.errorcode.get(e.errno, e.errno), flush=True)
home = os.environ["HOME"]
open(os.path.join(home, "holding"), "w").close()
while not os.path.exists(os.path.join(home, "release")):
    time.sleep(0.02)
"#;

#[test]
fn a_run_cannot_use_up_the_hosts_inotify_instances() {
    let fx = Fixture::new();
    if !fx.has_layer(
        "user-netns",
        "a_run_cannot_use_up_the_hosts_inotify_instances",
    ) {
        return;
    }
    let host_limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(128);
    let (holding, release) = (fx.scratch.join("holding"), fx.scratch.join("release"));
    let (out, host) = std::thread::scope(|s| {
        let run = s.spawn(|| fx.run(INOTIFY_HOG, &[], Duration::from_secs(30)));
        let held = eventually(|| holding.exists());
        // While the run holds all it could get: can a host process of the same user still
        // make one? Asked from an unconfined interpreter, as any host program would.
        let host = Command::new(python())
            .args([
                "-c",
                "import ctypes; l = ctypes.CDLL(None, use_errno=True); \
                 print('ok' if l.inotify_init1(0) >= 0 else ctypes.get_errno())",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        std::fs::write(&release, "").unwrap();
        assert!(held, "the run never held its instances");
        (run.join().unwrap(), host.unwrap_or_default())
    });
    assert_eq!(
        host, "ok",
        "the host's inotify_init1 failed while a run held its instances"
    );
    let got: Vec<String> = out
        .value("INSTANCES")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let count: usize = got.first().and_then(|n| n.parse().ok()).unwrap_or(0);
    // Enough for watchdog-style libraries, at most a quarter of the host's budget.
    assert!(
        (4..=host_limit / 4).contains(&count),
        "{count} instances of {host_limit}: {}\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(
        got.get(1).map(String::as_str),
        Some("EMFILE"),
        "{}",
        out.stdout
    );
    assert_ne!(out.value("RAISE").as_deref(), Some("ok"), "{}", out.stdout);
}

#[test]
fn syscalls_off_the_allowlist_get_enosys_and_python_falls_back_to_listed_ones() {
    let fx = Fixture::new();
    if !fx.has_layer(
        "seccomp",
        "syscalls_off_the_allowlist_get_enosys_and_python_falls_back_to_listed_ones",
    ) {
        return;
    }
    let script = r#"
import ctypes, errno, os, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for spec in sys.argv[1:]:
    name, nr = spec.split("=")
    rc = libc.syscall(ctypes.c_long(int(nr)), ctypes.c_long(0), ctypes.c_long(0),
                      ctypes.c_long(0), ctypes.c_long(0))
    err = ctypes.get_errno()
    print("SYSCALL", name, "ok" if rc >= 0 else errno.errorcode.get(err, err), flush=True)
# What glibc and CPython fall back from (clone3 to clone, statx and faccessat2 to older calls).
t = threading.Thread(target=lambda: None)
t.start()
t.join()
out = subprocess.run([sys.executable, "-c", "print('child')"], capture_output=True, text=True)
print("SUBPROCESS", out.stdout.strip(), flush=True)
print("STAT", os.stat(".").st_mode != 0, os.access(".", os.R_OK), flush=True)
"#;
    let calls: &[(&str, i64)] = &[
        ("clone3", libc::SYS_clone3),
        ("openat2", libc::SYS_openat2),
        ("setuid", libc::SYS_setuid),
        ("settimeofday", libc::SYS_settimeofday),
        ("sethostname", libc::SYS_sethostname),
        ("beyond_the_table", 1000),
    ];
    let args: Vec<String> = calls.iter().map(|(n, nr)| format!("{n}={nr}")).collect();
    let out = fx.run(script, &args, Duration::from_secs(20));
    for (name, _) in calls {
        assert_eq!(
            out.value(&format!("SYSCALL {name}")).as_deref(),
            Some("ENOSYS"),
            "{name}: {}\n{}",
            out.stdout,
            out.stderr
        );
    }
    assert_eq!(
        out.value("SUBPROCESS").as_deref(),
        Some("child"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.value("STAT").as_deref(),
        Some("True True"),
        "{}",
        out.stderr
    );
}

/// The kernel uid of `pid` (real, effective, saved), from its `/proc` status.
fn kernel_uids(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|ids| ids.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[test]
fn a_root_servers_run_has_a_kernel_uid_of_its_own_and_its_files_belong_to_the_folders_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let fx = Fixture::new();
    // overlayfs, NFS and 9p cannot idmap: there a root server's runs keep uid 0.
    let no_idmap: [u64; 3] = [0x794c_7630, 0x6969, 0x0102_1997];
    let fs = rustix::fs::statfs(&fx.project).map(|fs| fs.f_type as u64);
    if !rustix::process::geteuid().is_root() || fs.is_ok_and(|t| no_idmap.contains(&t)) {
        eprintln!("SKIP: not root, or the temp folder cannot be idmapped");
        return;
    }
    assert!(
        fx.sandbox.layers().contains(&"run-uid"),
        "a root server on an idmappable filesystem without run-uid: {:?}",
        fx.sandbox.layers()
    );
    // A file of another user in the run's own project: the idmap shows only the folder's
    // owner as the run, so this one is "others" to it.
    let other = fx.project.join("other.txt");
    std::fs::write(&other, SECRET).unwrap();
    std::os::unix::fs::chown(&other, Some(12345), Some(12345)).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mine = fx.project.join("mine.txt");
    std::fs::write(&mine, "the folder owner's").unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = r#"
import os, time
print("uid", os.getuid(), flush=True)
with open("made.txt", "w") as f:
    f.write("made")
print("mine", open("mine.txt").read(), flush=True)
try:
    print("other", open("other.txt").read(), flush=True)
except OSError as e:
    print("other refused", e.errno, flush=True)
time.sleep(1)
"#;
    let mut seen = Vec::new();
    let out = fx.run_watching(script, &[], Duration::from_secs(20), |pid| {
        // Pid 1, then the interpreter (its child) once it shows.
        seen.push(kernel_uids(pid));
        let children = format!("/proc/{pid}/task/{pid}/children");
        let child = (0..100).find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            std::fs::read_to_string(&children)
                .ok()?
                .split_whitespace()
                .next()?
                .parse::<i32>()
                .ok()
        });
        seen.push(child.map(kernel_uids).unwrap_or_default());
    });
    assert_eq!(out.value("uid").as_deref(), Some("65534"), "{}", out.stderr);
    assert_eq!(seen.len(), 2);
    for ids in &seen {
        let uids: Vec<&str> = ids.split_whitespace().collect();
        assert_eq!(uids.len(), 3, "no uids read: {seen:?}");
        assert!(
            uids.iter().all(|u| *u != "0" && *u == uids[0]),
            "a run's process has kernel uid 0 or mixed ids: {seen:?}"
        );
    }
    let made = std::fs::metadata(fx.project.join("made.txt")).expect("the run made its file");
    let owner = std::fs::metadata(&fx.project).unwrap();
    assert_eq!((made.uid(), made.gid()), (owner.uid(), owner.gid()));
    assert_eq!(out.value("mine").as_deref(), Some("the folder owner's"));
    assert_eq!(
        out.value("other").as_deref(),
        Some("refused 13"),
        "{}",
        out.stdout
    );
}

/// An overlayfs mount the test made in a temp folder of its own, detached on drop.
struct Overlay {
    merged: PathBuf,
    _base: tempfile::TempDir,
}

impl Overlay {
    fn mount() -> Option<Self> {
        let base = tempfile::tempdir().ok()?;
        for dir in ["lower", "upper", "work", "merged"] {
            std::fs::create_dir(base.path().join(dir)).ok()?;
        }
        let at = |dir: &str| base.path().join(dir).display().to_string();
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            at("lower"),
            at("upper"),
            at("work")
        );
        let merged = base.path().join("merged");
        let mounted = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &options])
            .arg(&merged)
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            return None;
        }
        Some(Self {
            merged,
            _base: base,
        })
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.merged).status();
    }
}

#[test]
fn on_overlayfs_a_root_servers_runs_keep_todays_uid_and_still_work() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: not root");
        return;
    }
    let Some(overlay) = Overlay::mount() else {
        eprintln!("SKIP: cannot mount overlayfs");
        return;
    };
    let root = tempfile::tempdir_in(&overlay.merged).unwrap();
    let fx = Fixture::in_dir(root, ResourceLimits::default(), false, python(), None);
    assert!(
        !fx.sandbox.layers().contains(&"run-uid"),
        "overlayfs cannot idmap: {:?}",
        fx.sandbox.layers()
    );
    let out = fx.run(
        "open('made.txt', 'w').write('x')\nprint('ran', open('made.txt').read())\n",
        &[],
        Duration::from_secs(20),
    );
    assert_eq!(out.value("ran").as_deref(), Some("x"), "{}", out.stderr);
    drop(fx);
}

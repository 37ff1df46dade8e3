//! The escapes a hostile script tried against the sandbox, each tried again for real through the
//! server binary (its own spawn path, policy and slots) and expected to fail safely, in a run
//! started cold (`--warm off`) and in one handed to a warm interpreter (`util::warm`). Every
//! attack aims only at what the test made itself: a canary process, a temp file, a temp folder.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util;
use crate::util::warm::Start;
use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

/// Runs `file` with `args` and returns the result object.
fn run(server: &mut StdioServer, file: &str, args: &[&str]) -> Value {
    server.call("run_python", json!({"file_name": file, "args": args}))
}

fn layers(result: &Value) -> Vec<String> {
    serde_json::from_value(result["structuredContent"]["sandbox"].clone())
        .unwrap_or_else(|e| panic!("no sandbox list in {result}: {e}"))
}

/// Fails the test unless the run reports `wanted`: an attack test must not pass because a
/// layer it relies on is missing on this machine.
fn require_layers(result: &Value, wanted: &[&str]) {
    let reported = layers(result);
    for layer in wanted {
        assert!(
            reported.iter().any(|l| l == layer),
            "layer {layer} is not active ({reported:?}); this test would prove nothing: {result}"
        );
    }
}

/// The attempts the script made and how each ended: "DONE" or the errno's name. The script
/// prints them as one JSON object on its last line.
fn attempts(result: &Value) -> BTreeMap<String, String> {
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no attempts in {result}: {e}"))
}

/// Each named attempt failed, with one of `errnos`.
fn all_refused(attempts: &BTreeMap<String, String>, names: &[&str], errnos: &[&str]) {
    for name in names {
        let got = attempts
            .get(*name)
            .unwrap_or_else(|| panic!("{name} not tried: {attempts:?}"));
        assert!(
            errnos.contains(&got.as_str()),
            "{name} ended with {got}, not one of {errnos:?}: {attempts:?}"
        );
    }
}

fn script(body: &str) -> String {
    format!("{}\n{body}\nreport()\n", util::ATTEMPT)
}

/// When the tests run as root: a uid no account uses, for a second, unprivileged server (and its
/// canary), so each attack is tried with the server as root and as a normal user. `None` when the
/// tests already run unprivileged (then the one server is that).
pub(crate) fn other_user() -> Option<u32> {
    rustix::process::geteuid().is_root().then_some(61_234)
}

/// The servers to try an attack on, starting runs as `start` says: as the test's own user, and
/// as [`other_user`] when there is one (its projects folder made that user's, and the
/// interpreter one that user can reach).
pub(crate) fn servers_for(
    start: Start,
    files: &[(&str, &str)],
) -> Vec<(TempProjects, StdioServer, Option<u32>)> {
    servers_with(start, files, &[])
}

/// [`servers_for`], each server started with `extra` arguments besides.
pub(crate) fn servers_with(
    start: Start,
    files: &[(&str, &str)],
    extra: &[&str],
) -> Vec<(TempProjects, StdioServer, Option<u32>)> {
    let mut files = files.to_vec();
    files.push((util::warm::WARMUP_FILE, "pass\n"));
    let files = &files[..];
    let mut servers = Vec::new();
    let (dir, _) = util::project(files);
    let server = start.server(dir.path(), extra);
    servers.push((dir, server, None));
    if let Some(uid) = other_user() {
        let (dir, _) = util::project(files);
        let chown = Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(dir.path())
            .status()
            .expect("chown runs");
        assert!(chown.success());
        let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("a system python3 for the unprivileged server");
        let mut args = vec!["--python", python];
        args.extend_from_slice(extra);
        let server = start.server_as(dir.path(), &args, Some(uid));
        servers.push((dir, server, Some(uid)));
    }
    servers
}

/// A process of the test's own, to aim at: `sleep 60`, killed when dropped.
struct Canary(Child);

impl Canary {
    /// Started as `uid` when given (the server's user: what a run could reach without a pid
    /// namespace).
    fn start(uid: Option<u32>) -> Self {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new("sleep");
        command.arg("60").stdin(Stdio::null());
        if let Some(uid) = uid {
            command.uid(uid).gid(uid);
        }
        Self(command.spawn().expect("sleep starts"))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The "Max open files" line of `/proc/<pid>/limits`.
fn open_files_limit(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .expect("limits readable")
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line")
        .to_owned()
}

/// Every file under `dir` (not following symlinks) with a set-user-ID or set-group-ID bit.
fn set_id_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.mode() & 0o6000 != 0 {
                found.push(entry.path().display().to_string());
            }
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn no_run_makes_a_set_id_file_or_changes_owners_and_xattrs_even_of_its_own_files() {
    let body = r##"
import shutil
shutil.copyfile("/usr/bin/id", "suid_id")
attempt("chmod_suid", lambda: os.chmod("suid_id", 0o4755))
attempt("chmod_sgid", lambda: os.chmod("suid_id", 0o2755))
fd = os.open("suid_id", os.O_RDONLY)
attempt("fchmod_suid", lambda: os.fchmod(fd, 0o4755))
attempt("open_creat_suid", lambda: os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("mkdir_sgid", lambda: os.mkdir("sgid_dir", 0o2775))
attempt("mknod_suid", lambda: os.mknod("node", 0o4644))
attempt("chown", lambda: os.chown("suid_id", 0, 0))
attempt("lchown", lambda: os.lchown("suid_id", 1, 1))
attempt("setxattr", lambda: os.setxattr("suid_id", "user.pyrun", b"1"))
attempt("file_capability", lambda: os.setxattr("suid_id", "security.capability",
    bytes([1, 0, 0, 2]) + bytes(16)))
attempt("chmod_plain", lambda: os.chmod("suid_id", 0o755))
"##;
    for (start, (dir, mut server, uid)) in Start::BOTH.into_iter().flat_map(|start| {
        servers_for(start, &[("setid.py", &script(body))])
            .into_iter()
            .map(move |s| (start, s))
    }) {
        let result = start.run(&mut server, dir.path(), "setid.py", &[]);
        require_layers(&result, &["seccomp"]);
        let tried = attempts(&result);
        all_refused(
            &tried,
            &[
                "chmod_suid",
                "chmod_sgid",
                "fchmod_suid",
                "open_creat_suid",
                "mkdir_sgid",
                "mknod_suid",
                "chown",
                "lchown",
                "setxattr",
                "file_capability",
            ],
            &["EPERM"],
        );
        // Ordinary modes still work: a script may make its own files executable or private.
        assert_eq!(
            tried["chmod_plain"], "DONE",
            "{start:?}, server uid {uid:?}: {tried:?}"
        );
        assert_eq!(set_id_files(dir.path()), Vec::<String>::new());
        server.close();
    }
}

#[test]
fn no_run_changes_the_mode_times_owner_or_xattrs_of_a_file_outside_the_folder() {
    // Outside the projects folder, on a host path the run's view shows read-only. Landlock does
    // not govern these calls; the view's read-only mounts and seccomp must.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = outside.path().join("victim");
    std::fs::write(&target, "keep me").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = target.metadata().unwrap();
    let body = r##"
target = sys.argv[1]
attempt("chmod", lambda: os.chmod(target, 0o666))
attempt("utime", lambda: os.utime(target, (0, 0)))
attempt("chown", lambda: os.chown(target, 65534, 65534))
attempt("setxattr", lambda: os.setxattr(target, "user.pyrun", b"1"))
attempt("write", lambda: open(target, "w").write("changed"))
attempt("rename", lambda: os.rename(target, target + ".moved"))
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("outside.py", &script(body))]);
        let mut server = start.server(dir.path(), &[]);
        let target_arg = target.to_str().unwrap();
        let result = start.run(&mut server, dir.path(), "outside.py", &[target_arg]);
        require_layers(&result, &["seccomp", "mount-ns"]);
        let tried = attempts(&result);
        all_refused(
            &tried,
            &["chmod", "utime", "chown", "setxattr", "write", "rename"],
            &["EROFS", "EPERM", "EACCES", "ENOENT"],
        );
        let after = target.metadata().unwrap();
        assert_eq!(after.mode(), before.mode());
        assert_eq!(after.mtime(), before.mtime());
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        server.close();
    }
}

#[test]
fn root_only_files_in_readable_system_trees_stay_unreadable() {
    let body = r##"
attempt("list_ssl_private", lambda: os.listdir("/etc/ssl/private"))
attempt("read_shadow", lambda: open("/etc/shadow").read())
attempt("read_certs", lambda: os.listdir("/etc/ssl/certs"))
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("secrets.py", &script(body))]);
        let mut server = start.server(dir.path(), &[]);
        let result = start.run(&mut server, dir.path(), "secrets.py", &[]);
        require_layers(&result, &["landlock"]);
        let tried = attempts(&result);
        all_refused(
            &tried,
            &["list_ssl_private", "read_shadow"],
            &["EACCES", "ENOENT", "EPERM"],
        );
        // What TLS needs stays readable.
        assert_eq!(tried["read_certs"], "DONE", "{start:?}: {tried:?}");
        server.close();
    }
}

#[test]
fn a_run_can_neither_limit_nor_signal_nor_find_any_process_but_its_own() {
    let body = r##"
import resource, signal
for name, pid in (("canary", int(sys.argv[1])), ("server", int(sys.argv[2]))):
    attempt(name + "_prlimit_nofile",
            lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (8, 8)))
    attempt(name + "_prlimit_cpu", lambda: resource.prlimit(pid, resource.RLIMIT_CPU, (1, 1)))
    attempt(name + "_kill_0", lambda: os.kill(pid, 0))
    attempt(name + "_kill_term", lambda: os.kill(pid, signal.SIGTERM))
    attempt(name + "_proc_stat", lambda: os.stat("/proc/%d" % pid))
attempt("proc_self", lambda: os.readlink("/proc/self"))
attempt("proc_cpuinfo", lambda: open("/proc/cpuinfo").read())
# Its own limits stay its own to lower.
attempt("own_prlimit", lambda: resource.prlimit(0, resource.RLIMIT_NOFILE, (64, 64)))
attempt("own_setrlimit", lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
_results["own_pid"] = str(os.getpid())
"##;
    for (start, (dir, mut server, uid)) in Start::BOTH.into_iter().flat_map(|start| {
        servers_for(start, &[("others.py", &script(body))])
            .into_iter()
            .map(move |s| (start, s))
    }) {
        // A process of the server's own user: what `prlimit` and `kill` reach without a pid
        // namespace.
        let canary = Canary::start(uid);
        let canary_limit = open_files_limit(canary.pid());
        let server_limit = open_files_limit(server.pid());
        let (canary_pid, server_pid) = (canary.pid().to_string(), server.pid().to_string());
        let result = start.run(
            &mut server,
            dir.path(),
            "others.py",
            &[&canary_pid, &server_pid],
        );
        require_layers(&result, &["pid-ns", "seccomp"]);
        let tried = attempts(&result);
        let mut refused = Vec::new();
        for who in ["canary", "server"] {
            for what in ["prlimit_nofile", "prlimit_cpu", "kill_0", "kill_term"] {
                refused.push(format!("{who}_{what}"));
            }
        }
        let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
        all_refused(&tried, &refused, &["ESRCH", "EPERM"]);
        // Not even whether a host pid exists: the view's /proc has no pid entries at all.
        all_refused(
            &tried,
            &["canary_proc_stat", "server_proc_stat", "proc_self"],
            &["ENOENT"],
        );
        assert_eq!(
            tried["proc_cpuinfo"], "DONE",
            "{start:?}, server uid {uid:?}: {tried:?}"
        );
        assert_eq!(
            tried["own_prlimit"], "DONE",
            "{start:?}, server uid {uid:?}: {tried:?}"
        );
        assert_eq!(
            tried["own_setrlimit"], "DONE",
            "{start:?}, server uid {uid:?}: {tried:?}"
        );
        // Pid 1 is the run's reaper; the interpreter comes right after it.
        assert_eq!(
            tried["own_pid"], "2",
            "{start:?}, server uid {uid:?}: {tried:?}"
        );
        assert_eq!(open_files_limit(canary.pid()), canary_limit);
        assert_eq!(open_files_limit(server.pid()), server_limit);
        assert!(
            pyrun_mcp_tests::procs::alive(canary.pid()),
            "the canary was killed"
        );
        // The server still serves.
        let again = run(&mut server, "others.py", &[&canary_pid, &server_pid]);
        assert_eq!(again["isError"], false, "{again}");
        server.close();
    }
}

#[test]
fn orphans_are_reaped_and_clone_parent_is_refused_so_no_zombie_fills_the_pids_limit() {
    // Each round leaves an orphan that exits: unreaped, 200 of them would pass the run's
    // pids limit (64) long before the end.
    let body = r##"
import ctypes, time
made = 0
for _ in range(200):
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    os.waitpid(child, 0)
    made += 1
_results["orphans"] = str(made)
libc = ctypes.CDLL(None, use_errno=True)
CLONE_PARENT, SIGCHLD = 0x8000, 17
def clone_parent():
    pid = libc.syscall(56, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    if pid < 0:
        raise OSError(ctypes.get_errno(), "clone")
attempt("clone_parent", clone_parent)
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("zombies.py", &script(body))]);
        let mut server = start.server(dir.path(), &[]);
        let result = start.run(&mut server, dir.path(), "zombies.py", &[]);
        require_layers(&result, &["pid-ns", "seccomp", "cgroup-pids"]);
        let tried = attempts(&result);
        assert_eq!(tried["orphans"], "200", "{start:?}: {tried:?}");
        all_refused(&tried, &["clone_parent"], &["EPERM"]);
        // Nothing of the run is left under the server: no zombie, and besides the spare a warm
        // server starts for the next run, no process.
        // Up to 20 s: the server's own start-up probe (at nice 10) may still be finishing on a
        // loaded machine (seen: 2 in 16 at load 12 with 5 s); a process a run left never ends.
        let left = util::warm::left_besides_spares(server.pid(), Duration::from_secs(20));
        assert!(
            left.is_empty(),
            "{start:?}: left under the server: {left:?}"
        );
        let zombies: Vec<u32> = util::warm::descendants(server.pid())
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
            })
            .collect();
        assert!(
            zombies.is_empty(),
            "{start:?}: zombies under the server: {zombies:?}"
        );
        let again = run(&mut server, "zombies.py", &[]);
        assert_eq!(attempts(&again)["orphans"], "200");
        server.close();
    }
}

#[test]
fn programs_a_script_wrote_do_not_execute() {
    let body = r##"
import shutil, subprocess
def run(path):
    subprocess.run([path], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for where in (".", os.environ.get("TMPDIR", "/tmp")):
    elf = os.path.join(where, "true_copy")
    shutil.copyfile("/bin/true", elf)
    os.chmod(elf, 0o755)
    attempt("elf_" + ("projects" if where == "." else "scratch"), lambda: run(elf))
    sh = os.path.join(where, "hello.sh")
    open(sh, "w").write("#!/bin/sh\necho hi\n")
    os.chmod(sh, 0o755)
    attempt("shebang_" + ("projects" if where == "." else "scratch"), lambda: run(sh))
mem = os.memfd_create("payload")
os.write(mem, open("/bin/true", "rb").read())
def fexecve():
    pid = os.fork()
    if pid == 0:
        try:
            os.execve(mem, ["x"], {})
        except OSError as e:
            os._exit(e.errno)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise OSError(code, "fexecve")
attempt("memfd_fexecve", fexecve)
attempt("memfd_proc_path", lambda: run("/proc/self/fd/%d" % mem))
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("exec.py", &script(body))]);
        let mut server = start.server(dir.path(), &[]);
        let result = start.run(&mut server, dir.path(), "exec.py", &[]);
        require_layers(&result, &["landlock", "seccomp", "mount-ns"]);
        let tried = attempts(&result);
        all_refused(
            &tried,
            &[
                "elf_projects",
                "shebang_projects",
                "elf_scratch",
                "shebang_scratch",
                "memfd_fexecve",
                "memfd_proc_path",
            ],
            &["EACCES", "EPERM", "ENOENT"],
        );
        server.close();
    }
}

#[test]
fn protected_names_in_the_folder_are_read_only_to_runs_and_what_a_run_creates_does_not_stay() {
    let body = r##"
attempt("git_config", lambda: open(".git/config", "a").write("[core]\n\tfsmonitor = evil\n"))
attempt("git_hook", lambda: open(".git/hooks/pre-commit", "w").write("#!/bin/sh\nevil\n"))
attempt("venv_pth", lambda: open(".venv/lib/evil.pth", "w").write("import evil\n"))
attempt("dotenv", lambda: open(".env", "a").write("PYRUN_SANDBOX=off\n"))
attempt("envrc", lambda: open(".envrc", "w").write("evil\n"))
attempt("vscode", lambda: open(".vscode/tasks.json", "w").write("{}"))
attempt("git_remove", lambda: os.rename(".git", "git_moved"))
attempt("ordinary", lambda: open("notes.txt", "w").write("fine\n"))
def make_hg():
    os.makedirs(".hg", exist_ok=True)
    open(".hg/hgrc", "w").write("[hooks]\n")
attempt("hg_first", make_hg)
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[
            ("persist.py", &script(body)),
            (".git/config", "[core]\n"),
            (".git/hooks/README", "hooks\n"),
            (".venv/lib/site.py", "# venv\n"),
            (".env", "PYTHON_TIMEOUT=30\n"),
            (".vscode/settings.json", "{}\n"),
        ]);
        let mut server = start.server(dir.path(), &[]);
        let result = start.run(&mut server, dir.path(), "persist.py", &[]);
        require_layers(&result, &["mount-ns"]);
        let tried = attempts(&result);
        all_refused(
            &tried,
            &[
                "git_config",
                "git_hook",
                "venv_pth",
                "dotenv",
                "vscode",
                "git_remove",
            ],
            &["EROFS", "EACCES", "EPERM", "EBUSY"],
        );
        assert_eq!(tried["ordinary"], "DONE", "{tried:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".env")).unwrap(),
            "PYTHON_TIMEOUT=30\n"
        );
        assert!(!dir.path().join(".git/hooks/pre-commit").exists());
        // `.hg` did not exist when the run started, so the run could make it; it did not stay.
        assert_eq!(tried["hg_first"], "DONE", "{tried:?}");
        assert!(!dir.path().join(".hg").exists());
        let quarantined = result["structuredContent"]["quarantined"].to_string();
        assert!(quarantined.contains(".hg"), "{result}");
        server.close();
    }
}

#[test]
fn a_run_sees_neutral_paths_only() {
    let body = r##"
_results["cwd"] = os.getcwd()
_results["file"] = __file__
_results["home"] = os.environ.get("HOME", "")
_results["tmpdir"] = os.environ.get("TMPDIR", "")
import traceback
try:
    raise RuntimeError("where am I")
except RuntimeError:
    _results["traceback"] = traceback.format_exc()
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("sub/where.py", &script(body))]);
        let mut server = start.server(dir.path(), &[]);
        let result = start.run(&mut server, dir.path(), "sub/where.py", &[]);
        require_layers(&result, &["mount-ns"]);
        let seen = attempts(&result);
        assert_eq!(seen["cwd"], "/projects/sub", "{seen:?}");
        assert_eq!(seen["file"], "/projects/sub/where.py", "{seen:?}");
        assert_eq!(seen["home"], "/tmp", "{seen:?}");
        let host = dir.path().canonicalize().unwrap();
        let host = host.to_str().unwrap();
        let everything = result.to_string();
        assert!(
            !everything.contains(host),
            "the host path {host} reached the client: {everything}"
        );
        server.close();
    }
}

#[test]
fn with_read_only_projects_a_run_reads_the_folder_and_writes_only_its_scratch() {
    let body = r##"
attempt("read_own_source", lambda: open(__file__).read())
attempt("write_new", lambda: open("made.txt", "w").write("x"))
attempt("append_existing", lambda: open("data.txt", "a").write("x"))
attempt("remove", lambda: os.remove("data.txt"))
attempt("mkdir", lambda: os.mkdir("newdir"))
attempt("write_scratch", lambda: open(os.path.join(os.environ["HOME"], "ok.txt"), "w").write("x"))
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("ro.py", &script(body)), ("data.txt", "keep\n")]);
        let mut server = start.server(dir.path(), &["--read-only-projects"]);
        let result = start.run(&mut server, dir.path(), "ro.py", &[]);
        require_layers(&result, &["landlock", "mount-ns"]);
        let tried = attempts(&result);
        assert_eq!(tried["read_own_source"], "DONE", "{tried:?}");
        assert_eq!(tried["write_scratch"], "DONE", "{tried:?}");
        all_refused(
            &tried,
            &["write_new", "append_existing", "remove", "mkdir"],
            &["EROFS", "EACCES", "EPERM"],
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("data.txt")).unwrap(),
            "keep\n"
        );
        assert!(!dir.path().join("made.txt").exists());
        server.close();
    }
}

//! Attacks on what only warm runs have, each tried for real through the server binary: the
//! driver's report of a run's imports (what the server learns to preload), the spares waiting
//! for other folders, the job pipe that becomes the run's stdin, a spare's view made before the
//! run, processes a run leaves behind, and what a venv's start-up code leaves running while its
//! spare waits. Each must fail safely and leave the server serving.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::time::Duration;

use crate::util;
use crate::util::warm::{self, Start};
use pyrun_mcp_tests::procs;
use pyrun_mcp_tests::stdio::StdioServer;
use serde_json::{json, Value};

fn run(server: &mut StdioServer, file: &str, extra: Value) -> Value {
    let mut arguments = json!({"file_name": file, "timeout_seconds": 30});
    if let (Some(to), Some(from)) = (arguments.as_object_mut(), extra.as_object()) {
        to.extend(from.clone());
    }
    server.call("run_python", arguments)
}

fn stdout(result: &Value) -> &str {
    result["structuredContent"]["stdout"].as_str().unwrap_or("")
}

fn ended_normally(result: &Value) {
    let sc = &result["structuredContent"];
    assert_eq!(sc["exit_code"], 0, "{result}");
    assert_eq!(sc["timed_out"], false, "{result}");
}

/// Each way a script may forge `$TMPDIR/.pyrun-warm-imports`, the file the driver writes at
/// exit and the server reads back: the names to learn, a link to a file elsewhere, a FIFO (a
/// writer that opens it blocks), 10 MB. The names include a project module that leaves a canary
/// when imported, stdlib modules whose import runs a program (`venv.__main__`, the regression
/// tests' `test.autotest`), and one harmless stdlib module the test checks was learned (without
/// it the test could pass because no report was read at all).
const FORGE: &str = r#"
import os, sys
report = os.path.join(os.environ["TMPDIR"], ".pyrun-warm-imports")
names = "evil_canary\nvenv.__main__\ntest.autotest\nunittest.__main__\ncolorsys\n"
how = sys.argv[1]
if how == "names":
    open(report, "w").write(names)
    os._exit(0)  # no atexit: the driver's own report never replaces this one
elif how == "link":
    os.symlink(os.path.abspath("names.txt"), report)
elif how == "fifo":
    os.mkfifo(report)
elif how == "big":
    with open(report, "w") as f:
        f.write(names)
        f.write("json\n" * (2 * 1024 * 1024))
    os._exit(0)
print("forged", how, flush=True)
"#;

/// What the next warm run finds already imported, then imports the project module itself.
const CHECK: &str = r#"
import os, sys
print("preloaded", "evil_canary" in sys.modules, "colorsys" in sys.modules, flush=True)
print("canary before", os.path.exists("canary_imported"), flush=True)
import evil_canary
print("canary after", os.path.exists("canary_imported"), flush=True)
"#;

#[test]
fn a_forged_import_report_never_makes_a_spare_import_project_code_or_run_a_program() {
    let (dir, _) = util::project(&[
        ("a/forge.py", FORGE),
        ("a/check.py", CHECK),
        ("a/names.txt", "evil_canary\n"),
        (
            "a/evil_canary.py",
            "import os\nopen(os.path.join(os.path.dirname(__file__), 'canary_imported'), 'w').close()\n",
        ),
    ]);
    let canary = dir.path().join("a/canary_imported");
    let mut server = StdioServer::start(dir.path(), &[]);
    for how in ["link", "fifo", "big", "names"] {
        let forged = run(&mut server, "a/forge.py", json!({"args": [how]}));
        // A FIFO at the report's place must not hold the run's end (the driver writes the
        // report last, never waiting for a reader).
        ended_normally(&forged);
        assert!(!canary.exists(), "after {how}: {forged}");
    }
    // The next warm run of the folder: its spare was started with what the forged reports taught.
    let checked = Start::Warm.run(&mut server, dir.path(), "a/check.py", &[]);
    ended_normally(&checked);
    let out = stdout(&checked);
    assert!(out.contains("preloaded False True"), "{checked}");
    assert!(out.contains("canary before False"), "{checked}");
    assert!(out.contains("canary after True"), "{checked}");
    // No spare ran `venv.__main__` (a venv named after the preload list, in the folder).
    let entries: Vec<String> = std::fs::read_dir(dir.path().join("a"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        entries.iter().all(|name| !name.contains(',')),
        "a preload ran a program in the folder: {entries:?}"
    );
    // The server still serves, warm.
    std::fs::remove_file(&canary).unwrap();
    let again = Start::Warm.run(&mut server, dir.path(), "a/check.py", &[]);
    assert!(stdout(&again).contains("canary before False"), "{again}");
    server.close();
}

/// Tries to reach the spare waiting for the other folder: its host pid (argv 1), its scratch on
/// the host (argv 2); lists its own /proc; leaves a marker in its own /tmp.
const REACH: &str = r#"
import os, signal, sys
pid, scratch = int(sys.argv[1]), sys.argv[2]
attempt("kill_0", lambda: os.kill(pid, 0))
attempt("kill", lambda: os.kill(pid, signal.SIGKILL))
attempt("proc_stat", lambda: os.stat("/proc/%d" % pid))
attempt("proc_stdin", lambda: open("/proc/%d/fd/0" % pid, "wb").write(b"\0\0\0\2{}"))
attempt("list_scratch", lambda: os.listdir(scratch))
attempt("write_scratch", lambda: open(os.path.join(scratch, "from_a"), "w").write("x"))
def list_proc():
    _results["pids"] = ",".join(sorted(p for p in os.listdir("/proc") if p.isdigit()))
attempt("list_proc", list_proc)
write(os.path.join(os.environ["TMPDIR"], "from_a"))
"#;

const LOOK: &str = r#"
import os
print("tmp", sorted(os.listdir(os.environ["TMPDIR"])), flush=True)
"#;

/// The host path the spare `pid` has at `/tmp` (its slot's scratch), from its mount table.
fn scratch_of(pid: u32) -> String {
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    mounts
        .lines()
        .map(|line| line.split(' ').collect::<Vec<_>>())
        .find(|fields| fields.len() > 4 && fields[4] == "/tmp")
        .map(|fields| fields[3].to_owned())
        .unwrap_or_else(|| panic!("no /tmp mount in the spare's table:\n{mounts}"))
}

#[test]
fn a_run_in_one_folder_cannot_reach_or_disturb_the_spare_waiting_for_another() {
    let reach = format!("{}\n{REACH}\nreport()\n", util::ATTEMPT);
    let (dir, _) = util::project(&[("a/reach.py", &reach), ("b/look.py", LOOK)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let before = warm::waiting_spares(server.pid());
    warm::warm_up(
        &mut server,
        json!({"file_name": warm::warmup_beside(dir.path(), "b/look.py")}),
    );
    let spare_b = *warm::waiting_spares(server.pid())
        .difference(&before)
        .next()
        .unwrap();
    let scratch = scratch_of(spare_b);
    assert!(Path::new(&scratch).is_dir(), "{scratch}");
    let attack = Start::Warm.run(
        &mut server,
        dir.path(),
        "a/reach.py",
        &[&spare_b.to_string(), &scratch],
    );
    let last = stdout(&attack).lines().last().unwrap_or("");
    let tried: std::collections::BTreeMap<String, String> =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("{attack}: {e}"));
    for name in ["kill_0", "kill"] {
        assert!(
            ["ESRCH", "EPERM"].contains(&tried[name].as_str()),
            "{name}: {tried:?}"
        );
    }
    for name in ["proc_stat", "proc_stdin", "list_scratch", "write_scratch"] {
        assert!(
            ["ENOENT", "EACCES", "EPERM", "EROFS"].contains(&tried[name].as_str()),
            "{name}: {tried:?}"
        );
    }
    // Its /proc shows no pid at all, or those of its own pid namespace only: its pid 1 and itself.
    if tried["list_proc"] == "DONE" {
        assert_eq!(tried["pids"], "1,2", "{tried:?}");
    } else {
        assert!(
            ["EACCES", "ENOENT"].contains(&tried["list_proc"].as_str()),
            "{tried:?}"
        );
    }
    assert!(procs::alive(spare_b), "the other folder's spare was killed");
    assert!(warm::waiting_spares(server.pid()).contains(&spare_b));
    assert!(!Path::new(&scratch).join("from_a").exists());
    // The other folder's run takes that same spare, undisturbed, and sees none of a's files.
    let looked = run(&mut server, "b/look.py", json!({}));
    Start::Warm.check(&looked["structuredContent"], &looked);
    ended_normally(&looked);
    assert!(!stdout(&looked).contains("from_a"), "{looked}");
    assert!(
        !procs::alive(spare_b),
        "the run did not take the waiting spare"
    );
    server.close();
}

const READ_STDIN: &str = r#"
import sys
data = sys.stdin.buffer.read()
print("got", repr(data), flush=True)
"#;

#[test]
fn a_warm_runs_stdin_is_exactly_what_was_given_and_ends_at_once_without_any() {
    let (dir, _) = util::project(&[("s/read.py", READ_STDIN)]);
    let mut server = StdioServer::start(dir.path(), &["--allow-inline-code"]);
    // No stdin: EOF at once, none of the job's bytes.
    let none = Start::Warm.run(&mut server, dir.path(), "s/read.py", &[]);
    ended_normally(&none);
    assert!(stdout(&none).contains("got b''"), "{none}");
    // Given: exactly that text, and nothing of the job frame before it.
    warm::warm_up(
        &mut server,
        json!({"file_name": warm::warmup_beside(dir.path(), "s/read.py")}),
    );
    let given = run(
        &mut server,
        "s/read.py",
        json!({"stdin": "line one\n\u{0}two"}),
    );
    Start::Warm.check(&given["structuredContent"], &given);
    ended_normally(&given);
    assert!(
        stdout(&given).contains(r"got b'line one\n\x00two'"),
        "{given}"
    );
    // The same for inline code.
    let inline = Start::Warm.call(
        &mut server,
        "run_python_code",
        json!({"code": READ_STDIN, "project": "s"}),
        json!({"code": "pass", "project": "s"}),
    );
    assert!(stdout(&inline).contains("got b''"), "{inline}");
    server.close();
}

/// Leaves a grandchild (double fork; `setsid` tried first) running `sleep` with a token, and a
/// plain child that the run does not wait for.
const LEAVE: &str = r#"
import os, sys, time
token = sys.argv[1]
if os.fork() == 0:
    try:
        os.setsid()
        print("setsid worked", flush=True)
    except OSError as e:
        print("setsid refused", e.errno, flush=True)
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", token])
    os._exit(0)
if os.fork() == 0:
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", token])
time.sleep(0.5)
print("left", flush=True)
"#;

#[test]
fn what_a_warm_run_leaves_behind_dies_with_it_and_never_keeps_a_spare_alive() {
    let (dir, _) = util::project(&[("l/leave.py", LEAVE)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let token = procs::unique_token("warm-left");
    let result = Start::Warm.run(&mut server, dir.path(), "l/leave.py", &[&token]);
    ended_normally(&result);
    assert!(stdout(&result).contains("left"), "{result}");
    assert!(
        procs::holds_within(Duration::from_secs(5), || procs::processes_carrying(&token)
            .is_empty()),
        "a process the run left outlived it: {:?}",
        procs::processes_carrying(&token)
    );
    // Under the server: the spare for the next run, and nothing else.
    // Up to 20 s: the server's own start-up probe (at nice 10) may still be finishing on a
    // loaded machine (seen: 2 in 16 at load 12 with 5 s); a process a run left never ends.
    let left = warm::left_besides_spares(server.pid(), Duration::from_secs(20));
    assert!(left.is_empty(), "left under the server: {left:?}");
    // The next run is warm, in a spare none of those processes share.
    let again = Start::Warm.run(&mut server, dir.path(), "l/leave.py", &[&token]);
    ended_normally(&again);
    assert!(
        procs::holds_within(Duration::from_secs(5), || procs::processes_carrying(&token)
            .is_empty()),
        "a process the second run left outlived it"
    );
    server.close();
}

const WRITE_ENV: &str = r#"
try:
    open(".env", "a").write("PYRUN_SANDBOX=off\n")
    print("wrote", flush=True)
except OSError as e:
    print("refused", e.errno, flush=True)
"#;

#[test]
fn a_protected_name_made_after_a_spare_started_is_read_only_to_the_run_it_serves() {
    let (dir, _) = util::project(&[("e/env.py", WRITE_ENV)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    warm::warm_up(
        &mut server,
        json!({"file_name": warm::warmup_beside(dir.path(), "e/env.py")}),
    );
    // The spare waits with a view made before this `.env` existed.
    let dotenv = dir.path().join("e/.env");
    std::fs::write(&dotenv, "PYTHON_TIMEOUT=30\n").unwrap();
    let result = run(&mut server, "e/env.py", json!({}));
    ended_normally(&result);
    assert!(stdout(&result).contains("refused"), "{result}");
    assert_eq!(
        std::fs::read_to_string(&dotenv).unwrap(),
        "PYTHON_TIMEOUT=30\n"
    );
    // A spare started once it existed serves the next run warm, with it read-only too.
    let warm_result = Start::Warm.run(&mut server, dir.path(), "e/env.py", &[]);
    assert!(stdout(&warm_result).contains("refused"), "{warm_result}");
    assert_eq!(
        std::fs::read_to_string(&dotenv).unwrap(),
        "PYTHON_TIMEOUT=30\n"
    );
    server.close();
}

const FORGE_MAIN: &str = r#"
import os
report = os.path.join(os.environ["TMPDIR"], ".pyrun-warm-imports")
open(report, "w").write("sidefx.__main__\nsidefx\n")
os._exit(0)
"#;

const CHECK_MAIN: &str = r#"
import os, sys
print("preloaded", "sidefx" in sys.modules, "sidefx.__main__" in sys.modules, flush=True)
print("main ran", os.path.exists("main_ran"), flush=True)
"#;

#[test]
fn a_forged_report_naming_a_packages_main_module_runs_no_program_before_the_run() {
    // A package of the folder's venv whose `__main__` does something where it runs (as
    // `pytest.__main__` would load the folder's conftest.py): importing it is running it.
    let (dir, _) = util::project(&[("a/forge.py", FORGE_MAIN), ("a/check.py", CHECK_MAIN)]);
    let venv = dir.path().join("a/.venv");
    let status = std::process::Command::new(pyrun_mcp_tests::python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(status.success(), "python -m venv failed");
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|python| python.path().join("site-packages"))
        .find(|site| site.is_dir())
        .expect("the venv's site-packages");
    std::fs::create_dir(site.join("sidefx")).unwrap();
    std::fs::write(site.join("sidefx/__init__.py"), "").unwrap();
    std::fs::write(
        site.join("sidefx/__main__.py"),
        "open('main_ran', 'w').close()\n",
    )
    .unwrap();
    let mut server = StdioServer::start(dir.path(), &[]);
    let forged = run(&mut server, "a/forge.py", json!({}));
    ended_normally(&forged);
    assert_eq!(
        forged["structuredContent"]["python"]["venv"], "a/.venv",
        "{forged}"
    );
    let checked = Start::Warm.run(&mut server, dir.path(), "a/check.py", &[]);
    ended_normally(&checked);
    // The package itself was learned from the report (so the report was read), its
    // `__main__` was not imported, and nothing ran in the folder.
    assert!(
        stdout(&checked).contains("preloaded True False"),
        "{checked}"
    );
    assert!(stdout(&checked).contains("main ran False"), "{checked}");
    assert!(!dir.path().join("a/main_ran").exists());
    server.close();
}

const WRITE_NEW_PROJECT: &str = r#"
try:
    open("c/data.txt", "a").write("evil\n")
    print("wrote", flush=True)
except OSError as e:
    print("refused", e.errno, flush=True)
"#;

#[test]
fn a_project_folder_made_after_a_top_level_spare_started_stays_read_only_to_its_run() {
    // A script directly in the projects folder writes top-level files, never a project's.
    let (dir, _) = util::project(&[("top.py", WRITE_NEW_PROJECT), ("a/keep.txt", "a\n")]);
    let mut server = StdioServer::start(dir.path(), &[]);
    warm::warm_up(
        &mut server,
        json!({"file_name": warm::warmup_beside(dir.path(), "top.py")}),
    );
    // The spare waits with a view made before project `c` existed.
    std::fs::create_dir(dir.path().join("c")).unwrap();
    std::fs::write(dir.path().join("c/data.txt"), "c\n").unwrap();
    let result = run(&mut server, "top.py", json!({}));
    ended_normally(&result);
    assert!(stdout(&result).contains("refused"), "{result}");
    let warm_result = Start::Warm.run(&mut server, dir.path(), "top.py", &[]);
    assert!(stdout(&warm_result).contains("refused"), "{warm_result}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("c/data.txt")).unwrap(),
        "c\n"
    );
    server.close();
}

/// `.pth` lines of the venv's site-packages: Python runs them at every start, so a spare runs
/// them before any call. The first forks a helper that spins; the second starts a thread that
/// spins in bytecode (the GIL is let go: the spare still gets ready). Both for as long as the
/// spare lives.
const SPINNING_PTH: &str = "\
import os; os.fork() == 0 and exec('while 1: pass')
import threading; threading.Thread(target=exec, args=('while 1: pass',), daemon=True).start()
";

/// Another caller's kind of run tries to wake the spare: its pid and its pid 1's (host pids, as
/// a script could guess them), their groups, and every process it can name.
const WAKE: &str = r#"
import errno, json, os, signal, sys
tried = {}
def attempt(name, f):
    try:
        f()
        tried[name] = "DONE"
    except OSError as e:
        tried[name] = errno.errorcode.get(e.errno, str(e.errno))
for name, pid in (("spare", int(sys.argv[1])), ("pid1", int(sys.argv[2]))):
    attempt("kill " + name, lambda: os.kill(pid, signal.SIGCONT))
    attempt("killpg " + name, lambda: os.killpg(pid, signal.SIGCONT))
attempt("kill -1", lambda: os.kill(-1, signal.SIGCONT))
print(json.dumps(tried))
"#;

/// CPU time (user + system, clock ticks) of `pid` and every process below it.
fn cpu_ticks(pid: u32) -> u64 {
    std::iter::once(pid)
        .chain(warm::descendants(pid))
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .map(|stat| {
            // Fields after the parenthesised name: state is the 3rd, utime the 14th, stime the 15th.
            let rest: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let field = |n: usize| {
                rest.get(n - 3)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            field(14) + field(15)
        })
        .sum()
}

#[test]
fn a_spare_whose_venv_starts_a_busy_thread_and_process_gets_no_cpu_while_it_waits() {
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a system python3 (the unprivileged server needs one it can reach)");
    // The test's own user, and an unprivileged server besides when the tests run as root.
    let other = rustix::process::geteuid().is_root().then_some(61_235);
    for uid in std::iter::once(None).chain(other.map(Some)) {
        let (dir, _) = util::project(&[
            ("a/_warmup.py", "pass\n"),
            ("a/check.py", "print('checked', flush=True)\n"),
            ("b/wake.py", WAKE),
        ]);
        let venv = dir.path().join("a/.venv");
        let made = std::process::Command::new(python)
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(made.success(), "python -m venv failed");
        let site = std::fs::read_dir(venv.join("lib"))
            .unwrap()
            .flatten()
            .map(|version| version.path().join("site-packages"))
            .find(|site| site.is_dir())
            .expect("the venv's site-packages");
        std::fs::write(site.join("spin.pth"), SPINNING_PTH).unwrap();
        if let Some(uid) = uid {
            let chown = std::process::Command::new("chown")
                .args(["-R", &format!("{uid}:{uid}")])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(chown.success());
        }
        let mut server = StdioServer::start_as(dir.path(), &["--python", python], uid);
        let warmup = json!({"file_name": "a/_warmup.py"});
        warm::warm_up(&mut server, warmup.clone());
        let spare = warm::waiting_spares(server.pid())
            .into_iter()
            .find(|&pid| warm::of_kind(pid, &warmup))
            .expect("the folder's spare");
        let stat = std::fs::read_to_string(format!("/proc/{spare}/stat")).unwrap();
        let pid1 = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap();
        let began = std::time::Instant::now();
        let before = cpu_ticks(spare);
        let woken = run(
            &mut server,
            "b/wake.py",
            json!({"args": [spare.to_string(), pid1]}),
        );
        ended_normally(&woken);
        let tried: serde_json::Map<String, Value> =
            serde_json::from_str(stdout(&woken).trim()).unwrap();
        for name in ["kill spare", "killpg spare", "kill pid1", "killpg pid1"] {
            assert_ne!(tried[name], "DONE", "{name}: {woken}");
        }
        std::thread::sleep(Duration::from_secs(2).saturating_sub(began.elapsed()));
        let used = cpu_ticks(spare) - before;
        // Two spinners take up to ~400 ticks of 10 ms in 2 s on 2 cores (fewer on a busy
        // machine); a held spare none.
        assert!(
            used <= 5,
            "the waiting spare {spare} (server as {uid:?}) used {used} ticks of CPU in 2 s"
        );
        // The spare still serves its run, warm.
        let checked = run(&mut server, "a/check.py", json!({}));
        ended_normally(&checked);
        assert_eq!(checked["structuredContent"]["warm"], true, "{checked}");
        assert!(stdout(&checked).contains("checked"), "{checked}");
        server.close();
    }
}

//! Warm runs through the real binary over stdio: a run after one of the same folder starts in a
//! spare (`warm: true`); a spare whose venv changed serves nothing; a preload import that never
//! finishes or that prints never costs a call or changes what a run prints; with `--warm off`
//! nothing is warm. The meaning of a warm run against a cold one is `warm_runs`' corpus.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use pyrun_mcp_tests::python;
use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

fn run(server: &mut StdioServer, file: &str) -> Value {
    server.call("run_python", json!({"file_name": file}))
}

fn warm(result: &Value) -> bool {
    result["structuredContent"]["warm"]
        .as_bool()
        .unwrap_or_else(|| panic!("no warm field in {result}"))
}

fn stdout(result: &Value) -> &str {
    result["structuredContent"]["stdout"].as_str().unwrap_or("")
}

/// Runs `file` until a run comes back warm (the first run of a folder starts its spare), within
/// `within`; the warm result.
fn run_until_warm(server: &mut StdioServer, file: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let result = run(server, file);
        assert_eq!(
            result["structuredContent"]["exit_code"], 0,
            "the run failed: {result}"
        );
        if warm(&result) {
            return result;
        }
        assert!(
            Instant::now() < deadline,
            "no run of {file} was warm within {within:?}: {result}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A venv made with the tests' interpreter at `projects/.venv`; its site-packages.
fn venv(projects: &Path) -> PathBuf {
    let dir = projects.join(".venv");
    let made = Command::new(python::python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(made.success(), "python -m venv failed");
    let lib = dir.join("lib");
    let version = std::fs::read_dir(&lib)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("python"))
        .unwrap()
        .file_name();
    let site = lib.join(version).join("site-packages");
    assert!(site.is_dir(), "{}", site.display());
    site
}

#[test]
fn a_second_run_is_warm_and_an_install_in_between_makes_its_spare_stale() {
    let projects = TempProjects::named("p").file("hello.py", "print('hi')\n");
    let site = venv(projects.path());
    let mut server = StdioServer::start(projects.path(), &[]);
    let first = run(&mut server, "hello.py");
    assert!(!warm(&first), "the first run cannot be warm: {first}");
    let warm_run = run_until_warm(&mut server, "hello.py", Duration::from_secs(20));
    assert_eq!(stdout(&warm_run), "hi\n");
    assert_eq!(warm_run["structuredContent"]["python"]["venv"], ".venv");

    // Wait for the next spare, then change the venv's packages as an install would.
    run_until_warm(&mut server, "hello.py", Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(site.join("newly_installed.py"), "VALUE = 42\n").unwrap();
    let after = run(&mut server, "hello.py");
    assert!(
        !warm(&after),
        "a spare started before the venv changed served a run: {after}"
    );
    server.close();
}

#[test]
fn warm_off_starts_every_run_cold() {
    let projects = TempProjects::named("p").file("hello.py", "print('hi')\n");
    let mut server = StdioServer::start(projects.path(), &["--warm", "off"]);
    for _ in 0..4 {
        let result = run(&mut server, "hello.py");
        assert_eq!(stdout(&result), "hi\n");
        assert!(!warm(&result), "{result}");
        std::thread::sleep(Duration::from_millis(300));
    }
    server.close();
}

#[test]
fn a_preload_import_that_never_ends_costs_no_call() {
    let projects = TempProjects::named("p").file("hello.py", "print('hi')\n");
    let site = venv(projects.path());
    std::fs::write(site.join("sleepy.py"), "import time\ntime.sleep(3600)\n").unwrap();
    let mut server = StdioServer::start(projects.path(), &["--preload", "sleepy"]);
    for _ in 0..3 {
        let started = Instant::now();
        let result = run(&mut server, "hello.py");
        assert_eq!(stdout(&result), "hi\n", "{result}");
        assert!(!warm(&result), "{result}");
        // Bounded: the wait for a starting spare, then a start without preload.
        assert!(started.elapsed() < Duration::from_secs(25), "{result}");
    }
    server.close();
}

#[test]
fn a_module_that_prints_when_imported_prints_in_every_run_warm_or_not() {
    let projects = TempProjects::named("p").file("main.py", "import chatty\nprint('main')\n");
    let site = venv(projects.path());
    std::fs::write(site.join("chatty.py"), "print('chatty imported')\n").unwrap();
    let mut server = StdioServer::start(projects.path(), &["--preload", "chatty"]);
    for _ in 0..3 {
        let result = run(&mut server, "main.py");
        assert_eq!(stdout(&result), "chatty imported\nmain\n", "{result}");
    }
    // Once the server learned that `chatty` prints, a spare without it serves the runs.
    let warm_run = run_until_warm(&mut server, "main.py", Duration::from_secs(20));
    assert_eq!(stdout(&warm_run), "chatty imported\nmain\n", "{warm_run}");
    server.close();
}

#[test]
fn a_project_file_named_like_a_preloaded_module_wins_as_in_a_cold_run() {
    let projects = TempProjects::named("p")
        .file("a/main.py", "import json\nprint(json.WHO)\n")
        .file("a/json.py", "WHO = 'the project json'\n")
        .file("b/plain.py", "import json\nprint(json.__name__)\n");
    let mut server = StdioServer::start(projects.path(), &[]);
    // `json` is in the default preload: the spare for `a` has the standard one imported.
    let result = run_until_warm(&mut server, "a/main.py", Duration::from_secs(20));
    assert_eq!(stdout(&result), "the project json\n", "{result}");
    let result = run_until_warm(&mut server, "b/plain.py", Duration::from_secs(20));
    assert_eq!(stdout(&result), "json\n", "{result}");
    server.close();
}

#[test]
fn a_sitecustomize_in_inline_codes_project_runs_only_inside_calls() {
    // Each start of an interpreter in `a` appends a line: inside a call only, never in a spare
    // waiting for the next call.
    let hook = "import os\nwith open(os.path.join(os.path.dirname(__file__), 'starts.txt'), 'a') as f:\n    f.write('start\\n')\n";
    let projects = TempProjects::named("p").file("a/sitecustomize.py", hook);
    let mut server = StdioServer::start(projects.path(), &["--allow-inline-code"]);
    let starts = projects.path().join("a/starts.txt");
    for n in 1..=3 {
        let result = server.call(
            "run_python_code",
            json!({"code": "print('ok')", "project": "a"}),
        );
        assert_eq!(stdout(&result), "ok\n", "{result}");
        assert!(!warm(&result), "{result}");
        std::thread::sleep(Duration::from_millis(1500));
        let lines = std::fs::read_to_string(&starts).unwrap_or_default();
        assert_eq!(
            lines.lines().count(),
            n,
            "the project's sitecustomize ran outside a call: {lines:?}"
        );
    }
    server.close();
}

/// The server's processes still running the warm driver as started (spares starting or waiting:
/// a run's driver writes the run's command line over its own).
fn spare_processes(server: u32) -> Vec<u32> {
    crate::util::warm::descendants(server)
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains("_pyrun_warm.py")
        })
        .collect()
}

#[test]
fn no_spare_starts_while_a_foreground_run_is_in_flight_and_one_does_once_it_is_over() {
    // `a/slow.py` runs until the test lets it go; `b/quick.py`'s run ends meanwhile.
    let projects = TempProjects::named("p")
        .file(
            "a/slow.py",
            "import os, time\nopen('started', 'w').close()\nfor _ in range(600):\n    if os.path.exists('go'):\n        break\n    time.sleep(0.05)\nprint('slow')\n",
        )
        .file("b/quick.py", "print('quick')\n");
    let mut server = StdioServer::start(projects.path(), &[]);
    let slow = server.start_request(
        "tools/call",
        json!({"name": "run_python", "arguments": {"file_name": "a/slow.py"}}),
    );
    let started = projects.path().join("a/started");
    assert!(
        pyrun_mcp_tests::procs::holds_within(Duration::from_secs(20), || started.exists()),
        "a/slow.py did not start"
    );
    let quick = run(&mut server, "b/quick.py");
    assert_eq!(stdout(&quick), "quick\n", "{quick}");
    // Before: `b`'s spare started as its run ended, beside the slow run.
    let spare_started = pyrun_mcp_tests::procs::holds_within(Duration::from_millis(1500), || {
        !spare_processes(server.pid()).is_empty()
    });
    assert!(
        !spare_started,
        "a spare started while a foreground run was in flight"
    );
    std::fs::write(projects.path().join("a/go"), "").unwrap();
    let slow = server.response(slow);
    assert_eq!(stdout(&slow["result"]), "slow\n", "{slow}");
    // Once nothing is in flight, the spare asked for then starts.
    assert!(
        crate::util::warm::wait_for_spare(server.pid(), &json!({"file_name": "b/quick.py"})),
        "no spare for b once the slow run was over"
    );
    server.close();
}

#[test]
fn a_run_starts_cold_at_once_rather_than_wait_for_a_spare_still_starting() {
    // The spare's preload takes 2.5 s: longer than a cold start of the run, and shorter than
    // the longest wait for a starting spare.
    let projects = TempProjects::named("p").file("hello.py", "print('hi')\n");
    let site = venv(projects.path());
    std::fs::write(site.join("slowish.py"), "import time\ntime.sleep(2.5)\n").unwrap();
    let mut server = StdioServer::start(projects.path(), &["--preload", "slowish"]);
    let first = run(&mut server, "hello.py");
    assert!(!warm(&first), "{first}");
    assert!(
        pyrun_mcp_tests::procs::holds_within(Duration::from_secs(10), || {
            !spare_processes(server.pid()).is_empty()
        }),
        "no spare started after the first run"
    );
    // Before: this run waited for the spare and ran in it.
    let second = run(&mut server, "hello.py");
    assert_eq!(stdout(&second), "hi\n", "{second}");
    assert!(
        !warm(&second),
        "the run waited for a spare still importing its preload: {second}"
    );
    // The spare was good: a later run takes it.
    let later = run_until_warm(&mut server, "hello.py", Duration::from_secs(20));
    assert_eq!(stdout(&later), "hi\n");
    server.close();
}

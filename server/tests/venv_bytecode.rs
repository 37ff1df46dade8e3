//! Bytecode for venvs, end to end through the real server over stdio: a venv's packages are
//! served from the server's cache once it has compiled them in the background, a `.pyc` planted
//! in the venv is never trusted, a changed package is compiled again, a gone venv's cache is
//! removed, and no run can write the cache.
//!
//! The tests share one cache folder of their own (`XDG_CACHE_HOME`): another test server's venvs
//! would own the user's. They take turns, since the cache's venvs belong to one projects folder
//! at a time.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::bytecode_cache::forge_pyc;
use crate::util;
use pyrun_mcp_tests::stdio::StdioServer;
use serde_json::{json, Value};

/// The venv's module (`forge_pyc` forges one of the same size).
const MODULE: &str = "X = 'source'\n";
/// What a run prints: the value, where Python looks for the module's bytecode, whether a
/// fresh interpreter of the venv loads it from there (`-v` says "matches"), and whether the run
/// can write there.
const CHECK: &str = r##"
import os, subprocess, sys
import vpkg.mod
print("value", vpkg.mod.X)
cached = vpkg.mod.__cached__
print("cached", cached)
v = subprocess.run([sys.executable, "-v", "-c", "import vpkg.mod"],
                   capture_output=True, text=True).stderr
print("matched", any(l.startswith("# " + cached + " matches") for l in v.splitlines()))
try:
    open(cached, "r+b").close()
    print("write CACHE")
except OSError:
    print("write denied")
try:
    open(os.path.join(os.path.dirname(cached), "planted.pyc"), "wb").close()
    print("plant CACHE")
except OSError:
    print("plant denied")
for gone in sys.argv[1:]:
    print("exists", gone, os.path.exists(gone))
"##;
/// How long the background compile may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(180);

/// The tests' own cache folder, and their turn.
fn cache_home() -> (&'static Path, MutexGuard<'static, ()>) {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    static TURN: Mutex<()> = Mutex::new(());
    let turn = TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let home = HOME.get_or_init(|| tempfile::tempdir().unwrap());
    (home.path(), turn)
}

fn start(projects: &Path, cache_home: &Path) -> StdioServer {
    let name = "XDG_CACHE_HOME";
    StdioServer::start_with_env(projects, &[], None, &[(name, cache_home.to_str().unwrap())])
}

/// A venv at `dir/.venv` made by the tests' interpreter, with the package `vpkg`: its
/// site-packages.
fn venv_with_package(dir: &Path) -> PathBuf {
    let venv = dir.join(".venv");
    let out = Command::new(pyrun_mcp_tests::python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lib = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let site = lib.join("site-packages");
    std::fs::create_dir_all(site.join("vpkg")).unwrap();
    std::fs::write(site.join("vpkg/__init__.py"), "").unwrap();
    std::fs::write(site.join("vpkg/mod.py"), MODULE).unwrap();
    site
}

fn stdout(result: &Value) -> String {
    result["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Runs `file` until its output satisfies `done` (the compile is in the background), and
/// returns that output.
fn run_until(
    server: &mut StdioServer,
    file: &str,
    args: &[&str],
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let result = server.call("run_python", json!({"file_name": file, "args": args}));
        let out = stdout(&result);
        if done(&out) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "not served from the cache in time: {result}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {key} in {out}"))
}

#[test]
fn a_venvs_modules_are_served_from_the_servers_cache_which_runs_cannot_write() {
    let (home, _turn) = cache_home();
    let (dir, _) = util::project(&[("main.py", CHECK)]);
    let site = venv_with_package(dir.path());
    let mut server = start(dir.path(), home);
    let out = run_until(&mut server, "main.py", &[], |out| {
        out.contains("matched True")
    });
    server.close();
    assert_eq!(line(&out, "value"), "source");
    let cached = line(&out, "cached");
    assert!(
        cached.starts_with("/pycache/projects/.venv/")
            || cached.starts_with(home.to_str().unwrap()),
        "not in the server's cache: {out}"
    );
    assert!(out.contains("write denied"), "{out}");
    assert!(out.contains("plant denied"), "{out}");
    assert!(
        !site.join("vpkg/__pycache__").exists(),
        "bytecode was written beside the venv's sources"
    );
}

#[test]
fn a_pyc_planted_in_a_venvs_pycache_is_never_trusted() {
    let (home, _turn) = cache_home();
    let (dir, _) = util::project(&[("main.py", CHECK)]);
    let site = venv_with_package(dir.path());
    // What a run that can write the venv could plant: its header matches the source.
    forge_pyc(&pyrun_mcp_tests::python(), &site.join("vpkg"));
    let mut server = start(dir.path(), home);
    let out = run_until(&mut server, "main.py", &[], |out| {
        out.contains("matched True")
    });
    server.close();
    assert_eq!(line(&out, "value"), "source", "{out}");
}

#[test]
fn a_changed_package_is_compiled_again() {
    let (home, _turn) = cache_home();
    let (dir, _) = util::project(&[("main.py", CHECK)]);
    let site = venv_with_package(dir.path());
    let mut server = start(dir.path(), home);
    run_until(&mut server, "main.py", &[], |out| {
        out.contains("matched True")
    });
    // As an upgrade does: the module replaced by a new file.
    std::fs::remove_file(site.join("vpkg/mod.py")).unwrap();
    std::fs::write(site.join("vpkg/mod.py"), "X = 'upgraded'\n").unwrap();
    let out = run_until(&mut server, "main.py", &[], |out| {
        out.contains("value upgraded") && out.contains("matched True")
    });
    server.close();
    assert!(out.contains("write denied"), "{out}");
}

#[test]
fn the_cache_of_a_gone_venv_is_removed() {
    let (home, _turn) = cache_home();
    let (dir, _) = util::project(&[("a/main.py", CHECK), ("b/main.py", CHECK)]);
    venv_with_package(&dir.path().join("a"));
    venv_with_package(&dir.path().join("b"));
    let mut server = start(dir.path(), home);
    let out = run_until(&mut server, "a/main.py", &[], |out| {
        out.contains("matched True")
    });
    let cached_a = line(&out, "cached").to_string();
    run_until(&mut server, "b/main.py", &[], |out| {
        out.contains("matched True")
    });
    std::fs::remove_dir_all(dir.path().join("a/.venv")).unwrap();
    let gone = format!("exists {cached_a} False");
    run_until(&mut server, "b/main.py", &[cached_a.as_str()], |out| {
        out.contains(&gone)
    });
    server.close();
}

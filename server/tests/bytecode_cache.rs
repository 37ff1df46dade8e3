//! Bytecode, end to end through the real server over stdio: a `.pyc` a script forged beside a
//! project module is never run, runs leave no `__pycache__` in the projects folder, and they read
//! the stdlib from the server's cache, which they cannot write.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util;
use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_run::bytecode_cache::{BytecodeCache, Fill};
use serde_json::{json, Value};

fn stdout(result: &Value) -> String {
    result["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn layers(result: &Value) -> Vec<String> {
    serde_json::from_value(result["structuredContent"]["sandbox"].clone()).unwrap_or_default()
}

/// The module and its importer; `FORGED_SOURCE` has the same length, so a `.pyc` compiled from
/// it carries the real source's size (and, below, its mtime).
const MODULE: &str = "X = 'source'\n";
const FORGED_SOURCE: &str = "X = 'forged'\n";
const MAIN: &str = "import mod\nprint(mod.X)\n";

/// Compiles `FORGED_SOURCE` into `__pycache__/mod.<tag>.pyc` beside `mod.py`, with `mod.py`'s
/// mtime and size in its header: what a script with write access to the folder can do.
pub(crate) fn forge_pyc(python: &Path, project: &Path) {
    let forge = r#"
import os, py_compile, sys, importlib.util
project, fake = sys.argv[1], sys.argv[2]
st = os.stat(os.path.join(project, "mod.py"))
os.utime(fake, ns=(st.st_atime_ns, st.st_mtime_ns))
cfile = importlib.util.cache_from_source(os.path.join(project, "mod.py"))
py_compile.compile(fake, cfile=cfile, doraise=True)
print(cfile)
"#;
    let fake_dir = tempfile::tempdir().unwrap();
    let fake = fake_dir.path().join("mod.py");
    std::fs::write(&fake, FORGED_SOURCE).unwrap();
    let out = Command::new(python)
        .args(["-c", forge])
        .arg(project)
        .arg(&fake)
        .env_remove("PYTHONPYCACHEPREFIX")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the user's own `python main.py` prints in `project`.
fn users_python(python: &Path, project: &Path) -> String {
    let out = Command::new(python)
        .arg("main.py")
        .current_dir(project)
        .env_remove("PYTHONPYCACHEPREFIX")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_pyc_forged_beside_a_project_module_is_not_run() {
    let (dir, _) = util::project(&[("mod.py", MODULE), ("main.py", MAIN)]);
    forge_pyc(&pyrun_mcp_tests::python(), dir.path());
    // The forgery works on a plain interpreter: what the user's own python runs.
    assert_eq!(
        users_python(&pyrun_mcp_tests::python(), dir.path()),
        "forged\n"
    );

    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "main.py"}));
    assert_eq!(stdout(&result), "source\n", "{result}");
    server.close();
}

#[test]
fn runs_leave_no_pycache_in_the_projects_folder_whatever_the_sandbox() {
    // A package import, and the same from a child interpreter the script starts.
    let main = "import subprocess, sys\nimport pkg.mod\n\
                subprocess.run([sys.executable, '-c', 'import pkg.mod'], check=True)\n\
                print(pkg.mod.X)\n";
    for mode in ["standard", "off"] {
        let (dir, _) = util::project(&[
            ("pkg/__init__.py", ""),
            ("pkg/mod.py", MODULE),
            ("main.py", main),
        ]);
        let mut server = StdioServer::start(dir.path(), &["--sandbox", mode]);
        let result = server.call("run_python", json!({"file_name": "main.py"}));
        assert_eq!(stdout(&result), "source\n", "{mode}: {result}");
        server.close();
        for folder in [dir.path().to_path_buf(), dir.path().join("pkg")] {
            assert!(
                !folder.join("__pycache__").exists(),
                "{mode}: a run wrote {}/__pycache__",
                folder.display()
            );
        }
    }
}

/// Fills the server's cache for this interpreter now, at normal priority (a server's own fill
/// runs at idle priority and may hold the lock: then wait for it).
fn cache_filled(python: &Path, projects: &Path) -> BytecodeCache {
    let cache = BytecodeCache::open(python, projects).unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        match cache.fill(python, projects).unwrap() {
            Fill::Filled | Fill::Unchanged | Fill::Incomplete => return cache,
            Fill::Busy if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(500));
            }
            other => panic!("the cache was not filled: {other:?}"),
        }
    }
}

#[test]
fn runs_read_the_stdlib_from_the_servers_cache_and_cannot_write_it() {
    let check = r##"
import json, os, subprocess, sys
print("prefix", sys.pycache_prefix)
print("cached", json.__cached__)
try:
    open(json.__cached__, "r+b").close()
    print("write CACHE")
except OSError:
    print("write denied")
try:
    open(os.path.join(sys.pycache_prefix, "planted.pyc"), "wb").close()
    print("plant CACHE")
except OSError:
    print("plant denied")
v = subprocess.run([sys.executable, "-v", "-c", "import json.decoder"],
                   capture_output=True, text=True).stderr
print("matched", any(l.startswith("# " + sys.pycache_prefix) and " matches " in l
                     and "json/decoder" in l for l in v.splitlines()))
"##;
    let (dir, root) = util::project(&[("check.py", check)]);
    let cache = cache_filled(&pyrun_mcp_tests::python(), root.path());

    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "check.py"}));
    let out = stdout(&result);
    let layers = layers(&result);
    let prefix = if layers.iter().any(|l| l == "mount-ns") {
        "/pycache".to_string()
    } else {
        cache.dir().display().to_string()
    };
    assert!(
        out.contains(&format!("prefix {prefix}\n")),
        "{out}\n{result}"
    );
    assert!(
        out.contains(&format!("cached {prefix}/")),
        "json's bytecode is not looked for in the cache: {out}"
    );
    assert!(
        out.contains("matched True"),
        "the stdlib was compiled again: {out}"
    );
    if layers.iter().any(|l| l == "mount-ns" || l == "landlock") {
        assert!(out.contains("write denied"), "{out}");
        assert!(out.contains("plant denied"), "{out}");
    }
    server.close();
    assert!(!cache.dir().join("planted.pyc").exists());
}

//! Where the server's interpreter lives does not change a run's sandbox: a venv made under
//! `/tmp` (where a run sees its own scratch), a base interpreter copied or linked there, and a
//! venv inside the projects folder each give runs the same layers as `/usr/bin/python3`, cold
//! and warm, on a root and an unprivileged server; the run imports from that venv and cannot
//! change, rename or replace the interpreter's tree, and the host's copy is as it was after.
//! An interpreter the view cannot show (under `/pycache` or `/pyrun`) is refused at start.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util;
use crate::util::warm::Start;
use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_mcp_tests::TempProjects;
use serde_json::Value;

const SYSTEM_PYTHON: &str = "/usr/bin/python3";
/// The module a test's venv holds in its site-packages.
const VENV_MODULE: &str = "interp_places_mod";

/// The script every run executes: imports from the venv when there is one, writes its own
/// `/tmp`, and tries to change the interpreter's tree (`sys.prefix` for a venv, the folder
/// of `sys.executable` otherwise) every way a file can be changed.
const PROBE: &str = r##"
import importlib.util
_results["venv_module"] = "DONE" if importlib.util.find_spec("interp_places_mod") else "MISSING"
if _results["venv_module"] == "DONE":
    import interp_places_mod
    _results["venv_module"] = interp_places_mod.WHO
tree = sys.prefix if sys.prefix != sys.base_prefix else os.path.dirname(sys.executable)
_results["tree_in_tmp"] = "YES" if tree.startswith("/tmp/") else "NO"
attempt("scratch_write", lambda: write("/tmp/mine/ok.txt"))
attempt("beside_read", lambda: open(os.path.join(os.path.dirname(sys.executable), "beside.txt")).read())
attempt("tree_new_file", lambda: write(os.path.join(tree, "planted.py")))
attempt("tree_append", lambda: write(sys.executable if tree != sys.prefix else os.path.join(tree, "pyvenv.cfg"), "x", "a"))
attempt("tree_chmod", lambda: os.chmod(tree, 0o777))
attempt("tree_rename", lambda: os.rename(tree, tree + "_moved"))
top = "/tmp/" + tree[len("/tmp/"):].split("/")[0] if tree.startswith("/tmp/") else tree
attempt("top_rename", lambda: os.rename(top, top + "_moved"))
attempt("top_rmdir", lambda: os.rmdir(top))
attempt("top_new_file", lambda: write(os.path.join(top, "planted.txt")))
def replace():
    os.makedirs("/tmp/fake/bin", exist_ok=True)
    os.rename("/tmp/fake", top)
attempt("top_replace", replace)
"##;

/// The attempts that must fail, with the errnos that count as refused.
const REFUSED: &[&str] = &[
    "tree_new_file",
    "tree_append",
    "tree_chmod",
    "tree_rename",
    "top_rename",
    "top_rmdir",
    "top_new_file",
    "top_replace",
];
const REFUSALS: &[&str] = &[
    "EROFS",
    "EBUSY",
    "EACCES",
    "EPERM",
    "EXDEV",
    "ENOTEMPTY",
    "EEXIST",
];

/// Where an interpreter under test lives, made for one test and removed with it.
struct Place {
    _dir: tempfile::TempDir,
    python: PathBuf,
    /// The tree whose files must not change (checked on the host after the runs).
    tree: PathBuf,
}

/// A folder directly in `/tmp`, open to pass through (an unprivileged server reaches it).
fn tmp_folder() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("pyrun-interp-")
        .tempdir_in("/tmp")
        .expect("a folder in /tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A venv of the system interpreter at `dir` holding [`VENV_MODULE`].
fn make_venv(dir: &Path) {
    let status = Command::new(SYSTEM_PYTHON)
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .status()
        .expect("python3 -m venv runs");
    assert!(status.success(), "python3 -m venv failed");
    let site = std::fs::read_dir(dir.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .expect("the venv's site-packages");
    std::fs::write(site.join(format!("{VENV_MODULE}.py")), "WHO = 'venv'\n").unwrap();
    // Readable by an unprivileged server.
    let chmod = Command::new("chmod").args(["-R", "a+rX"]).arg(dir).status();
    assert!(chmod.is_ok_and(|s| s.success()));
}

fn venv_under_tmp() -> Place {
    let dir = tmp_folder();
    let venv = dir.path().join("venv");
    make_venv(&venv);
    Place {
        python: venv.join("bin/python"),
        tree: venv,
        _dir: dir,
    }
}

/// The system interpreter's binary copied under `/tmp` (its stdlib found at its built-in prefix).
fn base_copied_under_tmp() -> Place {
    let dir = tmp_folder();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let real = std::fs::canonicalize(SYSTEM_PYTHON).unwrap();
    let python = bin.join("python3");
    std::fs::copy(&real, &python).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    Place {
        python,
        tree: bin,
        _dir: dir,
    }
}

/// A link under `/tmp` to the system interpreter.
fn base_linked_under_tmp() -> Place {
    let dir = tmp_folder();
    let python = dir.path().join("python3");
    std::os::unix::fs::symlink(SYSTEM_PYTHON, &python).unwrap();
    // The link's folder is not shown: only the link is.
    std::fs::write(dir.path().join("beside.txt"), "not for runs\n").unwrap();
    Place {
        python,
        tree: dir.path().to_path_buf(),
        _dir: dir,
    }
}

/// Every file under `tree` with its size and mode: what must be the same after the runs.
fn snapshot(tree: &Path) -> BTreeMap<PathBuf, (u64, u32)> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![tree.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            seen.insert(entry.path(), (meta.len(), meta.permissions().mode()));
            if meta.is_dir() {
                todo.push(entry.path());
            }
        }
    }
    let meta = std::fs::symlink_metadata(tree).unwrap();
    seen.insert(tree.to_path_buf(), (0, meta.permissions().mode()));
    seen
}

fn layers(result: &Value) -> Vec<String> {
    serde_json::from_value(result["structuredContent"]["sandbox"].clone())
        .unwrap_or_else(|e| panic!("no sandbox list in {result}: {e}"))
}

fn attempts(result: &Value) -> BTreeMap<String, String> {
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no attempts in {result}: {e}"))
}

/// The uids to serve as: the test's own, and an unprivileged one when the tests run as root.
fn users() -> Vec<Option<u32>> {
    let mut users = vec![None];
    if rustix::process::geteuid().is_root() {
        users.push(Some(61_235));
    }
    users
}

/// A projects folder holding the probe, owned by `uid` when given.
fn projects_for(uid: Option<u32>) -> TempProjects {
    let projects = TempProjects::named("p")
        .file(
            "probe.py",
            format!("{}\n{PROBE}\nreport()\n", util::ATTEMPT),
        )
        .file(util::warm::WARMUP_FILE, "pass\n");
    if let Some(uid) = uid {
        let chown = Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(projects.path())
            .status()
            .expect("chown runs");
        assert!(chown.success());
    }
    projects
}

/// Runs the probe with `python` as the server's interpreter, started `start`, as `uid`.
fn probe(python: &Path, start: Start, uid: Option<u32>) -> Value {
    let projects = projects_for(uid);
    let python = python.to_str().unwrap();
    let mut server: StdioServer = start.server_as(projects.path(), &["--python", python], uid);
    let result = start.run(&mut server, projects.path(), "probe.py", &[]);
    assert_eq!(result["isError"], false, "{result}");
    result
}

/// The place's runs report the system interpreter's layers, the venv's module when it is one,
/// and every change to the interpreter's tree refused; the host's tree is unchanged.
fn keeps_every_layer(place: &Place, venv: bool) {
    let before = snapshot(&place.tree);
    for uid in users() {
        for start in Start::BOTH {
            let reference = layers(&probe(Path::new(SYSTEM_PYTHON), start, uid));
            for layer in ["mount-ns", "landlock", "seccomp"] {
                assert!(
                    reference.iter().any(|l| l == layer),
                    "{layer} missing with the system python ({uid:?}, {start:?}): {reference:?}"
                );
            }
            let result = probe(&place.python, start, uid);
            assert_eq!(
                layers(&result),
                reference,
                "{} ({uid:?}, {start:?}) lost layers: {result}",
                place.python.display()
            );
            let tried = attempts(&result);
            let want_module = if venv { "venv" } else { "MISSING" };
            assert_eq!(tried["venv_module"], want_module, "{tried:?}");
            assert_eq!(tried["scratch_write"], "DONE", "{tried:?}");
            assert_eq!(tried["beside_read"], "ENOENT", "{tried:?}");
            for name in REFUSED {
                let got = tried
                    .get(*name)
                    .unwrap_or_else(|| panic!("{name} not tried: {tried:?}"));
                assert!(
                    REFUSALS.contains(&got.as_str()),
                    "{name} ended {got} ({uid:?}, {start:?}): {tried:?}"
                );
            }
        }
    }
    assert_eq!(
        snapshot(&place.tree),
        before,
        "the interpreter's tree changed"
    );
}

#[test]
fn a_venv_under_tmp_keeps_every_layer_and_its_tree_stays_read_only() {
    let place = venv_under_tmp();
    keeps_every_layer(&place, true);
}

#[test]
fn a_base_interpreter_copied_under_tmp_keeps_every_layer() {
    let place = base_copied_under_tmp();
    keeps_every_layer(&place, false);
}

#[test]
fn a_base_interpreter_linked_under_tmp_keeps_every_layer() {
    let place = base_linked_under_tmp();
    keeps_every_layer(&place, false);
}

#[test]
fn a_venv_inside_the_projects_folder_keeps_every_layer() {
    for start in Start::BOTH {
        let projects = projects_for(None);
        let venv = projects.path().join("envs/venv");
        make_venv(&venv);
        let python = venv.join("bin/python");
        let reference = layers(&probe(Path::new(SYSTEM_PYTHON), start, None));
        let mut server = start.server(projects.path(), &["--python", python.to_str().unwrap()]);
        let result = start.run(&mut server, projects.path(), "probe.py", &[]);
        assert_eq!(result["isError"], false, "{result}");
        assert_eq!(layers(&result), reference, "{start:?}: {result}");
        assert_eq!(attempts(&result)["venv_module"], "venv", "{result}");
    }
}

/// `/health` (unauthenticated) names each layer runs lack with why and what would bring it, and
/// the log says the same once at start, one line each; no host path reaches `/health`. Forced
/// here by serving as an unprivileged user (only a root server gives runs a uid and cgroups of
/// their own); a root server on a machine with every layer lists none.
#[tokio::test]
async fn health_names_each_missing_layer_with_why_and_a_hint() {
    for uid in users() {
        let projects = projects_for(uid);
        let mut launch = pyrun_mcp_tests::ServerLaunch::new(
            env!("CARGO_BIN_EXE_pyrun-mcp-server"),
            projects.path(),
        )
        .args(["--python", SYSTEM_PYTHON])
        .log("info");
        if let Some(uid) = uid {
            launch = launch.uid(uid);
        }
        let server = launch.http();
        let answer = util::http::http()
            .get(server.url("/health"))
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success());
        let body = answer.text().await.unwrap();
        let health: Value = serde_json::from_str(&body).unwrap();
        let active: Vec<String> = serde_json::from_value(health["sandbox"].clone()).unwrap();
        let missing = health["sandbox_missing"]
            .as_array()
            .unwrap_or_else(|| panic!("no sandbox_missing in {body}"));
        for entry in missing {
            let layer = entry["layer"].as_str().unwrap();
            assert!(!active.iter().any(|l| l == layer), "{body}");
            for part in ["why", "hint"] {
                assert!(entry[part].as_str().is_some_and(|t| t.len() > 10), "{body}");
            }
            let line = format!("runs lack the {layer} layer");
            assert!(
                pyrun_mcp_tests::procs::holds_within(std::time::Duration::from_secs(10), || {
                    server.logs().contains(&line)
                }),
                "no log line for {layer}: {}",
                server.logs()
            );
        }
        let host = projects.path().parent().unwrap().to_str().unwrap();
        assert!(!body.contains(host) && !body.contains("/tmp"), "{body}");
        let named: Vec<&str> = missing.iter().filter_map(|m| m["layer"].as_str()).collect();
        match uid {
            Some(_) => assert!(named.contains(&"run-uid"), "{body}"),
            // A root server lists what it lacks of every layer there is.
            None if active.iter().any(|l| l == "run-uid") => {
                assert!(named.is_empty(), "{body}")
            }
            None => assert!(!named.is_empty(), "{body}"),
        }
    }
}

/// A package install made with a server whose interpreter is a venv under `/tmp` works (the
/// install's steps see their folders at their host paths, the interpreter's among them), and a
/// run then imports the package with the same layers as before the install.
#[test]
fn an_install_with_an_interpreter_under_tmp_works_and_its_runs_keep_their_layers() {
    let place = venv_under_tmp();
    let index = pyrun_mcp_tests::PackageIndex::start();
    let projects = TempProjects::named("p")
        .file(
            "app/use_alpha.py",
            "import pyrunalpha\nprint(pyrunalpha.VALUE)\n",
        )
        .file("app/hello.py", "print('hello')\n");
    let python = place.python.to_str().unwrap();
    let url = index.url();
    let mut server = StdioServer::start(
        projects.path(),
        &[
            "--python",
            python,
            "--allow-install",
            "--package-index",
            &url,
        ],
    );
    let before = server.call(
        "run_python",
        serde_json::json!({"file_name": "app/hello.py"}),
    );
    assert_eq!(before["isError"], false, "{before}");
    let result = server.call(
        "install_packages",
        serde_json::json!({"project": "app", "packages": ["pyrunalpha"]}),
    );
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["ok"], true, "{result}");
    let after = server.call(
        "run_python",
        serde_json::json!({"file_name": "app/use_alpha.py"}),
    );
    assert_eq!(after["structuredContent"]["exit_code"], 0, "{after}");
    assert_eq!(layers(&after), layers(&before), "{after}");
    assert!(layers(&after).iter().any(|l| l == "mount-ns"), "{after}");
}

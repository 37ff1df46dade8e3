//! What a run may write of the projects folder, tried for real through the server binary: its
//! own project only (`--write-scope all` restores the whole folder), protected names read-only
//! wherever they are, and a protected name a run creates does not stay (moved to the quarantine
//! under the state folder, and named in the run's result).
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::util;
use crate::util::warm::Start;
use pyrun_mcp_tests::stdio::StdioServer;
use serde_json::{json, Value};

fn script(body: &str) -> String {
    format!("{}\n{body}\nreport()\n", util::ATTEMPT)
}

fn run(server: &mut StdioServer, file: &str) -> Value {
    server.call("run_python", json!({"file_name": file}))
}

fn attempts(result: &Value) -> BTreeMap<String, String> {
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no attempts in {result}: {e}"))
}

/// Fails unless the run had a file view of its own: without it these tests prove nothing.
fn require_view(result: &Value) {
    let layers = result["structuredContent"]["sandbox"].to_string();
    assert!(
        layers.contains("mount-ns"),
        "no mount-ns layer ({layers}); this test would prove nothing: {result}"
    );
}

fn refused(tried: &BTreeMap<String, String>, names: &[&str]) {
    for name in names {
        let got = tried
            .get(*name)
            .unwrap_or_else(|| panic!("{name} not tried: {tried:?}"));
        assert!(
            ["EROFS", "EACCES", "EPERM"].contains(&got.as_str()),
            "{name} ended with {got}: {tried:?}"
        );
    }
}

fn done(tried: &BTreeMap<String, String>, names: &[&str]) {
    for name in names {
        assert_eq!(
            tried.get(*name).map(String::as_str),
            Some("DONE"),
            "{name}: {tried:?}"
        );
    }
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The files under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                found.push(rel.to_path_buf());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_run_of_project_a_writes_its_own_files_but_no_file_of_project_b_nor_b_git_hooks_or_config() {
    let body = r##"
attempt("own_new", lambda: write("out.txt", "mine\n"))
attempt("own_existing", lambda: write("data.txt", "more\n", "a"))
attempt("own_subfolder", lambda: write("results/r.txt"))
attempt("b_hook", lambda: write("../b/.git/hooks/pre-commit", "#!/bin/sh\nevil\n"))
attempt("b_config", lambda: write("../b/.git/config", "[core]\n\tfsmonitor = evil\n", "a"))
attempt("b_data", lambda: write("../b/data.txt", "changed\n", "a"))
attempt("b_new", lambda: write("../b/new.txt"))
attempt("b_remove", lambda: os.remove("../b/data.txt"))
attempt("top_new", lambda: write("../top.txt"))
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[
            ("a/run.py", &script(body)),
            ("a/data.txt", "a\n"),
            ("b/data.txt", "b\n"),
            ("b/.git/config", "[core]\n"),
            ("b/.git/hooks/README", "hooks\n"),
        ]);
        let mut server = start.server(dir.path(), &[]);
        let result = start.run(&mut server, dir.path(), "a/run.py", &[]);
        require_view(&result);
        let tried = attempts(&result);
        done(&tried, &["own_new", "own_existing", "own_subfolder"]);
        refused(
            &tried,
            &[
                "b_hook", "b_config", "b_data", "b_new", "b_remove", "top_new",
            ],
        );
        assert_eq!(read(dir.path(), "a/out.txt"), "mine\n");
        assert_eq!(read(dir.path(), "a/data.txt"), "a\nmore\n");
        assert_eq!(read(dir.path(), "b/data.txt"), "b\n");
        assert_eq!(read(dir.path(), "b/.git/config"), "[core]\n");
        assert!(!dir.path().join("b/.git/hooks/pre-commit").exists());
        assert!(!dir.path().join("b/new.txt").exists());
        server.close();
    }
}

#[test]
fn a_new_vscode_git_or_forged_pycache_in_its_own_project_does_not_stay_and_is_reported() {
    let body = r##"
attempt("vscode", lambda: write(".vscode/tasks.json", '{"tasks": [{"command": "evil"}]}'))
attempt("git", lambda: write(".git/hooks/pre-commit", "#!/bin/sh\nevil\n"))
attempt("pyc", lambda: write("pkg/__pycache__/mod.cpython-311.pyc", "forged"))
attempt("github", lambda: write("pkg/deep/.github/workflows/x.yml", "on: push\n"))
attempt("ordinary", lambda: write("pkg/notes.txt", "fine\n"))
"##;
    let (dir, _) = util::project(&[("a/make.py", &script(body)), ("a/pkg/mod.py", "X = 1\n")]);
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().to_str().unwrap();
    let mut server = StdioServer::start(dir.path(), &["--state-dir", state_arg]);
    let result = run(&mut server, "a/make.py");
    require_view(&result);
    // Created (nothing refuses a new name inside the project), then moved out once it ended.
    done(
        &attempts(&result),
        &["vscode", "git", "pyc", "github", "ordinary"],
    );
    for gone in [
        "a/.vscode",
        "a/.git",
        "a/pkg/__pycache__",
        "a/pkg/deep/.github",
    ] {
        assert!(!dir.path().join(gone).exists(), "{gone} stayed");
    }
    assert_eq!(read(dir.path(), "a/pkg/notes.txt"), "fine\n");
    assert_eq!(read(dir.path(), "a/pkg/mod.py"), "X = 1\n");
    let reported: Vec<String> =
        serde_json::from_value(result["structuredContent"]["quarantined"].clone()).unwrap();
    assert_eq!(
        reported,
        [
            "a/.git",
            "a/.vscode",
            "a/pkg/__pycache__",
            "a/pkg/deep/.github"
        ]
    );
    let text = result["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.contains("quarantine") && text.contains("a/.vscode"),
        "{text}"
    );
    // Kept, not deleted: the user's own concurrent change would be recoverable.
    let kept = files_under(&state.path().join("quarantine"));
    let kept: Vec<String> = kept
        .iter()
        .map(|p| p.components().skip(1).collect::<PathBuf>())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    assert!(
        kept.contains(&"a/.vscode/tasks.json".to_owned())
            && kept.contains(&"a/pkg/__pycache__/mod.cpython-311.pyc".to_owned()),
        "{kept:?}"
    );
    // Made again by the next run: moved out again, into a folder of its own.
    let again = run(&mut server, "a/make.py");
    assert_eq!(
        again["structuredContent"]["quarantined"]
            .as_array()
            .map(Vec::len),
        Some(4)
    );
    server.close();
}

#[test]
fn protected_names_that_exist_deep_in_its_own_project_are_read_only() {
    let body = r##"
attempt("deep_git", lambda: write("sub/lib/.git/config", "[core]\n\tfsmonitor = evil\n", "a"))
attempt("venv_cfg", lambda: write("tools/env/lib/evil.pth", "import evil\n"))
attempt("pycache", lambda: write("sub/__pycache__/m.cpython-311.pyc", "forged"))
attempt("dotenv", lambda: write("sub/.env", "X=2\n"))
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[
            ("a/run.py", &script(body)),
            ("a/sub/lib/.git/config", "[core]\n"),
            ("a/tools/env/pyvenv.cfg", "home = /usr/bin\n"),
            ("a/tools/env/lib/site.py", "\n"),
            ("a/sub/__pycache__/m.cpython-311.pyc", "real"),
            ("a/sub/.env", "X=1\n"),
        ]);
        let mut server = start.server(dir.path(), &[]);
        let result = start.run(&mut server, dir.path(), "a/run.py", &[]);
        require_view(&result);
        refused(
            &attempts(&result),
            &["deep_git", "venv_cfg", "pycache", "dotenv"],
        );
        assert_eq!(read(dir.path(), "a/sub/lib/.git/config"), "[core]\n");
        assert_eq!(
            read(dir.path(), "a/sub/__pycache__/m.cpython-311.pyc"),
            "real"
        );
        assert!(!dir.path().join("a/tools/env/lib/evil.pth").exists());
        server.close();
    }
}

#[test]
fn with_write_scope_all_a_run_writes_other_projects_again_but_not_their_protected_names() {
    let body = r##"
attempt("b_data", lambda: write("../b/data.txt", "changed\n", "a"))
attempt("b_config", lambda: write("../b/.git/config", "[core]\n\tfsmonitor = evil\n", "a"))
attempt("b_hook", lambda: write("../b/.git/hooks/pre-commit", "#!/bin/sh\nevil\n"))
"##;
    let (dir, _) = util::project(&[
        ("a/run.py", &script(body)),
        ("b/data.txt", "b\n"),
        ("b/.git/config", "[core]\n"),
    ]);
    let mut server = StdioServer::start(dir.path(), &["--write-scope", "all"]);
    let result = run(&mut server, "a/run.py");
    require_view(&result);
    let tried = attempts(&result);
    done(&tried, &["b_data"]);
    refused(&tried, &["b_config", "b_hook"]);
    assert_eq!(read(dir.path(), "b/data.txt"), "b\nchanged\n");
    assert_eq!(read(dir.path(), "b/.git/config"), "[core]\n");
    server.close();
}

#[test]
fn a_script_directly_in_the_projects_folder_writes_its_own_top_level_file_but_not_a_subfolder() {
    let body = r##"
attempt("top_new", lambda: write("top.txt", "mine\n"))
attempt("a_new", lambda: write("a/x", "evil\n"))
attempt("a_existing", lambda: write("a/data.txt", "evil\n", "a"))
attempt("a_rename", lambda: os.rename("a", "a_moved"))
attempt("made_git", lambda: write("made/.git/config", "[core]\n\tfsmonitor = evil\n"))
"##;
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("top.py", &script(body)), ("a/data.txt", "a\n")]);
        let mut server = start.server(dir.path(), &[]);
        let result = start.run(&mut server, dir.path(), "top.py", &[]);
        require_view(&result);
        let tried = attempts(&result);
        done(&tried, &["top_new", "made_git"]);
        refused(&tried, &["a_new", "a_existing"]);
        // A folder it made is its own, but a protected name inside does not stay.
        assert!(!dir.path().join("made/.git").exists());
        assert_eq!(
            result["structuredContent"]["quarantined"],
            json!(["made/.git"]),
            "{result}"
        );
        // A read-only bind cannot be moved away (EBUSY): the folder stays where it is.
        assert_ne!(tried["a_rename"], "DONE", "{tried:?}");
        assert_eq!(read(dir.path(), "top.txt"), "mine\n");
        assert_eq!(read(dir.path(), "a/data.txt"), "a\n");
        assert!(!dir.path().join("a/x").exists());
        server.close();
    }
}

#[test]
fn inline_code_writes_its_project_or_nothing_of_the_folder_without_one() {
    let code = script(
        r##"
attempt("here", lambda: write("inline.txt"))
attempt("b", lambda: write("/projects/b/inline.txt"))
"##,
    );
    for start in Start::BOTH {
        let (dir, _) = util::project(&[("a/keep.txt", "a\n"), ("b/keep.txt", "b\n")]);
        let mut server = start.server(dir.path(), &["--allow-inline-code"]);
        let result = start.call(
            &mut server,
            "run_python_code",
            json!({"code": code, "project": "a"}),
            json!({"code": "pass", "project": "a"}),
        );
        require_view(&result);
        let tried = attempts(&result);
        done(&tried, &["here"]);
        refused(&tried, &["b"]);
        assert!(dir.path().join("a/inline.txt").exists());
        // Without a project it works in its scratch and writes nothing of the projects folder.
        let code = script(r##"attempt("a", lambda: write("/projects/a/none.txt"))"##);
        let result = start.call(
            &mut server,
            "run_python_code",
            json!({"code": code}),
            json!({"code": "pass"}),
        );
        refused(&attempts(&result), &["a"]);
        assert!(!dir.path().join("a/none.txt").exists());
        server.close();
    }
}

#[test]
fn with_allow_protected_writes_a_scaffolding_script_keeps_the_names_it_creates() {
    let body = r##"
attempt("vscode", lambda: write(".vscode/settings.json", "{}"))
"##;
    let (dir, _) = util::project(&[("a/scaffold.py", &script(body))]);
    let mut server = StdioServer::start(dir.path(), &["--allow-protected-writes"]);
    let result = run(&mut server, "a/scaffold.py");
    done(&attempts(&result), &["vscode"]);
    assert_eq!(read(dir.path(), "a/.vscode/settings.json"), "{}");
    assert_eq!(
        result["structuredContent"]["quarantined"],
        json!([]),
        "{result}"
    );
    server.close();
}

#[test]
fn a_background_run_that_creates_a_protected_name_has_it_moved_and_named_in_get_run() {
    let body = r##"attempt("vscode", lambda: write(".vscode/tasks.json", "{}"))"##;
    let (dir, _) = util::project(&[("a/bg.py", &script(body))]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let started = server.call("start_python", json!({"file_name": "a/bg.py"}));
    let run_id = started["structuredContent"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run id: {started}"))
        .to_owned();
    let mut state = Value::Null;
    for _ in 0..20 {
        // Past the output: the call waits for the end, not for the next line.
        let args = json!({"run_id": run_id, "wait_seconds": 5,
                          "stdout_offset": u64::MAX, "stderr_offset": u64::MAX});
        state = server.call("get_run", args);
        let status = state["structuredContent"]["status"].as_str().unwrap_or("");
        if !matches!(status, "queued" | "running") {
            break;
        }
    }
    assert_eq!(state["structuredContent"]["status"], "exited", "{state}");
    assert_eq!(
        state["structuredContent"]["quarantined"],
        json!(["a/.vscode"]),
        "{state}"
    );
    assert!(!dir.path().join("a/.vscode").exists());
    server.close();
}

#[test]
fn a_session_writes_its_project_only_and_what_it_made_with_a_protected_name_goes_when_it_stops() {
    let (dir, _) = util::project(&[("a/keep.txt", "a\n"), ("b/keep.txt", "b\n")]);
    let mut server = StdioServer::start(dir.path(), &["--allow-inline-code"]);
    let started = server.call("session_start", json!({"project": "a"}));
    let id = started["structuredContent"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id: {started}"))
        .to_owned();
    let code = script(
        r##"
attempt("own", lambda: write("session.txt"))
attempt("b", lambda: write("/projects/b/session.txt"))
attempt("git", lambda: write(".git/hooks/pre-commit", "#!/bin/sh\nevil\n"))
"##,
    );
    let reply = server.call("session_exec", json!({"session_id": id, "code": code}));
    let stdout = reply["structuredContent"]["stdout"].as_str().unwrap_or("");
    let tried: BTreeMap<String, String> = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("no attempts in {reply}: {e}"));
    done(&tried, &["own", "git"]);
    refused(&tried, &["b"]);
    assert!(dir.path().join("a/session.txt").exists());
    assert!(!dir.path().join("b/session.txt").exists());
    let stopped = server.call("session_stop", json!({"session_id": id}));
    assert_eq!(stopped["isError"], false, "{stopped}");
    assert!(!dir.path().join("a/.git").exists(), "a/.git stayed");
    server.close();
}

#[test]
fn a_folder_a_run_makes_into_a_git_repository_under_another_name_does_not_stay() {
    // git takes any folder holding HEAD, objects and refs for a repository: with this config,
    // a user's `git status` (or a prompt that runs it) inside `docs` runs the fsmonitor.
    let body = r##"
config = "[core]\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"evil\"\n"
def repo(at):
    os.makedirs(at + "/objects", exist_ok=True)
    os.makedirs(at + "/refs/heads", exist_ok=True)
    write(at + "/HEAD", "ref: refs/heads/main\n")
    write(at + "/config", config)
attempt("docs", lambda: repo("docs"))
attempt("itself", lambda: repo("."))
attempt("old", lambda: write("old/config", config))
"##;
    let (dir, _) = util::project(&[
        ("a/make.py", &script(body)),
        ("a/old/HEAD", "ref: refs/heads/main\n"),
        ("a/old/objects/.keep", ""),
        ("a/old/refs/.keep", ""),
        ("a/old/config", "[core]\n"),
    ]);
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().to_str().unwrap();
    let mut server = StdioServer::start(dir.path(), &["--state-dir", state_arg]);
    let result = run(&mut server, "a/make.py");
    require_view(&result);
    let tried = attempts(&result);
    done(&tried, &["docs", "itself"]);
    // One that was there before is read-only whole, like a venv.
    refused(&tried, &["old"]);
    assert_eq!(read(dir.path(), "a/old/config"), "[core]\n");
    assert!(!dir.path().join("a/docs").exists(), "a/docs stayed");
    assert!(!dir.path().join("a/HEAD").exists(), "a/HEAD stayed");
    let reported: Vec<String> =
        serde_json::from_value(result["structuredContent"]["quarantined"].clone()).unwrap();
    assert_eq!(reported, ["a/HEAD", "a/docs"]);
    server.close();
}

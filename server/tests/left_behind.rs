//! What a run leaves behind in its project must not run on the host afterwards: a planted
//! repository (`.git`, git's other forms) that the user's own `git` would take up, hidden from
//! the after-run check by an unlistable folder, by depth, by git's `commondir` form, by a `.git`
//! file pointing elsewhere, or by a protected entry renamed away and a new one planted at its
//! path. Each attack runs for real through the server binary, root and unprivileged, warm and
//! cold; then the host's own `git` runs in the folder (under a terminal, so `core.pager` runs,
//! and `git status`, so `core.fsmonitor` runs), or its `python3` with the project on its path,
//! and no marker may appear.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::escapes::servers_for;
use crate::util;
use crate::util::warm::Start;
use serde_json::Value;

/// The attacker's script: `util::ATTEMPT`, a `plant(at)` that makes a repository at `at` whose
/// config runs the marker command (argv[1]), then `body`.
fn script(body: &str) -> String {
    format!(
        r##"{}
MARKER = sys.argv[1]
CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
          "\tfsmonitor = touch " + MARKER + "; echo\n"
          "\tpager = touch " + MARKER + "; cat\n")
def repo_parts(at):
    os.makedirs(os.path.join(at, "objects"), exist_ok=True)
    os.makedirs(os.path.join(at, "refs", "heads"), exist_ok=True)
    write(os.path.join(at, "config"), CONFIG)
def plant(at):
    repo_parts(at)
    write(os.path.join(at, "HEAD"), "ref: refs/heads/main\n")
os.chdir(os.path.dirname(os.path.abspath(__file__)))
{body}
report()
"##,
        util::ATTEMPT
    )
}

/// A marker file's path no run can reach (outside the projects folder), not there yet.
fn marker() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temp folder");
    let path = dir.path().join("ran");
    (dir, path)
}

/// Runs the host's `git status` and `git branch` (under a terminal: the pager runs) in the
/// folder reached from `root` through `steps` (one physical `cd -P` each: the path may be longer
/// than PATH_MAX, though git itself then fails to stat its own folder). Any repository is trusted (`safe.directory`), so a planted one owned by the
/// unprivileged server's user is not refused for its owner alone.
fn host_git(root: &Path, steps: &[&str]) {
    let mut cd = format!("cd -P '{}'", root.display());
    for step in steps {
        cd.push_str(&format!(" && cd -P '{step}'"));
    }
    let git = "git -c safe.directory='*'";
    let line = format!("{cd} && {git} status; {git} branch; true");
    let _ = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("GIT_PAGER")
        .env_remove("PAGER")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env("GIT_CEILING_DIRECTORIES", root.parent().unwrap_or(root))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs git");
}

/// The attack `body` against every server (root and unprivileged) started `start`; `check`
/// the host's git runs in each of `folders` (as `cd` steps from the projects folder) and must
/// leave no marker; then `check` gets the projects folder, the result and the marker's path.
fn attack(
    start: Start,
    body: &str,
    files: &[(&str, &str)],
    folders: &[Vec<String>],
    check: impl Fn(&Path, &Value, &Path),
) {
    attack_with_links(start, body, files, &[], folders, check);
}

/// [`attack`], the project also holding `links` (path, target) made before the run.
fn attack_with_links(
    start: Start,
    body: &str,
    files: &[(&str, &str)],
    links: &[(&str, &str)],
    folders: &[Vec<String>],
    check: impl Fn(&Path, &Value, &Path),
) {
    let script = script(body);
    let mut files = files.to_vec();
    files.push(("proj/attack.py", &script));
    for (dir, mut server, uid) in servers_for(start, &files) {
        for (path, target) in links {
            std::os::unix::fs::symlink(target, dir.path().join(path)).expect("a link");
            if let Some(uid) = uid {
                std::os::unix::fs::lchown(dir.path().join(path), Some(uid), Some(uid))
                    .expect("the link given to the server's user");
            }
        }
        let (_keep, marker) = marker();
        let marker_arg = marker.to_string_lossy().into_owned();
        let result = start.run(&mut server, dir.path(), "proj/attack.py", &[&marker_arg]);
        let sandbox = result["structuredContent"]["sandbox"].to_string();
        assert!(sandbox.contains("mount-ns"), "no file view: {result}");
        for steps in folders {
            let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
            host_git(dir.path(), &steps);
            assert!(
                !marker.exists(),
                "the host's git ran the planted config in {steps:?} ({start:?}, uid {uid:?}): \
                 {result}"
            );
        }
        check(dir.path(), &result, &marker);
        assert!(
            !marker.exists(),
            "the host ran what the run planted ({start:?}, uid {uid:?}): {result}"
        );
        server.close();
    }
}

fn steps(path: &str) -> Vec<String> {
    path.split('/').map(str::to_owned).collect()
}

fn quarantined(result: &Value) -> String {
    result["structuredContent"]["quarantined"].to_string()
}

#[test]
fn a_repository_hidden_in_an_unlistable_folder_does_not_stay() {
    let body = r##"
def hide():
    plant("x/.git")
    os.chmod("x", 0o111)
attempt("hide", hide)
def nested():
    plant("y/z/.git")
    os.chmod("y/z", 0o111)
    os.chmod("y", 0o111)
attempt("nested", nested)
def readonly():
    plant("r/.git")
    os.chmod("r/.git", 0o555)
    os.chmod("r", 0o555)
attempt("readonly", readonly)
"##;
    for start in Start::BOTH {
        attack(
            start,
            body,
            &[("proj/main.py", "print(1)\n")],
            &[steps("proj/x"), steps("proj/y/z"), steps("proj/r")],
            |root, result, _marker| {
                let said = quarantined(result);
                for name in ["proj/x", "proj/y", "proj/r/.git"] {
                    assert!(said.contains(name), "{name} not reported: {result}");
                }
                assert!(!root.join("proj/x/.git").exists(), "{result}");
                assert!(!root.join("proj/y/z/.git").exists(), "{result}");
                assert!(!root.join("proj/r/.git").exists(), "{result}");
            },
        );
    }
}

#[test]
fn a_folder_with_head_and_commondir_is_taken_for_a_repository() {
    let body = r##"
def common():
    repo_parts("c/common")
    write("c/w/HEAD", "ref: refs/heads/main\n")
    write("c/w/commondir", "../common\n")
attempt("commondir", common)
def gitfile():
    repo_parts("g/common2")
    write("g/planted/HEAD", "ref: refs/heads/main\n")
    write("g/planted/commondir", "../common2\n")
    write("g/work/.git", "gitdir: ../planted\n")
attempt("gitfile", gitfile)
"##;
    for start in Start::BOTH {
        attack(
            start,
            body,
            &[("proj/main.py", "print(1)\n")],
            &[
                steps("proj/c/w"),
                steps("proj/g/work"),
                steps("proj/g/planted"),
            ],
            |_, result, _marker| {
                let said = quarantined(result);
                for name in ["proj/c/w", "proj/g/planted", "proj/g/work/.git"] {
                    assert!(said.contains(name), "{name} not reported: {result}");
                }
            },
        );
    }
}

#[test]
fn a_repository_deeper_than_path_max_does_not_stay() {
    let body = r##"
def deep():
    here = os.open(".", os.O_RDONLY)
    try:
        os.mkdir("deep")
        os.chdir("deep")
        for i in range(30):
            name = ("d%02d" % i) * 50
            os.mkdir(name)
            os.chdir(name)
        plant(".git")
    finally:
        os.fchdir(here)
attempt("deep", deep)
"##;
    let mut path = vec!["proj".to_owned(), "deep".to_owned()];
    path.extend((0..30).map(|i| format!("d{i:02}").repeat(50)));
    for start in Start::BOTH {
        attack(
            start,
            body,
            &[("proj/main.py", "print(1)\n")],
            std::slice::from_ref(&path),
            |root, result, _marker| {
                assert_eq!(attempts(result)["deep"], "DONE", "{result}");
                assert!(quarantined(result).contains("/.git"), "{result}");
                // Gone from the bottom (looked at one `cd` at a time: git itself cannot work in
                // a folder whose path is longer than PATH_MAX).
                let mut line = format!("cd -P '{}'", root.display());
                for step in &path {
                    line.push_str(&format!(" && cd -P '{step}'"));
                }
                line.push_str(" && test ! -e .git");
                let gone = Command::new("sh").args(["-c", &line]).status().unwrap();
                assert!(gone.success(), "the planted .git is still there: {result}");
            },
        );
    }
}

#[test]
fn a_protected_entry_renamed_away_is_kept_and_the_one_planted_at_its_path_goes() {
    let body = r##"
attempt("rename", lambda: os.rename("sub", "sub_old"))
attempt("plant", lambda: plant("sub/.git"))
# A hard link of the user's config (another mount in the view: refused) and a planted
# repository whose config is a hard link of the run's own file.
attempt("link_user", lambda: os.link("sub_old/.git/config" if os.path.exists("sub_old") else "sub/.git/config", "stolen"))
def linked():
    write("evil.cfg", CONFIG)
    repo_parts("hl/.git")
    os.remove("hl/.git/config")
    os.link("evil.cfg", "hl/.git/config")
    write("hl/.git/HEAD", "ref: refs/heads/main\n")
attempt("linked", linked)
"##;
    for start in Start::BOTH {
        attack(
            start,
            body,
            &[
                ("proj/main.py", "print(1)\n"),
                ("proj/sub/.git/HEAD", "ref: refs/heads/main\n"),
                ("proj/sub/.git/config", "[core]\n\tbare = false\n"),
                ("proj/sub/.git/objects/.keep", ""),
                ("proj/sub/.git/refs/heads/.keep", ""),
            ],
            &[steps("proj/sub"), steps("proj/sub_old"), steps("proj/hl")],
            |root, result, _marker| {
                // The user's own repository is still there, untouched, at one of the two paths.
                let real = ["proj/sub/.git/config", "proj/sub_old/.git/config"]
                    .iter()
                    .filter_map(|p| std::fs::read_to_string(root.join(p)).ok())
                    .filter(|c| c == "[core]\n\tbare = false\n")
                    .count();
                assert_eq!(real, 1, "the user's .git went: {result}");
                assert!(quarantined(result).contains("proj/hl/.git"), "{result}");
                assert_ne!(attempts(result)["link_user"], "DONE", "{result}");
            },
        );
    }
}

#[test]
fn a_protected_link_replaced_by_a_planted_repository_goes_even_with_its_inode_number() {
    // The view cannot bind a link read-only, so a run may remove the user's `sub/.git` link;
    // ext4 gives the planted folder made next at that path the link's inode number, and the
    // check by (dev, ino) alone took it for the user's.
    let body = r##"
attempt("remove", lambda: os.remove("sub/.git"))
attempt("plant", lambda: plant("sub/.git"))
"##;
    for start in Start::BOTH {
        attack_with_links(
            start,
            body,
            &[
                ("proj/main.py", "print(1)\n"),
                ("proj/sub/readme.txt", "mine\n"),
                ("proj/mine/.git/HEAD", "ref: refs/heads/main\n"),
                ("proj/mine/.git/config", "[core]\n\tbare = false\n"),
                ("proj/mine/.git/objects/.keep", ""),
                ("proj/mine/.git/refs/heads/.keep", ""),
            ],
            &[("proj/sub/.git", "../mine/.git")],
            &[steps("proj/sub")],
            |root, result, _marker| {
                assert_eq!(attempts(result)["plant"], "DONE", "{result}");
                assert!(quarantined(result).contains("proj/sub/.git"), "{result}");
                let config = std::fs::read_to_string(root.join("proj/mine/.git/config"));
                assert_eq!(config.ok().as_deref(), Some("[core]\n\tbare = false\n"));
            },
        );
    }
}

/// The attempts the script made: its last line of output.
fn attempts(result: &Value) -> std::collections::BTreeMap<String, String> {
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no attempts in {result}: {e}"))
}

#[test]
fn a_startup_module_planted_in_the_project_does_not_stay() {
    let body = r##"
hook = "open(" + repr(MARKER) + ", 'w').write('ran')\n"
attempt("py", lambda: write("sitecustomize.py", hook))
attempt("package", lambda: write("src/usercustomize/__init__.py", hook))
"##;
    for start in Start::BOTH {
        attack(
            start,
            body,
            &[("proj/main.py", "print(1)\n")],
            &[],
            |root, result, marker| {
                // The host's Python with the folders on its path, as a shell with
                // `PYTHONPATH=.:src` would start it.
                let python = Command::new("python3")
                    .args(["-c", "pass"])
                    .current_dir(root.join("proj"))
                    .env("PYTHONPATH", ".:src")
                    .status()
                    .expect("python3 runs");
                assert!(python.success());
                assert!(!marker.exists(), "the host's python ran it: {result}");
                let said = quarantined(result);
                for name in ["proj/sitecustomize.py", "proj/src/usercustomize"] {
                    assert!(said.contains(name), "{name} not reported: {result}");
                }
            },
        );
    }
}

/// A compiled module beside no source (`json.pyc`) or an extension module (`*.so`) in a folder on
/// the path is imported by the user's own Python before the standard library's or the project's
/// `.py` of that name; `*.pyc` hides in every Python `.gitignore`.
#[test]
fn a_compiled_module_planted_in_the_project_does_not_stay() {
    let body = r##"
import importlib.util, marshal
print("exe", sys.executable)
hook = "open(" + repr(MARKER) + ", 'w').write('ran')\n"
def pyc(name):
    code = compile(hook, name + ".py", "exec")
    head = importlib.util.MAGIC_NUMBER + bytes(12)
    with open(name + ".pyc", "wb") as f:
        f.write(head + marshal.dumps(code))
attempt("pyc", lambda: pyc("json"))
attempt("so", lambda: write("helper.so", "not an ELF"))
"##;
    for start in Start::BOTH {
        attack(
            start,
            body,
            &[("proj/main.py", "import json\nprint(json.dumps(1))\n")],
            &[],
            |root, result, marker| {
                assert_eq!(attempts(result)["pyc"], "DONE", "{result}");
                // The interpreter the run had (the planted bytecode is for its version), as the
                // user would start the project's script on the host.
                let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
                let exe = stdout
                    .lines()
                    .find_map(|l| l.strip_prefix("exe "))
                    .unwrap_or_else(|| panic!("no interpreter in {result}"));
                let python = Command::new(exe)
                    .arg("main.py")
                    .current_dir(root.join("proj"))
                    .output()
                    .expect("the interpreter runs");
                assert!(!marker.exists(), "the host's python ran it: {result}");
                assert!(python.status.success(), "{python:?}");
                let said = quarantined(result);
                for name in ["proj/json.pyc", "proj/helper.so"] {
                    assert!(said.contains(name), "{name} not reported: {result}");
                }
            },
        );
    }
}

/// A protected entry that is a link is not bound read-only (a bind would follow it), so a run
/// may remove it; the inode number it frees is handed out again, and a new link made until one
/// gets it (then renamed to the old name) has the old link's device and inode. It is still new:
/// `.venv` pointing at a planted folder would run its `bin/activate` in the user's shell.
#[test]
fn a_link_replaced_by_one_with_its_inode_number_does_not_stay() {
    let body = r##"
def reuse():
    ino = os.lstat(".venv").st_ino
    os.unlink(".venv")
    for i in range(5000):
        tmp = "t%d" % i
        os.symlink("fake", tmp)
        if os.lstat(tmp).st_ino == ino:
            os.rename(tmp, ".venv")
            break
    for name in os.listdir("."):
        if name.startswith("t") and os.path.islink(name):
            os.unlink(name)
    write("fake/bin/activate", "touch " + MARKER + "\n")
    if os.lstat(".venv").st_ino != ino:
        raise OSError(errno.EAGAIN, "no inode reused")
attempt("reuse", reuse)
"##;
    let script = script(body);
    let files = [
        ("proj/main.py", "print(1)\n"),
        ("proj/attack.py", script.as_str()),
    ];
    for start in Start::BOTH {
        for (dir, mut server, uid) in servers_for(start, &files) {
            let venv = dir.path().join("proj/.venv");
            std::os::unix::fs::symlink("/nonexistent/venv", &venv).expect("the user's link");
            if let Some(uid) = uid {
                std::os::unix::fs::lchown(&venv, Some(uid), Some(uid)).expect("chown -h");
            }
            let (_keep, marker) = marker();
            let marker_arg = marker.to_string_lossy().into_owned();
            let result = start.run(&mut server, dir.path(), "proj/attack.py", &[&marker_arg]);
            // EAGAIN: another process took the freed number first (tests run side by side);
            // what follows holds then too.
            let reuse = &attempts(&result)["reuse"];
            assert!(reuse == "DONE" || reuse == "EAGAIN", "{result}");
            // The user's shell, activating the project's venv.
            let _ = Command::new("bash")
                .args(["-c", ". proj/.venv/bin/activate"])
                .current_dir(dir.path())
                .stdin(std::process::Stdio::null())
                .output()
                .expect("bash runs");
            assert!(
                !marker.exists(),
                "the planted activate ran ({start:?}, uid {uid:?}): {result}"
            );
            let now = std::fs::read_link(&venv).ok();
            assert!(
                now.is_none() || now == Some(PathBuf::from("/nonexistent/venv")),
                "a planted .venv link stayed ({start:?}, uid {uid:?}): {now:?} {result}"
            );
            server.close();
        }
    }
}

/// A venv whose `pyvenv.cfg` is a symbolic link: Python opens the file through the link, so the
/// folder is a venv to it (its `site-packages` and their `.pth` files run at start), and it is
/// one to the check too.
#[test]
fn a_venv_whose_pyvenv_cfg_is_a_link_does_not_stay() {
    let body = r##"
def venv():
    write("tools/cfg", "home = /usr/bin\ninclude-system-site-packages = false\n")
    os.symlink("cfg", "tools/pyvenv.cfg")
    os.makedirs("tools/bin", exist_ok=True)
    os.symlink("/usr/bin/python3", "tools/bin/python")
    for minor in range(8, 16):
        write("tools/lib/python3.%d/site-packages/evil.pth" % minor,
              "import os; open(%r, 'w').write('ran')\n" % MARKER)
attempt("venv", venv)
"##;
    for start in Start::BOTH {
        attack(
            start,
            body,
            &[("proj/main.py", "print(1)\n")],
            &[],
            |root, result, marker| {
                assert_eq!(attempts(result)["venv"], "DONE", "{result}");
                let python = root.join("proj/tools/bin/python");
                if std::fs::symlink_metadata(&python).is_ok() {
                    let _ = Command::new(&python).args(["-c", "pass"]).output();
                }
                assert!(!marker.exists(), "the planted venv's .pth ran: {result}");
                assert!(quarantined(result).contains("proj/tools"), "{result}");
            },
        );
    }
}

//! A run that swaps the folders a protected entry hangs from, tried for real through the server
//! binary: it renames the parent of the user's `sub/.git` or `src/pkg/__pycache__` (or a
//! grandparent, or its own project folder, or replaces one by a link, renames it onto an
//! existing folder or exchanges it with another in one step) and builds a
//! planted copy at the old path: a repository whose `core.fsmonitor` runs on `git status`, a
//! package whose unchecked-hash `.pyc` runs on `import`. The run's view pins every folder on the
//! way (a mount point cannot be renamed or removed), so each rename is refused; afterwards the
//! host's own `git status` and `python3 -c 'import pkg.mod'` run in the user's folders and must
//! not run the planted code (its marker file stays absent), and the user's real entries are
//! still where they were, the same files. Each attack is first tried on the host with nothing
//! to refuse it, to prove it would plant working code. On a root and an unprivileged server,
//! warm and cold. Last, what a run may still do in a pinned folder: write, rename inside it,
//! and move a file out with `shutil.move` (a plain rename out is `EXDEV`, as between disks).
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::escapes::servers_with;
use crate::util;
use crate::util::warm::Start;
use pyrun_mcp_tests::TempProjects;
use serde_json::Value;

/// What the attack scripts share: `plant_git(worktree, marker)` builds a repository whose
/// fsmonitor touches `MARKERS/marker`; `plant_pkg(folder, marker)` a package `pkg` whose `mod`'s
/// cached bytecode (unchecked hash: Python never compares it with the source) touches it.
const PLANT: &str = r##"
import ctypes, py_compile, shutil
def plant_git(worktree, marker):
    git = os.path.join(worktree, ".git")
    os.makedirs(os.path.join(git, "objects"))
    os.makedirs(os.path.join(git, "refs", "heads"))
    write(os.path.join(git, "HEAD"), "ref: refs/heads/main\n")
    write(os.path.join(git, "config"), "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
          "\tfsmonitor = touch " + os.path.join(MARKERS, marker) + "\n")
def plant_pkg(folder, marker):
    write(os.path.join(folder, "__init__.py"), "")
    write(os.path.join(folder, "mod.py"), "X = 1\n")
    evil = os.path.join(os.environ.get("TMPDIR", "/tmp"), marker + ".py")
    write(evil, "open(%r, 'w').close()\nX = 1\n" % os.path.join(MARKERS, marker))
    os.makedirs(os.path.join(folder, "__pycache__"), exist_ok=True)
    cached = os.path.join(folder, "__pycache__", "mod.%s.pyc" % sys.implementation.cache_tag)
    py_compile.compile(evil, cfile=cached, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
_libc = ctypes.CDLL(None, use_errno=True)
def exchange(a, b):
    # renameat2(RENAME_EXCHANGE): both names swapped in one step.
    if _libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
def then(name, f):
    # A step that makes sense only once every step before it of its group was done.
    group = name.split("_")[0]
    if all(v == "DONE" for k, v in _results.items() if k.split("_")[0] == group):
        attempt(name, f)
"##;

/// Way 1 of the issue, exactly: `sub` and `src/pkg` renamed aside, planted copies built at
/// their old paths.
const WAY_1: &str = r##"
attempt("sub_rename", lambda: os.rename("sub", "sub_old"))
then("sub_plant", lambda: plant_git("sub", "way1_git"))
attempt("pkg_rename", lambda: os.rename("src/pkg", "src/pkg_old"))
then("pkg_plant", lambda: plant_pkg("src/pkg", "way1_pyc"))
"##;

/// The variants, each on a subtree of its own.
const VARIANTS: &str = r##"
# The grandparent of a __pycache__.
attempt("grand_rename", lambda: os.rename("g/src", "g/src_old"))
then("grand_plant", lambda: plant_pkg("g/src/pkg", "grand_pyc"))
# The writable root's child that holds a deep .git.
attempt("deep_rename", lambda: os.rename("w", "w_old"))
then("deep_plant", lambda: plant_git("w/x/y", "deep_git"))
# A folder on the path replaced by a link to a planted tree.
attempt("link_rename", lambda: os.rename("l", "l_real"))
then("link_plant", lambda: plant_pkg("planted/pkg", "link_pyc"))
then("link_swap", lambda: os.symlink("planted", "l"))
# The folder holding a __pycache__ moved away and back.
attempt("back_away", lambda: os.rename("m/pkg", "m/pkg_away"))
then("back_return", lambda: os.rename("m/pkg_away", "m/pkg"))
# The parent of a .git renamed onto an existing (empty) folder.
os.makedirs("q/spare", exist_ok=True)
attempt("onto_rename", lambda: os.rename("q/sub", "q/spare"))
then("onto_plant", lambda: plant_git("q/sub", "onto_git"))
# A package folder emptied, then removed.
def empty(folder):
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
attempt("rmdir_empty", lambda: empty("e/pkg"))
attempt("rmdir_remove", lambda: os.rmdir("e/pkg"))
then("rmdir_plant", lambda: plant_pkg("e/pkg", "rmdir_pyc"))
# The parent of a .git exchanged with a planted folder in one step.
attempt("swap_plant", lambda: plant_git("x/evil", "swap_git"))
then("swap_exchange", lambda: exchange("x/evil", "x/sub"))
"##;

/// With `--write-scope all`: the project folder itself, which holds a `.git` two levels down,
/// renamed aside from inside, and a planted copy built at its path.
const OWN_FOLDER: &str = r##"
attempt("own_rename", lambda: os.rename("../a", "../a_old"))
then("own_plant", lambda: plant_git("../a/sub", "own_git"))
"##;

/// A host check after the run: a repository's work tree, or a package's import root.
#[derive(Clone, Copy)]
enum Check {
    /// `git status` in this folder (relative to the attack's folder).
    Git(&'static str),
    /// `python3 -c 'import pkg.mod'` with this folder as `PYTHONPATH`.
    Import(&'static str),
}

/// One attack: its script body, the files of its folder `a/`, the real protected entries it
/// aims at (relative to `a/`, made by the host before the run), the host checks, the markers
/// its planted code leaves when nothing refuses it, and each attempt's name with the errnos
/// that count as refused.
struct Attack {
    body: &'static str,
    /// The servers' arguments besides.
    flags: &'static [&'static str],
    planted: &'static [&'static str],
    files: &'static [(&'static str, &'static str)],
    repos: &'static [&'static str],
    packages: &'static [&'static str],
    checks: &'static [Check],
    refused: &'static [(&'static str, &'static [&'static str])],
}

const BUSY: &[&str] = &["EBUSY"];

fn way_1() -> Attack {
    Attack {
        body: WAY_1,
        flags: &[],
        planted: &["way1_git", "way1_pyc"],
        files: &[
            ("a/sub/README", "the user's sub-repository\n"),
            ("a/src/pkg/__init__.py", ""),
            ("a/src/pkg/mod.py", "X = 1\n"),
        ],
        repos: &["sub"],
        packages: &["src/pkg"],
        checks: &[Check::Git("sub"), Check::Import("src")],
        refused: &[("sub_rename", BUSY), ("pkg_rename", BUSY)],
    }
}

fn variants() -> Attack {
    Attack {
        body: VARIANTS,
        flags: &[],
        planted: &[
            "deep_git",
            "grand_pyc",
            "link_pyc",
            "onto_git",
            "rmdir_pyc",
            "swap_git",
        ],
        files: &[
            ("a/g/src/pkg/__init__.py", ""),
            ("a/g/src/pkg/mod.py", "X = 1\n"),
            ("a/w/x/y/README", "deep\n"),
            ("a/l/pkg/__init__.py", ""),
            ("a/l/pkg/mod.py", "X = 1\n"),
            ("a/m/pkg/__init__.py", ""),
            ("a/m/pkg/mod.py", "X = 1\n"),
            ("a/q/sub/README", "sub\n"),
            ("a/x/sub/README", "sub\n"),
            ("a/e/pkg/__init__.py", ""),
            ("a/e/pkg/mod.py", "X = 1\n"),
        ],
        repos: &["w/x/y", "q/sub", "x/sub"],
        packages: &["g/src/pkg", "l/pkg", "m/pkg", "e/pkg"],
        checks: &[
            Check::Import("g/src"),
            Check::Git("w/x/y"),
            Check::Import("l"),
            Check::Import("m"),
            Check::Git("q/sub"),
            Check::Import("e"),
            Check::Git("x/sub"),
        ],
        refused: &[
            ("grand_rename", BUSY),
            ("deep_rename", BUSY),
            ("link_rename", BUSY),
            ("back_away", BUSY),
            ("onto_rename", BUSY),
            ("rmdir_remove", &["EBUSY", "ENOTEMPTY"]),
            ("swap_exchange", BUSY),
        ],
    }
}

fn own_folder() -> Attack {
    Attack {
        body: OWN_FOLDER,
        flags: &["--write-scope", "all"],
        planted: &["own_git"],
        files: &[("a/sub/README", "the user's sub-repository\n")],
        repos: &["sub"],
        packages: &[],
        checks: &[Check::Git("sub")],
        refused: &[("own_rename", BUSY)],
    }
}

/// The interpreter a server runs scripts with: the harness's for the test's own user, the
/// system's for the other one (`escapes::servers_with`). The host's checks use the same one, so
/// a planted `.pyc` has the tag it would look for.
fn python_of(uid: Option<u32>) -> PathBuf {
    match uid {
        Some(_) => ["/usr/bin/python3", "/usr/local/bin/python3"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .expect("a system python3"),
        None => pyrun_mcp_tests::python(),
    }
}

/// A command of the host's, as `uid` when given (the user whose folder it is), with no user or
/// system git settings and no bytecode prefix: what the user's own shell would run.
fn host_command(program: &Path, cwd: &Path, uid: Option<u32>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(program);
    command
        .current_dir(cwd)
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPYCACHEPREFIX")
        .env_remove("PYTHONPATH")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    command
}

fn ran(command: &mut Command) {
    let out = command.output().expect("the host command starts");
    assert!(out.status.success(), "{command:?}: {out:?}");
}

/// Makes the attack's real entries in the project `a/` of `projects`: a repository (`git
/// init`) in each of `repos`, a `__pycache__` (compiled by `python`) in each of `packages`;
/// then makes the folder `uid`'s. Returns each entry with its identity (dev, inode).
fn make_real_entries(
    projects: &Path,
    attack: &Attack,
    python: &Path,
    uid: Option<u32>,
) -> BTreeMap<PathBuf, (u64, u64)> {
    let a = projects.join("a");
    let mut entries = Vec::new();
    for repo in attack.repos {
        ran(Command::new("git")
            .args(["init", "-q"])
            .arg(a.join(repo))
            .env("HOME", "/nonexistent")
            .env("GIT_CONFIG_NOSYSTEM", "1"));
        entries.push(a.join(repo).join(".git"));
    }
    for package in attack.packages {
        ran(Command::new(python)
            .args(["-m", "compileall", "-q"])
            .arg(a.join(package)));
        entries.push(a.join(package).join("__pycache__"));
    }
    if let Some(uid) = uid {
        ran(Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(projects));
    }
    entries
        .into_iter()
        .map(|entry| {
            let meta = std::fs::symlink_metadata(&entry).expect("the real entry exists");
            assert!(meta.is_dir(), "{}", entry.display());
            (entry, (meta.dev(), meta.ino()))
        })
        .collect()
}

/// A folder the planted code writes its markers in, open to every user.
fn markers_dir() -> tempfile::TempDir {
    let markers = tempfile::tempdir().unwrap();
    std::fs::set_permissions(markers.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    markers
}

fn script(attack: &Attack, markers: &Path) -> String {
    format!(
        "{}\nMARKERS = {:?}\n{PLANT}\n{}\nreport()\n",
        util::ATTEMPT,
        markers.display().to_string(),
        attack.body
    )
}

/// Runs the host's own `git status` and `import pkg.mod` where the attack's checks say, as
/// `uid`, and returns the markers the planted code left.
fn host_checks(
    a: &Path,
    attack: &Attack,
    python: &Path,
    uid: Option<u32>,
    markers: &Path,
) -> Vec<String> {
    for check in attack.checks {
        // Either may fail (a repository half made): only what they ran matters.
        let _ = match check {
            Check::Git(worktree) => host_command(Path::new("git"), &a.join(worktree), uid)
                .env("GIT_CEILING_DIRECTORIES", a)
                .arg("status")
                .output(),
            Check::Import(root) => host_command(python, &a.join(root), uid)
                .env("PYTHONPATH", a.join(root))
                .args(["-c", "import pkg.mod"])
                .output(),
        };
    }
    let mut left: Vec<String> = std::fs::read_dir(markers)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    left
}

/// The attack run on the host itself, nothing refusing it: the planted code must run there,
/// or the sandboxed tries below would prove nothing.
fn proves_itself(attack: &Attack) {
    let projects = TempProjects::named("p").files(attack.files);
    let python = python_of(None);
    make_real_entries(projects.path(), attack, &python, None);
    let markers = markers_dir();
    let scratch = tempfile::tempdir().unwrap();
    let a = projects.path().join("a");
    std::fs::write(a.join("attack.py"), script(attack, markers.path())).unwrap();
    ran(host_command(&python, &a, None)
        .env("TMPDIR", scratch.path())
        .arg("attack.py"));
    let left = host_checks(&a, attack, &python, None, markers.path());
    assert_eq!(
        left, attack.planted,
        "not every planted copy ran on the host"
    );
}

/// The attack's files with its script (whose markers go to `markers`).
fn attack_files(attack: &Attack, markers: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = attack
        .files
        .iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect();
    files.push(("a/attack.py".into(), script(attack, markers)));
    files
}

fn attempts(result: &Value) -> BTreeMap<String, String> {
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no attempts in {result}: {e}"))
}

/// Tries `attack` through root and unprivileged servers, cold and warm: each rename refused,
/// nothing planted runs on the host, the real entries the same files at the same paths.
fn try_everywhere(attack: &Attack) {
    proves_itself(attack);
    for start in Start::BOTH {
        let markers = markers_dir();
        let files = attack_files(attack, markers.path());
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        for (dir, mut server, uid) in servers_with(start, &files, attack.flags) {
            let python = python_of(uid);
            let real = make_real_entries(dir.path(), attack, &python, uid);
            let result = start.run(&mut server, dir.path(), "a/attack.py", &[]);
            let layers = result["structuredContent"]["sandbox"].to_string();
            assert!(layers.contains("mount-ns"), "no view ({layers}): {result}");
            let tried = attempts(&result);
            let label = format!("{start:?}, uid {uid:?}");
            for (name, errnos) in attack.refused {
                let got = tried.get(*name).map(String::as_str).unwrap_or("not tried");
                assert!(
                    errnos.contains(&got),
                    "{label}: {name} ended with {got}, not refused ({errnos:?}): {tried:?}\n{result}"
                );
            }
            server.close();
            let a = dir.path().join("a");
            let left = host_checks(&a, attack, &python, uid, markers.path());
            assert!(
                left.is_empty(),
                "{label}: planted code ran on the host: {left:?}; {tried:?}"
            );
            for (entry, identity) in &real {
                let meta = std::fs::symlink_metadata(entry)
                    .unwrap_or_else(|e| panic!("{label}: {} is gone: {e}", entry.display()));
                assert_eq!(
                    (meta.dev(), meta.ino()),
                    *identity,
                    "{label}: {} is not the user's own any more",
                    entry.display()
                );
            }
        }
    }
}

#[test]
fn a_run_cannot_rename_the_parents_of_a_git_or_a_pycache_and_plant_copies_there() {
    try_everywhere(&way_1());
}

#[test]
fn a_run_cannot_swap_a_grandparent_a_deep_folder_a_link_or_an_emptied_folder_on_the_way() {
    try_everywhere(&variants());
}

#[test]
fn with_write_scope_all_a_run_cannot_rename_its_own_project_folder_aside() {
    try_everywhere(&own_folder());
}

const WORK_INSIDE: &str = r##"
import shutil
attempt("write", lambda: write("src/pkg/new.py", "Y = 2\n"))
attempt("rename_inside", lambda: os.rename("src/pkg/new.py", "src/pkg/renamed.py"))
attempt("mkdir_rmdir", lambda: (os.mkdir("src/pkg/tmp"), os.rmdir("src/pkg/tmp")))
attempt("rename_across", lambda: os.rename("src/pkg/renamed.py", "src/moved.py"))
attempt("move_across", lambda: shutil.move("src/pkg/renamed.py", "src/moved.py"))
"##;

#[test]
fn a_run_still_writes_and_renames_inside_a_pinned_folder_and_moves_files_out_with_shutil() {
    let (dir, _) = util::project(&[
        (
            "a/work.py",
            &format!("{}\n{WORK_INSIDE}\nreport()\n", util::ATTEMPT),
        ),
        ("a/src/pkg/__init__.py", ""),
        ("a/src/pkg/__pycache__/x.pyc", ""),
    ]);
    let mut server = Start::Cold.server(dir.path(), &[]);
    let result = Start::Cold.run(&mut server, dir.path(), "a/work.py", &[]);
    let tried = attempts(&result);
    for done in ["write", "rename_inside", "mkdir_rmdir", "move_across"] {
        assert_eq!(
            tried.get(done).map(String::as_str),
            Some("DONE"),
            "{done}: {tried:?}"
        );
    }
    // A pinned folder is a mount of its own: a rename out of it is one across mounts.
    assert_eq!(
        tried.get("rename_across").map(String::as_str),
        Some("EXDEV"),
        "{tried:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a/src/moved.py")).unwrap(),
        "Y = 2\n"
    );
    server.close();
}

//! Where things are: the workspace, its `target/<profile>/` binaries and the sample projects.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::process::run_bounded;

/// The workspace root (the folder holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `target/<profile>/` of the running test: test binaries live in its `deps/` subfolder.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    let mut dir = exe
        .parent()
        .expect("a test binary lives in a folder")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// The cargo target folder of this build (`target/`, or `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    let profile = profile_dir();
    profile.parent().map(Path::to_path_buf).unwrap_or(profile)
}

/// A workspace binary next to the test binary, e.g. `bin_path("pyrun-mcp-server")`, up to date.
///
/// `cargo test --workspace` builds only the binaries of packages that have integration tests, and
/// `cargo test -p pyrun-mcp-tests` none at all. So the first call in a test process runs
/// `cargo build --workspace --bins --tests` into this target folder: the same units `cargo test
/// --workspace` compiles (no rebuild with other features), plus every plain binary; a no-op when
/// all is fresh, and serialised by cargo's own lock. Panics with the build's output if it fails.
pub fn bin_path(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(e) = BUILT.get_or_init(build_workspace) {
        panic!("{e}");
    }
    let path = profile_dir().join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is not built: no workspace package has a binary named {name}",
        path.display()
    );
    path
}

/// `cargo` (the one running these tests when known), in the workspace root.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

fn build_workspace() -> Result<(), String> {
    let profile = profile_dir();
    let profile_flag = match profile.file_name().and_then(|n| n.to_str()) {
        Some("debug") => None,
        Some("release") => Some("--release"),
        // Some other profile or layout: trust what is there (`bin_path` checks it exists).
        _ => return Ok(()),
    };
    let mut cmd = cargo();
    cmd.args(["build", "--workspace", "--bins", "--tests"])
        .args(profile_flag)
        .arg("--target-dir")
        .arg(target_dir());
    let out = run_bounded(&mut cmd, Duration::from_secs(1200));
    if out.success() {
        Ok(())
    } else {
        Err(format!(
            "building the workspace binaries failed: {cmd:?}\n{}",
            out.describe()
        ))
    }
}

/// The repository's sample folder `python_projects/` (do not write into it; see [`projects_copy`]).
pub fn sample_projects() -> PathBuf {
    workspace_root().join("python_projects")
}

/// A private copy of `python_projects/` in a temporary folder that is removed on drop; scripts may
/// write into it without touching the repository.
pub fn projects_copy() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("pyrun-projects-")
        .tempdir()
        .expect("create a temporary folder");
    copy_tree(&sample_projects(), dir.path());
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    let entries = std::fs::read_dir(from)
        .unwrap_or_else(|e| panic!("read sample folder {}: {e}", from.display()));
    for entry in entries {
        let entry = entry.expect("read a directory entry");
        let kind = entry.file_type().expect("file type of a directory entry");
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            if entry.file_name() == "__pycache__" {
                continue;
            }
            std::fs::create_dir_all(&target).expect("create a folder in the copy");
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).expect("copy a sample file");
        }
    }
}

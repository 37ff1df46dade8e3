//! Where things are: the workspace, its `target/<profile>/` binaries and the sample projects.

use std::path::{Path, PathBuf};

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

/// A workspace binary next to the test binary, e.g. `bin_path("pyrun-mcp-server")`.
///
/// Nothing is built here (no nested cargo). Cargo builds a package's binaries for that package's
/// own integration tests (so the server's tests find `pyrun-mcp-server`, the one their
/// `CARGO_BIN_EXE_pyrun-mcp-server` names); the tests that need another package's binary are the
/// `real-clients` step, which `scripts/test.sh` runs after `cargo build --workspace --bins`.
/// Panics with that hint when the binary is missing.
pub fn bin_path(name: &str) -> PathBuf {
    let path = profile_dir().join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is not built.\nhint: run `cargo build --workspace --bins{}` first (scripts/test.sh does)",
        path.display(),
        if profile_dir().ends_with("release") { " --release" } else { "" }
    );
    path
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

//! The one interpreter resolver of the tests and the bench: the real executable behind `python3`
//! (`python` on Windows), asked once. A pyenv shim on PATH is a bash script that costs ~100 ms a
//! start, and the sandbox must see the real binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The interpreter the tests run: `PYRUN_TEST_PYTHON`, else `python3`, resolved once per process.
/// Panics (with the reason) when there is none: these tests need Python.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let given = std::env::var_os("PYRUN_TEST_PYTHON").map(PathBuf::from);
            resolve_python(given.as_deref())
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The real executable of `given` (default `python3`, `python` on Windows): what it reports as
/// `sys.executable`.
pub fn resolve_python(given: Option<&Path>) -> Result<PathBuf, String> {
    let default = Path::new(if cfg!(windows) { "python" } else { "python3" });
    let candidate = given.unwrap_or(default);
    let out = Command::new(candidate)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", candidate.display()))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || path.is_empty() {
        return Err(format!(
            "{} did not report its executable ({}): {}",
            candidate.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(PathBuf::from(path))
}

//! Asks an interpreter once which trees it reads at start-up (prefixes, stdlib, site-packages).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::SandboxError;

/// Printed by the interpreter: one absolute path per line. `-I` keeps `PYTHON*` variables, the
/// user site (`~/.local`) and the current directory out of the answer.
const PROBE: &str = "import os, site, sys\n\
paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,\n\
         os.path.dirname(os.path.realpath(sys.executable))]\n\
paths += site.getsitepackages() + sys.path\n\
print('\\n'.join(p for p in paths if p))";

/// The directories `python` needs to read (and execute) to run scripts: `sys.prefix`,
/// `sys.base_prefix` (for a venv), the real executable's directory, the stdlib and site-packages.
/// Canonical, existing, without nested duplicates. Refuses an answer that includes `/`.
pub fn python_read_paths(python: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    let fail = |reason: String| SandboxError::PythonPaths {
        python: python.to_path_buf(),
        reason,
    };
    let output = Command::new(python)
        .args(["-I", "-c", PROBE])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| fail(e.to_string()))?;
    if !output.status.success() {
        return Err(fail(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let text = String::from_utf8(output.stdout).map_err(|e| fail(e.to_string()))?;
    let mut paths: Vec<PathBuf> = text
        .lines()
        .map(Path::new)
        .filter(|p| p.is_absolute())
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    if let Some(root) = paths.iter().find(|p| p.parent().is_none()) {
        return Err(fail(format!(
            "it reports {} as one of its directories, which would open the whole filesystem",
            root.display()
        )));
    }
    Ok(outermost(&mut paths))
}

/// Sorted, deduplicated, and without paths already covered by an ancestor in the list.
fn outermost(paths: &mut Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for p in paths.drain(..) {
        if !kept.iter().any(|k| p.starts_with(k)) {
            kept.push(p);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_paths_collapse_into_their_ancestor() {
        let mut paths = vec![
            PathBuf::from("/usr/lib/python3.11"),
            PathBuf::from("/usr"),
            PathBuf::from("/opt/venv/lib/site-packages"),
            PathBuf::from("/opt/venv"),
            PathBuf::from("/usr"),
            PathBuf::from("/usrx"),
        ];
        assert_eq!(
            outermost(&mut paths),
            vec![
                PathBuf::from("/opt/venv"),
                PathBuf::from("/usr"),
                PathBuf::from("/usrx")
            ]
        );
    }
}

//! The interpreter the escape suite and the sandbox benchmark run, and the trees it reads: what
//! the run layer (`pyrun_run::python_env`) gives the sandbox in the server, asked here the same
//! way, since this crate sits below the run layer and cannot call it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The interpreter, resolved once (`python3` on PATH may be a slow shim): its `sys.executable`.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 must be installed to test the sandbox");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// The trees `python` reads, as the server's policy lists them: its prefixes, its executable's
/// folder, site-packages, `sys.path` and the `sitecustomize` it imports (Debian's is a link into
/// `/etc`), canonical, outermost only.
pub fn python_read_paths(python: &Path) -> std::io::Result<Vec<PathBuf>> {
    const PROBE: &str = "import os, site, sys\n\
paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,\n\
         os.path.dirname(os.path.realpath(sys.executable))]\n\
paths += site.getsitepackages() + sys.path\n\
paths.append(getattr(sys.modules.get('sitecustomize'), '__file__', None))\n\
print('\\n'.join(p for p in paths if p))";
    let out = Command::new(python).args(["-I", "-c", PROBE]).output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "{} could not say what it reads: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let mut paths: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(Path::new)
        .filter(|p| p.is_absolute())
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    paths.sort();
    paths.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for p in paths {
        if !kept.iter().any(|k| p.starts_with(k)) {
            kept.push(p);
        }
    }
    Ok(kept)
}

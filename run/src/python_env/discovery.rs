//! The interpreter: found once ([`resolve_python`]), then asked once at start-up which trees it
//! reads ([`python_read_paths`]: prefixes, stdlib, site-packages), or that with its version and
//! its site-packages folders ([`python_facts`]), in one start. What it reads goes into the
//! sandbox's policy (`SandboxPolicy::read_paths`); the sandbox itself never starts it. Each
//! question is a helper process ([`crate::helpers`]), killed if the server closes meanwhile.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pyrun_sandbox::SandboxError;

#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("no Python interpreter found: {0}")]
    NotFound(String),
}

/// Printed by the interpreter: its version on the first line, then its site-packages folders
/// (`S` lines), then the trees it reads (`R` lines), one absolute path each. `-I` keeps `PYTHON*`
/// variables, the user site (`~/.local`) and the current directory out of the answer. A
/// `sitecustomize` every start imports is named too: Debian's is a link into `/etc/python3.X/`.
const PROBE: &str = "import os, platform, site, sys\n\
print(platform.python_version())\n\
print('\\n'.join('S ' + p for p in site.getsitepackages()))\n\
paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,\n\
         os.path.dirname(os.path.realpath(sys.executable))]\n\
print('X ' + sys.executable)\n\
paths += site.getsitepackages() + sys.path\n\
paths.append(getattr(sys.modules.get('sitecustomize'), '__file__', None))\n\
print('\\n'.join('R ' + p for p in paths if p))";

/// What an interpreter says about itself at start-up (it is the operator's choice: trusted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonFacts {
    /// `platform.python_version()`, e.g. `3.11.2`.
    pub version: String,
    /// Its own site-packages folders (`site.getsitepackages()`), canonical, existing, in its order.
    pub site_packages: Vec<PathBuf>,
    /// What [`python_read_paths`] returns.
    pub read_paths: Vec<PathBuf>,
}

/// The directories `python` needs to read (and execute) to run scripts: `sys.prefix`,
/// `sys.base_prefix` (for a venv), the real executable's directory, the stdlib and site-packages;
/// and the link it was started through when it was (runs start it by that path), alone.
/// Canonical, existing, without nested duplicates. Refuses an answer that includes `/`.
pub fn python_read_paths(python: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    python_facts(python).map(|facts| facts.read_paths)
}

/// The link `python` was started through (`executable`), at its canonical folder, when it is
/// one: runs start the interpreter by that path, so their view shows the link itself (not its
/// folder: a link in a home folder must not bring the home).
fn started_through_link(executable: &Path) -> Option<PathBuf> {
    let is_link = std::fs::symlink_metadata(executable).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link || !executable.is_absolute() {
        return None;
    }
    let folder = executable.parent()?.canonicalize().ok()?;
    Some(folder.join(executable.file_name()?))
}

/// Starts `python` once and learns its version, its site-packages folders and the trees it reads
/// (see [`python_read_paths`]).
pub fn python_facts(python: &Path) -> Result<PythonFacts, SandboxError> {
    let fail = |reason: String| SandboxError::PythonPaths {
        python: python.to_path_buf(),
        reason,
    };
    let output = crate::helpers::output(
        Command::new(python)
            .args(["-I", "-c", PROBE])
            .stdin(Stdio::null()),
    )
    .map_err(|e| fail(e.to_string()))?;
    if !output.status.success() {
        // Its last line says why (a traceback ends there); the lines before may quote the whole
        // probe back (a program that is not Python, given it as an argument).
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last: String = stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        return Err(fail(format!("{}: {last}", output.status)));
    }
    let text = String::from_utf8(output.stdout).map_err(|e| fail(e.to_string()))?;
    let mut lines = text.lines();
    let version = lines
        .next()
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'))
        .ok_or_else(|| fail("it did not report its version".to_owned()))?
        .to_owned();
    let (mut site_packages, mut paths) = (Vec::new(), Vec::new());
    for line in lines {
        let (list, path) = match line.split_once(' ') {
            Some(("S", path)) => (&mut site_packages, path),
            Some(("R", path)) => (&mut paths, path),
            Some(("X", path)) => {
                paths.extend(started_through_link(Path::new(path)));
                continue;
            }
            _ => continue,
        };
        let path = Path::new(path);
        if let Some(canonical) = path
            .is_absolute()
            .then(|| path.canonicalize().ok())
            .flatten()
        {
            list.push(canonical);
        }
    }
    if let Some(root) = paths.iter().find(|p| p.parent().is_none()) {
        return Err(fail(format!(
            "it reports {} as one of its directories, which would open the whole filesystem",
            root.display()
        )));
    }
    let mut seen = Vec::new();
    site_packages.retain(|p| {
        let new = !seen.contains(p);
        seen.push(p.clone());
        new
    });
    Ok(PythonFacts {
        version,
        site_packages,
        read_paths: outermost(&mut paths),
    })
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

/// The interpreter's name when none is given.
const DEFAULT_NAME: &str = if cfg!(windows) { "python" } else { "python3" };

/// Where Python usually lives, searched (in this order) when `python3` is not on `PATH`:
/// assistants such as Claude Desktop start servers with a bare `PATH`. Homebrew's and
/// `/usr/local` come before `/usr/bin`, whose `python3` on macOS may be a stub that asks to
/// install developer tools.
#[cfg(unix)]
const USUAL_DIRS: &[&str] = &[
    "/opt/homebrew/bin",
    "/usr/local/bin",
    "/usr/bin",
    "/opt/local/bin",
];
#[cfg(not(unix))]
const USUAL_DIRS: &[&str] = &[];

/// Resolves the interpreter once, so a version-manager shim (pyenv, asdf: a shell script costing
/// ~100 ms) is not paid on every run. A native executable found directly is the interpreter itself
/// and is used as found (a venv's `bin/python` must keep its path); anything else (a shim script, a
/// Windows app alias) is asked for `sys.executable`.
///
/// Without `given`: `python3` (`python` on Windows) on `PATH`, else in the usual places
/// ([`USUAL_DIRS`]; on Windows the `py` launcher), else an error naming where it looked.
pub fn resolve_python(given: Option<&Path>) -> Result<PathBuf, PythonError> {
    let path_var = std::env::var_os("PATH");
    let usual: Vec<PathBuf> = USUAL_DIRS.iter().map(PathBuf::from).collect();
    match given {
        Some(given) => resolve_candidate(given, path_var.as_deref()),
        None => resolve_default(path_var.as_deref(), &usual),
    }
}

/// `candidate` as given: a path, or a name looked up on `path_var`.
fn resolve_candidate(candidate: &Path, path_var: Option<&OsStr>) -> Result<PathBuf, PythonError> {
    match locate(candidate, path_var) {
        Some(found) if is_native_executable(&found) => {
            Ok(std::path::absolute(&found).unwrap_or(found))
        }
        Some(found) => ask_interpreter(&found),
        None => ask_interpreter(candidate),
    }
}

/// No interpreter given: the default name on `path_var`, then in `usual` folders, then (Windows)
/// the `py` launcher.
fn resolve_default(path_var: Option<&OsStr>, usual: &[PathBuf]) -> Result<PathBuf, PythonError> {
    let name = Path::new(DEFAULT_NAME);
    if locate(name, path_var).is_some() {
        return resolve_candidate(name, path_var);
    }
    if let Some(found) = usual.iter().map(|dir| dir.join(name)).find(|p| p.is_file()) {
        return resolve_candidate(&found, path_var);
    }
    if cfg!(windows) {
        if let Ok(found) = ask_interpreter(Path::new("py")) {
            return Ok(found);
        }
    }
    let looked: Vec<String> = usual.iter().map(|d| d.display().to_string()).collect();
    let launcher = if cfg!(windows) {
        ", nor a `py` launcher"
    } else {
        ""
    };
    Err(PythonError::NotFound(format!(
        "no `{DEFAULT_NAME}` on PATH or in {}{launcher}",
        if looked.is_empty() {
            "the usual places".to_owned()
        } else {
            looked.join(", ")
        }
    )))
}

/// The file a command name or path refers to, searching `path_var` for a bare name.
fn locate(candidate: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if candidate.components().count() > 1 || candidate.is_absolute() {
        return candidate.is_file().then(|| candidate.to_path_buf());
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(candidate))
        .find(|p| p.is_file())
}

/// ELF (Linux) or Mach-O (macOS) magic: a real program, not a script. Windows always asks.
fn is_native_executable(path: &Path) -> bool {
    use std::io::Read;
    if cfg!(windows) {
        return false;
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    read.is_ok()
        && matches!(
            magic,
            [0x7f, b'E', b'L', b'F']
                | [0xcf, 0xfa, 0xed, 0xfe]
                | [0xce, 0xfa, 0xed, 0xfe]
                | [0xca, 0xfe, 0xba, 0xbe]
        )
}

/// Starts the interpreter once to learn its real path.
fn ask_interpreter(candidate: &Path) -> Result<PathBuf, PythonError> {
    let output = crate::helpers::output(
        Command::new(candidate)
            .args(["-c", "import sys; print(sys.executable)"])
            .stdin(std::process::Stdio::null()),
    )
    .map_err(|e| PythonError::NotFound(format!("'{}': {e}", candidate.display())))?;
    if !output.status.success() {
        return Err(PythonError::NotFound(format!(
            "'{}' exited with {}",
            candidate.display(),
            output.status
        )));
    }
    let reported = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let path = PathBuf::from(&reported);
    if reported.is_empty() || !path.is_file() {
        // Embedded or unusual interpreters may not know their path: keep what worked.
        return Ok(candidate.to_path_buf());
    }
    Ok(path)
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

    #[test]
    fn the_interpreter_tells_its_version_site_packages_and_read_trees_in_one_start() {
        let python = resolve_python(None).expect("python3 installed");
        let facts = python_facts(&python).unwrap();
        assert!(facts.version.starts_with("3."), "{facts:?}");
        assert!(!facts.read_paths.is_empty(), "{facts:?}");
        for dir in &facts.site_packages {
            assert!(dir.is_absolute() && dir.is_dir(), "{facts:?}");
            // Every site-packages folder lies within a tree runs may read.
            assert!(
                facts.read_paths.iter().any(|r| dir.starts_with(r)),
                "{facts:?}"
            );
        }
    }

    #[test]
    fn bad_python_is_a_clear_error() {
        let err = resolve_python(Some(Path::new("/no/such/python"))).unwrap_err();
        assert!(err.to_string().contains("/no/such/python"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_shim_script_is_resolved_to_the_real_interpreter() {
        use std::os::unix::fs::PermissionsExt;
        let real = resolve_python(None).expect("python3 installed");
        assert!(is_native_executable(&real), "{}", real.display());
        let dir = tempfile::tempdir().unwrap();
        let shim = dir.path().join("python3");
        std::fs::write(
            &shim,
            format!("#!/bin/sh\nexec '{}' \"$@\"\n", real.display()),
        )
        .unwrap();
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        let resolved = resolve_python(Some(&shim)).unwrap();
        assert_ne!(resolved, shim);
        assert!(is_native_executable(&resolved));
    }

    /// Claude Desktop and other assistants start servers with a bare `PATH`: the usual folders
    /// are searched then, and when nothing is there the error says where it looked.
    #[cfg(unix)]
    #[test]
    fn without_python_on_path_the_usual_places_are_searched_and_named() {
        let empty = tempfile::tempdir().unwrap();
        let bare = Some(empty.path().as_os_str());
        let found = resolve_default(bare, &[PathBuf::from("/usr/bin")])
            .expect("this machine has /usr/bin/python3");
        assert!(is_native_executable(&found), "{}", found.display());
        let nowhere = [empty.path().join("a"), empty.path().join("b")];
        let err = resolve_default(bare, &nowhere).unwrap_err().to_string();
        for dir in &nowhere {
            assert!(err.contains(&dir.display().to_string()), "{err}");
        }
        assert!(err.contains("python3") && err.contains("PATH"), "{err}");
        // On PATH, the usual places are not needed.
        let on_path = resolve_default(Some(std::ffi::OsStr::new("/usr/bin")), &nowhere).unwrap();
        assert!(is_native_executable(&on_path));
    }
}

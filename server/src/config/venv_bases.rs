//! `config`'s look at the projects folder's venvs: which base interpreter each wants, and whether
//! this server would run it (`--python`, `--allow-python`) — so that the snippet can allow the
//! ones it would refuse (`config … --allow-venv-pythons`), or say which it found. Local only:
//! `config` prints on the operator's own terminal, so host paths are fine here.

use std::path::{Path, PathBuf};

use pyrun_run::python_env::{base_interpreter, PyvenvCfg, VENV_NAMES};

/// Folders below the projects folder looked into for venvs (a project, or a project's folder).
const DEPTH: usize = 3;
/// Folders looked into at most: a projects folder may be a large tree.
const MAX_FOLDERS: usize = 5000;

/// A venv of the projects folder whose base interpreter this server would not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignVenv {
    /// The venv, relative to the projects folder.
    pub venv: String,
    /// What it wants, in words: `Python 3.12.1 (python3.12)`.
    pub wants: String,
    /// Its base interpreter, when its `home` holds one: what `--allow-python` takes.
    pub interpreter: Option<PathBuf>,
}

/// The venvs below `projects` (canonical) whose `home` is none of the folders of `python` and
/// `allowed`, in path order.
pub(super) fn foreign_venvs(
    projects: &Path,
    python: &Path,
    allowed: &[PathBuf],
) -> Vec<ForeignVenv> {
    let homes: Vec<PathBuf> = std::iter::once(python)
        .chain(allowed.iter().map(PathBuf::as_path))
        .flat_map(|path| {
            let given = path.parent().and_then(|dir| dunce::canonicalize(dir).ok());
            let real = dunce::canonicalize(path)
                .ok()
                .and_then(|real| real.parent().map(Path::to_path_buf));
            [given, real]
        })
        .flatten()
        .collect();
    let mut found = Vec::new();
    let mut folders = vec![(projects.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((folder, depth)) = folders.pop() {
        seen += 1;
        if seen > MAX_FOLDERS {
            break;
        }
        for name in VENV_NAMES {
            let venv = folder.join(name);
            let Some(cfg) = read_cfg(&venv) else {
                continue;
            };
            let home = dunce::canonicalize(&cfg.home).unwrap_or_else(|_| PathBuf::from(&cfg.home));
            if homes.contains(&home) {
                continue;
            }
            found.push(ForeignVenv {
                venv: relative(projects, &venv),
                wants: wants(&cfg),
                interpreter: base_interpreter(&home, &cfg),
            });
        }
        if depth >= DEPTH {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let skip = name.to_string_lossy().starts_with('.')
                || VENV_NAMES.iter().any(|v| name == *v)
                || matches!(name.to_str(), Some("node_modules" | "__pycache__"));
            // Not through links: `file_type` does not follow them.
            if !skip && entry.file_type().is_ok_and(|t| t.is_dir()) {
                folders.push((entry.path(), depth + 1));
            }
        }
    }
    found.sort_by(|a, b| a.venv.cmp(&b.venv));
    found
}

/// `Python 3.12.1 (python3.12)`, as much as the venv's `pyvenv.cfg` says.
pub(crate) fn wants(cfg: &PyvenvCfg) -> String {
    let version = cfg.version_text.as_ref().or(cfg.version.as_ref());
    match (version, &cfg.interpreter_name) {
        (Some(version), Some(name)) => format!("Python {version} ({name})"),
        (Some(version), None) => format!("Python {version}"),
        (None, Some(name)) => name.clone(),
        (None, None) => "an interpreter of unknown version".to_owned(),
    }
}

/// The `pyvenv.cfg` of a real (not linked) venv folder, when it reads.
fn read_cfg(venv: &Path) -> Option<PyvenvCfg> {
    let meta = std::fs::symlink_metadata(venv).ok()?;
    if !meta.is_dir() {
        return None;
    }
    let cfg = venv.join("pyvenv.cfg");
    let meta = std::fs::symlink_metadata(&cfg).ok()?;
    if !meta.is_file() || meta.len() > pyrun_run::python_env::PYVENV_CFG_MAX_BYTES {
        return None;
    }
    PyvenvCfg::parse(&std::fs::read(cfg).ok()?).ok()
}

fn relative(projects: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(projects).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_venv_of_another_interpreter_is_found_with_what_it_wants_and_ours_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dunce::canonicalize(dir.path()).unwrap();
        let ours = projects.join("ours/bin");
        let theirs = projects.join("theirs/bin");
        for bin in [&ours, &theirs] {
            std::fs::create_dir_all(bin).unwrap();
        }
        std::fs::write(ours.join("python3"), "").unwrap();
        std::fs::write(theirs.join("python3.12"), "").unwrap();
        let venv = |at: &str, home: &Path, extra: &str| {
            let venv = projects.join(at);
            std::fs::create_dir_all(&venv).unwrap();
            let cfg = format!("home = {}\n{extra}", home.display());
            std::fs::write(venv.join("pyvenv.cfg"), cfg).unwrap();
        };
        venv("a/.venv", &ours, "version = 3.11.7\n");
        venv(
            "b/c/venv",
            &theirs,
            "version = 3.12.1\nexecutable = /x/python3.12\n",
        );
        let found = foreign_venvs(&projects, &ours.join("python3"), &[]);
        assert_eq!(
            found,
            [ForeignVenv {
                venv: "b/c/venv".into(),
                wants: "Python 3.12.1 (python3.12)".into(),
                interpreter: Some(theirs.join("python3.12")),
            }]
        );
        // Allowed, it is no longer foreign.
        let allowed = [theirs.join("python3.12")];
        assert!(foreign_venvs(&projects, &ours.join("python3"), &allowed).is_empty());
    }
}

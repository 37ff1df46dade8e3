//! `.env`: read from the working directory only, below the real environment, and never from
//! inside the projects folder.

use std::path::{Path, PathBuf};

/// The settings file, read from the working directory only.
pub(super) const DOTENV: &str = ".env";

/// What start-up did with `.env`: the entries are read without applying them, the projects folder
/// they would select is resolved, and the whole file is ignored when it lies inside that folder
/// (a script could have written it: `PYRUN_SANDBOX=off`, a token, another interpreter...).
#[derive(Debug)]
pub enum Dotenv {
    /// No `.env` in the working directory.
    Absent,
    /// Read, and applied below the real environment.
    Loaded {
        file: PathBuf,
        entries: Vec<(String, String)>,
        /// The first line dotenvy could not parse (the lines before it are kept).
        malformed: Option<String>,
    },
    /// Found inside the projects folder, so not read into the environment at all.
    IgnoredInsideProjects { file: PathBuf, projects: PathBuf },
}

impl Dotenv {
    /// Reads `file` if it exists. `projects_for` gets the file's `PYTHON_PROJECTS_DIR` (if any)
    /// and returns the projects folder the server would serve with the file applied.
    pub(super) fn read(
        file: &Path,
        projects_for: impl FnOnce(Option<&str>) -> Option<PathBuf>,
    ) -> Self {
        if !file.is_file() {
            return Self::Absent;
        }
        let (entries, malformed) = match dotenvy::from_path_iter(file) {
            Ok(iter) => {
                let mut entries = Vec::new();
                let mut malformed = None;
                for item in iter {
                    match item {
                        Ok(entry) => entries.push(entry),
                        Err(e) => {
                            malformed = Some(e.to_string());
                            break;
                        }
                    }
                }
                (entries, malformed)
            }
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let from_file = entries
            .iter()
            .rev()
            .find(|(key, _)| key == super::PROJECTS_DIR_VAR)
            .map(|(_, value)| value.as_str());
        if let Some(projects) = projects_for(from_file).and_then(|p| dunce::canonicalize(p).ok()) {
            if lies_inside(file, &projects) {
                return Self::IgnoredInsideProjects {
                    file: file.to_path_buf(),
                    projects,
                };
            }
        }
        Self::Loaded {
            file: file.to_path_buf(),
            entries,
            malformed,
        }
    }

    /// Sets each entry that the real environment does not already set (the environment wins); an
    /// empty entry (`PYTHON_BIN=`) sets nothing, as an empty variable means unset.
    pub(super) fn apply(&self) {
        if let Self::Loaded { entries, .. } = self {
            for (key, value) in entries {
                if !value.is_empty() && std::env::var_os(key).is_none() {
                    std::env::set_var(key, value);
                }
            }
        }
    }

    /// Reports what happened, once tracing is set up.
    pub fn log(&self) {
        match self {
            Self::Absent => {}
            Self::Loaded {
                file, malformed, ..
            } => {
                let file = file.display();
                match malformed {
                    None => tracing::debug!(%file, "settings read from .env"),
                    Some(error) => tracing::warn!(
                        %file,
                        %error,
                        "part of .env could not be read; the lines before the error were applied"
                    ),
                }
            }
            Self::IgnoredInsideProjects { file, projects } => tracing::warn!(
                file = %file.display(),
                projects = %projects.display(),
                ".env IGNORED: it lies inside the projects folder, where scripts can write it; \
                 none of its settings apply. Move it out of the folder (e.g. start the server \
                 from the folder's parent), or set the variables in the environment"
            ),
        }
    }
}

/// Whether `file` is inside `projects` (canonical), by where it is or by where it points.
pub(super) fn lies_inside(file: &Path, projects: &Path) -> bool {
    let folder = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let located = dunce::canonicalize(folder)
        .ok()
        .zip(file.file_name())
        .map(|(folder, name)| folder.join(name));
    let target = dunce::canonicalize(file).ok();
    [located, target]
        .into_iter()
        .flatten()
        .any(|path| path.starts_with(projects))
}

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
    },
    /// A line could not be read: none of the file applies, and the server does not start (a
    /// setting after the line, a token or the sandbox mode, would otherwise be dropped silently).
    Malformed {
        file: PathBuf,
        /// The 1-based line where the entry that could not be read starts, when it is found.
        line: Option<usize>,
        /// Its variable's name, when the line has one (never its value: it may be a secret).
        key: Option<String>,
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
        // The entries before the first line that cannot be read, and that line's text as dotenvy
        // gives it (`Some("")` when the file could not be read at all).
        let (entries, malformed) = match dotenvy::from_path_iter(file) {
            Ok(iter) => {
                let mut entries = Vec::new();
                let mut malformed = None;
                for item in iter {
                    match item {
                        Ok(entry) => entries.push(entry),
                        Err(dotenvy::Error::LineParse(text, _)) => {
                            malformed = Some(text);
                            break;
                        }
                        Err(_) => {
                            malformed = Some(String::new());
                            break;
                        }
                    }
                }
                (entries, malformed)
            }
            Err(_) => (Vec::new(), Some(String::new())),
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
        match malformed {
            None => Self::Loaded {
                file: file.to_path_buf(),
                entries,
            },
            Some(text) => {
                let found = line_of(file, &text);
                Self::Malformed {
                    file: file.to_path_buf(),
                    line: found.as_ref().map(|(line, _)| *line),
                    key: found.and_then(|(_, text)| key_of(&text)),
                }
            }
        }
    }

    /// Why the server must not start with this file, for the person who wrote it: the file, the
    /// line, the variable and the fix; never a value.
    pub fn refusal(&self) -> Option<String> {
        let Self::Malformed { file, line, key } = self else {
            return None;
        };
        let at = line.map_or_else(String::new, |line| format!(" line {line}"));
        let of = key
            .as_ref()
            .map_or_else(String::new, |key| format!(" (the value of {key})"));
        Some(format!(
            "{}{at} cannot be read{of}, so none of it was applied and the server did not start\n\
             hint: quote a value that holds spaces or #, e.g. NAME=\"two words\", or remove the \
             line; a setting left out of .env would silently fall back to its default",
            file.display()
        ))
    }

    /// Sets each entry that the real environment does not already set (the environment wins); an
    /// empty entry (`PYTHON_BIN=`) sets nothing, as an empty variable means unset. Returns the
    /// variables it set.
    pub(super) fn apply(&self) -> Vec<String> {
        let mut applied = Vec::new();
        if let Self::Loaded { entries, .. } = self {
            for (key, value) in entries {
                if !value.is_empty() && std::env::var_os(key).is_none() {
                    std::env::set_var(key, value);
                    applied.push(key.clone());
                }
            }
        }
        applied
    }

    /// The 1-based line of the file that sets `key` first (the entry [`Self::apply`] used).
    pub(super) fn line_of_key(&self, key: &str) -> Option<usize> {
        let Self::Loaded { file, .. } = self else {
            return None;
        };
        let content = std::fs::read_to_string(file).ok()?;
        content
            .lines()
            .position(|line| key_of(line).as_deref() == Some(key))
            .map(|index| index + 1)
    }

    /// The names the file sets (read, whether applied or not), each with its line when found.
    pub(super) fn names(&self) -> Vec<(String, Option<usize>)> {
        let Self::Loaded { entries, .. } = self else {
            return Vec::new();
        };
        entries
            .iter()
            .map(|(key, _)| (key.clone(), self.line_of_key(key)))
            .collect()
    }

    /// Reports what happened, once tracing is set up.
    pub fn log(&self) {
        match self {
            Self::Absent => {}
            Self::Loaded { file, .. } => {
                tracing::debug!(file = %file.display(), "settings read from .env");
            }
            // Said by `refusal`, as the reason the server stops.
            Self::Malformed { .. } => {}
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

/// The 1-based line of `file` holding what dotenvy could not read (`text`: the entry, or only its
/// value), and that line.
fn line_of(file: &Path, text: &str) -> Option<(usize, String)> {
    let first = text.lines().next()?.trim();
    if first.is_empty() {
        return None;
    }
    let content = std::fs::read_to_string(file).ok()?;
    content
        .lines()
        .enumerate()
        .find(|(_, line)| line.contains(first))
        .map(|(index, line)| (index + 1, line.to_owned()))
}

/// The variable an entry sets (`NAME` of `NAME=…` or `export NAME=…`), if it looks like one.
fn key_of(text: &str) -> Option<String> {
    let line = text.lines().next()?.trim();
    let line = line.strip_prefix("export ").unwrap_or(line);
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    let named = !key.is_empty()
        && key.len() <= 128
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    named.then(|| key.to_owned())
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

//! `--state-dir`: where what must outlive the process is kept (OAuth clients and grants,
//! background runs' records, sessions, as those features come). Never inside the projects
//! folder: scripts can write there.

use std::path::{Path, PathBuf};

use super::ConfigError;

/// The folder's name under the platform's data folder.
const APP_DIR: &str = "pyrun-mcp";

/// Where lasting state lives.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "State")]
pub struct StateArgs {
    /// Folder for state that must outlive a restart; made (owner-only) when first needed
    /// [default: the platform's data folder: $XDG_DATA_HOME or ~/.local/share, ~/Library/Application
    /// Support, %APPDATA%; then pyrun-mcp].
    #[arg(long, env = "PYRUN_STATE_DIR", value_name = "DIR", global = true, value_parser = super::home::path)]
    pub state_dir: Option<PathBuf>,
}

impl StateArgs {
    /// The folder as an absolute path, checked to lie outside `projects` (canonical). `None`
    /// when none is given and the platform has no data folder (no home), or when the default one
    /// overlaps the projects folder (a user who serves their whole home): features that keep
    /// state then say they need `--state-dir`. A folder given that overlaps is an error.
    pub(super) fn resolve(&self, projects: &Path) -> Result<Option<PathBuf>, ConfigError> {
        let given = self
            .state_dir
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let Some(dir) = given
            .cloned()
            .or_else(|| dirs::data_dir().map(|d| d.join(APP_DIR)))
        else {
            return Ok(None);
        };
        let dir = std::path::absolute(&dir)
            .map_err(|e| ConfigError::StateDir(format!("'{}': {e}", dir.display())))?;
        if let Ok(projects) = dunce::canonicalize(projects) {
            let real = real_path(&dir);
            if real.starts_with(&projects) || projects.starts_with(&real) {
                if given.is_none() {
                    tracing::warn!(
                        "no state folder: the default one ({}) overlaps the projects folder, \
                         where scripts can write; pass --state-dir DIR outside it for the \
                         features that keep state",
                        dir.display()
                    );
                    return Ok(None);
                }
                return Err(ConfigError::StateDirOverlapsProjects(dir));
            }
        }
        Ok(Some(dir))
    }
}

/// `path` with its longest existing ancestor resolved (links followed), the rest appended and
/// tidied lexically (a folder that does not exist yet is no link): where the folder is or would
/// be made.
pub(super) fn real_path(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(real) = dunce::canonicalize(existing) {
            let joined = rest.iter().rev().fold(real, |p, name| p.join(name));
            return path_clean::clean(joined);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

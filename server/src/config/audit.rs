//! `--audit-log`: where each tool call is recorded (who, over what, which file, how it ended;
//! never what it printed or was given). On by default, in the state folder.

use std::path::{Path, PathBuf};

use super::state::real_path;
use super::ConfigError;

/// The log's name in the state folder.
const DEFAULT_FILE: &str = "audit.jsonl";

/// Where the audit log goes.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "State")]
pub struct AuditArgs {
    /// Append one JSON line per tool call to this file (size-rotated to FILE.1, FILE.2, …), or
    /// `off` [default: audit.jsonl in the state folder].
    #[arg(long, env = "PYRUN_AUDIT_LOG", value_name = "PATH|off", value_parser = super::home::path)]
    pub audit_log: Option<PathBuf>,
}

impl AuditArgs {
    /// The log's absolute path, or `None` when it is off (`off`, or no state folder and no path
    /// given, which is said once on stderr). A path inside the projects folder is refused:
    /// scripts could rewrite the record of what they did.
    pub(super) fn resolve(
        &self,
        state_dir: Option<&Path>,
        projects: &Path,
    ) -> Result<Option<PathBuf>, ConfigError> {
        let given = self
            .audit_log
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let path = match given {
            Some(p) if p.as_os_str().eq_ignore_ascii_case("off") => return Ok(None),
            Some(p) => std::path::absolute(p)
                .map_err(|e| ConfigError::AuditLog(format!("'{}': {e}", p.display())))?,
            None => match state_dir {
                Some(dir) => dir.join(DEFAULT_FILE),
                None => {
                    tracing::info!(
                        "no audit log: there is no state folder; pass --audit-log PATH or \
                         --state-dir DIR to record tool calls"
                    );
                    return Ok(None);
                }
            },
        };
        if let Ok(projects) = dunce::canonicalize(projects) {
            if real_path(&path).starts_with(&projects) {
                return Err(ConfigError::AuditLogInsideProjects(path));
            }
        }
        Ok(Some(path))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        audit: AuditArgs,
    }

    fn resolve(
        args: &[&str],
        state: Option<&Path>,
        projects: &Path,
    ) -> Result<Option<PathBuf>, ConfigError> {
        let cli = Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied())).unwrap();
        cli.audit.resolve(state, projects)
    }

    #[test]
    fn defaults_to_the_state_folder_and_can_be_turned_off() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dir.path().join("projects");
        std::fs::create_dir(&projects).unwrap();
        let state = dir.path().join("state");
        assert_eq!(
            resolve(&[], Some(&state), &projects).unwrap(),
            Some(state.join("audit.jsonl"))
        );
        assert_eq!(resolve(&[], None, &projects).unwrap(), None);
        for off in ["off", "OFF"] {
            assert_eq!(
                resolve(&["--audit-log", off], Some(&state), &projects).unwrap(),
                None
            );
        }
        let elsewhere = dir.path().join("logs/calls.jsonl");
        let arg = elsewhere.to_str().unwrap();
        assert_eq!(
            resolve(&["--audit-log", arg], None, &projects).unwrap(),
            Some(elsewhere.clone())
        );
        let relative = resolve(&["--audit-log", "calls.jsonl"], None, &projects)
            .unwrap()
            .unwrap();
        assert!(relative.is_absolute(), "{}", relative.display());
    }

    #[test]
    fn a_log_inside_the_projects_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dir.path().join("projects");
        std::fs::create_dir(&projects).unwrap();
        let inside = format!("{}/sub/../audit.jsonl", projects.display());
        let err = resolve(&["--audit-log", &inside], None, &projects)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--audit-log") && err.contains("PYRUN_AUDIT_LOG"),
            "{err}"
        );
    }
}

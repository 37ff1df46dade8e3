//! What a run gets: the projects folder, the interpreter, its time and output limits.

use std::path::PathBuf;

use super::{ConfigError, MAX_TIMEOUT_SECS};

/// Which files run, with what, and for how long.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The folder whose .py files may run; nothing outside it can.
    #[arg(long, env = "PYTHON_PROJECTS_DIR", default_value = "./python_projects", value_parser = super::home::path, global = true)]
    pub projects_dir: PathBuf,

    /// Longest a run may take, in seconds (1 to 86400); a tool call may ask for less, never more.
    #[arg(long, env = "PYTHON_TIMEOUT", default_value_t = 30, value_parser = super::grammar::seconds(1, MAX_TIMEOUT_SECS))]
    pub timeout: u64,

    /// Python interpreter [default: `python3` on PATH (`python` on Windows), else in the usual
    /// places (/opt/homebrew/bin, /usr/local/bin, /usr/bin; Windows: `py`), resolved once at
    /// start-up].
    #[arg(long, env = "PYTHON_BIN", value_parser = super::home::path, global = true)]
    pub python: Option<PathBuf>,

    /// Output kept per stream (stdout, stderr), in bytes; the rest is counted and dropped.
    #[arg(long, env = "PYRUN_MAX_OUTPUT_BYTES", default_value_t = 1024 * 1024, value_parser = super::grammar::bytes(1, 1 << 30))]
    pub max_output_bytes: u64,

    /// Output a run's result shows per stream, in bytes (1024 to 262144): beyond it, the head
    /// and the tail with what was cut between, the whole capture one link (or get_run) away.
    #[arg(long, env = "PYRUN_MAX_RESULT_OUTPUT_BYTES", default_value_t = 24 * 1024, value_parser = super::grammar::bytes(1024, 256 * 1024))]
    pub max_result_output_bytes: u64,

    /// The largest stdin a run is given, in bytes (inline `stdin`, or staged in pieces with
    /// upload_stdin and named by `stdin_upload`).
    #[arg(long, env = "PYRUN_MAX_STDIN_BYTES", default_value_t = 64 * 1024 * 1024, value_parser = super::grammar::bytes(1, 1 << 30))]
    pub max_stdin_bytes: u64,

    /// Runs at once; further calls wait their turn; with --oauth, one caller's runs leave a
    /// place to the others [default: 2 x CPUs].
    #[arg(long, env = "PYRUN_MAX_CONCURRENT", value_parser = super::grammar::count(1, 4096))]
    pub max_concurrent: Option<u64>,

    /// Also pass this environment variable to scripts (repeatable; comma-separated in the variable).
    #[arg(
        long = "pass-env",
        env = "PYRUN_PASS_ENV",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub pass_env: Vec<String>,

    /// Serve a projects folder that is the filesystem's root, a home folder or a system folder
    /// (`/etc`, `/usr`, `C:\Windows`...): every file there becomes readable, and writable, by
    /// the scripts run. Refused without this flag.
    #[arg(long, env = "PYRUN_ALLOW_BROAD_PROJECTS_DIR")]
    pub allow_broad_projects_dir: bool,
}

impl RunArgs {
    /// Checks what needs the world: the folder exists and is not too broad to serve unasked,
    /// the names to pass are variable names.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let folder = dunce::canonicalize(&self.projects_dir)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| ConfigError::ProjectsDir(self.projects_dir.display().to_string()))?;
        if let Some(what) = super::broad::too_broad(&folder) {
            if !self.allow_broad_projects_dir {
                return Err(ConfigError::BroadProjectsDir {
                    folder: folder.display().to_string(),
                    what,
                });
            }
        }
        for name in &self.pass_env {
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(ConfigError::BadEnvName(name.clone()));
            }
        }
        Ok(())
    }
}

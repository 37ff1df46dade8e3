//! Project environments: which interpreters, besides `--python`, a project's virtual environment
//! may be made with (`--allow-python`). A venv is used only when its base interpreter is one of
//! these; each is resolved at start-up like `--python` and trusted like it.

use std::path::PathBuf;

use pyrun_run::python_env::resolve_python;

use super::ConfigError;

/// The separator of a list of paths in one variable, as `PATH` has it.
const PATH_LIST_SEPARATOR: char = if cfg!(windows) { ';' } else { ':' };

/// The flags, as given.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Project environments")]
pub struct PythonEnvArgs {
    /// Also run projects whose virtual environment (.venv/ or venv/ with a pyvenv.cfg) was made
    /// with this interpreter (repeatable; a PATH-like list in the variable). A venv made with
    /// --python needs no flag; one made with anything else is refused.
    #[arg(
        long = "allow-python",
        env = "PYRUN_ALLOW_PYTHON",
        value_delimiter = PATH_LIST_SEPARATOR,
        value_name = "PATH",
        value_parser = super::home::path
    )]
    pub allow_python: Vec<PathBuf>,
}

impl PythonEnvArgs {
    /// Each allowed interpreter resolved as `--python` is (a shim to its real program), or the
    /// error naming the one that is not there.
    pub(super) fn resolve(&self) -> Result<Vec<PathBuf>, ConfigError> {
        let mut allowed = Vec::new();
        for given in self
            .allow_python
            .iter()
            .filter(|p| !p.as_os_str().is_empty())
        {
            let python = resolve_python(Some(given)).map_err(|e| {
                ConfigError::AllowPython(given.display().to_string(), e.to_string())
            })?;
            if !allowed.contains(&python) {
                allowed.push(python);
            }
        }
        Ok(allowed)
    }
}

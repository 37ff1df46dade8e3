//! Warm runs (Linux): whether a run may start in an interpreter started ahead of it, how many
//! such interpreters may wait, for how long, and what every one of them imports besides the
//! defaults and what runs taught it.

use std::time::Duration;

use super::ConfigError;
use pyrun_run::warm::WarmSettings;

/// The flags, as given.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Warm runs")]
pub struct WarmArgs {
    /// Start runs in interpreters started ahead of them, in the run's own sandbox, with the
    /// modules runs of that folder import already imported (`on`, the default on Linux), or
    /// always cold (`off`). Elsewhere runs start cold whatever this says.
    #[arg(long, env = "PYRUN_WARM", default_value = "on", value_name = "BOOL", action = clap::ArgAction::Set, value_parser = super::grammar::boolean())]
    pub warm: bool,

    /// Warm interpreters waiting at most, server-wide (one per folder, venv and caller; each
    /// holds its imports' memory: tens of MB with numpy and pandas).
    #[arg(long, env = "PYRUN_WARM_MAX", default_value_t = 4, value_parser = super::grammar::count(0, 64))]
    pub warm_max: u64,

    /// Seconds after which a warm interpreter no run used is stopped.
    #[arg(long, env = "PYRUN_WARM_IDLE", default_value_t = 600, value_parser = super::grammar::seconds(1, 86_400))]
    pub warm_idle: u64,

    /// Modules every warm interpreter imports ahead (comma-separated, e.g. numpy,pandas), from
    /// the interpreter's library or the venv's site-packages only.
    #[arg(
        long,
        env = "PYRUN_PRELOAD",
        value_delimiter = ',',
        value_name = "MODULE"
    )]
    pub preload: Vec<String>,
}

impl WarmArgs {
    pub(super) fn resolve(&self) -> Result<WarmSettings, ConfigError> {
        if let Some(bad) = self.preload.iter().find(|name| !module_name(name)) {
            return Err(ConfigError::Preload(bad.clone()));
        }
        Ok(WarmSettings {
            enabled: self.warm && pyrun_run::warm::SUPPORTED,
            max: usize::try_from(self.warm_max).unwrap_or(usize::MAX),
            idle: Duration::from_secs(self.warm_idle),
            preload: self.preload.clone(),
        })
    }
}

fn module_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
                && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        })
}

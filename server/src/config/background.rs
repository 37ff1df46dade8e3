//! Background runs (`start_python`, MCP tasks, `run_python` handed over with `--detach-after`):
//! their time limit, their own pool of turns, how many are kept and for how long.

use std::time::Duration;

use super::MAX_TIMEOUT_SECS;

/// The flags, as given.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Background runs")]
pub struct BackgroundArgs {
    /// Longest a background run may take, in seconds (1 to 86400).
    #[arg(long, env = "PYRUN_BACKGROUND_TIMEOUT", default_value_t = 3600, value_parser = super::grammar::seconds(1, MAX_TIMEOUT_SECS))]
    pub background_timeout: u64,

    /// Background runs at once, in a pool of their own (run_python never waits for them);
    /// further ones are queued; with --oauth, one caller's runs leave a place to the others
    /// [default: CPUs].
    #[arg(long, env = "PYRUN_MAX_BACKGROUND_CONCURRENT", value_parser = super::grammar::count(1, 1024))]
    pub max_background_concurrent: Option<u64>,

    /// Background runs kept at once (queued, running, or ended and not yet expired); a start
    /// beyond is refused with a clear error.
    #[arg(long, env = "PYRUN_MAX_BACKGROUND_RUNS", default_value_t = 32, value_parser = super::grammar::count(1, 10_000))]
    pub max_background_runs: u64,

    /// Background runs one caller may keep at once, within --max-background-runs: a new run
    /// only ever makes room from its own caller's runs, so no caller evicts or crowds out
    /// another's.
    #[arg(long, env = "PYRUN_MAX_BACKGROUND_RUNS_PER_CALLER", default_value_t = 16, value_parser = super::grammar::count(1, 10_000))]
    pub max_background_runs_per_caller: u64,

    /// How long a finished background run (its output and files) is kept, in seconds.
    #[arg(long, env = "PYRUN_RUN_RETENTION", default_value_t = 3600, value_parser = super::grammar::seconds(1, 7 * 86_400))]
    pub run_retention: u64,

    /// Hand a run_python call still going after this many seconds over to the background:
    /// the call returns its run id at once and the run goes on (claude.ai gives up on a tool
    /// call after about a minute: ~45 suits it) [default: off].
    #[arg(long, env = "PYRUN_DETACH_AFTER", value_parser = super::grammar::seconds(1, MAX_TIMEOUT_SECS))]
    pub detach_after: Option<u64>,
}

/// The settings, resolved: the run engine's own policy, so nothing maps them again.
pub use pyrun_run::engine::settings::BackgroundPolicy as BackgroundConfig;

impl BackgroundArgs {
    pub(super) fn resolve(&self, cpus: usize) -> BackgroundConfig {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        BackgroundConfig {
            timeout: Duration::from_secs(self.background_timeout),
            max_concurrent: self.max_background_concurrent.map_or(cpus.max(1), size),
            max_runs: size(self.max_background_runs),
            max_per_caller: size(self.max_background_runs_per_caller),
            retention: Duration::from_secs(self.run_retention),
            detach_after: self.detach_after.map(Duration::from_secs),
        }
    }
}

//! Persistent Python sessions (`session_start`, `session_exec`, …; offered only with
//! `--allow-inline-code`): how many may be open, per caller and server-wide, and how long an
//! unused one lives. The flags say `python-session` because `--max-sessions` and
//! `--session-idle-timeout` are the HTTP transport's (MCP sessions).

use std::time::Duration;

use super::MAX_TIMEOUT_SECS;

/// The flags, as given.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Python sessions")]
pub struct SessionArgs {
    /// Python sessions open at once, server-wide (each is an interpreter that may hold up to
    /// --max-memory-mb for its whole life, idle or not); a start beyond is refused.
    #[arg(long, env = "PYRUN_MAX_PYTHON_SESSIONS", default_value_t = 8, value_parser = super::grammar::count(1, 1024))]
    pub max_python_sessions: u64,

    /// Python sessions one caller may hold open at once.
    #[arg(long, env = "PYRUN_MAX_PYTHON_SESSIONS_PER_CALLER", default_value_t = 4, value_parser = super::grammar::count(1, 1024))]
    pub max_python_sessions_per_caller: u64,

    /// Seconds after which a Python session that ran nothing is closed (its interpreter killed).
    #[arg(long, env = "PYRUN_PYTHON_SESSION_IDLE_TIMEOUT", default_value_t = 900, value_parser = super::grammar::seconds(1, MAX_TIMEOUT_SECS * 7))]
    pub python_session_idle_timeout: u64,
}

/// The settings, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    pub max_sessions: usize,
    pub max_per_caller: usize,
    pub idle_timeout: Duration,
}

impl SessionArgs {
    pub(super) fn resolve(&self) -> SessionConfig {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        SessionConfig {
            max_sessions: size(self.max_python_sessions),
            max_per_caller: size(self.max_python_sessions_per_caller),
            idle_timeout: Duration::from_secs(self.python_session_idle_timeout),
        }
    }
}

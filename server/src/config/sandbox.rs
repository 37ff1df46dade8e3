//! `--sandbox` and the limits of a run: how every run is confined.

use clap::builder::TypedValueParser;
use pyrun_sandbox::{ResourceLimits, SandboxMode, WriteScope};

/// How every run is confined (see README, "Security model").
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Sandbox")]
pub struct SandboxArgs {
    /// Isolation of runs: `standard` applies every layer the machine supports, `strict` refuses to
    /// start unless all are available, `off` gives scripts all the rights of the server.
    #[arg(long = "sandbox", env = "PYRUN_SANDBOX", default_value_t = SandboxMode::Standard,
          value_parser = sandbox_mode_parser())]
    pub mode: SandboxMode,

    /// Let scripts open TCP/UDP sockets (UNIX sockets do not depend on it: docs/security.md).
    #[arg(long, env = "PYRUN_ALLOW_NETWORK")]
    pub allow_network: bool,

    /// Scripts may read the projects folder but not change it; they write only to their scratch
    /// folder ($HOME, $TMPDIR). Implied by --sandbox strict.
    #[arg(long, env = "PYRUN_READ_ONLY_PROJECTS")]
    pub read_only_projects: bool,

    /// What of the projects folder a run may write: `project`, its own project (the top-level
    /// folder holding its script; for a script directly in the projects folder, that folder's
    /// own files) and its scratch; `all`, the whole projects folder. Protected names (.git,
    /// .venv, .env*, .vscode, __pycache__...) stay read-only either way.
    #[arg(long, env = "PYRUN_WRITE_SCOPE", default_value = "project",
          value_parser = write_scope_parser())]
    pub write_scope: WriteScope,

    /// Let runs create protected names (.git, .vscode, .github, .env*, __pycache__, venvs...)
    /// in the projects folder, for scaffolding scripts that mean to; by default what a run
    /// creates with such a name is moved to the quarantine under the state folder.
    #[arg(long, env = "PYRUN_ALLOW_PROTECTED_WRITES")]
    pub allow_protected_writes: bool,

    /// Memory of a run in MiB (address space per process; the whole run where a memory cgroup
    /// exists). 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_MEMORY_MB", default_value_t = 2048, value_parser = super::grammar::mebibytes(0, u64::MAX / super::grammar::MIB))]
    pub max_memory_mb: u64,

    /// CPU seconds per process of a run; never less than --timeout or --background-timeout.
    /// 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_CPU_SECS", default_value_t = 300, value_parser = super::grammar::seconds(0, u64::MAX))]
    pub max_cpu_secs: u64,

    /// Largest file a run may write, in MiB. 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_FILE_SIZE_MB", default_value_t = 1024, value_parser = super::grammar::mebibytes(0, u64::MAX / super::grammar::MIB))]
    pub max_file_size_mb: u64,

    /// Open files per process of a run. 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_OPEN_FILES", default_value_t = 1024, value_parser = super::grammar::count(0, u64::MAX))]
    pub max_open_files: u64,

    /// Processes and threads of a run (a fork bomb stops here). 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_PROCESSES", default_value_t = 64, value_parser = super::grammar::count(0, u64::MAX))]
    pub max_processes: u64,
}

/// How runs are confined, validated: the run engine's own settings, so nothing maps them again.
pub use pyrun_run::engine::settings::SandboxSettings as SandboxConfig;

impl SandboxArgs {
    pub(super) fn resolve(self, timeout_secs: u64) -> SandboxConfig {
        const MIB: u64 = 1 << 20;
        let cpu_secs = match self.max_cpu_secs {
            0 => 0,
            n => n.max(timeout_secs),
        };
        SandboxConfig {
            mode: self.mode,
            allow_network: self.allow_network,
            read_only_projects: self.read_only_projects || self.mode == SandboxMode::Strict,
            write_scope: self.write_scope,
            allow_protected_writes: self.allow_protected_writes,
            limits: ResourceLimits {
                memory_bytes: self.max_memory_mb.saturating_mul(MIB),
                cpu_secs,
                file_size_bytes: self.max_file_size_mb.saturating_mul(MIB),
                open_files: self.max_open_files,
                processes: self.max_processes,
            },
        }
    }
}

/// `--write-scope`: one of the sandbox's own scope names.
fn write_scope_parser() -> impl clap::builder::TypedValueParser<Value = WriteScope> {
    clap::builder::PossibleValuesParser::new(WriteScope::NAMES).try_map(|s| s.parse::<WriteScope>())
}

/// `--sandbox`: one of the sandbox's own mode names (listed in `--help` and in errors).
fn sandbox_mode_parser() -> impl clap::builder::TypedValueParser<Value = SandboxMode> {
    clap::builder::PossibleValuesParser::new(SandboxMode::NAMES)
        .try_map(|s| s.parse::<SandboxMode>())
}

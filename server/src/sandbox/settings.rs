//! Sandbox flags (clap `Args`, each with an env var); `config.rs` flattens them into its own flags.

use super::{ResourceLimits, SandboxMode};

const MIB: u64 = 1 << 20;

/// Flags that shape the sandbox around every run. Precedence: flag > env var > default.
#[derive(Clone, Debug, clap::Args)]
pub struct SandboxSettings {
    /// Isolation of runs: `standard` applies every layer the machine supports, `strict` refuses to
    /// start unless all are available, `off` gives scripts the server's own rights.
    #[arg(long = "sandbox", env = "PYRUN_SANDBOX", value_enum, default_value_t = SandboxMode::Standard)]
    pub sandbox: SandboxMode,

    /// Let scripts open network sockets (TCP/UDP; UNIX sockets stay closed).
    #[arg(long, env = "PYRUN_ALLOW_NETWORK", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub allow_network: bool,

    /// Memory per run in MiB (address space per process; whole run where a memory cgroup exists). 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_MEMORY_MB", default_value_t = 2048)]
    pub max_memory_mb: u64,

    /// CPU seconds per process of a run; keep it at least the run timeout. 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_CPU_SECS", default_value_t = 300)]
    pub max_cpu_secs: u64,

    /// Largest file a run may write, in MiB. 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_FILE_SIZE_MB", default_value_t = 1024)]
    pub max_file_size_mb: u64,

    /// Open files per process of a run. 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_OPEN_FILES", default_value_t = 1024)]
    pub max_open_files: u64,

    /// Processes and threads per run (a fork bomb stops here). 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_PROCESSES", default_value_t = 64)]
    pub max_processes: u64,
}

impl SandboxSettings {
    pub fn limits(&self) -> ResourceLimits {
        ResourceLimits {
            memory_bytes: self.max_memory_mb.saturating_mul(MIB),
            cpu_secs: self.max_cpu_secs,
            file_size_bytes: self.max_file_size_mb.saturating_mul(MIB),
            open_files: self.max_open_files,
            processes: self.max_processes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sandbox: SandboxSettings,
    }

    #[test]
    fn defaults_are_standard_without_network() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(cli.sandbox.sandbox, SandboxMode::Standard);
        assert!(!cli.sandbox.allow_network);
        assert_eq!(cli.sandbox.limits(), ResourceLimits::default());
    }

    #[test]
    fn flags_override_defaults() {
        let cli = Cli::try_parse_from([
            "x",
            "--sandbox",
            "strict",
            "--allow-network",
            "--max-memory-mb",
            "512",
        ])
        .unwrap();
        assert_eq!(cli.sandbox.sandbox, SandboxMode::Strict);
        assert!(cli.sandbox.allow_network);
        assert_eq!(cli.sandbox.limits().memory_bytes, 512 << 20);
        assert!(Cli::try_parse_from(["x", "--sandbox", "loose"]).is_err());
    }
}

//! rlimits of a run: computed in the server, applied in the child with raw syscalls only.

use rustix::process::{setrlimit, Resource, Rlimit};

use crate::policy::ResourceLimits;

/// The rlimits to set in the child, precomputed so that applying them does not allocate.
#[derive(Clone, Debug)]
pub(super) struct RlimitTable(Vec<(Resource, Rlimit)>);

impl RlimitTable {
    /// `nproc`: whether RLIMIT_NPROC applies. Not for runs with a uid of their own: the
    /// kernel counts it per uid across every run (a pids cgroup bounds each run instead).
    pub(super) fn new(limits: &ResourceLimits, nproc: bool) -> Self {
        let both = |n: u64| Rlimit {
            current: Some(n),
            maximum: Some(n),
        };
        let mut table = vec![(Resource::Core, both(0))];
        if limits.memory_bytes > 0 {
            table.push((Resource::As, both(limits.memory_bytes)));
        }
        if limits.cpu_secs > 0 {
            // SIGXCPU at the soft limit, SIGKILL one second later.
            let hard = limits.cpu_secs.saturating_add(1);
            table.push((
                Resource::Cpu,
                Rlimit {
                    current: Some(limits.cpu_secs),
                    maximum: Some(hard),
                },
            ));
        }
        if limits.file_size_bytes > 0 {
            table.push((Resource::Fsize, both(limits.file_size_bytes)));
        }
        if limits.open_files > 0 {
            table.push((Resource::Nofile, both(limits.open_files)));
        }
        if limits.processes > 0 && nproc {
            // Counted per user (per user namespace on Linux >= 5.14); not enforced for root.
            table.push((Resource::Nproc, both(limits.processes)));
        }
        Self(table)
    }

    /// Applies every limit to the calling process. Async-signal-safe: one syscall per limit.
    pub(super) fn apply(&self) -> std::io::Result<()> {
        for (resource, limit) in &self.0 {
            setrlimit(*resource, *limit)?;
        }
        Ok(())
    }
}

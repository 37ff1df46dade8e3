//! macOS and other Unixes: rlimits in a `pre_exec` hook; no file or network layer.

use std::os::unix::process::CommandExt;

use crate::error::SandboxError;
use crate::policy::{SandboxMode, SandboxPolicy};
use crate::unix_limits::RlimitTable;

#[derive(Debug)]
pub(super) struct UnixSandbox {
    rlimits: RlimitTable,
}

impl UnixSandbox {
    pub(super) fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        let missing = "file access rules, syscall filter, network isolation and escape-proof \
                       process groups (only Linux has them here)";
        if policy.mode == SandboxMode::Strict {
            return Err(SandboxError::StrictUnavailable {
                missing: missing.into(),
            });
        }
        tracing::warn!("sandbox on this OS: rlimits and process group only; missing {missing}");
        Ok(Self {
            rlimits: RlimitTable::new(&policy.limits, true),
        })
    }

    pub(super) fn layers(&self) -> Vec<&'static str> {
        vec!["rlimits", "process-group"]
    }

    pub(super) fn confine(&self, cmd: &mut std::process::Command) -> Result<(), SandboxError> {
        let rlimits = self.rlimits.clone();
        // SAFETY: the hook runs in the forked child before exec and only calls setrlimit on a
        // table prepared here: async-signal-safe, no allocation.
        unsafe {
            cmd.pre_exec(move || rlimits.apply());
        }
        Ok(())
    }
}

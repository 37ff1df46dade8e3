//! Kernel policy for every run. This first version applies no kernel layer yet: it only records
//! that runs are confined to their own process group. The sandbox issue replaces it.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    Strict,
    Standard,
    Off,
}

#[derive(Debug, Clone, Default)]
pub struct ResourceLimits {}

#[derive(Debug, Clone)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    pub read_paths: Vec<PathBuf>,
    pub write_paths: Vec<PathBuf>,
    pub allow_network: bool,
    pub limits: ResourceLimits,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox layer unavailable: {0}")]
    Unavailable(String),
}

#[derive(Debug)]
pub struct Sandbox {
    _policy: SandboxPolicy,
}

impl Sandbox {
    pub fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        if policy.mode == SandboxMode::Strict {
            return Err(SandboxError::Unavailable(
                "no kernel layer is built yet".into(),
            ));
        }
        Ok(Self { _policy: policy })
    }

    pub fn layers(&self) -> Vec<&'static str> {
        vec!["process-group"]
    }

    pub fn confine(
        &self,
        _cmd: &mut std::process::Command,
        _scratch: &Path,
    ) -> Result<(), SandboxError> {
        Ok(())
    }
}

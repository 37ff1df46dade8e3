//! The server's shared state, built once from the [`Config`] and handed to every transport.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::paths::{PathError, ProjectRoot};
use crate::runner::{Runner, RunnerSettings};
use crate::sandbox::{ResourceLimits, Sandbox, SandboxError, SandboxMode, SandboxPolicy};

#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub root: ProjectRoot,
    pub runner: Runner,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Root(#[from] PathError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

impl App {
    /// `shutdown` kills every run in flight when it fires.
    pub fn build(config: Config, shutdown: CancellationToken) -> Result<Arc<Self>, AppError> {
        let root = ProjectRoot::open(&config.projects_dir)?;
        let sandbox = Sandbox::new(SandboxPolicy {
            mode: SandboxMode::Standard,
            read_paths: vec![root.path().to_path_buf()],
            write_paths: vec![root.path().to_path_buf()],
            allow_network: true,
            limits: ResourceLimits::default(),
        })?;
        let runner = Runner::new(
            RunnerSettings {
                python: config.python.clone(),
                max_output_bytes: config.max_output_bytes,
                max_concurrent: config.max_concurrent,
                pass_env: config.pass_env.clone(),
            },
            sandbox,
            shutdown,
        );
        Ok(Arc::new(Self {
            config,
            root,
            runner,
        }))
    }
}

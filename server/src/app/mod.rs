//! The server's shared state, built once from the [`Config`] and handed to every transport.

pub mod banner;
pub mod engine_settings;
pub mod protection;
pub mod shutdown;
pub mod source_tree;
pub mod stderr;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::config::Config;
use crate::oauth::{self, OAuth};
use pyrun_run::engine::backend::RemoteBackend;
use pyrun_run::engine::{Engine, EngineError};
use pyrun_run::state_dir;

#[derive(Debug)]
pub struct App {
    pub config: Config,
    /// The run layer's front door: runs, sessions, installs, artifacts, environments.
    pub engine: Arc<Engine>,
    /// `--oauth`: the authorization server's state.
    pub oauth: Option<Arc<OAuth>>,
    /// Where each tool call is recorded (`--audit-log`); may be off.
    pub audit: AuditLog,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    OAuth(#[from] oauth::OAuthError),
    #[error("cannot make the state folder {dir}: {error}")]
    StateDir { dir: String, error: std::io::Error },
    #[error("the RunPod backend cannot be set up: {0}")]
    RunPod(String),
    #[error("--oauth has no public URL to use as its issuer\nhint: pass --public-url https://…")]
    NoPublicUrl,
}

impl App {
    /// `shutdown` kills every run in flight when it fires.
    pub fn build(config: Config, shutdown: CancellationToken) -> Result<Arc<Self>, AppError> {
        let mut remote: Vec<Arc<dyn RemoteBackend>> = Vec::new();
        if let Some(settings) = &config.runpod {
            let runpod = engine_settings::open_runpod(settings).map_err(AppError::RunPod)?;
            remote.push(Arc::new(runpod));
        }
        let settings = engine_settings::engine_settings(&config, remote);
        // The engine first: a projects folder that cannot be opened is said before anything
        // is made in the state folder.
        let engine = Arc::new(Engine::new(settings, shutdown)?);
        let oauth = match &config.oauth {
            Some(settings) => Some(open_oauth(&config, settings)?),
            None => None,
        };
        let audit = match &config.audit_log {
            Some(path) => {
                tracing::info!(path = %path.display(), "audit log");
                AuditLog::open(path.clone())
            }
            None => AuditLog::off(),
        };
        Ok(Arc::new(Self {
            engine,
            config,
            oauth,
            audit,
        }))
    }

    /// The server's last step, once its transport has stopped: the engine stops every run,
    /// session and install in flight and its helpers. No process outlives the server.
    pub async fn close(&self) {
        self.engine.close().await;
    }
}

/// Opens the OAuth state in the state folder (made owner-only when missing).
fn open_oauth(
    config: &Config,
    settings: &crate::config::OAuthConfig,
) -> Result<Arc<OAuth>, AppError> {
    let base = settings.public_url.clone().ok_or(AppError::NoPublicUrl)?;
    let dir = config.state_dir.as_deref().ok_or(AppError::NoPublicUrl)?;
    state_dir::create_owner_only(dir).map_err(|error| AppError::StateDir {
        dir: dir.display().to_string(),
        error,
    })?;
    let store = oauth::store::Store::open(dir).map_err(oauth::OAuthError::from)?;
    let documents =
        oauth::cimd::CimdFetcher::new(config.cimd.clone()).map_err(oauth::OAuthError::from)?;
    Ok(OAuth::open(
        oauth::Endpoints { base },
        store,
        &settings.owner,
        documents,
    )?)
}

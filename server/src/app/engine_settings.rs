//! The server's [`Config`] mapped into the run engine's one settings struct, and the remote
//! backends it configures (RunPod) made here, where HTTP clients may be built: the run layer
//! knows them only as `RemoteBackend`s.

use std::sync::Arc;

use crate::client_message::ClientMessage;
use crate::config::{Config, RunPodConfig, RunPodPoll};
use pyrun_remote::runpod::{PollMethod, RunPod, RunPodApi};
use pyrun_run::engine::backend::RemoteBackend;
use pyrun_run::engine::settings::{ArtifactStorage, InstallPolicy, SessionLimits};
use pyrun_run::engine::EngineSettings;

/// The engine's settings from `config`, with `remote` as its remote backends.
pub fn engine_settings(config: &Config, remote: Vec<Arc<dyn RemoteBackend>>) -> EngineSettings {
    EngineSettings {
        projects_dir: config.projects_dir.clone(),
        state_dir: config.state_dir.clone(),
        python: config.python.clone(),
        allow_python: config.allow_python.clone(),
        pass_env: config.pass_env.clone(),
        max_output_bytes: config.max_output_bytes,
        max_concurrent: config.max_concurrent,
        timeout: config.timeout,
        sandbox: config.sandbox.clone(),
        background: config.background.clone(),
        sessions: SessionLimits {
            max_sessions: config.sessions.max_sessions,
            max_per_caller: config.sessions.max_per_caller,
            idle_timeout: config.sessions.idle_timeout,
        },
        artifacts: ArtifactStorage {
            max_total_bytes: config.artifacts.max_storage_bytes,
            max_bytes_per_caller: config.artifacts.max_storage_bytes_per_caller,
        },
        install: config.install.allowed.then(|| InstallPolicy {
            index: config.install.index.clone(),
            allow_sdist: config.install.allow_sdist,
            uv: config.install.uv.clone(),
            timeout: config.install.timeout,
            max_bytes: config.install.max_bytes,
        }),
        warm: config.warm.clone(),
        // Only OAuth brings several callers.
        caller_turns: config.oauth.is_some(),
        remote,
        describe_failure: |e| ClientMessage::from(e).into_string(),
    }
}

/// The RunPod endpoint's client (nothing is sent until a run asks for it).
pub fn open_runpod(settings: &RunPodConfig) -> Result<RunPod, String> {
    let poll = match settings.poll {
        RunPodPoll::Get => PollMethod::Get,
        RunPodPoll::Post => PollMethod::Post,
    };
    let api =
        RunPodApi::new(&settings.base_url, &settings.api_key, poll).map_err(|e| e.to_string())?;
    Ok(RunPod::new(api))
}

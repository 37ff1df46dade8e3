//! The RunPod backend (`--runpod-endpoint`): runs sent to a RunPod serverless endpoint whose
//! workers run `runpod/handler.py`. Off unless an endpoint is named; the key comes from
//! `RUNPOD_API_KEY` only (a flag would show it to every user of the machine).

use super::ConfigError;

/// RunPod's serverless API; `{endpoint}` is replaced by the endpoint id.
pub const DEFAULT_API_URL: &str = "https://api.runpod.ai/v2/{endpoint}";

/// How status and stream are asked: RunPod's cloud by GET, the SDK's local test server by POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RunPodPoll {
    Get,
    Post,
}

/// The flags, as given.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "RunPod backend")]
pub struct RunPodArgs {
    /// Offer the `runpod` backend: run_python and start_python may send a run (its project
    /// folder's snapshot) to this RunPod serverless endpoint; the key comes from RUNPOD_API_KEY.
    #[arg(long, env = "PYRUN_RUNPOD_ENDPOINT", value_name = "ID")]
    pub runpod_endpoint: Option<String>,

    /// The endpoint's base URL; `{endpoint}` stands for the endpoint id (the SDK's local test
    /// server: `http://127.0.0.1:PORT`, with --runpod-poll post).
    #[arg(long, env = "PYRUN_RUNPOD_API_URL", default_value = DEFAULT_API_URL, value_name = "URL")]
    pub runpod_api_url: String,

    /// How job status and output are asked (RunPod's cloud: get; the SDK's local test
    /// server, `--rp_serve_api`: post).
    #[arg(long, env = "PYRUN_RUNPOD_POLL", value_enum, default_value_t = RunPodPoll::Get, value_name = "METHOD")]
    pub runpod_poll: RunPodPoll,
}

/// The settings, resolved.
#[derive(Clone)]
pub struct RunPodConfig {
    pub endpoint: String,
    /// The endpoint's base URL, `{endpoint}` replaced.
    pub base_url: String,
    pub poll: RunPodPoll,
    /// `RUNPOD_API_KEY`; never logged (see the `Debug` below).
    pub api_key: String,
}

impl std::fmt::Debug for RunPodConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPodConfig")
            .field("endpoint", &self.endpoint)
            .field("base_url", &self.base_url)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

impl RunPodArgs {
    pub(super) fn resolve(&self) -> Result<Option<RunPodConfig>, ConfigError> {
        let Some(endpoint) = self.runpod_endpoint.as_deref().map(str::trim) else {
            return Ok(None);
        };
        let fine = !endpoint.is_empty()
            && endpoint
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !fine {
            return Err(ConfigError::RunPod(format!(
                "--runpod-endpoint '{endpoint}' is not an endpoint id (letters, digits, - and _)"
            )));
        }
        let base_url = self.runpod_api_url.replace("{endpoint}", endpoint);
        if !(base_url.starts_with("https://") || base_url.starts_with("http://")) {
            return Err(ConfigError::RunPod(format!(
                "--runpod-api-url '{base_url}' is not an http(s) URL"
            )));
        }
        let api_key = std::env::var("RUNPOD_API_KEY").unwrap_or_default();
        if api_key.trim().is_empty() {
            return Err(ConfigError::RunPod(
                "--runpod-endpoint needs RUNPOD_API_KEY (your RunPod API key) in the environment or .env".into(),
            ));
        }
        Ok(Some(RunPodConfig {
            endpoint: endpoint.to_owned(),
            base_url,
            poll: self.runpod_poll,
            api_key: api_key.trim().to_owned(),
        }))
    }
}

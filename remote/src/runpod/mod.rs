//! The RunPod backend: a project file run on a RunPod serverless endpoint whose workers run
//! `runpod/handler.py` (this repository's worker).
//!
//! [`RunPod::prepare`] packs the script's project ([`crate::snapshot`]) and builds the job's
//! request, refusing one over RunPod's request limit with the limit and the largest files named;
//! the [`job::Job`] it returns is a [`pyrun_run::background::RemoteRun`]: the background registry
//! drives it like any run (owner rules, offsets, cancel, retention).

pub mod api;
mod job;

use std::time::Duration;

use base64::Engine as _;
use pyrun_run::background::RemoteRun;
use pyrun_run::paths::ProjectPath;
use serde_json::json;

pub use api::{ApiError, PollMethod, RunPodApi};

use crate::snapshot::{self, SnapshotLimits};

/// The backend's name, as callers write it.
pub const BACKEND: &str = "runpod";
/// RunPod's limit on a `/run` request's body (its documented 10 MB).
pub const MAX_REQUEST_BYTES: usize = 10_000_000;
/// Files larger than this stay behind.
pub const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;
/// Project bytes read at most for one snapshot (a hundred times the request limit: past that,
/// only degenerate data such as sparse files could still fit).
const MAX_READ_BYTES: u64 = 100 * MAX_REQUEST_BYTES as u64;
/// Entries of a project walked at most.
const MAX_ENTRIES: usize = 20_000;
/// What RunPod's execution timeout adds to the run's own (the worker kills the script at the
/// run's limit and still has to send its end).
const EXECUTION_GRACE: Duration = Duration::from_secs(30);

/// A configured RunPod endpoint.
#[derive(Debug, Clone)]
pub struct RunPod {
    api: RunPodApi,
}

/// Why a run was not sent.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("the project could not be packed for RunPod: {0}")]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error("the project's request would be {bytes} bytes, over RunPod's limit of {limit}")]
    TooLarge {
        bytes: usize,
        limit: usize,
        /// The largest files sent, largest first (at most five), with their sizes.
        largest: Vec<(String, u64)>,
    },
    #[error("the job could not be written ({0})")]
    Encode(String),
}

/// What a job carries besides the snapshot.
#[derive(Debug, Clone)]
pub struct JobSpec<'a> {
    pub args: &'a [String],
    pub stdin: Option<&'a str>,
    pub timeout: Duration,
    /// Bytes kept per stream (`--max-output-bytes`).
    pub max_output: usize,
}

impl RunPod {
    pub fn new(api: RunPodApi) -> Self {
        Self { api }
    }

    pub fn api(&self) -> &RunPodApi {
        &self.api
    }

    /// Packs the script's project and builds its job; nothing leaves the machine yet.
    pub async fn prepare(
        &self,
        script: &ProjectPath,
        spec: JobSpec<'_>,
    ) -> Result<Box<dyn RemoteRun>, PrepareError> {
        let (path, relative) = (script.absolute().to_owned(), script.relative().to_owned());
        let limits = SnapshotLimits {
            max_file_bytes: MAX_FILE_BYTES,
            max_entries: MAX_ENTRIES,
            max_archive_bytes: MAX_REQUEST_BYTES,
            max_read_bytes: MAX_READ_BYTES,
        };
        let packed = tokio::task::spawn_blocking(move || snapshot::pack(&path, &relative, limits))
            .await
            .map_err(|_| snapshot::SnapshotError::Io(std::io::ErrorKind::Other))??;
        let body = json!({
            "input": {
                "snapshot": base64::engine::general_purpose::STANDARD.encode(&packed.archive),
                "script": packed.script,
                "args": spec.args,
                "stdin": spec.stdin,
                "timeout_seconds": spec.timeout.as_secs_f64(),
                "max_output_bytes": spec.max_output,
            },
            "policy": {
                "executionTimeout": u64::try_from((spec.timeout + EXECUTION_GRACE).as_millis()).unwrap_or(u64::MAX),
            },
        });
        let body = serde_json::to_vec(&body).map_err(|e| PrepareError::Encode(e.to_string()))?;
        if packed.over_limit || body.len() > MAX_REQUEST_BYTES {
            return Err(PrepareError::TooLarge {
                bytes: body.len(),
                limit: MAX_REQUEST_BYTES,
                largest: packed.files.into_iter().take(5).collect(),
            });
        }
        let left_behind = left_behind(&packed.too_large);
        Ok(Box::new(job::Job {
            api: self.api.clone(),
            body,
            timeout: spec.timeout,
            note: left_behind,
        }))
    }
}

/// The note a run gets when files stayed behind for their size.
fn left_behind(files: &[(String, u64)]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let names: Vec<String> = files
        .iter()
        .map(|(name, size)| format!("{name} ({size} bytes)"))
        .collect();
    Some(format!(
        "[pyrun: not sent to RunPod, over the {MAX_FILE_BYTES}-byte file cap: {}]\n",
        names.join(", ")
    ))
}

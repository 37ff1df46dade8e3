//! The RunPod backend: a project file run on a RunPod serverless endpoint whose workers run
//! `runpod/handler.py` (this repository's worker).
//!
//! [`RunPod`] is a [`RemoteBackend`] of the run engine: `prepare` packs the script's project
//! ([`crate::snapshot`]) and builds the job's request, refusing one over RunPod's request limit
//! with the limit and the largest files named; the [`job::Job`] it returns is a
//! [`pyrun_run::background::RemoteRun`]: the background registry drives it like any run (owner
//! rules, offsets, cancel, retention). `health` asks the endpoint how it is doing, at most once
//! per [`HEALTH_TTL`]: `backend_status` is a tool any client may call in a loop, and RunPod's
//! rate limit is the operator's.

pub mod api;
mod job;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use pyrun_run::background::RemoteRun;
use pyrun_run::engine::backend::{
    BackendFuture, BackendHealth, JobSpec, PrepareError, RemoteBackend,
};
use pyrun_run::paths::ProjectPath;
use serde_json::{json, Value};

pub use api::{ApiError, PollMethod, RunPodApi};

use crate::snapshot::{self, SnapshotError, SnapshotLimits};

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

/// How long an answer of the endpoint's `/health` is given again instead of asking anew.
pub const HEALTH_TTL: Duration = Duration::from_secs(5);

/// A configured RunPod endpoint.
#[derive(Debug, Clone)]
pub struct RunPod {
    api: RunPodApi,
    /// The last health answer and when it came; held while asking, so that callers at the same
    /// moment share one request.
    health: Arc<tokio::sync::Mutex<Option<(Instant, BackendHealth)>>>,
}

impl RunPod {
    pub fn new(api: RunPodApi) -> Self {
        Self {
            api,
            health: Arc::default(),
        }
    }

    /// The endpoint's health, asked at most once per [`HEALTH_TTL`].
    async fn cached_health(&self) -> BackendHealth {
        let mut last = self.health.lock().await;
        if let Some((at, health)) = last.as_ref() {
            if at.elapsed() < HEALTH_TTL {
                return health.clone();
            }
        }
        let health = health_of(self.api.health().await);
        *last = Some((Instant::now(), health.clone()));
        health
    }

    pub fn api(&self) -> &RunPodApi {
        &self.api
    }

    /// Packs the script's project and builds its job; nothing leaves the machine yet.
    async fn prepare_job(
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
            .map_err(|_| SnapshotError::Io(std::io::ErrorKind::Other))
            .and_then(|packed| packed)
            .map_err(|e| match e {
                SnapshotError::Io(kind) => PrepareError::Unreadable(kind),
                other => PrepareError::Pack(other.to_string()),
            })?;
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

impl RemoteBackend for RunPod {
    fn name(&self) -> &'static str {
        BACKEND
    }

    fn prepare<'a>(
        &'a self,
        script: &'a ProjectPath,
        spec: JobSpec<'a>,
    ) -> BackendFuture<'a, Result<Box<dyn RemoteRun>, PrepareError>> {
        Box::pin(self.prepare_job(script, spec))
    }

    fn health(&self) -> BackendFuture<'_, BackendHealth> {
        Box::pin(self.cached_health())
    }
}

/// The endpoint's health from its `/health` answer: a refused key (401, 403) is reachable with
/// a key that does not work; another refusal reached it with a working key.
fn health_of(answer: Result<Value, ApiError>) -> BackendHealth {
    let (reachable, key_works, answer, error) = match answer {
        Ok(answer) => (true, true, answer, None),
        Err(ApiError::Refused {
            status: 401 | 403,
            words,
        }) => (
            true,
            false,
            Value::Null,
            Some(format!("the key was refused: {words}")),
        ),
        Err(e @ ApiError::Refused { .. }) => (true, true, Value::Null, Some(e.to_string())),
        Err(e) => (false, false, Value::Null, Some(e.to_string())),
    };
    BackendHealth {
        reachable,
        key_works,
        workers: answer.get("workers").cloned().unwrap_or(Value::Null),
        jobs: answer.get("jobs").cloned().unwrap_or(Value::Null),
        error,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_key_is_reachable_but_not_working_and_other_refusals_keep_the_key() {
        let answer = json!({"workers": {"idle": 1}, "jobs": {"inQueue": 2}});
        let up = health_of(Ok(answer));
        assert!(up.reachable && up.key_works && up.error.is_none());
        assert_eq!(up.workers, json!({"idle": 1}));
        assert_eq!(up.jobs, json!({"inQueue": 2}));
        let refused = |status| {
            health_of(Err(ApiError::Refused {
                status,
                words: "no".into(),
            }))
        };
        for status in [401, 403] {
            let h = refused(status);
            assert!(h.reachable && !h.key_works);
            assert_eq!(h.error.as_deref(), Some("the key was refused: no"));
            assert_eq!(h.workers, Value::Null);
        }
        let busy = refused(503);
        assert!(busy.reachable && busy.key_works);
        assert_eq!(busy.error.as_deref(), Some("RunPod answered 503: no"));
        let down = health_of(Err(ApiError::Unreachable("dns".into())));
        assert!(!down.reachable && !down.key_works);
    }
}

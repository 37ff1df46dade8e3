//! The backends room: `backend_status`, offered only when a remote backend is configured
//! (`--runpod-endpoint`): the endpoint's health as RunPod reports it — workers idle, running and
//! throttled, jobs in queue and in progress — and whether the API key works.

use std::fmt::Write as _;

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mcp::present::reply::structured;
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_remote::runpod::{ApiError, BACKEND as RUNPOD};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BackendStatusArgs {}

/// A remote backend's state.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BackendStatus {
    /// The backend (`runpod`).
    pub backend: String,
    /// Whether the endpoint answered with the server's key (false: the key was refused).
    pub key_works: bool,
    /// Whether the endpoint could be asked at all.
    pub reachable: bool,
    /// Workers by state (`idle`, `running`, `throttled`...), as RunPod counts them.
    pub workers: Value,
    /// Jobs by state (`inQueue`, `inProgress`, `completed`, `failed`...), as RunPod counts them.
    pub jobs: Value,
    /// Why the endpoint could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[tool_router(router = backends_router, vis = "pub(in crate::mcp)")]
impl PyRunServer {
    /// The remote backend's health: its workers (idle, running, throttled), its jobs (in queue,
    /// in progress) and whether the server's API key works.
    #[tool(
        title = "Remote backend status",
        annotations(title = "Remote backend status", read_only_hint = true, open_world_hint = true),
        output_schema = schema_for_output::<BackendStatus>()
    )]
    async fn backend_status(
        &self,
        Parameters(_): Parameters<BackendStatusArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(runpod) = &self.app.runpod else {
            return Err(ErrorData::invalid_params(
                "no remote backend is configured",
                None,
            ));
        };
        let health = runpod.api().health().await;
        let (reachable, key_works, answer, error) = match health {
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
        let status = BackendStatus {
            backend: RUNPOD.to_owned(),
            key_works,
            reachable,
            workers: answer.get("workers").cloned().unwrap_or(Value::Null),
            jobs: answer.get("jobs").cloned().unwrap_or(Value::Null),
            error,
        };
        let mut text = format!("{RUNPOD}: ");
        match &status.error {
            Some(error) => text.push_str(error),
            None => {
                let _ = write!(
                    text,
                    "key works; workers {}; jobs {}",
                    status.workers, status.jobs
                );
            }
        }
        Ok(structured(text, &status))
    }
}

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
        let Some(backend) = self.engine().backends().remotes().first() else {
            return Err(ErrorData::invalid_params(
                "no remote backend is configured",
                None,
            ));
        };
        let health = backend.health().await;
        let name = backend.name();
        let status = BackendStatus {
            backend: name.to_owned(),
            key_works: health.key_works,
            reachable: health.reachable,
            workers: health.workers,
            jobs: health.jobs,
            error: health.error,
        };
        let mut text = format!("{name}: ");
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

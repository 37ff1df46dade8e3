//! MCP Tasks (`io.modelcontextprotocol/tasks`, SEP-2663): when the client declares the
//! extension, a `run_python` call becomes a task. The run is a background run of kind `task`
//! (listed by `list_runs`, read by `get_run`); rmcp's [`TaskManager`] answers `tasks/get` with its
//! status, the last line of output as the status message, and in the end the ordinary
//! `run_python` result. `tasks/cancel` is only a wish in rmcp (cooperative): the task's future
//! watches for it and kills the run's process tree. Every task is checked against its caller:
//! anyone else is told the task does not exist, as for an id never issued.
//!
//! `Tasks` (`store.rs`, in the server's `McpState`) keeps the tasks; `run_python_as_task`
//! starts one for the handler.

pub(in crate::mcp) mod store;

use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::audit::CallNotes;
use crate::client_message::ClientMessage;
use crate::mcp::call::{call_notes, script_call, RunPythonArgs};
use crate::mcp::present::reply::refusal;
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_run::background::{RunKind, RunRecord};
use pyrun_run::engine::placement::RunMode;
use pyrun_run::paths::ProjectPath;

impl PyRunServer {
    /// `run_python` for a client that declared the Tasks extension: the run goes to the
    /// background registry (kind `task`, the background time limit and pool) and the call
    /// returns a task at once. Bad arguments are answered as the tool would, without a task.
    pub(in crate::mcp) async fn run_python_as_task(
        &self,
        request: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let args: RunPythonArgs = serde_json::from_value(arguments).map_err(|e| {
            ErrorData::invalid_params(format!("failed to deserialize parameters: {e}"), None)
        })?;
        let notes = call_notes(ctx);
        let call = match script_call(self.engine(), &args, RunMode::Task, &notes).await {
            Ok(call) => call,
            Err(message) => return Ok(refusal(message).into()),
        };
        let caller = self.caller(ctx);
        let owner = caller.key().into_owned();
        let run = match self.file_run(&call, &args) {
            Ok(run) => run,
            Err(message) => return Ok(refusal(message).into()),
        };
        let record = match self
            .engine()
            .start_background(&caller, &run, RunKind::Task)
            .await
        {
            Ok(record) => record,
            Err(refused) => return Ok(refusal(self.start_refused(refused)).into()),
        };
        let (script, timeout) = (call.script, call.timeout);
        let retention = self.engine().runs().settings().retention;
        tracing::info!(%caller, run_id = %record.id, script = script.relative(), "task started");
        let (status_server, end_server) = (self.clone(), self.clone());
        let created = self.state.tasks.spawn(
            &owner,
            record,
            script.clone(),
            timeout + retention,
            move |run, script| status_server.task_status(run, script),
            move |run| async move {
                end_server
                    .ended_result(&run, &caller, &script, timeout, &CallNotes::default())
                    .await
            },
        );
        Ok(CallToolResponse::Task(created))
    }

    /// A task's status message: where its run is and the last line it printed.
    fn task_status(&self, run: &RunRecord, script: &ProjectPath) -> String {
        let status = run.status();
        let message = ClientMessage::new("")
            .then(status.as_str())
            .then(" ")
            .path(script)
            .then(" (")
            .number(run.duration().as_secs())
            .then(" s)");
        let message = match run.live.last_line() {
            Some(line) => message
                .then(": ")
                .output(&self.engine().without_host_folder(&line)),
            None => message,
        };
        message.into_string()
    }
}

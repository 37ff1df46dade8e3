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

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::ErrorData;

use crate::audit::CallNotes;
use crate::client_message::ClientMessage;
use crate::mcp::call::start_run::{file_run, start_refused};
use crate::mcp::call::stdin_upload::StdinUploads;
use crate::mcp::call::waited_run::ended_result;
use crate::mcp::call::{script_call, take_stdin, CallContext, RunPythonArgs};
use crate::mcp::present::reply::refusal;
use pyrun_run::background::{RunKind, RunRecord};
use store::Tasks;

use pyrun_run::engine::placement::RunMode;
use pyrun_run::engine::Engine;
use pyrun_run::paths::ProjectPath;

/// `run_python` for a client that declared the Tasks extension: the run goes to the
/// background registry (kind `task`, the background time limit and pool) and the call
/// returns a task at once. Bad arguments are answered as the tool would, without a task.
pub(in crate::mcp) async fn run_python_as_task(
    call: CallContext<'_>,
    tasks: &Tasks,
    stdin: &StdinUploads,
    request: CallToolRequestParams,
) -> Result<CallToolResponse, ErrorData> {
    let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
    let mut args: RunPythonArgs = serde_json::from_value(arguments).map_err(|e| {
        ErrorData::invalid_params(format!("failed to deserialize parameters: {e}"), None)
    })?;
    let CallContext { app, caller, notes } = call;
    let engine = &app.engine;
    let call = match script_call(engine, &args, RunMode::Task, &notes).await {
        Ok(call) => call,
        Err(message) => return Ok(refusal(message).into()),
    };
    let upload = args.stdin_upload.take();
    if let Err(message) = take_stdin(stdin, &caller, &mut args.stdin, upload.as_deref()) {
        return Ok(refusal(message).into());
    }
    let owner = caller.key().into_owned();
    let run = match file_run(engine, &call, &args) {
        Ok(run) => run,
        Err(message) => return Ok(refusal(message).into()),
    };
    let record = match engine.start_background(&caller, &run, RunKind::Task).await {
        Ok(record) => record,
        Err(refused) => return Ok(refusal(start_refused(engine, refused)).into()),
    };
    let (script, timeout) = (call.script, call.timeout);
    let retention = engine.runs().settings().retention;
    tracing::info!(%caller, run_id = %record.id, script = script.relative(), "task started");
    // The task outlives the call: its status and its end hold the server's `App` themselves.
    let (status_app, end_app) = (Arc::clone(app), Arc::clone(app));
    let created = tasks.spawn(
        &owner,
        record,
        script.clone(),
        timeout + retention,
        move |run, script| task_status(&status_app.engine, run, script),
        move |run| async move {
            // The call's audit entry was written when the task was created: nobody reads these.
            let call = CallContext {
                app: &end_app,
                caller,
                notes: CallNotes::default(),
            };
            ended_result(&call, &run, &script, timeout, false).await
        },
    );
    Ok(CallToolResponse::Task(created))
}

/// A task's status message: where its run is and the last line it printed.
fn task_status(engine: &Engine, run: &RunRecord, script: &ProjectPath) -> String {
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
            .output(&engine.without_host_folder(&line)),
        None => message,
    };
    message.into_string()
}

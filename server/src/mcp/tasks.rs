//! MCP Tasks (`io.modelcontextprotocol/tasks`, SEP-2663): when the client declares the
//! extension, a `run_python` call becomes a task. The run is a background run of kind `task`
//! (listed by `list_runs`, read by `get_run`); rmcp's [`TaskManager`] answers `tasks/get` with its
//! status, the last line of output as the status message, and in the end the ordinary
//! `run_python` result. `tasks/cancel` is only a wish in rmcp (cooperative): the task's future
//! watches for it and kills the run's process tree. Every task is checked against its caller:
//! anyone else is told the task does not exist, as for an id never issued.
//!
//! [`Tasks`] (held by the `App`) keeps the tasks; `run_python_as_task` starts one for the handler.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, RoleServer};

use super::call::{call_notes, RunPythonArgs, ScriptCall};
use super::client_message::ClientMessage;
use super::handler::PyRunServer;
use super::reply::{refusal, runs_full};
use crate::audit::CallNotes;
use pyrun_run::background::{BackgroundRequest, RunKind, RunRecord, RunStatus};
use pyrun_run::paths::ProjectPath;
use pyrun_run::runner::Pool;

/// How often a task's status message is refreshed from the run's output.
const STATUS_EVERY: Duration = Duration::from_secs(1);
/// The poll interval suggested to clients.
const POLL_INTERVAL_MS: u64 = 1000;

/// The server's one task manager and who owns each task.
#[derive(Clone, Default)]
pub struct Tasks {
    manager: TaskManager,
    /// Task id → (owner key, run id).
    owners: Arc<Mutex<HashMap<String, (String, String)>>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("owned", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, String)>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes `record` (a run of kind `task`, already started) a task whose result `finish`
    /// builds once the run has ended. `ttl` is the run's time limit plus the retention: rmcp
    /// fails a task still going at its TTL, and forgets it one TTL after it ended.
    pub fn spawn<F, R>(
        &self,
        owner: &str,
        record: Arc<RunRecord>,
        script: ProjectPath,
        ttl: Duration,
        status: impl Fn(&RunRecord, &ProjectPath) -> String + Send + Sync + 'static,
        finish: F,
    ) -> CreateTaskResult
    where
        F: FnOnce(Arc<RunRecord>) -> R + Send + 'static,
        R: std::future::Future<Output = CallToolResult> + Send + 'static,
    {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let options = TaskOptions::new()
            .with_ttl_ms(ttl_ms)
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_status_message(status(&record, &script));
        let run = record.clone();
        let task = self.manager.spawn(options, move |context| {
            Box::pin(async move {
                let mut ticks = tokio::time::interval(STATUS_EVERY);
                loop {
                    tokio::select! {
                        () = run.ended() => break,
                        () = context.cancelled() => {
                            run.cancel();
                            run.ended().await;
                            break;
                        }
                        _ = ticks.tick() => context.set_status_message(status(&run, &script)),
                    }
                }
                if run.status() == RunStatus::Cancelled && context.is_cancel_requested() {
                    return Err(TaskExit::Cancelled);
                }
                Ok(finish(run).await)
            })
        });
        record.set_task_id(task.task_id.clone());
        self.lock()
            .insert(task.task_id.clone(), (owner.to_owned(), record.id.clone()));
        CreateTaskResult::new(task)
    }

    /// `tasks/get` for `owner`.
    pub fn get(&self, owner: &str, task_id: &str) -> Result<DetailedTask, ErrorData> {
        self.check(owner, task_id)?;
        let task = self.manager.get_task(task_id);
        if task.is_err() {
            self.lock().remove(task_id);
        }
        task
    }

    /// `tasks/cancel` for `owner`: the task's future kills the run.
    pub fn cancel(&self, owner: &str, task_id: &str) -> Result<(), ErrorData> {
        self.check(owner, task_id)?;
        self.manager.cancel_task(task_id)
    }

    /// `tasks/update` for `owner` (runs ask for no input: there is nothing to deliver).
    pub fn update(&self, owner: &str, task_id: &str) -> Result<(), ErrorData> {
        self.check(owner, task_id)?;
        self.manager.update_task(task_id, [])
    }

    /// Forgets the tasks of a run dropped from the registry.
    pub fn forget_run(&self, run_id: &str) {
        self.lock().retain(|_, (_, run)| run != run_id);
    }

    fn check(&self, owner: &str, task_id: &str) -> Result<(), ErrorData> {
        match self.lock().get(task_id) {
            Some((key, _)) if key == owner => Ok(()),
            // The words rmcp uses for an unknown task (-32602), for a foreign one too.
            _ => Err(ErrorData::invalid_params(
                format!("unknown task: {}", task_id.escape_debug()),
                None,
            )),
        }
    }
}

impl PyRunServer {
    /// `run_python` for a client that declared the Tasks extension: the run goes to the
    /// background registry (kind `task`, the background time limit and pool) and the call
    /// returns a task at once. Bad arguments are answered as the tool would, without a task.
    pub(super) async fn run_python_as_task(
        &self,
        request: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let args: RunPythonArgs = serde_json::from_value(arguments).map_err(|e| {
            ErrorData::invalid_params(format!("failed to deserialize parameters: {e}"), None)
        })?;
        let notes = call_notes(ctx);
        let settings = self.app.runs.settings();
        let ScriptCall {
            script,
            timeout,
            python,
        } = match self.script_call(&args, settings.timeout, &notes).await {
            Ok(call) => call,
            Err(message) => return Ok(refusal(message).into()),
        };
        let caller = self.caller(ctx);
        let owner = caller.key().into_owned();
        let request = BackgroundRequest {
            script: script.clone(),
            args: args.args,
            stdin: args.stdin,
            timeout,
            pool: Pool::Background,
            python,
        };
        let record = match self.app.runs.start(&owner, RunKind::Task, request, true) {
            Ok(record) => record,
            Err(e) => return Ok(refusal(runs_full(e, settings)).into()),
        };
        tracing::info!(%caller, run_id = %record.id, script = script.relative(), "task started");
        let (status_server, end_server) = (self.clone(), self.clone());
        let created = self.app.tasks.spawn(
            &owner,
            record,
            script.clone(),
            timeout + settings.retention,
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
            Some(line) => message.then(": ").output(&self.without_host_folder(&line)),
            None => message,
        };
        message.into_string()
    }
}

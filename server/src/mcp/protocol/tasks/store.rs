//! The MCP tasks of one server (in its `McpState`): rmcp's [`TaskManager`] and who owns each task
//! (task id → owner key and run id), so every `tasks/*` request is checked against its caller.
//! The tasks module (`mod.rs`) starts them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolResult, CreateTaskResult, DetailedTask};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::ErrorData;

use pyrun_run::background::{RunRecord, RunStatus};
use pyrun_run::paths::ProjectPath;

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

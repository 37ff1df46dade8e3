//! Background runs: runs that go on while their caller does other things (`start_python`, MCP
//! tasks, a `run_python` handed over after `--detach-after`), kept in memory for their owner to
//! read, wait on and cancel.
//!
//! A run belongs to the caller that started it (a [`Caller::key`](super::caller::Caller::key))
//! and to no session: a client that reconnects reads it again. Anyone else gets the same answer
//! as for an id that never existed. Steps: [`BackgroundRuns::start`] makes the record (refusing
//! past `--max-background-runs`, or past `--max-background-runs-per-caller` for its caller; the
//! room a new run needs only ever comes from its own caller's runs whose end that caller has
//! seen, never from another caller's before their retention), spawns the run in the runner's background pool with a live
//! capture of its output, and returns; the spawned task writes the end into the record and wakes
//! waiters. Ended runs are kept `--run-retention`, then swept (on every call: nothing runs when
//! nobody asks). Nothing survives a restart.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use super::artifacts::{new_run_id, ArtifactStore};
use super::live_output::{LiveOutput, Stream};
use super::paths::ProjectPath;
use super::python_env::PythonEnv;
use super::runner::{ArtifactTarget, Pool, RunError, RunOutcome, RunRequest, Runner};

/// What the registry needs from the configuration.
#[derive(Debug, Clone)]
pub struct BackgroundSettings {
    /// The time limit of a run started in the background.
    pub timeout: Duration,
    /// Runs kept at once: waiting, running, or ended and not yet expired.
    pub max_runs: usize,
    /// Runs one caller may keep at once, within `max_runs`: no caller takes every place.
    pub max_per_caller: usize,
    /// How long an ended run is kept.
    pub retention: Duration,
}

// What a run is called on the wire, shared with the client.
pub use pyrun_api::{RunKind, RunStatus};

/// How a run ended.
#[derive(Debug)]
pub enum RunEnd {
    /// It ran (to its end, a timeout or a cancellation). The output is in the record's
    /// [`LiveOutput`], not in the outcome.
    Finished(RunOutcome),
    /// It never started; the client-facing reason.
    Failed(String),
}

/// What is to run.
#[derive(Debug, Clone)]
pub struct BackgroundRequest {
    pub script: ProjectPath,
    pub args: Vec<String>,
    pub stdin: Option<String>,
    /// At most the background time limit.
    pub timeout: Duration,
    pub pool: Pool,
    /// The environment it runs in; `None`: the runner's interpreter.
    pub python: Option<Arc<PythonEnv>>,
}

/// The backend of a run the server's own runner executes.
pub const LOCAL_BACKEND: &str = "local";

/// A run executed somewhere else than by this server's runner (a remote engine), prepared and
/// checked before it is registered: driven, it fills the record's live output, stops when `cancel`
/// fires, keeps the files it brought back through `artifacts` and returns how the run ended.
pub trait RemoteRun: Send {
    fn drive(
        self: Box<Self>,
        live: Arc<LiveOutput>,
        cancel: CancellationToken,
        artifacts: ArtifactTarget,
    ) -> Pin<Box<dyn Future<Output = RunEnd> + Send>>;
}

/// One run and what is known of it.
#[derive(Debug)]
pub struct RunRecord {
    pub id: String,
    owner: String,
    /// The script, relative to the projects folder.
    pub file_name: String,
    pub kind: RunKind,
    /// When it was started (wall clock, for listings).
    pub started_at: SystemTime,
    created: Instant,
    pub live: Arc<LiveOutput>,
    cancel: CancellationToken,
    end: OnceLock<(RunEnd, Instant)>,
    /// Listed by `list_runs` (a `run_python` waiting to be handed over is not, yet).
    listed: AtomicBool,
    /// Its end was shown to its owner: it may make room for a new run before it expires.
    end_seen: AtomicBool,
    /// The MCP task this run answers, if any.
    task_id: OnceLock<String>,
    /// The environment it runs in (`None`: the runner's interpreter).
    pub python: Option<Arc<PythonEnv>>,
    /// Where it runs: [`LOCAL_BACKEND`] or a remote backend's name.
    pub backend: &'static str,
}

impl RunRecord {
    pub fn status(&self) -> RunStatus {
        match self.end.get() {
            None if self.live.has_started() => RunStatus::Running,
            None => RunStatus::Queued,
            Some((RunEnd::Failed(_), _)) => RunStatus::Failed,
            Some((RunEnd::Finished(o), _)) if o.timed_out => RunStatus::TimedOut,
            Some((RunEnd::Finished(o), _)) if o.cancelled => RunStatus::Cancelled,
            Some((RunEnd::Finished(_), _)) => RunStatus::Exited,
        }
    }

    /// Who started it (a `Caller::key()`).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// How it ended, once it has.
    pub fn end(&self) -> Option<&RunEnd> {
        self.end.get().map(|(end, _)| end)
    }

    /// Notes that the owner has seen how the run ended.
    pub fn mark_end_seen(&self) {
        if self.end.get().is_some() {
            self.end_seen.store(true, Ordering::Relaxed);
        }
    }

    /// Wall time so far, or of the whole run once it ended.
    pub fn duration(&self) -> Duration {
        match self.end.get() {
            Some((RunEnd::Finished(outcome), _)) => outcome.duration,
            Some((RunEnd::Failed(_), at)) => at.duration_since(self.created),
            None => self.created.elapsed(),
        }
    }

    /// Asks the run to stop: its whole process tree is killed (a queued run never starts).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The MCP task this run answers.
    pub fn task_id(&self) -> Option<&str> {
        self.task_id.get().map(String::as_str)
    }

    pub fn set_task_id(&self, id: String) {
        let _ = self.task_id.set(id);
    }

    /// Waits (at most `wait`) until the run ends, starts, or has output past the given offsets.
    /// Returns at once when one of those is already true. Dropping the future is harmless.
    pub async fn wait_for_news(&self, wait: Duration, stdout_offset: u64, stderr_offset: u64) {
        let deadline = tokio::time::Instant::now() + wait;
        let mut changes = self.live.subscribe();
        let was_started = self.live.has_started();
        loop {
            changes.borrow_and_update();
            let news = self.end.get().is_some()
                || self.live.has_started() != was_started
                || self.live.len(Stream::Stdout) > stdout_offset
                || self.live.len(Stream::Stderr) > stderr_offset;
            if news {
                return;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// Waits until the run has ended.
    pub async fn ended(&self) {
        let mut changes = self.live.subscribe();
        while self.end.get().is_none() {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    fn finish(&self, end: RunEnd) {
        let _ = self.end.set((end, Instant::now()));
        self.live.bump();
    }

    fn expired(&self, now: Instant, retention: Duration) -> bool {
        self.end
            .get()
            .is_some_and(|(_, at)| now.duration_since(*at) >= retention)
    }
}

/// Why a run was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    #[error("{max} background runs are kept at once and none can make room")]
    Full { max: usize },
    #[error("{max} background runs of one caller are kept at once and none can make room")]
    CallerFull { max: usize },
    #[error("no run id could be drawn (no randomness from the OS)")]
    NoRunId,
}

/// Called with the id of a run dropped from the registry.
type ForgetHook = Box<dyn Fn(&str) + Send + Sync>;

/// Every background run of the server.
pub struct BackgroundRuns {
    runner: Arc<Runner>,
    settings: BackgroundSettings,
    /// Where the files runs leave are kept (under their run id, for their owner).
    artifacts: Arc<ArtifactStore>,
    runs: Mutex<HashMap<String, Arc<RunRecord>>>,
    /// Turns a run that could not start into the words its owner reads.
    describe: fn(RunError) -> String,
    /// Called with the id of each run dropped from the registry (its files go too).
    on_forget: Mutex<Vec<ForgetHook>>,
}

impl std::fmt::Debug for BackgroundRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundRuns")
            .field("settings", &self.settings)
            .field("runs", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl BackgroundRuns {
    pub fn new(
        runner: Arc<Runner>,
        settings: BackgroundSettings,
        artifacts: Arc<ArtifactStore>,
        describe: fn(RunError) -> String,
    ) -> Self {
        Self {
            runner,
            settings,
            artifacts,
            runs: Mutex::default(),
            describe,
            on_forget: Mutex::default(),
        }
    }

    pub fn settings(&self) -> &BackgroundSettings {
        &self.settings
    }

    /// Registers what to do when a run is dropped (expired, or removed).
    pub fn on_forget(&self, hook: impl Fn(&str) + Send + Sync + 'static) {
        self.on_forget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Box::new(hook));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<RunRecord>>> {
        self.runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts a run for `owner` and returns its record at once. `listed: false` keeps it out of
    /// [`Self::list`] until [`Self::show`] (a `run_python` that may still end in time).
    pub fn start(
        &self,
        owner: &str,
        kind: RunKind,
        request: BackgroundRequest,
        listed: bool,
    ) -> Result<Arc<RunRecord>, StartError> {
        let record = self.register(owner, kind, &request, listed, LOCAL_BACKEND)?;
        self.spawn_local(&record, request);
        Ok(record)
    }

    /// Starts a run of a remote backend (`backend` names it) for `owner`, under the same
    /// limits, owner rules and retention as a local one; `request` says what runs (its pool
    /// and interpreter are the remote side's business).
    pub fn start_remote(
        &self,
        owner: &str,
        kind: RunKind,
        request: &BackgroundRequest,
        listed: bool,
        backend: &'static str,
        run: Box<dyn RemoteRun>,
    ) -> Result<Arc<RunRecord>, StartError> {
        let record = self.register(owner, kind, request, listed, backend)?;
        let artifacts = self.artifact_target(&record);
        let running = record.clone();
        // The server's shutdown cancels the job too: a job left behind on the engine runs (and
        // is billed) until its own time limit.
        let shutdown = self.runner.shutdown_token().clone();
        tokio::spawn(async move {
            let drive = run.drive(running.live.clone(), running.cancel.clone(), artifacts);
            tokio::pin!(drive);
            let end = tokio::select! {
                end = &mut drive => end,
                () = shutdown.cancelled() => {
                    running.cancel.cancel();
                    drive.await
                }
            };
            running.finish(end);
        });
        Ok(record)
    }

    fn artifact_target(&self, record: &RunRecord) -> ArtifactTarget {
        ArtifactTarget {
            store: self.artifacts.clone(),
            run_id: record.id.clone(),
            owner: record.owner.clone(),
            retention: self.settings.retention,
        }
    }

    /// Makes the record and takes its place in the registry (or says why there is none).
    fn register(
        &self,
        owner: &str,
        kind: RunKind,
        request: &BackgroundRequest,
        listed: bool,
        backend: &'static str,
    ) -> Result<Arc<RunRecord>, StartError> {
        let id = new_run_id().map_err(|_| StartError::NoRunId)?;
        let record = Arc::new(RunRecord {
            id,
            owner: owner.to_owned(),
            file_name: request.script.relative().to_owned(),
            kind,
            started_at: SystemTime::now(),
            created: Instant::now(),
            live: Arc::new(LiveOutput::new(self.runner.max_output())),
            cancel: CancellationToken::new(),
            end: OnceLock::new(),
            listed: AtomicBool::new(listed),
            end_seen: AtomicBool::new(false),
            task_id: OnceLock::new(),
            python: request.python.clone(),
            backend,
        });
        self.admit(&record)?;
        Ok(record)
    }

    /// Runs a registered record with the server's own runner.
    fn spawn_local(&self, record: &Arc<RunRecord>, request: BackgroundRequest) {
        let runner = self.runner.clone();
        let describe = self.describe;
        let running = record.clone();
        let artifacts = self.artifact_target(record);
        tokio::spawn(async move {
            let req = RunRequest {
                live: Some(running.live.clone()),
                pool: request.pool,
                caller: Some(&running.owner),
                artifacts: Some(artifacts),
                python: request.python.clone(),
                ..RunRequest::new(
                    &request.script,
                    &request.args,
                    request.stdin.as_deref(),
                    request.timeout,
                )
            };
            let end = match runner.run(req, &running.cancel).await {
                Ok(outcome) => RunEnd::Finished(outcome),
                Err(RunError::CancelledWhileQueued) if running.cancel.is_cancelled() => {
                    RunEnd::Finished(RunOutcome {
                        stdout: String::new(),
                        stderr: String::new(),
                        exit_code: None,
                        signal: None,
                        timed_out: false,
                        cancelled: true,
                        stdout_truncated: false,
                        stderr_truncated: false,
                        duration: running.created.elapsed(),
                        artifacts: None,
                        python: request.python.clone(),
                        quarantined: Vec::new(),
                        warm: false,
                    })
                }
                Err(e) => RunEnd::Failed(describe(e)),
            };
            running.finish(end);
        });
    }

    /// Keeps a run that ended in its call (`run_python`, `run_python_code`) so that its whole
    /// output stays readable with get_run: unlisted, its end already seen by its owner, under
    /// the room rules of a new run (it may take the place of the owner's oldest seen run; when
    /// none can make room, it is not kept). `outcome` carries no output: that is in `live`.
    pub fn keep_ended(
        &self,
        owner: &str,
        id: String,
        file_name: String,
        live: Arc<LiveOutput>,
        outcome: RunOutcome,
    ) -> Result<Arc<RunRecord>, StartError> {
        let now = Instant::now();
        let python = outcome.python.clone();
        let end = OnceLock::new();
        let _ = end.set((RunEnd::Finished(outcome), now));
        let record = Arc::new(RunRecord {
            id,
            owner: owner.to_owned(),
            file_name,
            kind: RunKind::Background,
            started_at: SystemTime::now(),
            created: now,
            live,
            cancel: CancellationToken::new(),
            end,
            listed: AtomicBool::new(false),
            end_seen: AtomicBool::new(true),
            task_id: OnceLock::new(),
            python,
            backend: LOCAL_BACKEND,
        });
        self.admit(&record)?;
        Ok(record)
    }

    /// Puts a new record in the registry when there is room for it, made if need be from its
    /// owner's oldest run whose end the owner has seen.
    /// Whether `owner` could start a run now (asked again when it starts): a remote run asks
    /// before its project is packed, so that a caller at its quota costs the server no snapshot.
    pub fn has_room(&self, owner: &str) -> Result<(), StartError> {
        let mut runs = self.lock();
        let dropped = self.sweep(&mut runs);
        let mine = runs.values().filter(|r| r.owner == owner).count();
        // The caller's oldest run whose end it has seen would make room (see `admit`).
        let spare = usize::from(
            runs.values()
                .any(|r| r.owner == owner && r.end_seen.load(Ordering::Relaxed)),
        );
        let (max, per_caller) = (self.settings.max_runs, self.settings.max_per_caller);
        let verdict = if mine - spare >= per_caller {
            Err(StartError::CallerFull { max: per_caller })
        } else if runs.len() - spare >= max {
            Err(StartError::Full { max })
        } else {
            Ok(())
        };
        drop(runs);
        self.forget_all(&dropped);
        verdict
    }

    fn admit(&self, record: &Arc<RunRecord>) -> Result<(), StartError> {
        let owner = record.owner.as_str();
        let mut runs = self.lock();
        let mut dropped = self.sweep(&mut runs);
        let (max, per_caller) = (self.settings.max_runs, self.settings.max_per_caller);
        let full = |runs: &HashMap<String, Arc<RunRecord>>| {
            let mine = runs.values().filter(|r| r.owner == owner).count();
            if mine >= per_caller {
                Some(StartError::CallerFull { max: per_caller })
            } else if runs.len() >= max {
                Some(StartError::Full { max })
            } else {
                None
            }
        };
        if full(&runs).is_some() {
            // Room from the caller's own oldest run whose end it has already seen.
            let seen = runs
                .values()
                .filter(|r| r.owner == owner && r.end_seen.load(Ordering::Relaxed))
                .min_by_key(|r| r.created)
                .map(|r| r.id.clone());
            if let Some(id) = seen {
                runs.remove(&id);
                dropped.push(id);
            }
        }
        if let Some(error) = full(&runs) {
            drop(runs);
            self.forget_all(&dropped);
            return Err(error);
        }
        runs.insert(record.id.clone(), record.clone());
        drop(runs);
        self.forget_all(&dropped);
        Ok(())
    }

    /// Lists a run started with `listed: false` (it was handed over to the background).
    pub fn show(&self, record: &RunRecord) {
        record.listed.store(true, Ordering::Relaxed);
    }

    /// Drops a run's record at once (a `run_python` that ended before it was handed over);
    /// the files it left stay in the store for their retention, as any `run_python`'s do.
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// The owner's run with this id; `None` for an unknown, expired or foreign id alike.
    pub fn get(&self, owner: &str, id: &str) -> Option<Arc<RunRecord>> {
        let mut runs = self.lock();
        let dropped = self.sweep(&mut runs);
        let found = runs.get(id).filter(|r| r.owner == owner).cloned();
        drop(runs);
        self.forget_all(&dropped);
        found
    }

    /// The owner's listed runs, newest first.
    pub fn list(&self, owner: &str) -> Vec<Arc<RunRecord>> {
        let mut runs = self.lock();
        let dropped = self.sweep(&mut runs);
        let mut mine: Vec<_> = runs
            .values()
            .filter(|r| r.owner == owner && r.listed.load(Ordering::Relaxed))
            .cloned()
            .collect();
        drop(runs);
        self.forget_all(&dropped);
        mine.sort_by_key(|r| std::cmp::Reverse(r.created));
        mine
    }

    /// Runs that have not ended (for the server's shutdown and tests).
    pub fn running(&self) -> usize {
        self.lock()
            .values()
            .filter(|r| r.end.get().is_none())
            .count()
    }

    /// Removes expired runs; returns their ids (the caller calls the hooks once unlocked).
    fn sweep(&self, runs: &mut HashMap<String, Arc<RunRecord>>) -> Vec<String> {
        let now = Instant::now();
        let expired: Vec<String> = runs
            .values()
            .filter(|r| r.expired(now, self.settings.retention))
            .map(|r| r.id.clone())
            .collect();
        for id in &expired {
            runs.remove(id);
        }
        expired
    }

    fn forget_all(&self, ids: &[String]) {
        if ids.is_empty() {
            return;
        }
        let hooks = self
            .on_forget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for id in ids {
            for hook in hooks.iter() {
                hook(id);
            }
        }
    }
}

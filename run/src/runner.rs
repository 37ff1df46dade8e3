//! The only module that starts runs: one Python run with a scrubbed environment, its own process
//! group, a timeout, cancellation, capped output and a bounded number of runs at once.
//!
//! Steps of a run, in order: wait for a permit; wait for the sandbox's start-up probe (done long
//! before, usually); take a slot (a reused scratch dir for HOME/TMPDIR with its sandbox rules);
//! build the argv (never a shell); have the sandbox start it (Linux: `Sandbox::spawn`, made
//! awaitable by `child.rs`; elsewhere a `Command` the sandbox confines); feed stdin; read both
//! pipes with a cap; wait for exit, timeout or cancellation; kill the whole process group whatever
//! happened; drain the pipes for a bounded time; report a plain [`RunOutcome`].
//!
//! Artifacts: each run gets an empty `output` folder in its scratch (`PYRUN_OUTPUT_DIR`); once the
//! process tree is dead and before the slot goes back, what the run left there is kept by the
//! [`ArtifactStore`] (when the request names a run id and an owner) and the folder removed; an
//! empty one stays in the slot for its next run.
//!
//! Inline code ([`RunSource::Inline`]): the caller's code is written into the slot's scratch as
//! [`INLINE_FILE_NAME`] (owner read-only, never into the projects folder) right before the spawn,
//! and the interpreter runs that file as the run sees it (`/tmp/_pyrun_inline.py` in the
//! sandbox's view); the same spawn, layers and limits as a script. It is removed with the run.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::artifacts::{ArtifactStore, Collected};
#[cfg(target_os = "linux")]
use super::launch::Seen;
use super::launch::{Launch, Placement, Program, Starter};
use super::live_output::{LiveOutput, Stream};
use super::paths::{ProjectDir, ProjectPath};
use super::python_env::PythonEnv;
use super::quarantine::{Quarantine, Quarantined};
use super::sandbox_probe::SandboxProbe;
#[cfg(target_os = "linux")]
use super::slots::Slot;
use super::slots::{SlotLease, SlotPool};
use super::turns::CallerTurns;
use super::warm::WarmSettings;
#[cfg(target_os = "linux")]
use super::warm::{await_ready, driver_arg, job_frame, Place, Warm, WarmKey, WARM_DRIVER};
use pyrun_sandbox::{RunScope, Sandbox};

/// How long pipes are read after the process group is gone. Data the script wrote before dying is
/// already in the pipe; only a process that escaped the group can keep a pipe open this long.
pub(super) const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// How long to wait for the kernel to reap a process after SIGKILL.
pub(super) const REAP_GRACE: Duration = Duration::from_secs(5);
/// What is read from a pipe at a time.
const READ_CHUNK: usize = 16 * 1024;

/// Variables a script sees from the server's environment; everything else (tokens, API keys) is
/// dropped unless the user passes it with `--pass-env`.
const ALLOWED_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "PATHEXT",
    "COMSPEC",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
];

/// What the runner needs from the configuration.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    pub python: PathBuf,
    pub max_output_bytes: usize,
    pub max_concurrent: usize,
    /// Background runs at once (their own pool: they never take a turn from `run_python`).
    pub max_background_concurrent: usize,
    pub pass_env: Vec<String>,
}

/// Which pool a run waits in for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// A tool call that waits for its result (`run_python`).
    Foreground,
    /// A run that goes on while its caller does other things (`start_python`, tasks).
    Background,
}

/// What a run runs.
#[derive(Debug, Clone, Copy)]
pub enum RunSource<'a> {
    /// A `.py` file of the projects folder, run in its own folder.
    Script(&'a ProjectPath),
    /// Code the caller sent (already checked: not empty, no NUL byte, within the cap), run from
    /// the run's scratch in `cwd`, or in the scratch itself when `None`.
    Inline {
        code: &'a str,
        cwd: Option<&'a ProjectDir>,
    },
}

impl<'a> From<&'a ProjectPath> for RunSource<'a> {
    fn from(script: &'a ProjectPath) -> Self {
        Self::Script(script)
    }
}

impl RunSource<'_> {
    /// The name a run is known by in logs and messages: the script relative to the projects
    /// folder, or `<inline>`.
    pub fn shown(&self) -> &str {
        match self {
            Self::Script(script) => script.relative(),
            Self::Inline { .. } => INLINE_SHOWN,
        }
    }
}

/// One run to do.
#[derive(Debug)]
pub struct RunRequest<'a> {
    pub source: RunSource<'a>,
    pub args: &'a [String],
    pub stdin: Option<&'a str>,
    pub timeout: Duration,
    /// Where the output goes as it arrives. `None`: a capture of the run's own, whose text
    /// ends up in [`RunOutcome`]. `Some`: the output stays in it and the outcome's `stdout` and
    /// `stderr` are empty (the truncation flags are set all the same).
    pub live: Option<Arc<LiveOutput>>,
    pub pool: Pool,
    /// Who asked for it (a `Caller::key`): its runs wait for their turns in the pool when
    /// several callers share the server ([`Runner::with_caller_turns`]).
    pub caller: Option<&'a str>,
    /// Where the files the run leaves in `PYRUN_OUTPUT_DIR` go; `None`: they are dropped.
    pub artifacts: Option<ArtifactTarget>,
    /// The environment it runs in (`PythonEnvs::for_dir`); `None`: the runner's interpreter,
    /// without a venv.
    pub python: Option<Arc<PythonEnv>>,
}

impl<'a> RunRequest<'a> {
    /// A foreground run with its own capture.
    pub fn new(
        source: impl Into<RunSource<'a>>,
        args: &'a [String],
        stdin: Option<&'a str>,
        timeout: Duration,
    ) -> Self {
        Self {
            source: source.into(),
            args,
            stdin,
            timeout,
            live: None,
            pool: Pool::Foreground,
            caller: None,
            artifacts: None,
            python: None,
        }
    }
}

/// The run's artifacts: kept by `store` under `run_id` for `owner` (a `Caller::key()`), for
/// `retention` after the run ends.
#[derive(Debug, Clone)]
pub struct ArtifactTarget {
    pub store: Arc<ArtifactStore>,
    pub run_id: String,
    pub owner: String,
    pub retention: Duration,
}

pub(crate) use super::launch::Spawned;
pub use super::launch::{RunError, INLINE_FILE_NAME, MPL_BACKEND};
pub use super::slots::OUTPUT_DIR_NAME;
/// How inline code is named in logs and messages.
const INLINE_SHOWN: &str = "<inline>";

/// What happened, in plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub stdout: String,
    pub stderr: String,
    /// None when the process was killed (timeout, cancellation) or died of a signal.
    pub exit_code: Option<i32>,
    /// The signal it died of (Unix), when it was not killed for a timeout or a cancellation.
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration: Duration,
    /// What the run left in its output folder, when the request named an [`ArtifactTarget`].
    pub artifacts: Option<Collected>,
    /// The environment it ran in, as the request named it.
    pub python: Option<Arc<PythonEnv>>,
    /// Protected names (`.git`, `.vscode`, `__pycache__`...) that appeared in the part of the
    /// projects folder the run could write, moved to the quarantine once it was over.
    pub quarantined: Vec<Quarantined>,
    /// It ran in an interpreter started ahead of it (a warm run).
    pub warm: bool,
}

pub struct Runner {
    /// Starts interpreters (shared with the warm spares' background starts).
    starter: Arc<Starter>,
    max_output: usize,
    permits: Arc<Semaphore>,
    background_permits: Arc<Semaphore>,
    /// Each caller's turns in the foreground and background pools, when several callers share
    /// the server.
    turns: Option<[CallerTurns; 2]>,
    places: [usize; 2],
    running: AtomicUsize,
    // Before `sandbox`: spares and slots drop their rules (cgroups) before the sandbox removes
    // their parent.
    #[cfg(target_os = "linux")]
    warm: Warm,
    sandbox: SandboxProbe,
    shutdown: CancellationToken,
    /// Where protected names runs create go; `None`: they stay (`--allow-protected-writes`).
    quarantine: Option<Arc<Quarantine>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("python", &self.starter.python)
            .field("running", &self.running())
            .finish_non_exhaustive()
    }
}

impl Runner {
    /// `sandbox` is a [`Sandbox`](pyrun_sandbox::Sandbox) or one still being probed. `shutdown`
    /// kills every run in flight when it fires. Fails when no private scratch root can be made.
    pub fn new(
        settings: RunnerSettings,
        sandbox: impl Into<SandboxProbe>,
        shutdown: CancellationToken,
    ) -> io::Result<Self> {
        let env = scrubbed_env(std::env::vars_os(), &settings.pass_env);
        Ok(Self {
            starter: Arc::new(Starter {
                python: settings.python,
                env,
                slots: Arc::new(SlotPool::new()?),
                #[cfg(target_os = "linux")]
                venv_bytecode: Default::default(),
            }),
            max_output: settings.max_output_bytes,
            permits: Arc::new(Semaphore::new(settings.max_concurrent.max(1))),
            background_permits: Arc::new(Semaphore::new(settings.max_background_concurrent.max(1))),
            turns: None,
            places: [
                settings.max_concurrent.max(1),
                settings.max_background_concurrent.max(1),
            ],
            running: AtomicUsize::new(0),
            #[cfg(target_os = "linux")]
            warm: Warm::new(WarmSettings::default(), shutdown.clone()),
            sandbox: sandbox.into(),
            shutdown,
            quarantine: Some(Arc::new(Quarantine::in_temp())),
        })
    }

    /// Starts runs in interpreters started ahead of them (Linux; elsewhere runs start cold
    /// whatever `settings` says: see `warm`).
    pub fn with_warm(self, settings: WarmSettings) -> Self {
        #[cfg(target_os = "linux")]
        {
            let shutdown = self.shutdown.clone();
            Self {
                warm: Warm::new(settings, shutdown),
                ..self
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = settings;
            self
        }
    }

    /// Warm interpreters ready for a run now.
    pub fn warm_ready(&self) -> usize {
        #[cfg(target_os = "linux")]
        {
            self.warm.ready()
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    }

    /// Stops the warm interpreters waiting for runs (the server is closing).
    pub fn close_warm(&self) {
        #[cfg(target_os = "linux")]
        self.warm.close();
    }

    /// Moves protected names runs create to `quarantine` (the server's, under its state
    /// folder), or with `None` lets them stay (for scaffolding scripts that mean to make them).
    pub fn with_quarantine(mut self, quarantine: Option<Quarantine>) -> Self {
        self.quarantine = quarantine.map(Arc::new);
        self
    }

    /// Several callers share the server (OAuth clients): each caller's runs take at most all
    /// places of a pool but one (`turns.rs`).
    pub fn with_caller_turns(mut self) -> Self {
        self.turns = Some(self.places.map(CallerTurns::new));
        self
    }

    /// Runs in flight (not counting those waiting for a permit).
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// The most output kept per stream, in bytes.
    pub fn max_output(&self) -> usize {
        self.max_output
    }

    /// The private folder the runs' scratch folders are made in (never shown to callers).
    pub fn scratch_root(&self) -> &Path {
        self.starter.slots.root()
    }

    /// The sandbox (possibly still being probed), for reports.
    pub fn sandbox(&self) -> &SandboxProbe {
        &self.sandbox
    }

    /// Runs one script to completion, timeout or cancellation. Dropping the returned future kills
    /// the run too.
    pub async fn run(
        &self,
        req: RunRequest<'_>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        let (pool, index) = match req.pool {
            Pool::Foreground => (&self.permits, 0),
            Pool::Background => (&self.background_permits, 1),
        };
        let turns = self.turns.as_ref().map(|turns| &turns[index]);
        let _turn = match turns.zip(req.caller) {
            Some((turns, caller)) => tokio::select! {
                turn = turns.take(caller) => Some(turn.ok_or(RunError::CancelledWhileQueued)?),
                _ = cancel.cancelled() => return Err(RunError::CancelledWhileQueued),
                _ = self.shutdown.cancelled() => return Err(RunError::CancelledWhileQueued),
            },
            None => None,
        };
        let _permit = tokio::select! {
            permit = pool.clone().acquire_owned() => permit.map_err(|_| RunError::CancelledWhileQueued)?,
            _ = cancel.cancelled() => return Err(RunError::CancelledWhileQueued),
            _ = self.shutdown.cancelled() => return Err(RunError::CancelledWhileQueued),
        };
        self.running.fetch_add(1, Ordering::Relaxed);
        let _running = DecrementOnDrop(&self.running);
        let live = req
            .live
            .clone()
            .unwrap_or_else(|| Arc::new(LiveOutput::new(self.max_output)));
        live.mark_started();

        // The slot is dropped after the process tree below: it goes back only once the run is dead.
        let sandbox = self.probed_sandbox().await?;
        #[cfg(target_os = "linux")]
        let key = self.warm.enabled().then(|| warm_key(&req));
        #[cfg(target_os = "linux")]
        #[cfg(target_os = "linux")]
        let scope_now = |scratch: &Path| launch_of(&req, scratch).scope(&sandbox);
        #[cfg(target_os = "linux")]
        let spare = match &key {
            Some(key) => {
                let wait = req.timeout.min(WAIT_FOR_STARTING);
                self.warm.take_or_wait(key, &scope_now, wait).await
            }
            None => None,
        };
        #[cfg(target_os = "linux")]
        let (slot, spare) = self.slot_of(spare, &sandbox).await?;
        #[cfg(not(target_os = "linux"))]
        let slot = self.starter.take_slot(&sandbox).await?;
        let output = slot.dir().join(OUTPUT_DIR_NAME);
        let inline = match req.source {
            RunSource::Inline { code, .. } => {
                let file = slot.dir().join(INLINE_FILE_NAME);
                write_inline(&file, code).map_err(RunError::Scratch)?;
                Some(file)
            }
            RunSource::Script(_) => None,
        };
        let launch = launch_of(&req, slot.dir());
        let scope = launch.scope(&sandbox);
        let started = Instant::now();
        #[cfg(target_os = "linux")]
        let Started {
            mut child,
            job,
            warm,
        } = self
            .start(key.is_some(), spare, &req, &launch, &sandbox, &slot, &scope)
            .await?;
        #[cfg(not(target_os = "linux"))]
        let (mut child, job, warm): (Spawned, Option<Vec<u8>>, bool) = (
            self.starter.spawn(&launch, &sandbox, &slot, &scope)?,
            None,
            false,
        );
        // Windows: a kill-on-close Job Object holds the whole tree (on error, kill_on_drop).
        #[cfg(windows)]
        let _job = match child.raw_handle() {
            Some(handle) => sandbox.assign_job(handle)?,
            None => None,
        };
        let tree = ProcessTree::of(child.id());

        // A warm driver reads its job first, then the run's stdin follows on the same pipe.
        let input = req.stdin.map(|text| text.as_bytes().to_vec());
        if job.is_some() || input.is_some() {
            if let Some(mut pipe) = child.stdin.take() {
                // A script that does not read its stdin closes the pipe: that is not an error.
                tokio::spawn(async move {
                    for bytes in [job, input].into_iter().flatten() {
                        if pipe.write_all(&bytes).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
        let stop_reading = CancellationToken::new();
        let out = tokio::spawn(read_live(
            child.stdout.take(),
            live.clone(),
            Stream::Stdout,
            stop_reading.clone(),
        ));
        let err = tokio::spawn(read_live(
            child.stderr.take(),
            live.clone(),
            Stream::Stderr,
            stop_reading.clone(),
        ));

        let ending = tokio::select! {
            status = child.wait() => Ending::Exited(status.ok()),
            _ = tokio::time::sleep(req.timeout) => Ending::TimedOut,
            _ = cancel.cancelled() => Ending::Cancelled,
            _ = self.shutdown.cancelled() => Ending::Cancelled,
        };
        // Whatever happened, nothing of the run may outlive it.
        tree.kill();
        let status = match ending {
            Ending::Exited(status) => status,
            _ => {
                let _ = child.start_kill();
                tokio::time::timeout(REAP_GRACE, child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
        };
        let duration = started.elapsed();

        // Reading ends at EOF, or DRAIN_GRACE from now for a pipe held by an escaped process.
        let deadline = {
            let stop = stop_reading.clone();
            tokio::spawn(async move {
                tokio::time::sleep(DRAIN_GRACE).await;
                stop.cancel();
            })
        };
        let _ = out.await;
        let _ = err.await;
        deadline.abort();
        #[cfg(target_os = "linux")]
        if let Some(key) = key {
            self.warm.learn(&key, slot.dir());
            self.warm
                .refill(key, self.starter.clone(), Arc::clone(&sandbox));
        }
        let artifacts = collect_artifacts(req.artifacts, output).await;
        let quarantined = self.sweep(&sandbox, &scope).await;
        // Gone with the run, so the slot can be reused (a run that replaced it leaves it to the
        // slot's clean-up).
        if let Some(file) = inline {
            let _ = std::fs::remove_file(file);
        }

        let ((stdout, stdout_truncated), (stderr, stderr_truncated)) = if req.live.is_some() {
            (
                (String::new(), live.truncated(Stream::Stdout)),
                (String::new(), live.truncated(Stream::Stderr)),
            )
        } else {
            (
                live.take_text(Stream::Stdout),
                live.take_text(Stream::Stderr),
            )
        };
        Ok(RunOutcome {
            stdout,
            stderr,
            exit_code: match ending {
                Ending::Exited(_) => status.and_then(exit_code),
                _ => None,
            },
            signal: match ending {
                Ending::Exited(_) => status.and_then(signal_of),
                _ => None,
            },
            timed_out: matches!(ending, Ending::TimedOut),
            cancelled: matches!(ending, Ending::Cancelled),
            stdout_truncated,
            stderr_truncated,
            duration,
            artifacts,
            python: req.python,
            quarantined,
            warm,
        })
    }

    /// Starts a resident run: `module`, one of the server's support modules, with `args`, its
    /// stdin piped, in a slot of its own with every sandbox layer and limit of a run, working in
    /// `cwd` (or its scratch), for `owner` (a `Caller::key`). It takes no permit and has no time
    /// limit: its owner ends it (a session; see `session`), and dropping it kills its whole
    /// process tree. With warm runs on, a spare of inline code's kind (same folder, environment
    /// and caller) takes it when one is ready.
    pub async fn start_resident(
        &self,
        module: &'static str,
        args: &[String],
        cwd: Option<&ProjectDir>,
        python: Option<&PythonEnv>,
        owner: Option<&str>,
    ) -> Result<ResidentRun, RunError> {
        if self.shutdown.is_cancelled() {
            return Err(RunError::CancelledWhileQueued);
        }
        #[cfg(target_os = "linux")]
        let key = self
            .warm
            .enabled()
            .then(|| WarmKey::resident(python, cwd, owner));
        #[cfg(not(target_os = "linux"))]
        let _ = owner;
        let sandbox = self.probed_sandbox().await?;
        #[cfg(target_os = "linux")]
        let scope_now = |scratch: &Path| {
            let place = Placement::in_project(cwd, scratch);
            sandbox.run_scope(&sandbox.project_of(place.project_dir))
        };
        #[cfg(target_os = "linux")]
        let spare = key.as_ref().and_then(|key| self.warm.take(key, &scope_now));
        #[cfg(target_os = "linux")]
        let (slot, spare) = self.slot_of(spare, &sandbox).await?;
        #[cfg(not(target_os = "linux"))]
        let slot = self.starter.take_slot(&sandbox).await?;
        let launch = Launch {
            place: Placement::in_project(cwd, slot.dir()),
            program: Program::Support(module),
            args,
            stdin_piped: true,
            python,
        };
        let scope = launch.scope(&sandbox);
        #[cfg(target_os = "linux")]
        let child = match spare {
            Some(mut child) => {
                let seen = Seen::of(&launch, &sandbox, &slot)?;
                let job = job_frame(&seen.script, args, &seen.cwd, true, &seen.scratch);
                let sent = match (job, child.stdin.as_mut()) {
                    (Some(job), Some(pipe)) => pipe.write_all(&job).await.is_ok(),
                    _ => false,
                };
                if sent {
                    if let Some(key) = key {
                        self.warm
                            .refill(key, self.starter.clone(), Arc::clone(&sandbox));
                    }
                    child
                } else {
                    // A spare that cannot take the job: a cold start in the same slot.
                    drop(child);
                    self.starter.spawn(&launch, &sandbox, &slot, &scope)?
                }
            }
            None => self.starter.spawn(&launch, &sandbox, &slot, &scope)?,
        };
        #[cfg(not(target_os = "linux"))]
        let child = self.starter.spawn(&launch, &sandbox, &slot, &scope)?;
        #[cfg(windows)]
        let job = match child.raw_handle() {
            Some(handle) => sandbox.assign_job(handle)?,
            None => None,
        };
        let tree = ProcessTree::of(child.id());
        Ok(ResidentRun {
            pid: child.id(),
            child,
            tree,
            #[cfg(windows)]
            _job: job,
            _slot: slot,
            sweep: Some(Sweep {
                sandbox,
                scope,
                quarantine: self.quarantine.clone(),
            }),
        })
    }

    /// Once a run's process tree is dead: what it created with a protected name in the part
    /// of the projects folder it could write, moved to the quarantine.
    async fn sweep(&self, sandbox: &Arc<Sandbox>, scope: &RunScope) -> Vec<Quarantined> {
        Sweep {
            sandbox: Arc::clone(sandbox),
            scope: scope.clone(),
            quarantine: self.quarantine.clone(),
        }
        .run()
        .await
    }

    /// The sandbox, once probed.
    async fn probed_sandbox(&self) -> Result<Arc<Sandbox>, RunError> {
        self.sandbox
            .get()
            .await
            .map_err(RunError::SandboxUnavailable)
    }

    /// The slot a run takes: its spare's (with the spare's process), or a free one.
    #[cfg(target_os = "linux")]
    async fn slot_of(
        &self,
        spare: Option<super::warm::Spare>,
        sandbox: &Sandbox,
    ) -> Result<(SlotLease, Option<Spawned>), RunError> {
        Ok(match spare {
            Some(spare) => (spare.slot, Some(spare.child)),
            None => (self.starter.take_slot(sandbox).await?, None),
        })
    }

    /// Linux: the run's process. With warm runs on, a spare of its kind when one was ready, or
    /// the warm driver started now (nothing preloaded, so that what the run imports is
    /// learned), with the job to send it; a driver that does not get ready gives way to a cold
    /// start, never a failed call. With warm runs off, a cold start.
    #[cfg(target_os = "linux")]
    #[allow(clippy::too_many_arguments)]
    async fn start(
        &self,
        warm: bool,
        spare: Option<Spawned>,
        req: &RunRequest<'_>,
        launch: &Launch<'_>,
        sandbox: &Sandbox,
        slot: &Slot,
        scope: &RunScope,
    ) -> Result<Started, RunError> {
        let cold = || -> Result<Started, RunError> {
            Ok(Started {
                child: self.starter.spawn(launch, sandbox, slot, scope)?,
                job: None,
                warm: false,
            })
        };
        if !warm || sandbox.support_dir().is_none() {
            return cold();
        }
        let seen = Seen::of(launch, sandbox, slot)?;
        let Some(job) = job_frame(
            &seen.script,
            req.args,
            &seen.cwd,
            req.stdin.is_some(),
            &seen.scratch,
        ) else {
            return cold();
        };
        if let Some(child) = spare {
            return Ok(Started {
                child,
                job: Some(job),
                warm: true,
            });
        }
        let args = [driver_arg("")];
        let driver = Launch {
            place: launch.place,
            program: Program::Support(WARM_DRIVER),
            args: &args,
            stdin_piped: true,
            python: launch.python,
        };
        let mut child = self.starter.spawn(&driver, sandbox, slot, scope)?;
        match await_ready(&mut child, req.timeout.min(DRIVER_READY_WITHIN)).await {
            Ok(_) => Ok(Started {
                child,
                job: Some(job),
                warm: false,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "the warm driver did not get ready; the run starts cold");
                drop(child);
                cold()
            }
        }
    }

    /// Fires when the server shuts down (runs in flight are killed; residents' owners end theirs).
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }
}

/// Where a run of `source` works, with `scratch` its slot's folder.
fn placement_of<'a>(source: RunSource<'a>, scratch: &'a Path) -> Placement<'a> {
    match source {
        RunSource::Script(script) => Placement {
            cwd: Some(script.directory()),
            project_dir: script.directory(),
            import_dir: None,
        },
        RunSource::Inline { cwd, .. } => Placement::in_project(cwd, scratch),
    }
}

/// How `req` starts, with `scratch` its slot's folder.
fn launch_of<'a>(req: &'a RunRequest<'a>, scratch: &'a Path) -> Launch<'a> {
    Launch {
        place: placement_of(req.source, scratch),
        program: match req.source {
            RunSource::Script(script) => Program::Script(script),
            RunSource::Inline { .. } => Program::Scratch(INLINE_FILE_NAME),
        },
        args: req.args,
        stdin_piped: req.stdin.is_some(),
        python: req.python.as_deref(),
    }
}

/// The kind of run `req` is, for its warm spare.
#[cfg(target_os = "linux")]
fn warm_key(req: &RunRequest<'_>) -> WarmKey {
    let place = match req.source {
        RunSource::Script(script) => Place::Script(script.directory().to_path_buf()),
        RunSource::Inline { cwd: Some(dir), .. } => Place::Inline(dir.absolute().to_path_buf()),
        RunSource::Inline { cwd: None, .. } => Place::Scratch,
    };
    WarmKey::new(req.python.clone(), place, req.caller)
}

/// Writes inline code where the run will find it: a new file (never through a link or over
/// something there), owner read-only.
fn write_inline(file: &Path, code: &str) -> io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o400);
    options.open(file)?.write_all(code.as_bytes())
}

/// Whether a folder has no entry (false when it cannot be read: it is then looked at closely).
fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none())
}

/// Keeps what the (dead) run left in `output` when it has a target, then removes the folder (the
/// next run makes it again), on a blocking thread. An empty folder stays for the slot's next run.
async fn collect_artifacts(target: Option<ArtifactTarget>, output: PathBuf) -> Option<Collected> {
    // Without a target, what the run left is the slot's clean-up's (off the response path).
    let target = target?;
    // Most runs leave nothing: the folder stays, empty, for the slot's next run, and no
    // blocking thread is needed to look at it.
    if is_empty(&output) {
        return Some(Collected::default());
    }
    let keep = move || {
        let expires = std::time::SystemTime::now() + target.retention;
        let kept = target
            .store
            .keep(&target.run_id, &target.owner, &output, expires);
        // A removal that fails (a folder the run made unreadable) is the slot's to clean.
        let _ = std::fs::remove_dir_all(&output);
        kept
    };
    tokio::task::spawn_blocking(keep).await.ok()
}

/// The allowlisted part of an environment, plus the names the user passes explicitly.
pub(super) fn scrubbed_env(
    vars: impl Iterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> Vec<(OsString, OsString)> {
    vars.filter(|(name, _)| {
        let name = name.to_string_lossy();
        let upper = name.to_ascii_uppercase();
        ALLOWED_ENV.contains(&upper.as_str())
            || upper.starts_with("LC_")
            || pass.iter().any(|p| p == name.as_ref())
    })
    .collect()
}

/// How long a warm driver started for a run may take to say READY (it imports nothing).
#[cfg(target_os = "linux")]
const DRIVER_READY_WITHIN: Duration = Duration::from_secs(30);

/// How long a run waits for its kind's spare when one is being started (after a run of the same
/// kind moments before: it is ahead of a start the run would make now).
#[cfg(target_os = "linux")]
const WAIT_FOR_STARTING: Duration = Duration::from_secs(3);

/// A run's process, started or taken warm.
#[cfg(target_os = "linux")]
struct Started {
    child: Spawned,
    /// The job frame the warm driver reads before the run's stdin.
    job: Option<Vec<u8>>,
    /// It was started ahead of the run.
    warm: bool,
}

enum Ending {
    Exited(Option<ExitStatus>),
    TimedOut,
    Cancelled,
}

fn exit_code(status: ExitStatus) -> Option<i32> {
    status.code()
}

#[cfg(unix)]
fn signal_of(status: ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

#[cfg(not(unix))]
fn signal_of(_: ExitStatus) -> Option<i32> {
    None
}

struct DecrementOnDrop<'a>(&'a AtomicUsize);

impl Drop for DecrementOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A run that stays (a session's interpreter): its pipes for its owner to take, a SIGINT for
/// an interrupt, and its whole process tree killed on drop. Fields drop in order: the tree and
/// the child before the slot goes back.
pub struct ResidentRun {
    pid: Option<u32>,
    child: Spawned,
    tree: ProcessTree,
    #[cfg(windows)]
    _job: Option<pyrun_sandbox::RunJob>,
    _slot: SlotLease,
    /// Swept when the run is killed (its owner's end); taken then.
    sweep: Option<Sweep>,
}

/// What a run may have left with a protected name, to be moved out once it is dead.
struct Sweep {
    sandbox: Arc<Sandbox>,
    scope: RunScope,
    quarantine: Option<Arc<Quarantine>>,
}

impl Sweep {
    async fn run(self) -> Vec<Quarantined> {
        let Some(quarantine) = self.quarantine else {
            return Vec::new();
        };
        // A walk through the sandbox's watched memo of the writable part (a lookup per folder,
        // or nothing when no entry came or went): cheap enough for the response path; moving
        // what was found is not.
        let created = self.sandbox.created_protected(&self.scope);
        let projects = match self.sandbox.projects_dir() {
            Some(projects) if !created.is_empty() => projects.to_path_buf(),
            _ => return Vec::new(),
        };
        tokio::task::spawn_blocking(move || quarantine.take(&projects, &created))
            .await
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for ResidentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResidentRun")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// A pipe to write to, whatever the platform's child type.
pub type PipeWriter = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;
/// A pipe to read from, whatever the platform's child type.
pub type PipeReader = Box<dyn AsyncRead + Send + Unpin>;

impl ResidentRun {
    /// Its stdin, stdout and stderr pipes (once).
    pub fn take_pipes(&mut self) -> Option<(PipeWriter, PipeReader, PipeReader)> {
        let stdin = self.child.stdin.take()?;
        let stdout = self.child.stdout.take()?;
        let stderr = self.child.stderr.take()?;
        Some((Box::new(stdin), Box::new(stdout), Box::new(stderr)))
    }

    /// Sends SIGINT to the interpreter (through the pid namespace's pid 1, which forwards it):
    /// Python raises `KeyboardInterrupt`. The child is never reaped before the run is dropped,
    /// so its pid cannot name another process. Elsewhere: nothing (the owner kills after its
    /// grace).
    pub fn interrupt(&self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .pid
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        }
    }

    /// Kills the whole process tree and reaps the child (bounded), then moves what it created
    /// with a protected name to the quarantine (logged: a session has no result to report it in).
    pub async fn kill(mut self) {
        self.tree.kill();
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(REAP_GRACE, self.child.wait()).await;
        if let Some(sweep) = self.sweep.take() {
            sweep.run().await;
        }
    }
}

/// The run's process group: killed explicitly at the end of a run, and on drop when the run's
/// future is abandoned (client gone, server shutting down).
pub(super) struct ProcessTree {
    #[cfg(unix)]
    group: Option<rustix::process::Pid>,
}

impl ProcessTree {
    /// The group of the child with this pid (its group leader).
    pub(super) fn of(pid: Option<u32>) -> Self {
        #[cfg(unix)]
        {
            let group = pid
                .and_then(|id| i32::try_from(id).ok())
                .and_then(rustix::process::Pid::from_raw);
            Self { group }
        }
        #[cfg(not(unix))]
        {
            let _ = pid;
            Self {}
        }
    }

    pub(super) fn kill(&self) {
        #[cfg(unix)]
        if let Some(group) = self.group {
            // ESRCH just means the group is already gone.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads a pipe to its end (or until told to stop) into the run's live capture, which keeps at
/// most its cap: memory stays flat however much the script writes, and the script never blocks
/// on a full pipe.
pub(super) async fn read_live<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    live: Arc<LiveOutput>,
    which: Stream,
    stop: CancellationToken,
) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut chunk = vec![0; READ_CHUNK];
    loop {
        let read = tokio::select! {
            read = pipe.read(&mut chunk) => read,
            _ = stop.cancelled() => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => live.append(which, &chunk[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_keeps_only_the_allowlist_and_passed_names() {
        let vars = [
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("MCP_AUTH_TOKEN", "secret"),
            ("OPENAI_API_KEY", "sk"),
            ("MY_SETTING", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept = scrubbed_env(vars, &["MY_SETTING".to_owned()]);
        let names: Vec<_> = kept.iter().map(|(k, _)| k.to_string_lossy()).collect();
        assert_eq!(names, ["PATH", "LC_ALL", "MY_SETTING"]);
    }

    #[tokio::test]
    async fn reading_keeps_the_cap_and_reads_to_the_end() {
        let data = vec![b'x'; 300_000];
        let read = |bytes: &'static [u8], cap| async move {
            let live = Arc::new(LiveOutput::new(cap));
            read_live(
                Some(bytes),
                live.clone(),
                Stream::Stdout,
                CancellationToken::new(),
            )
            .await;
            live.take_text(Stream::Stdout)
        };
        let data: &'static [u8] = data.leak();
        let (text, truncated) = read(data, 1000).await;
        assert_eq!((text.len(), truncated), (1000, true));
        let (text, truncated) = read(&data[..10], 1000).await;
        assert_eq!((text.len(), truncated), (10, false));
        // Exactly the cap is not truncated; the capture never holds more than the cap.
        let (text, truncated) = read(&data[..1000], 1000).await;
        assert_eq!((text.len(), truncated), (1000, false));
        let (text, truncated) = read(data, 100_000).await;
        assert_eq!(text.len(), 100_000);
        assert!(text.capacity() <= 100_000, "{}", text.capacity());
        assert!(truncated);
    }
}

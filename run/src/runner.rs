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

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::artifacts::{ArtifactStore, Collected};
use super::launch::{scrubbed_env, Launch, Placement, Program, Started, Starter};
use super::live_output::{LiveOutput, Stream};
use super::paths::{ProjectDir, ProjectPath};
use super::python_env::PythonEnv;
use super::quarantine::{Quarantine, Quarantined};
use super::sandbox_probe::SandboxProbe;
use super::slots::SlotLease;
use super::supervise::{Ending, Limits, Process, Sink, Supervised};
use super::turns::CallerTurns;
use super::warm::{Arrival, Place, Spare, Warm, WarmKey, WarmSettings};
use pyrun_sandbox::{RunScope, Sandbox};

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
            starter: Arc::new(Starter::new(settings.python, env)?),
            max_output: settings.max_output_bytes,
            permits: Arc::new(Semaphore::new(settings.max_concurrent.max(1))),
            background_permits: Arc::new(Semaphore::new(settings.max_background_concurrent.max(1))),
            turns: None,
            places: [
                settings.max_concurrent.max(1),
                settings.max_background_concurrent.max(1),
            ],
            running: AtomicUsize::new(0),
            warm: Warm::new(WarmSettings::default(), shutdown.clone()),
            sandbox: sandbox.into(),
            shutdown,
            quarantine: Some(Arc::new(Quarantine::in_temp())),
        })
    }

    /// Starts runs in interpreters started ahead of them (Linux; elsewhere runs start cold
    /// whatever `settings` says: see `warm`).
    pub fn with_warm(self, settings: WarmSettings) -> Self {
        let shutdown = self.shutdown.clone();
        Self {
            warm: Warm::new(settings, shutdown),
            ..self
        }
    }

    /// Warm interpreters ready for a run now.
    pub fn warm_ready(&self) -> usize {
        self.warm.ready()
    }

    /// Stops the warm interpreters waiting for runs (the server is closing).
    pub fn close_warm(&self) {
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
    ///
    /// Its phases, in order: `admit` (its turn and a permit), `place` (its sandbox, slot and
    /// files), `start` (its process, cold or warm, and its stdin), `supervise` (its output, its
    /// end, its tree killed), `settle` (what it left, the outcome).
    pub async fn run(
        &self,
        req: RunRequest<'_>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        let _admitted = self.admit(&req, cancel).await?;
        let clock = StepClock::start();
        let live = req
            .live
            .clone()
            .unwrap_or_else(|| Arc::new(LiveOutput::new(self.max_output)));
        live.mark_started();
        // Dropped after the process below: the slot goes back only once the run is dead.
        let mut placed = self.place(&req).await?;
        clock.step("placed");
        let started = Instant::now();
        let mut run = self.start(&req, &mut placed).await?;
        clock.step("started");
        let supervised = self.supervise(&req, &mut run, &live, cancel).await;
        clock.at("exited", supervised.exited);
        clock.at("tree dead", supervised.tree_dead);
        clock.step("drained");
        let duration = supervised.tree_dead.saturating_duration_since(started);
        let outcome = self
            .settle(req, placed, run, supervised.ending, duration, &live, &clock)
            .await;
        clock.step("settled");
        Ok(outcome)
    }

    /// Admission: the caller's turn (when callers share the server) and a permit of the run's
    /// pool, or an error when the call is cancelled or the server shuts down meanwhile.
    async fn admit(
        &self,
        req: &RunRequest<'_>,
        cancel: &CancellationToken,
    ) -> Result<Admitted<'_>, RunError> {
        let (pool, index) = match req.pool {
            Pool::Foreground => (&self.permits, 0),
            Pool::Background => (&self.background_permits, 1),
        };
        let turns = self.turns.as_ref().map(|turns| &turns[index]);
        let turn = match turns.zip(req.caller) {
            Some((turns, caller)) => tokio::select! {
                turn = turns.take(caller) => Some(turn.ok_or(RunError::CancelledWhileQueued)?),
                _ = cancel.cancelled() => return Err(RunError::CancelledWhileQueued),
                _ = self.shutdown.cancelled() => return Err(RunError::CancelledWhileQueued),
            },
            None => None,
        };
        let permit = tokio::select! {
            permit = pool.clone().acquire_owned() => permit.map_err(|_| RunError::CancelledWhileQueued)?,
            _ = cancel.cancelled() => return Err(RunError::CancelledWhileQueued),
            _ = self.shutdown.cancelled() => return Err(RunError::CancelledWhileQueued),
        };
        self.running.fetch_add(1, Ordering::Relaxed);
        Ok(Admitted {
            _turn: turn,
            _permit: permit,
            _running: DecrementOnDrop(&self.running),
        })
    }

    /// Placement: the probed sandbox, the run's slot (a spare's of its kind with warm runs on,
    /// else a free one), its inline code written there, its scope.
    async fn place(&self, req: &RunRequest<'_>) -> Result<Placed, RunError> {
        let sandbox = self.probed_sandbox().await?;
        let key = self.warm.enabled().then(|| warm_key(req));
        // A foreground run holds back spares' starts while it is in flight.
        let arrival = key
            .as_ref()
            .filter(|_| req.pool == Pool::Foreground)
            .map(|key| self.warm.arrive(key));
        let scope_now = |scratch: &Path| launch_of(req, scratch).scope(&sandbox);
        let spare = match &key {
            Some(key) => {
                let wait = req.timeout.min(WAIT_FOR_STARTING);
                self.warm.take_or_wait(key, &scope_now, wait).await
            }
            None => None,
        };
        let (slot, spare) = self.slot_of(spare, &sandbox).await?;
        let inline = match req.source {
            RunSource::Inline { code, .. } => {
                let file = slot.dir().join(INLINE_FILE_NAME);
                write_inline(&file, code).map_err(RunError::Scratch)?;
                Some(file)
            }
            RunSource::Script(_) => None,
        };
        let scope = launch_of(req, slot.dir()).scope(&sandbox);
        Ok(Placed {
            sandbox,
            key,
            _arrival: arrival,
            spare,
            slot,
            scope,
            inline,
        })
    }

    /// The start: the run's process (`Starter::start_run`: cold, or warm on Linux), its stdin
    /// fed on a task of its own.
    async fn start(&self, req: &RunRequest<'_>, placed: &mut Placed) -> Result<Started, RunError> {
        let launch = launch_of(req, placed.slot.dir());
        let mut started = self
            .starter
            .start_run(
                placed.key.is_some(),
                placed.spare.take(),
                &launch,
                req.timeout,
                &placed.sandbox,
                &placed.slot,
                &placed.scope,
            )
            .await?;
        // A warm driver reads its job first, then the run's stdin follows on the same pipe.
        let job = started.job.take();
        let input = req.stdin.map(|text| text.as_bytes().to_vec());
        if job.is_some() || input.is_some() {
            if let Some(mut pipe) = started.process.child.stdin.take() {
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
        Ok(started)
    }

    /// Supervision: the run's output into `live`, its end awaited against its time limit, the
    /// call's cancellation and the server's shutdown; its whole tree killed whatever happened.
    async fn supervise(
        &self,
        req: &RunRequest<'_>,
        run: &mut Started,
        live: &Arc<LiveOutput>,
        cancel: &CancellationToken,
    ) -> Supervised {
        let limits = Limits {
            deadline: tokio::time::Instant::now() + req.timeout,
            cancel,
            shutdown: &self.shutdown,
        };
        run.process.supervise(Sink::Apart(live), limits).await
    }

    /// Settling, once the run's tree is dead: what its kind imported learned and its next spare
    /// started, its artifacts kept, protected names it made swept, its inline file removed; the
    /// outcome.
    #[allow(clippy::too_many_arguments)]
    async fn settle(
        &self,
        req: RunRequest<'_>,
        placed: Placed,
        run: Started,
        ending: Ending,
        duration: Duration,
        live: &LiveOutput,
        clock: &StepClock,
    ) -> RunOutcome {
        let Placed {
            sandbox,
            key,
            slot,
            scope,
            inline,
            ..
        } = placed;
        if let Some(key) = key {
            self.warm.learn(&key, slot.dir());
            self.warm.ended(&key, run.warm, duration);
            self.warm
                .refill(key, self.starter.clone(), Arc::clone(&sandbox));
            clock.step("learned");
        }
        let output = slot.dir().join(OUTPUT_DIR_NAME);
        let artifacts = collect_artifacts(req.artifacts, output).await;
        clock.step("artifacts");
        let quarantined = self.sweep(&sandbox, &scope).await;
        clock.step("swept");
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
        let warm = run.warm;
        // The process before the slot: the slot goes back only once nothing of the run holds it.
        drop(run);
        drop(slot);
        RunOutcome {
            stdout,
            stderr,
            exit_code: ending.exit_code(),
            signal: ending.signal(),
            timed_out: ending.timed_out(),
            cancelled: ending.cancelled(),
            stdout_truncated,
            stderr_truncated,
            duration,
            artifacts,
            python: req.python,
            quarantined,
            warm,
        }
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
        let key = self
            .warm
            .enabled()
            .then(|| WarmKey::resident(python, cwd, owner));
        let sandbox = self.probed_sandbox().await?;
        let scope_now = |scratch: &Path| {
            let place = Placement::in_project(cwd, scratch);
            sandbox.run_scope(&sandbox.project_of(place.project_dir))
        };
        let spare = key.as_ref().and_then(|key| self.warm.take(key, &scope_now));
        let (slot, spare) = self.slot_of(spare, &sandbox).await?;
        let launch = Launch {
            place: Placement::in_project(cwd, slot.dir()),
            program: Program::Support(module),
            args,
            stdin_piped: true,
            python,
        };
        let scope = launch.scope(&sandbox);
        let handed = match spare {
            Some(spare) => {
                self.starter
                    .hand_over(spare, &launch, &sandbox, &slot)
                    .await?
            }
            None => None,
        };
        let child = match handed {
            Some(child) => {
                if let Some(key) = key {
                    self.warm
                        .refill(key, self.starter.clone(), Arc::clone(&sandbox));
                }
                child
            }
            // No spare, or one that could not take the job: a cold start in the same slot.
            None => self.starter.spawn(&launch, &sandbox, &slot, &scope)?,
        };
        let process = self.starter.contain(child, &sandbox)?;
        Ok(ResidentRun {
            process,
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
        .check()
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
    async fn slot_of(
        &self,
        spare: Option<Spare>,
        sandbox: &Sandbox,
    ) -> Result<(SlotLease, Option<Spawned>), RunError> {
        Ok(match spare {
            Some(spare) => (spare.slot, Some(spare.child)),
            None => (self.starter.take_slot(sandbox).await?, None),
        })
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

/// How long a run waits for its kind's spare when one is being started (after a run of the same
/// kind moments before: it is ahead of a start the run would make now).
const WAIT_FOR_STARTING: Duration = Duration::from_secs(3);

/// A run's admission: its turn, its permit, its count among the runs in flight (all given back
/// on drop).
struct Admitted<'a> {
    _turn: Option<OwnedSemaphorePermit>,
    _permit: OwnedSemaphorePermit,
    _running: DecrementOnDrop<'a>,
}

/// A run's place: its sandbox, its slot (with a spare's process when one was taken), what it may
/// write of the projects folder, its inline file.
struct Placed {
    sandbox: Arc<Sandbox>,
    /// Its kind, with warm runs on.
    key: Option<WarmKey>,
    /// While it is in flight (a foreground run), no spare starts; dropped last, after the
    /// run's settling asked for its kind's next spare.
    _arrival: Option<Arrival>,
    spare: Option<Spawned>,
    slot: SlotLease,
    scope: RunScope,
    inline: Option<PathBuf>,
}

struct DecrementOnDrop<'a>(&'a AtomicUsize);

/// When each step of a run ended, in microseconds since its admission: a debug log
/// (`PYRUN_LOG=pyrun_run::steps=debug`) for measuring where a call's time goes.
struct StepClock(Instant);

impl StepClock {
    fn start() -> Self {
        Self(Instant::now())
    }

    fn step(&self, step: &'static str) {
        self.at(step, Instant::now());
    }

    fn at(&self, step: &'static str, at: Instant) {
        let us = at.saturating_duration_since(self.0).as_micros();
        tracing::debug!(target: "pyrun_run::steps", step, us);
    }
}

impl Drop for DecrementOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A run that stays (a session's interpreter): its pipes for its owner to take, a SIGINT for
/// an interrupt, and its whole process tree killed on drop. Fields drop in order: the tree and
/// the child before the slot goes back.
pub struct ResidentRun {
    process: Process,
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
    /// What the run created so far, moved out (a run held still, or dead).
    async fn check(&self) -> Vec<Quarantined> {
        let Some(quarantine) = self.quarantine.clone() else {
            return Vec::new();
        };
        // A walk through the sandbox's watched memo of the writable part (a lookup per folder,
        // or nothing when no entry came or went): cheap enough for the response path; moving
        // what was found is not.
        let left = self.sandbox.created_protected(&self.scope);
        let projects = match self.sandbox.projects_dir() {
            Some(projects) if !left.is_empty() => projects.to_path_buf(),
            _ => return Vec::new(),
        };
        tokio::task::spawn_blocking(move || quarantine.take(&projects, &left))
            .await
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for ResidentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResidentRun")
            .field("process", &self.process)
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
        let child = &mut self.process.child;
        let stdin = child.stdin.take()?;
        let stdout = child.stdout.take()?;
        let stderr = child.stderr.take()?;
        Some((Box::new(stdin), Box::new(stdout), Box::new(stderr)))
    }

    /// Sends SIGINT to the interpreter (through the pid namespace's pid 1, which forwards it):
    /// Python raises `KeyboardInterrupt`. The child is never reaped before the run is dropped,
    /// so its pid cannot name another process. Elsewhere: nothing (the owner kills after its
    /// grace).
    pub fn interrupt(&self) {
        self.process.interrupt();
    }

    /// Holds it still between two uses (a session between execs): every process of it stopped
    /// (Linux; see `warm/hold.rs`), so that no thread or process the code left running plants
    /// anything while nobody looks; then what it created with a protected name so far is moved
    /// to the quarantine and returned. An error when it would not hold still (the owner ends
    /// it). Elsewhere nothing stops it: only the check runs.
    pub async fn hold(&mut self) -> std::io::Result<Vec<Quarantined>> {
        #[cfg(target_os = "linux")]
        crate::warm::hold::stop(&mut self.process.child).await?;
        Ok(match &self.sweep {
            Some(sweep) => sweep.check().await,
            None => Vec::new(),
        })
    }

    /// Lets a held run go on (its owner uses it again).
    pub fn resume(&mut self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        crate::warm::hold::resume(&mut self.process.child)?;
        Ok(())
    }

    /// Kills the whole process tree and reaps the child (bounded), then moves what it created
    /// with a protected name to the quarantine (logged: a session has no result to report it in).
    pub async fn kill(mut self) {
        self.process.kill().await;
        if let Some(sweep) = self.sweep.take() {
            sweep.check().await;
        }
    }
}

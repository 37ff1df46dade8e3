//! The run layer's one front door: an [`Engine`] built from one [`EngineSettings`] owns the
//! sandbox probe, the runner and its warm spares, the background runs, the sessions, the
//! artifact store, the installs, the Python environments and bytecode caches, and decides what
//! a front end would otherwise decide field by field: run ids and artifact targets, where a
//! file run goes (in the call, in the background, handed over, on a remote backend:
//! [`placement`]), which environment it runs in, and which host folders its output must not
//! show. The MCP tool rooms call its use-case methods and only adapt arguments and results.
//!
//! Building it, in order: the projects folder opened; the artifact store (state folder, else a
//! temp folder); the modules shipped for runs; the interpreters; the sandbox — probed at once
//! under `strict` (which refuses to start without every layer), else in the background after
//! the client's opening requests; the runner (quarantine, warm spares, caller turns); the
//! registry, whose forgotten runs drop their files; sessions; installs; the remote backends.

pub mod backend;
pub mod placement;
pub mod settings;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::artifacts::{self, ArtifactStore};
use crate::background::{
    BackgroundRequest, BackgroundRuns, RunKind, RunRecord, StartError, LOCAL_BACKEND,
};
use crate::bytecode_cache::BytecodeCache;
use crate::caller::Caller;
use crate::install::Installs;
use crate::live_output::LiveOutput;
use crate::paths::{PathError, ProjectDir, ProjectPath, ProjectRoot};
use crate::python_env::{EnvError, PythonEnv, PythonEnvs};
use crate::python_support::PythonSupport;
use crate::quarantine::{Quarantine, QUARANTINE_DIR};
use crate::runner::{ArtifactTarget, RunError, RunOutcome, RunRequest, RunSource, Runner};
use crate::sandbox_probe::SandboxProbe;
use crate::session::Sessions;
use crate::state_dir;
use backend::{Backends, JobSpec, PrepareError, RemoteBackend};
use placement::{Placement, Registration, RunMode};
use pyrun_sandbox::{Sandbox, SandboxError, SandboxMode};
pub use settings::EngineSettings;

/// How long the sandbox probe leaves the CPU to a connecting client when no run asks for it
/// first: assistants send `initialize` and the `*/list` requests within tens of milliseconds.
const PROBE_IDLE_DELAY: Duration = Duration::from_millis(100);
/// How long a stopping engine waits for the runs, sessions and installs in flight to be killed
/// and reaped: more than a run's own reap and drain graces.
const CLOSE_GRACE: Duration = Duration::from_secs(8);
/// How long it then waits for its own helpers (interpreter questions, bytecode fill) to die.
const HELPERS_GRACE: Duration = Duration::from_secs(3);

/// Why the engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Root(#[from] PathError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("cannot make the private scratch folder for runs: {0}")]
    Scratch(std::io::Error),
}

/// The run layer, behind one door.
#[derive(Debug)]
pub struct Engine {
    root: ProjectRoot,
    runner: Arc<Runner>,
    /// Runs that go on in the background (`start_python`, tasks, handed-over `run_python`s).
    runs: Arc<BackgroundRuns>,
    /// The files runs left in their output folder, kept for their owner.
    artifacts: Arc<ArtifactStore>,
    /// Persistent Python sessions.
    sessions: Arc<Sessions>,
    /// `--allow-install`: package installs into projects' `.venv`.
    installs: Option<Arc<Installs>>,
    /// The interpreters and checked virtual environments runs use.
    python_envs: Arc<PythonEnvs>,
    backends: Backends,
    /// The time limit of a run the call waits for.
    timeout: Duration,
    detach_after: Option<Duration>,
    /// The modules the engine ships for runs (the matplotlib backend); removed with it.
    _python_support: Option<PythonSupport>,
}

/// A file run, its arguments checked.
#[derive(Debug, Clone)]
pub struct FileRun {
    pub script: ProjectPath,
    pub args: Vec<String>,
    pub stdin: Option<String>,
    pub timeout: Duration,
    /// `None`: the runner's own interpreter.
    pub python: Option<Arc<PythonEnv>>,
    /// `None`: this machine.
    pub backend: Option<Arc<dyn RemoteBackend>>,
}

/// Where [`Engine::start_call`] put a run.
#[derive(Debug)]
pub enum Started {
    /// Not started: the call runs it itself ([`Engine::run_in_call`]).
    InCall,
    /// In the background registry; a waited-for run is handed over after `hand_over_after`.
    Registered {
        record: Arc<RunRecord>,
        hand_over_after: Option<Duration>,
    },
}

/// Why a run was not started.
#[derive(Debug, thiserror::Error)]
pub enum StartRefused {
    /// The registry has no room for the caller's run.
    #[error(transparent)]
    Full(#[from] StartError),
    /// The remote backend could not make its job.
    #[error(transparent)]
    Prepare(#[from] PrepareError),
}

/// A registered run its call still owns ([`Engine::hold`]): killed and forgotten on drop unless
/// handed over or kept.
#[derive(Debug)]
pub struct HeldRun<'a> {
    runs: &'a BackgroundRuns,
    record: &'a RunRecord,
    released: bool,
}

impl HeldRun<'_> {
    /// The call stops waiting and the run goes on in the background, listed for its owner.
    pub fn hand_over(mut self) {
        self.released = true;
        self.runs.show(self.record);
    }

    /// The run ended in its call but stays (unlisted, its end seen) so that its whole output
    /// stays readable by its id.
    pub fn keep(mut self) {
        self.released = true;
        self.record.mark_end_seen();
    }
}

impl Drop for HeldRun<'_> {
    fn drop(&mut self) {
        if !self.released {
            self.record.cancel();
            self.runs.remove(&self.record.id);
        }
    }
}

/// A run the call waits for, made ready: its capture and its run id.
#[derive(Debug)]
pub struct CallRun {
    /// Its output as it arrives (the result reads it from here).
    pub live: Arc<LiveOutput>,
    /// The id its files are kept under for its caller; `None` when no id could be drawn.
    pub run_id: Option<String>,
    artifacts: Option<ArtifactTarget>,
}

impl Engine {
    /// `shutdown` kills every run, session and install in flight when it fires.
    pub fn new(settings: EngineSettings, shutdown: CancellationToken) -> Result<Self, EngineError> {
        let root = ProjectRoot::open(&settings.projects_dir)?;
        let artifacts = Arc::new(open_artifacts(&settings).map_err(EngineError::Scratch)?);
        let python_support = PythonSupport::write()
            .map_err(|e| {
                tracing::warn!(
                    "{e}: the matplotlib backend is not written; plt.show() saves nothing"
                )
            })
            .ok();
        let python_envs = Arc::new(PythonEnvs::new(
            root.path(),
            &settings.python,
            &settings.allow_python,
        ));
        let sandbox = probe_sandbox(
            &settings,
            root.path(),
            python_envs.clone(),
            python_support.as_ref().map(|s| s.dir().to_path_buf()),
        )?;
        let runner = Runner::new(settings.runner(), sandbox, shutdown.clone())
            .map_err(EngineError::Scratch)?
            .with_quarantine(quarantine(&settings))
            .with_warm(settings.warm.clone());
        if settings.warm.enabled {
            tracing::debug!(max = settings.warm.max, "warm runs on");
        } else if !crate::warm::SUPPORTED {
            tracing::info!("warm runs need Linux: every run starts cold");
        }
        // Alone, a caller's runs may take every place.
        let runner = Arc::new(if settings.caller_turns {
            runner.with_caller_turns()
        } else {
            runner
        });
        let runs = Arc::new(BackgroundRuns::new(
            runner.clone(),
            settings.background(),
            artifacts.clone(),
            settings.describe_failure,
        ));
        let store = artifacts.clone();
        runs.on_forget(move |run_id| store.forget(run_id));
        let sessions = Sessions::new(runner.clone(), settings.sessions());
        let installs = match &settings.install {
            Some(policy) => Some(Arc::new(
                open_installs(&settings, policy, &root, shutdown).map_err(EngineError::Scratch)?,
            )),
            None => None,
        };
        Ok(Self {
            root,
            runner,
            runs,
            artifacts,
            sessions,
            installs,
            python_envs,
            backends: Backends::new(settings.remote),
            timeout: settings.timeout,
            detach_after: settings.background.detach_after,
            _python_support: python_support,
        })
    }

    // --- the parts, for what only adapts them ---

    pub fn root(&self) -> &ProjectRoot {
        &self.root
    }

    pub fn runner(&self) -> &Arc<Runner> {
        &self.runner
    }

    pub fn runs(&self) -> &Arc<BackgroundRuns> {
        &self.runs
    }

    pub fn artifacts(&self) -> &Arc<ArtifactStore> {
        &self.artifacts
    }

    pub fn sessions(&self) -> &Arc<Sessions> {
        &self.sessions
    }

    /// `None`: installs are off.
    pub fn installs(&self) -> Option<&Arc<Installs>> {
        self.installs.as_ref()
    }

    pub fn python_envs(&self) -> &Arc<PythonEnvs> {
        &self.python_envs
    }

    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// The time limit of a run asked for as `mode`.
    pub fn time_limit(&self, mode: RunMode) -> Duration {
        placement::time_limit(mode, self.timeout, self.runs.settings().timeout)
    }

    // --- file runs ---

    /// A file run the call waits for (`run_python`), placed by [`placement::place_call`]:
    /// left to the call ([`Self::run_in_call`]), or registered in the background (locally, or
    /// packed and sent to its remote backend) for the call to follow until it hands it over.
    pub async fn start_call(&self, owner: &Caller, run: &FileRun) -> Result<Started, StartRefused> {
        let Placement::Registry(place) =
            placement::place_call(run.backend.is_some(), self.detach_after)
        else {
            return Ok(Started::InCall);
        };
        match self.register(owner, run, place).await {
            Ok(record) => Ok(Started::Registered {
                record,
                hand_over_after: place.hand_over_after,
            }),
            // With no room, a run the call waits for goes on as a plain call.
            Err(StartRefused::Full(_)) if place.or_in_call => Ok(Started::InCall),
            Err(e) => Err(e),
        }
    }

    /// A file run that goes on in the background (`start_python`, `kind` background, or a
    /// task), listed at once; locally, or packed and sent to its remote backend.
    pub async fn start_background(
        &self,
        owner: &Caller,
        run: &FileRun,
        kind: RunKind,
    ) -> Result<Arc<RunRecord>, StartRefused> {
        self.register(owner, run, placement::place_background(kind))
            .await
    }

    /// Starts `run` in the registry as `place` says.
    async fn register(
        &self,
        owner: &Caller,
        run: &FileRun,
        place: Registration,
    ) -> Result<Arc<RunRecord>, StartRefused> {
        let key = owner.key();
        let request = BackgroundRequest {
            script: run.script.clone(),
            args: run.args.clone(),
            stdin: run.stdin.clone(),
            timeout: run.timeout,
            pool: place.pool,
            python: run.python.clone(),
        };
        let Some(backend) = &run.backend else {
            return Ok(self.runs.start(&key, place.kind, request, place.listed)?);
        };
        // Asked before packing: a caller at its quota costs no snapshot.
        self.runs.has_room(&key)?;
        let spec = JobSpec {
            args: &run.args,
            stdin: run.stdin.as_deref(),
            timeout: run.timeout,
            max_output: self.runner.max_output(),
        };
        let job = backend.prepare(&run.script, spec).await?;
        // Its pool and interpreter are the remote side's business.
        let request = BackgroundRequest {
            python: None,
            ..request
        };
        let name = backend.name();
        let record = self
            .runs
            .start_remote(&key, place.kind, &request, place.listed, name, job)?;
        tracing::info!(%owner, run_id = %record.id, script = %record.file_name, backend = name, "remote run started");
        Ok(record)
    }

    /// Holds `record`, a run [`Self::start_call`] registered, for its call: until the call
    /// hands it over or keeps it, a call that ends (cancelled, dropped) kills and forgets it.
    pub fn hold<'a>(&'a self, record: &'a RunRecord) -> HeldRun<'a> {
        HeldRun {
            runs: &self.runs,
            record,
            released: false,
        }
    }

    /// A run the call waits for, made ready: a capture, and a new run id under which the files
    /// it leaves are kept for `owner` (without one, they are dropped).
    pub fn call_run(&self, owner: &str) -> CallRun {
        let live = Arc::new(LiveOutput::new(self.runner.max_output()));
        let artifacts = self.artifact_target(owner);
        CallRun {
            live,
            run_id: artifacts.as_ref().map(|t| t.run_id.clone()),
            artifacts,
        }
    }

    /// Where the files of a new run of `owner` go: a new run id in the store, kept for the
    /// registry's retention; `None` when no id could be drawn.
    pub fn artifact_target(&self, owner: &str) -> Option<ArtifactTarget> {
        let run_id = artifacts::new_run_id()
            .map_err(|e| tracing::warn!(%e, "no run id: the run's artifacts are dropped"))
            .ok()?;
        Some(ArtifactTarget {
            store: Arc::clone(&self.artifacts),
            run_id,
            owner: owner.to_owned(),
            retention: self.runs.settings().retention,
        })
    }

    /// Runs `request` in the call, its output into `call`'s capture and its files under
    /// `call`'s run id; `ct` cancels it.
    pub async fn run_in_call(
        &self,
        call: &CallRun,
        request: RunRequest<'_>,
        owner: &str,
        ct: &CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        let request = RunRequest {
            live: Some(call.live.clone()),
            artifacts: call.artifacts.clone(),
            caller: Some(owner),
            ..request
        };
        self.runner.run(request, ct).await
    }

    /// Keeps the record of a run that ended in its call, under its run id, so that its whole
    /// output stays readable; the id, or `None` when the registry had no room.
    pub fn keep_ended(
        &self,
        call: &CallRun,
        outcome: &RunOutcome,
        owner: &str,
        source: RunSource<'_>,
    ) -> Option<String> {
        let run_id = call.run_id.clone()?;
        let file_name = match source {
            RunSource::Script(script) => script.relative().to_owned(),
            RunSource::Inline { .. } => "(inline code)".to_owned(),
        };
        // Its files were shown in its call's result: pages of its output read later leave
        // them out.
        let ended = RunOutcome {
            stdout: String::new(),
            stderr: String::new(),
            artifacts: None,
            ..outcome.clone()
        };
        match self
            .runs
            .keep_ended(owner, run_id, file_name, Arc::clone(&call.live), ended)
        {
            Ok(record) => Some(record.id.clone()),
            Err(e) => {
                tracing::info!(%e, "a long output could not be kept for reading");
                None
            }
        }
    }

    /// The caller's run with this id; `None` for ids unknown, expired, foreign or not shaped
    /// like a run id alike.
    pub fn find_run(&self, owner: &str, id: &str) -> Option<Arc<RunRecord>> {
        artifacts::is_run_id(id)
            .then(|| self.runs.get(owner, id))
            .flatten()
    }

    /// The sandbox layers a run had: none for a remote run (the worker's container is its
    /// boundary), else this machine's, as probed (an ended run was probed before it started).
    pub fn sandbox_layers(&self, owner: &str, run_id: Option<&str>) -> Vec<&'static str> {
        match run_id.and_then(|id| self.runs.get(owner, id)) {
            Some(record) if record.backend != LOCAL_BACKEND => Vec::new(),
            _ => self.layers_now(),
        }
    }

    /// This machine's sandbox layers, once probed (none before).
    pub fn layers_now(&self) -> Vec<&'static str> {
        self.runner.sandbox().layers_now().unwrap_or_default()
    }

    /// The runnable files of `dir` (a folder of the projects folder, proven), listed on a
    /// blocking thread.
    pub async fn list_scripts(&self, dir: PathBuf) -> Vec<String> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || root.list_scripts(&dir))
            .await
            .unwrap_or_default()
    }

    // --- environments ---

    /// The environment a run in `dir` uses (its nearest checked venv, or the server's
    /// interpreter), or why it is refused. A few `stat`s, done in place once the interpreters
    /// have been asked what they are; the first time, on a blocking thread (that asks them).
    pub async fn python_env(&self, dir: &Path) -> Result<Arc<PythonEnv>, EnvError> {
        let envs = &self.python_envs;
        if envs.interpreters().asked() {
            return envs.for_dir(dir);
        }
        let (envs, dir) = (envs.clone(), dir.to_path_buf());
        tokio::task::spawn_blocking(move || envs.for_dir(&dir))
            .await
            .unwrap_or_else(|_| Err(EnvError::Interpreter(Arc::new(SandboxError::ProbeLost))))
    }

    /// [`Self::python_env`] for a run: `None` (the runner's own interpreter) when the
    /// interpreter could not be asked what it is, so that the run is refused as before, by the
    /// sandbox's probe that asks it too (or, with the sandbox off, fails as that interpreter does).
    pub async fn run_env(&self, dir: &Path) -> Result<Option<Arc<PythonEnv>>, EnvError> {
        match self.python_env(dir).await {
            Ok(env) => Ok(Some(env)),
            Err(EnvError::Interpreter(e)) => {
                tracing::warn!(error = %e, "the interpreter could not be asked what it is");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// [`Self::run_env`] of code that runs in `project`, or with none in its scratch: then the
    /// projects folder's own environment.
    pub async fn project_env(
        &self,
        project: Option<&ProjectDir>,
    ) -> Result<Option<Arc<PythonEnv>>, EnvError> {
        let dir = project.map_or(self.root.path(), |dir| dir.absolute());
        self.run_env(dir).await
    }

    // --- what a client may read ---

    /// `text` without the host folders a run's output may name: the projects folder and the
    /// runs' scratch root, which runs see under other names.
    pub fn without_host_folder(&self, text: &str) -> String {
        without_folders(text, [self.root.path(), self.runner.scratch_root()])
    }

    // --- stopping ---

    /// The engine's last step: fires the shutdown (runs, sessions and installs in flight are
    /// killed), waits until their processes are reaped, then kills and reaps its own helpers.
    /// No process outlives it.
    pub async fn close(&self) {
        self.runner.shutdown_token().cancel();
        self.runner.close_warm();
        let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
        while self.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let left = self.in_flight();
        if left > 0 {
            tracing::warn!(
                left,
                "runs still ending after {CLOSE_GRACE:?}; stopping anyway"
            );
        }
        let helpers = tokio::task::spawn_blocking(|| crate::helpers::close(HELPERS_GRACE));
        if let Ok(killed @ 1..) = helpers.await {
            tracing::debug!(killed, "helper processes killed at shutdown");
        }
    }

    /// Runs, background runs, sessions and installs not yet ended.
    fn in_flight(&self) -> usize {
        self.runner.running()
            + self.runs.running()
            + self.sessions.alive()
            + self.installs.as_ref().map_or(0, |i| i.running())
    }
}

/// `text` with each folder's path (and its separator) cut where it appears.
fn without_folders<'a>(text: &str, folders: impl IntoIterator<Item = &'a Path>) -> String {
    let mut text = text.to_owned();
    for folder in folders {
        let mut prefix = folder.to_string_lossy().into_owned();
        prefix.push(std::path::MAIN_SEPARATOR);
        if text.contains(&prefix) {
            text = text.replace(&prefix, "");
        }
    }
    text
}

/// The sandbox runs get, probed at once under `strict` (which refuses to start without every
/// layer, so it must know before serving); otherwise the probe (~10 ms, mostly the
/// interpreter's start) runs after the client's opening requests, or as soon as a run needs it.
fn probe_sandbox(
    settings: &EngineSettings,
    projects: &Path,
    envs: Arc<PythonEnvs>,
    support: Option<PathBuf>,
) -> Result<SandboxProbe, EngineError> {
    let (projects, python) = (projects.to_path_buf(), settings.python.clone());
    let mode = settings.sandbox.mode;
    let settings = settings.clone();
    let build = move || {
        // Every allowed interpreter's trees are readable (asked here once, also with the
        // sandbox off: runs and listings need their versions).
        let sandboxed = mode != SandboxMode::Off;
        let interpreter_paths = envs.interpreters().read_paths();
        let read_paths = if sandboxed {
            // The interpreter's own error as it is (wrapping it again said it twice).
            interpreter_paths.map_err(|e| match &*e {
                SandboxError::PythonPaths { python, reason } => SandboxError::PythonPaths {
                    python: python.clone(),
                    reason: reason.clone(),
                },
                other => SandboxError::PythonPaths {
                    python: python.clone(),
                    reason: other.to_string(),
                },
            })?
        } else {
            Vec::new()
        };
        // With the sandbox off, scripts are trusted and read the stdlib's own `__pycache__`:
        // no cache to make or fill (runs still write no bytecode, see `runner`).
        let pycache = if sandboxed {
            BytecodeCache::open(&python, &projects)
                .map_err(|e| {
                    tracing::warn!("{e}; runs compile the stdlib they import each time");
                })
                .ok()
        } else {
            None
        };
        let policy = settings.sandbox_policy(
            &projects,
            read_paths,
            pycache.as_ref().map(|cache| cache.dir().to_path_buf()),
            support,
        );
        let sandbox = Sandbox::new(policy)?;
        if let Some(cache) = pycache {
            cache.fill_in_background(python, projects, PROBE_IDLE_DELAY);
        }
        Ok(sandbox)
    };
    Ok(if mode == SandboxMode::Strict {
        SandboxProbe::ready(build()?)
    } else {
        SandboxProbe::probe_in_background(PROBE_IDLE_DELAY, build)
    })
}

/// Where protected names runs create are moved: the state folder's `quarantine/` (made
/// owner-only when first needed), else a folder of the temp directory; none when protected
/// writes are allowed.
fn quarantine(settings: &EngineSettings) -> Option<Quarantine> {
    if settings.sandbox.allow_protected_writes {
        return None;
    }
    Some(match &settings.state_dir {
        Some(dir) => Quarantine::new(dir.join(QUARANTINE_DIR)),
        None => {
            tracing::warn!(
                "no state folder: protected names runs create are moved to a folder of the \
                 temp directory; pass --state-dir DIR to keep them"
            );
            Quarantine::in_temp()
        }
    })
}

/// The artifact store: in the state folder's `runs/` (made owner-only), else, or when that
/// cannot be made, in a private temp folder.
fn open_artifacts(settings: &EngineSettings) -> std::io::Result<ArtifactStore> {
    let limits = settings.artifact_limits();
    if let Some(dir) = &settings.state_dir {
        let made = state_dir::create_owner_only(dir)
            .and_then(|()| ArtifactStore::new(dir.join("runs"), limits));
        match made {
            Ok(store) => return Ok(store),
            Err(e) => tracing::warn!(
                dir = %dir.display(),
                "artifacts kept in a temp folder instead of the state folder: {e}"
            ),
        }
    }
    ArtifactStore::temporary(limits)
}

/// The installs: their cache in the state folder's `install-cache/` (made owner-only), else,
/// or when that cannot be made, in their private temp folder.
fn open_installs(
    settings: &EngineSettings,
    policy: &settings::InstallPolicy,
    root: &ProjectRoot,
    shutdown: CancellationToken,
) -> std::io::Result<Installs> {
    let cache_dir = settings.state_dir.as_ref().and_then(|dir| {
        let cache = dir.join("install-cache");
        state_dir::create_owner_only(dir)
            .and_then(|()| state_dir::create_owner_only(&cache))
            .map(|()| cache)
            .map_err(
                |e| tracing::warn!(dir = %dir.display(), "the install cache is a temp folder: {e}"),
            )
            .ok()
    });
    let install = settings.install(policy, cache_dir);
    let abi = pyrun_sandbox::landlock_abi();
    if install.sandbox_mode != SandboxMode::Off && abi < 4 {
        tracing::warn!(
            landlock_abi = abi,
            "--allow-install: this kernel cannot limit an install's TCP connections to the \
             index's port (Landlock ABI 4, Linux 6.7); every install is refused"
        );
    }
    tracing::info!(
        installer = if install.uv.is_some() { "uv" } else { "pip" },
        index = install.index.url(),
        "package installs are on"
    );
    Installs::new(install, root.path().to_path_buf(), shutdown)
}

#[cfg(test)]
mod tests;

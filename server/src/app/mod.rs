//! The server's shared state, built once from the [`Config`] and handed to every transport.

pub mod banner;
pub mod protection;
pub mod state_dir;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::client_message::ClientMessage;
use crate::config::{Config, RunPodConfig, RunPodPoll};
use crate::oauth::{self, OAuth};
use pyrun_remote::runpod::{PollMethod, RunPod, RunPodApi};
use pyrun_run::artifacts::{ArtifactLimits, ArtifactStore};
use pyrun_run::background::{BackgroundRuns, BackgroundSettings};
use pyrun_run::bytecode_cache::BytecodeCache;
use pyrun_run::install::{InstallSettings, Installs};
use pyrun_run::paths::{PathError, ProjectRoot};
use pyrun_run::python_env::PythonEnvs;
use pyrun_run::python_support::PythonSupport;
use pyrun_run::quarantine::{Quarantine, QUARANTINE_DIR};
use pyrun_run::runner::{Runner, RunnerSettings};
use pyrun_run::sandbox_probe::SandboxProbe;
use pyrun_run::session::{SessionSettings, Sessions};
use pyrun_sandbox::{Sandbox, SandboxError, SandboxMode, SandboxPolicy};

/// How long the sandbox probe leaves the CPU to a connecting client when no run asks for it
/// first: assistants send `initialize` and the `*/list` requests within tens of milliseconds.
const PROBE_IDLE_DELAY: Duration = Duration::from_millis(100);
/// How long a stopping server waits for the runs, sessions and installs in flight to be killed
/// and reaped: more than a run's own reap and drain graces.
const CLOSE_GRACE: Duration = Duration::from_secs(8);
/// How long it then waits for its own helpers (interpreter questions, bytecode fill) to die.
const HELPERS_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub root: ProjectRoot,
    pub runner: Arc<Runner>,
    /// Runs that go on in the background (`start_python`, tasks, handed-over `run_python`s).
    pub runs: BackgroundRuns,
    /// `--oauth`: the authorization server's state.
    pub oauth: Option<Arc<OAuth>>,
    /// Where each tool call is recorded (`--audit-log`); may be off.
    pub audit: AuditLog,
    /// The files runs left in their output folder, kept for their owner.
    pub artifacts: Arc<ArtifactStore>,
    /// Persistent Python sessions (offered with `--allow-inline-code`).
    pub sessions: Arc<Sessions>,
    /// The modules the server ships for runs (the matplotlib backend); removed with the App.
    _python_support: Option<PythonSupport>,
    /// `--allow-install`: package installs into projects' `.venv` (their pool and sandbox).
    pub installs: Option<Arc<Installs>>,
    /// The interpreters and checked virtual environments runs use.
    pub python_envs: Arc<PythonEnvs>,
    /// `--runpod-endpoint`: the RunPod backend runs may be sent to.
    pub runpod: Option<Arc<RunPod>>,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Root(#[from] PathError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("cannot make the private scratch folder for runs: {0}")]
    Scratch(std::io::Error),
    #[error(transparent)]
    OAuth(#[from] oauth::OAuthError),
    #[error("cannot make the state folder {dir}: {error}")]
    StateDir { dir: String, error: std::io::Error },
    #[error("the RunPod backend cannot be set up: {0}")]
    RunPod(String),
    #[error("--oauth has no public URL to use as its issuer\nhint: pass --public-url https://…")]
    NoPublicUrl,
}

impl App {
    /// `text` without the host folders a run's output may name: the projects folder and the
    /// runs' scratch root, which runs see under other names.
    pub fn without_host_folder(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for folder in [self.root.path(), self.runner.scratch_root()] {
            let mut prefix = folder.to_string_lossy().into_owned();
            prefix.push(std::path::MAIN_SEPARATOR);
            if text.contains(&prefix) {
                text = text.replace(&prefix, "");
            }
        }
        text
    }

    /// `shutdown` kills every run in flight when it fires.
    pub fn build(config: Config, shutdown: CancellationToken) -> Result<Arc<Self>, AppError> {
        let root = ProjectRoot::open(&config.projects_dir)?;
        let oauth = match &config.oauth {
            Some(settings) => Some(open_oauth(&config, settings)?),
            None => None,
        };
        let artifacts = Arc::new(open_artifacts(&config).map_err(AppError::Scratch)?);
        let python_support = PythonSupport::write()
            .map_err(|e| {
                tracing::warn!(
                    "{e}: the matplotlib backend is not written; plt.show() saves nothing"
                )
            })
            .ok();
        let support = python_support.as_ref().map(|s| s.dir().to_path_buf());
        let settings = config.sandbox.clone();
        let (projects, python) = (root.path().to_path_buf(), config.python.clone());
        let python_envs = Arc::new(PythonEnvs::new(
            root.path(),
            &config.python,
            &config.allow_python,
        ));
        let envs = python_envs.clone();
        let build = move || {
            // The projects folder is writable (and readable) unless `--read-only-projects`, and
            // never executable: a program a script wrote there does not run. Every allowed
            // interpreter's trees are readable (asked here once, also with the sandbox off: runs
            // and listings need their versions).
            let sandboxed = settings.mode != SandboxMode::Off;
            let interpreter_paths = envs.interpreters().read_paths();
            let mut read_paths = if sandboxed {
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
            // `--read-only-projects`: scripts read the folder and write only their scratch.
            let write_paths = if settings.read_only_projects {
                read_paths.push(projects.clone());
                Vec::new()
            } else {
                vec![projects.clone()]
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
            let sandbox = Sandbox::new(SandboxPolicy {
                mode: settings.mode,
                read_paths,
                write_paths,
                allow_network: settings.allow_network,
                limits: settings.limits,
                projects: Some(projects.clone()),
                read_only_projects: settings.read_only_projects,
                write_scope: settings.write_scope,
                pycache: pycache.as_ref().map(|cache| cache.dir().to_path_buf()),
                support,
                tcp_connect_ports: None,
            })?;
            if let Some(cache) = pycache {
                cache.fill_in_background(python, projects, PROBE_IDLE_DELAY);
            }
            Ok(sandbox)
        };
        // Strict refuses to start without every layer, so it must know before serving; otherwise
        // the probe (~10 ms, mostly the interpreter's start) runs after the client's opening
        // requests, or as soon as a run needs it.
        let sandbox = if config.sandbox.mode == SandboxMode::Strict {
            SandboxProbe::ready(build()?)
        } else {
            SandboxProbe::probe_in_background(PROBE_IDLE_DELAY, build)
        };
        let runner = Runner::new(
            RunnerSettings {
                python: config.python.clone(),
                max_output_bytes: config.max_output_bytes,
                max_concurrent: config.max_concurrent,
                max_background_concurrent: config.background.max_concurrent,
                pass_env: config.pass_env.clone(),
            },
            sandbox,
            shutdown.clone(),
        )
        .map_err(AppError::Scratch)?
        .with_quarantine(quarantine(&config))
        .with_warm(config.warm.clone());
        if config.warm.enabled {
            tracing::debug!(max = config.warm.max, "warm runs on");
        } else if !pyrun_run::warm::SUPPORTED {
            tracing::info!("warm runs need Linux: every run starts cold");
        }
        // Only OAuth brings several callers; alone, a caller's runs may take every place.
        let runner = Arc::new(if config.oauth.is_some() {
            runner.with_caller_turns()
        } else {
            runner
        });
        let runs = BackgroundRuns::new(
            runner.clone(),
            BackgroundSettings {
                timeout: config.background.timeout,
                max_runs: config.background.max_runs,
                max_per_caller: config.background.max_per_caller,
                retention: config.background.retention,
            },
            artifacts.clone(),
            |e| ClientMessage::from(e).into_string(),
        );
        let store = artifacts.clone();
        runs.on_forget(move |run_id| store.forget(run_id));
        let audit = match &config.audit_log {
            Some(path) => {
                tracing::info!(path = %path.display(), "audit log");
                AuditLog::open(path.clone())
            }
            None => AuditLog::off(),
        };
        let sessions = Sessions::new(
            runner.clone(),
            SessionSettings {
                max_sessions: config.sessions.max_sessions,
                max_per_caller: config.sessions.max_per_caller,
                idle_timeout: config.sessions.idle_timeout,
                max_output: config.max_output_bytes,
            },
        );
        let installs = if config.install.allowed {
            let installs = open_installs(&config, &root, shutdown).map_err(AppError::Scratch)?;
            Some(Arc::new(installs))
        } else {
            None
        };
        let runpod = match &config.runpod {
            Some(settings) => Some(Arc::new(open_runpod(settings)?)),
            None => None,
        };
        Ok(Arc::new(Self {
            runpod,
            config,
            root,
            runner,
            runs,
            oauth,
            audit,
            artifacts,
            sessions,
            _python_support: python_support,
            installs,
            python_envs,
        }))
    }

    /// The server's last step, once its transport has stopped: fires the shutdown (runs,
    /// sessions and installs in flight are killed), waits until their processes are reaped,
    /// then kills and reaps the server's own helpers. No process outlives the server.
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
        let helpers = tokio::task::spawn_blocking(|| pyrun_run::helpers::close(HELPERS_GRACE));
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

/// The RunPod endpoint's client (nothing is sent until a run asks for it).
fn open_runpod(settings: &RunPodConfig) -> Result<RunPod, AppError> {
    let poll = match settings.poll {
        RunPodPoll::Get => PollMethod::Get,
        RunPodPoll::Post => PollMethod::Post,
    };
    let api = RunPodApi::new(&settings.base_url, &settings.api_key, poll)
        .map_err(|e| AppError::RunPod(e.to_string()))?;
    Ok(RunPod::new(api))
}

/// Where protected names runs create are moved: the state folder's `quarantine/` (made
/// owner-only when first needed), else a folder of the temp directory; none with
/// `--allow-protected-writes`.
fn quarantine(config: &Config) -> Option<Quarantine> {
    if config.sandbox.allow_protected_writes {
        return None;
    }
    Some(match &config.state_dir {
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
fn open_artifacts(config: &Config) -> std::io::Result<ArtifactStore> {
    let storage = config.artifacts.max_storage_bytes;
    let limits = ArtifactLimits {
        max_total_bytes: storage,
        max_bytes_per_caller: config.artifacts.max_storage_bytes_per_caller.min(storage),
        max_file_bytes: ArtifactLimits::default().max_file_bytes.min(storage),
        ..ArtifactLimits::default()
    };
    if let Some(dir) = &config.state_dir {
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

/// The installs (`--allow-install`): their cache in the state folder's `install-cache/` (made
/// owner-only), else, or when that cannot be made, in their private temp folder.
fn open_installs(
    config: &Config,
    root: &ProjectRoot,
    shutdown: CancellationToken,
) -> std::io::Result<Installs> {
    let cache_dir = config.state_dir.as_ref().and_then(|dir| {
        let cache = dir.join("install-cache");
        state_dir::create_owner_only(dir)
            .and_then(|()| state_dir::create_owner_only(&cache))
            .map(|()| cache)
            .map_err(
                |e| tracing::warn!(dir = %dir.display(), "the install cache is a temp folder: {e}"),
            )
            .ok()
    });
    let settings = InstallSettings {
        python: config.python.clone(),
        uv: config.install.uv.clone(),
        index: config.install.index.clone(),
        allow_sdist: config.install.allow_sdist,
        timeout: config.install.timeout,
        max_output_bytes: config.max_output_bytes,
        sandbox_mode: config.sandbox.mode,
        cache_dir,
        max_concurrent: 2,
    };
    let abi = pyrun_sandbox::landlock_abi();
    if settings.sandbox_mode != SandboxMode::Off && abi < 4 {
        tracing::warn!(
            landlock_abi = abi,
            "--allow-install: this kernel cannot limit an install's TCP connections to the \
             index's port (Landlock ABI 4, Linux 6.7); every install is refused"
        );
    }
    tracing::info!(
        installer = if settings.uv.is_some() { "uv" } else { "pip" },
        index = settings.index.url(),
        "package installs are on"
    );
    Installs::new(settings, root.path().to_path_buf(), shutdown)
}

/// Opens the OAuth state in the state folder (made owner-only when missing).
fn open_oauth(
    config: &Config,
    settings: &crate::config::OAuthConfig,
) -> Result<Arc<OAuth>, AppError> {
    let base = settings.public_url.clone().ok_or(AppError::NoPublicUrl)?;
    let dir = config.state_dir.as_deref().ok_or(AppError::NoPublicUrl)?;
    state_dir::create_owner_only(dir).map_err(|error| AppError::StateDir {
        dir: dir.display().to_string(),
        error,
    })?;
    let store = oauth::store::Store::open(dir).map_err(oauth::OAuthError::from)?;
    let documents =
        oauth::cimd::CimdFetcher::new(config.cimd.clone()).map_err(oauth::OAuthError::from)?;
    Ok(OAuth::open(
        oauth::Endpoints { base },
        store,
        &settings.owner,
        documents,
    )?)
}

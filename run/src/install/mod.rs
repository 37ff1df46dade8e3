//! Package installs (`install_packages`, `--allow-install`): makes a project's `.venv` when it has
//! none and installs checked requirements into it, with `uv` when the server has one, else with
//! `python -m venv` and the venv's own `pip`. The only module that starts an installer.
//!
//! Steps, in order: refuse a second install of the same project while one runs; wait for a turn
//! in the installs' own pool (never a run's); build the two install sandboxes once (below); prove
//! the target: `<project>/.venv` must be a real folder (never a link) inside the projects folder,
//! or none yet, and an existing one must have been made from the server's `--python` (its
//! `bin/python` resolves to it); hold the project's folder open; make a private scratch; then,
//! one after the other under one deadline:
//! 1. **fetch**, the only step with the network: with uv, `uv venv` of a throwaway venv in the
//!    scratch and `uv pip install --python <it> --index-url <index> [--no-build] <requirements>`,
//!    which fills the project's uv cache; without, `<python> -m venv --without-pip`, `ensurepip`
//!    and `pip wheel --wheel-dir <scratch>/wheels --index-url <index> [--only-binary :all:]` in a
//!    throwaway venv. Only programs the server made run here (uv, the interpreter, a fresh venv
//!    of a scratch no run can reach);
//! 2. **venv** (when missing): `.venv` made through the project's open folder, opened without
//!    following a link, and made a venv (`uv venv --python <python>`, or `venv` + `ensurepip`);
//! 3. **install**, without the network: `uv pip install --offline` from the cache, or the venv's
//!    `pip install --no-index --find-links <scratch>/wheels`; pip's fetched wheels are first
//!    checked against the disk budget (`budget.rs`: their stated sizes), and the venv kept as
//!    it was (`snapshot.rs`), to be put back when this step fails.
//!
//! Every step runs under the install's disk budget (`--max-install-mb`): a watchdog kills a
//! step whose writes to the venv, scratch and cache pass it.
//!
//! A project's `uv.lock` (checked by `uv_lock.rs`; uv only) is synced the same way: the lock as
//! checked and a minimal `pyproject.toml` written into the scratch (the profiles cannot read the
//! project's folder, and its own pyproject's `[tool.uv]` must not reach uv); the fetch step runs
//! `uv sync --frozen --no-install-project --project <scratch> [--no-build]` into the throwaway
//! venv (`UV_PROJECT_ENVIRONMENT`), filling the cache, and the install step the same sync,
//! `--offline`, into the project's venv (`--frozen`: the lock is installed as it is, never
//! resolved again nor rewritten; default groups; packages of the venv that the lock does not
//! name are removed, as a sync does).
//!
//! Each step runs in its own process group, output read into a capped [`LiveOutput`] (both pipes
//! into one stream, in arrival order), killed with its whole group at the end, on timeout,
//! cancellation or shutdown (the run layer's one `supervise`). A venv made here whose steps
//! failed is removed again, through the project's open folder and only while it is still the
//! folder made.
//!
//! Requirements reach the installer only as [`Requirement::to_arg`] renders them (see
//! `requirement.rs`): no option, URL, path or file. The index is the operator's
//! (`--package-index`), the only one named; pip runs `--isolated` (no configuration file, no
//! `PIP_*` variable) and uv with `--no-config`; the environment is the runs' allowlist (`PATH`,
//! locale, time zone) plus what is set here.
//!
//! The folder, by job: `mod.rs` the use case (`Installs::install`: the steps above, in order);
//! `profiles.rs` the two install sandboxes; `venv.rs` the project's `.venv` proven, held, made and
//! removed when unfinished; `step.rs` one step's command and its supervised run; `fetch.rs` the
//! fetch step; `fill.rs` the venv and install steps, offline; `lock_sync.rs` a `uv.lock` synced;
//! `budget.rs` the disk budget (stated sizes, the watchdog); `snapshot.rs` the venv kept and put
//! back.
//!
//! # Why two sandboxes
//! The project's `.venv` is code any run can change: a run sees only the protected names on its
//! own folder's path read-only, so a run of another folder can plant a `.pth`, a `pip` or a
//! `sitecustomize` in this one, or make a `.venv` where there was none. Whatever starts the
//! project's interpreter runs that code. So nothing that starts it ever has the network: the
//! fetch step starts only what the server made, and the steps that start the project's venv run
//! in a sandbox without the network, as confined as a run. What each profile allows is
//! described in `profiles.rs`.

mod budget;
mod fetch;
mod fill;
mod lock_sync;
mod profiles;
mod snapshot;
mod stale_roots;
mod step;
mod venv;

use std::collections::HashSet;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OnceCell, Semaphore};
use tokio_util::sync::CancellationToken;

use super::live_output::LiveOutput;
use super::package_index::PackageIndex;
use super::paths::ProjectDir;
use super::requirement::Requirement;
use super::uv_lock::CheckedLock;
use budget::DiskBudget;
pub use budget::OverBudget;
use fill::Filled;
use lock_sync::write_sync_project;
pub use profiles::install_limits;
use profiles::Network;
use pyrun_sandbox::{Sandbox, SandboxError, SandboxMode};
use step::Steps;

/// The name of the environment an install makes and fills, in the project's folder.
pub const VENV_NAME: &str = ".venv";

/// What the installs need from the configuration.
#[derive(Debug, Clone)]
pub struct InstallSettings {
    /// The `--python` interpreter (its real path): the base of every venv made here.
    pub python: PathBuf,
    /// `uv` (its real path), when the server has one.
    pub uv: Option<PathBuf>,
    pub index: PackageIndex,
    /// Source distributions may be built (their build runs code); wheels only otherwise.
    pub allow_sdist: bool,
    /// One install, both steps, at most this long.
    pub timeout: Duration,
    /// The most one install may write (venv, scratch, cache), in bytes.
    pub max_bytes: u64,
    pub max_output_bytes: usize,
    pub sandbox_mode: SandboxMode,
    /// The installer's cache (owner-only, outside the projects folder); `None`: a private temp
    /// folder of this server.
    pub cache_dir: Option<PathBuf>,
    /// Installs at once, server-wide.
    pub max_concurrent: usize,
}

/// Which program installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installer {
    Uv,
    Pip,
}

impl Installer {
    pub fn name(self) -> &'static str {
        match self {
            Self::Uv => "uv",
            Self::Pip => "pip",
        }
    }
}

/// The step an install ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallStep {
    /// Fetching the packages (the only step with the network), into the cache or the scratch.
    Fetch,
    /// Making the venv.
    Venv,
    /// Installing into it.
    Install,
}

/// What an install puts into the venv.
#[derive(Debug, Clone, Copy)]
pub enum Wanted<'a> {
    /// Checked requirements: `uv pip install` or pip.
    Requirements(&'a [Requirement]),
    /// A checked `uv.lock`: `uv sync --frozen` (uv only).
    Lock(&'a CheckedLock),
}

/// One install to do.
#[derive(Debug)]
pub struct InstallRequest<'a> {
    pub project: &'a ProjectDir,
    pub wanted: Wanted<'a>,
    /// Where the installer's output goes as it arrives (both pipes, one stream: stdout).
    pub live: Arc<LiveOutput>,
}

/// What happened, in plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallOutcome {
    pub installer: Installer,
    /// The step it ended in: `Install` when every step ran.
    pub step: InstallStep,
    /// The last step's exit code; `None` when it was killed.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    /// The venv was made by this install.
    pub created_venv: bool,
    /// The venv relative to the projects folder, `/`-separated (`mathpkg/.venv`).
    pub venv: String,
    pub duration: Duration,
    /// The install would write, or wrote, more than `--max-install-mb`.
    pub over_budget: Option<OverBudget>,
    /// A step failed after the venv existed, and the venv could NOT be put back as it was
    /// before the call (the server's log says why): it may be half-made.
    pub venv_not_restored: bool,
}

impl InstallOutcome {
    /// Every step ran and exited 0.
    pub fn ok(&self) -> bool {
        self.step == InstallStep::Install && self.exit_code == Some(0)
    }
}

/// Why an install did not start. The text is for the server's log (it may name host paths);
/// `client_message` maps it for clients.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("an install into this project is already running")]
    Busy,
    #[error("the install was cancelled before it started")]
    CancelledWhileQueued,
    #[error("the project's .venv is a symbolic link")]
    VenvIsLink,
    #[error("the project's .venv is not a folder")]
    VenvNotDir,
    #[error("the project's .venv was not made from the server's interpreter ({0})")]
    ForeignVenv(String),
    #[error("the project's .venv leaves the projects folder")]
    VenvOutside,
    #[error("the project's .venv could not be prepared: {0}")]
    Venv(io::Error),
    #[error("a scratch folder for the install could not be made: {0}")]
    Scratch(io::Error),
    #[error("installs are refused: {0}")]
    Sandbox(Arc<SandboxError>),
    #[error("the installer could not be started: {what}: {source}")]
    Spawn {
        what: &'static str,
        source: io::Error,
    },
    #[error("installs need the Linux sandbox (or --sandbox off) on this platform")]
    Unsupported,
    #[error("syncing a uv.lock needs uv, and this server has none")]
    LockNeedsUv,
}

/// The installs of one server: their pool, their sandbox (built on first use), the projects
/// being installed into, their private root (scratch folders, and the cache without a state
/// folder).
pub struct Installs {
    settings: InstallSettings,
    env: Vec<(OsString, OsString)>,
    projects: PathBuf,
    permits: Semaphore,
    busy: Mutex<HashSet<PathBuf>>,
    /// The fetch step's sandbox (the network, to the index's port only).
    online: OnceCell<Result<Arc<Sandbox>, Arc<SandboxError>>>,
    /// The other steps' sandbox (no network, as runs).
    offline: OnceCell<Result<Arc<Sandbox>, Arc<SandboxError>>>,
    /// The root's lock, held while the server lives: a server that starts after this one was
    /// killed removes the root (see `stale_roots`). Declared before `root`, so that it is closed
    /// before the root is removed.
    _held: std::fs::File,
    root: tempfile::TempDir,
    cache: PathBuf,
    /// Venv snapshots being removed after their install answered, by project: the project's
    /// next install waits for its own.
    removing: Mutex<std::collections::HashMap<PathBuf, tokio::task::JoinHandle<()>>>,
    next: std::sync::atomic::AtomicU64,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Installs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installs")
            .field("installer", &self.installer())
            .field("index", &self.settings.index.url())
            .finish_non_exhaustive()
    }
}

impl Installs {
    /// `projects` is the canonical projects folder. Fails when no private root can be made.
    pub fn new(
        settings: InstallSettings,
        projects: PathBuf,
        shutdown: CancellationToken,
    ) -> io::Result<Self> {
        // Owner-only: the fetch's scratch holds the project's requirements and lock, and wheels
        // of a private index.
        let mut builder = tempfile::Builder::new();
        builder.prefix(stale_roots::PREFIX);
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
        let root = builder.tempdir()?;
        let held = stale_roots::hold(root.path())?;
        stale_roots::sweep_later(std::env::temp_dir(), root.path().to_path_buf());
        let cache = match &settings.cache_dir {
            Some(dir) => dir.clone(),
            None => {
                let dir = root.path().join("cache");
                std::fs::create_dir(&dir)?;
                dir
            }
        };
        Ok(Self {
            env: super::launch::scrubbed_env(std::env::vars_os(), &[]),
            permits: Semaphore::new(settings.max_concurrent.max(1)),
            settings,
            projects,
            busy: Mutex::new(HashSet::new()),
            online: OnceCell::new(),
            offline: OnceCell::new(),
            _held: held,
            root,
            cache,
            removing: Mutex::new(std::collections::HashMap::new()),
            next: std::sync::atomic::AtomicU64::new(0),
            shutdown,
        })
    }

    /// Installs under way (their processes may still be ending), for the shutdown.
    pub fn running(&self) -> usize {
        self.settings
            .max_concurrent
            .max(1)
            .saturating_sub(self.permits.available_permits())
    }

    /// The installer this server uses.
    pub fn installer(&self) -> Installer {
        if self.settings.uv.is_some() {
            Installer::Uv
        } else {
            Installer::Pip
        }
    }

    /// The operator's package index.
    pub fn index(&self) -> &PackageIndex {
        &self.settings.index
    }

    /// The most one install may write (`--max-install-mb`), in bytes.
    pub fn max_install_bytes(&self) -> u64 {
        self.settings.max_bytes
    }

    /// The most output kept, in bytes.
    pub fn max_output(&self) -> usize {
        self.settings.max_output_bytes
    }

    /// Host folders an installer's output may name, to be cut from what clients see: the
    /// install root (scratch, and the cache without a state folder) and the cache.
    pub fn host_folders(&self) -> [&Path; 2] {
        [self.root.path(), &self.cache]
    }

    /// The layers of the install sandbox, once it was built (empty before, or with it off).
    pub fn layers(&self) -> Vec<&'static str> {
        match self.online.get() {
            Some(Ok(sandbox)) => sandbox.layers(),
            _ => Vec::new(),
        }
    }

    /// Installs `req.wanted` into the project's `.venv` (made when missing). Dropping the
    /// future kills the installer too.
    pub async fn install(
        &self,
        req: InstallRequest<'_>,
        cancel: &CancellationToken,
    ) -> Result<InstallOutcome, InstallError> {
        if matches!(req.wanted, Wanted::Lock(_)) && self.settings.uv.is_none() {
            return Err(InstallError::LockNeedsUv);
        }
        let _busy = BusyProject::claim(&self.busy, req.project.absolute())?;
        let _permit = tokio::select! {
            permit = self.permits.acquire() => permit.map_err(|_| InstallError::CancelledWhileQueued)?,
            _ = cancel.cancelled() => return Err(InstallError::CancelledWhileQueued),
            _ = self.shutdown.cancelled() => return Err(InstallError::CancelledWhileQueued),
        };
        let removing = self
            .removing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(req.project.absolute());
        if let Some(removing) = removing {
            let _ = removing.await;
        }
        req.live.mark_started();
        let online = self.sandbox(Network::IndexOnly).await?;
        let offline = self.sandbox(Network::None).await?;
        let started = Instant::now();
        let venv = req.project.absolute().join(VENV_NAME);
        let target = self.prepare_venv(req.project, &venv)?;
        let scratch = self.scratch().map_err(InstallError::Scratch)?;
        if let Wanted::Lock(lock) = req.wanted {
            write_sync_project(scratch.path(), lock).map_err(InstallError::Scratch)?;
        }
        let (cache, _own_cache) = self.fetch_cache(req.project)?;
        // What the install may write: into the venv, its scratch and the cache, counted from now.
        // The slot's own `/dev/shm` lies beside its scratch (`<scratch>.shm`): a build backend
        // writes there too.
        let mut shm = scratch.path().as_os_str().to_owned();
        shm.push(".shm");
        let roots = vec![
            venv.clone(),
            scratch.path().to_path_buf(),
            cache.clone(),
            PathBuf::from(shm),
        ];
        let max_bytes = self.settings.max_bytes;
        let budget = tokio::task::spawn_blocking(move || DiskBudget::new(max_bytes, roots))
            .await
            .map_err(|e| InstallError::Scratch(io::Error::other(e)))?;
        let steps = Steps {
            installs: self,
            scratch: scratch.path(),
            live: &req.live,
            deadline: tokio::time::Instant::now() + self.settings.timeout,
            cancel,
            budget: &budget,
            over_budget: std::sync::atomic::AtomicBool::new(false),
        };
        let fetched = self.fetch(&steps, &online, &cache, &req.wanted).await?;
        // pip's wheels say what they unpack to: refused before anything is unpacked.
        let stated = match (fetched.succeeded(), &self.settings.uv) {
            (true, None) => budget
                .check_wheels(&scratch.path().join(fetch::WHEELS_DIR))
                .unwrap_or_else(|e| {
                    tracing::warn!(%e, "a fetched wheel's sizes could not be read");
                    None
                }),
            _ => None,
        };
        let filled = if fetched.succeeded() && stated.is_none() {
            self.fill(&steps, &offline, &target, req.project, &cache, &req.wanted)
                .await?
        } else {
            Filled {
                step: if stated.is_some() {
                    InstallStep::Install
                } else {
                    InstallStep::Fetch
                },
                ended: if stated.is_some() {
                    crate::supervise::Ending::Cancelled
                } else {
                    fetched
                },
                made: false,
                not_restored: false,
            }
        };
        let written = steps
            .over_budget
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(OverBudget::Written);
        let over_budget = stated.or(written);
        Ok(InstallOutcome {
            installer: self.installer(),
            step: filled.step,
            exit_code: filled.ended.exit_code(),
            timed_out: filled.ended.timed_out(),
            cancelled: filled.ended.cancelled() && over_budget.is_none(),
            created_venv: filled.made && filled.step == InstallStep::Install,
            venv: relative_venv(req.project),
            duration: started.elapsed(),
            over_budget,
            venv_not_restored: filled.not_restored,
        })
    }

    /// Removes a set-aside venv snapshot after the call answered (seconds for a large venv);
    /// the project's next install waits for it.
    fn remove_later(&self, project: &ProjectDir, discard: snapshot::Discard) {
        let task = tokio::task::spawn_blocking(move || discard.remove());
        self.removing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(project.absolute().to_path_buf(), task);
    }

    /// A private scratch folder for one install (removed with it).
    fn scratch(&self) -> io::Result<tempfile::TempDir> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tempfile::Builder::new()
            .prefix(&format!("install-{n}-"))
            .tempdir_in(self.root.path())
    }
}

/// `mathpkg/.venv`, or `.venv` for the projects folder itself.
fn relative_venv(project: &ProjectDir) -> String {
    match project.relative() {
        "" | "." => VENV_NAME.to_owned(),
        dir => format!("{dir}/{VENV_NAME}"),
    }
}

/// A project being installed into; released on drop.
struct BusyProject<'a> {
    busy: &'a Mutex<HashSet<PathBuf>>,
    project: PathBuf,
}

impl<'a> BusyProject<'a> {
    fn claim(busy: &'a Mutex<HashSet<PathBuf>>, project: &Path) -> Result<Self, InstallError> {
        let mut set = busy.lock().unwrap_or_else(|p| p.into_inner());
        if !set.insert(project.to_path_buf()) {
            return Err(InstallError::Busy);
        }
        Ok(Self {
            busy,
            project: project.to_path_buf(),
        })
    }
}

impl Drop for BusyProject<'_> {
    fn drop(&mut self) {
        let mut set = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        set.remove(&self.project);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_install_of_the_same_project_is_refused_until_the_first_ends() {
        let busy = Mutex::new(HashSet::new());
        let first = BusyProject::claim(&busy, Path::new("/p/a")).unwrap();
        assert!(matches!(
            BusyProject::claim(&busy, Path::new("/p/a")),
            Err(InstallError::Busy)
        ));
        let other = BusyProject::claim(&busy, Path::new("/p/b"));
        assert!(other.is_ok());
        drop(first);
        assert!(BusyProject::claim(&busy, Path::new("/p/a")).is_ok());
    }
}

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
//!    `pip install --no-index --find-links <scratch>/wheels`.
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
//! cancellation or shutdown. A venv made here whose steps failed is removed again, through the
//! project's open folder and only while it is still the folder made.
//!
//! Requirements reach the installer only as [`Requirement::to_arg`] renders them (see
//! `requirement.rs`): no option, URL, path or file. The index is the operator's
//! (`--package-index`), the only one named; pip runs `--isolated` (no configuration file, no
//! `PIP_*` variable) and uv with `--no-config`; the environment is the runs' allowlist (`PATH`,
//! locale, time zone) plus what is set here.
//!
//! # Why two sandboxes
//! The project's `.venv` is code any run can change: a run sees only the protected names on its
//! own folder's path read-only, so a run of another folder can plant a `.pth`, a `pip` or a
//! `sitecustomize` in this one, or make a `.venv` where there was none. Whatever starts the
//! project's interpreter runs that code. So nothing that starts it ever has the network: the
//! fetch step starts only what the server made, and the steps that start the project's venv run
//! in a sandbox without the network, as confined as a run.
//!
//! # The install sandbox profiles (Linux)
//! Both are [`Sandbox`]es of their own, built from policies of their own (runs' rules are
//! untouched):
//! - **network**: the fetch step has the host's network namespace (not the runs' empty one)
//!   inside a user namespace of its own (no capabilities); Landlock (ABI ≥ 4) allows TCP
//!   `connect` only to the index's port and denies every TCP `bind`; seccomp allows only IPv4/IPv6
//!   TCP and UDP sockets and netlink (no `AF_UNIX`: local daemons; no MPTCP or SCTP, which
//!   Landlock's TCP rules do not see). The resolver's files (`/etc/resolv.conf`, `/etc/hosts`,
//!   `nsswitch.conf`...) are readable. A kernel that cannot enforce the port rule gets no install
//!   at all (fail closed), whatever `--sandbox` says but `off`. The other steps have no network
//!   (the runs' empty namespace, no socket but `socketpair`).
//! - **files**: the system trees and the interpreter's trees read-only (with execute: a venv's
//!   `bin/python` is a link to the base interpreter); uv's folder read-only with execute; the
//!   project's own folder of the server's install cache and the install's scratch (its HOME and
//!   TMPDIR) writable, and for the venv and install steps the project's `.venv` (the folder
//!   proven, by its descriptor), all without execute (W^X as for runs); nothing else of the
//!   projects folder, not even readable. No mount view: the view's job is to show runs the
//!   projects folder with its protected names (`.venv` first) read-only, and an install must
//!   write exactly that folder, so installs rely on Landlock alone for files.
//! - **processes**: a pid namespace as for runs, the same seccomp filter, `RLIMIT_*` and
//!   per-install cgroups with larger bounds (memory, processes, open files: uv resolves on many
//!   threads), CPU seconds as long as `--install-timeout`.
//!
//! Code planted in the project's venv thus runs with no network, writes only that venv, the
//! scratch and (with uv, which writes its cache also `--offline`) the project's cache, and reads
//! nothing of the projects folder. What it leaves in the cache the next fetch reads as data only:
//! uv links cached files into the throwaway venv, no package code runs. A fetch that runs code,
//! a build with `--allow-sdist`, gets a fresh cache in its scratch instead.
//!
//! What the fetch profile does not stop: UDP (DNS needs it; Landlock has no UDP rules) and TCP to any
//! host on the index's port (Landlock rules name ports, not addresses). With wheels only
//! (the default) no code of a package runs during an install; `--allow-sdist` lets a build
//! backend run inside this profile.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OnceCell, Semaphore};
use tokio_util::sync::CancellationToken;

use super::live_output::LiveOutput;
use super::package_index::PackageIndex;
use super::paths::ProjectDir;
use super::python_env::python_read_paths;
use super::requirement::Requirement;
use super::uv_lock::CheckedLock;
use pyrun_sandbox::{Grant, ResourceLimits, Sandbox, SandboxError, SandboxMode};

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
    pub max_output_bytes: usize,
    pub sandbox_mode: SandboxMode,
    /// The installer's cache (owner-only, outside the projects folder); `None`: a private temp
    /// folder of this server.
    pub cache_dir: Option<PathBuf>,
    /// Installs at once, server-wide.
    pub max_concurrent: usize,
}

/// Larger bounds than a run's: uv and pip resolve on threads and unpack large wheels.
pub fn install_limits(timeout: Duration) -> ResourceLimits {
    ResourceLimits {
        memory_bytes: 4096 << 20,
        cpu_secs: timeout.as_secs().max(1),
        file_size_bytes: 2048 << 20,
        open_files: 4096,
        processes: 512,
    }
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
    root: tempfile::TempDir,
    cache: PathBuf,
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
        let root = tempfile::Builder::new()
            .prefix("pyrun-mcp-install-")
            .tempdir()?;
        let cache = match &settings.cache_dir {
            Some(dir) => dir.clone(),
            None => {
                let dir = root.path().join("cache");
                std::fs::create_dir(&dir)?;
                dir
            }
        };
        Ok(Self {
            env: super::runner::scrubbed_env(std::env::vars_os(), &[]),
            permits: Semaphore::new(settings.max_concurrent.max(1)),
            settings,
            projects,
            busy: Mutex::new(HashSet::new()),
            online: OnceCell::new(),
            offline: OnceCell::new(),
            root,
            cache,
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

    /// Installs `req.requirements` into the project's `.venv` (made when missing). Dropping the
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
        // With `--allow-sdist` a fetch runs build backends with the network: never from a cache
        // that code of the project's venv could write (see the module header), so such an
        // install fetches into a cache of its own scratch.
        let cache = if self.settings.allow_sdist {
            let cache = scratch.path().join("cache");
            std::fs::create_dir(&cache).map_err(InstallError::Scratch)?;
            cache
        } else {
            self.project_cache(req.project)
                .map_err(InstallError::Scratch)?
        };
        let relative = relative_venv(req.project);
        let deadline = tokio::time::Instant::now() + self.settings.timeout;
        let steps = Steps {
            installs: self,
            scratch: scratch.path(),
            live: &req.live,
            deadline,
            cancel,
        };
        let ok = |ended: &Ended| matches!(ended, Ended::Exited(Some(0)));

        // 1. Fetch, with the network: only what the server made runs (uv, or a venv of the
        // install's own scratch that no run can reach), never the project's venv, which any run
        // of another folder can write (see the module header).
        let fetch_slot = online
            .slot_granting(scratch.path(), &[Grant::writable(&cache)])
            .map_err(|e| InstallError::Sandbox(Arc::new(e)))?;
        let mut step = InstallStep::Fetch;
        let mut ended = Ended::Exited(Some(0));
        for command in self.fetch_commands(scratch.path(), &cache, &req.wanted)? {
            if ok(&ended) {
                ended = steps.run(&online, &fetch_slot, &command).await?;
            }
        }
        // The slot ends here, before the offline step takes one (on Linux its cgroup and view
        // go; elsewhere it holds nothing to drop).
        #[cfg_attr(not(target_os = "linux"), allow(clippy::drop_non_drop))]
        drop(fetch_slot);

        // 2. Make the venv when needed and install into it, without the network: the project's
        // venv (and whatever a run planted in it) starts here only, as confined as a run.
        let mut created = false;
        if ok(&ended) {
            step = InstallStep::Venv;
            let (venv_fd, made) = target.open()?;
            created = made;
            // The project read-only at its host path (venvs record absolute paths), and in it the
            // venv writable: the very folder proven above (a magic link to its descriptor), not
            // whatever its path names by now.
            let mut grants = vec![
                Grant {
                    at: req.project.absolute().to_path_buf(),
                    held: None,
                    writable: false,
                },
                Grant {
                    at: venv.clone(),
                    held: Some(fd_path(&venv_fd)),
                    writable: true,
                },
            ];
            // uv installs from its cache, and writes it (also `--offline`); pip from the wheels.
            if self.settings.uv.is_some() {
                grants.push(Grant::writable(&cache));
            }
            let slot = offline
                .slot_granting(scratch.path(), &grants)
                .map_err(|e| InstallError::Sandbox(Arc::new(e)))?;
            // A half-made venv would be taken for a good one next time: it goes unless every
            // step made it (also on an error or a dropped call).
            let mut unfinished = made.then(|| UnfinishedVenv::new(&target, &venv_fd));
            if made {
                for command in self.venv_commands(&venv) {
                    if ok(&ended) {
                        ended = steps.run(&offline, &slot, &command).await?;
                    }
                }
            }
            if ok(&ended) {
                if let Some(unfinished) = unfinished.as_mut() {
                    unfinished.finished();
                }
                step = InstallStep::Install;
                let command = match req.wanted {
                    Wanted::Requirements(requirements) => {
                        self.install_command(&venv, &cache, scratch.path(), requirements)
                    }
                    Wanted::Lock(_) => self.sync_command(&venv, &cache, scratch.path(), false)?,
                };
                ended = steps.run(&offline, &slot, &command).await?;
            }
            drop(unfinished);
            #[cfg_attr(not(target_os = "linux"), allow(clippy::drop_non_drop))]
            drop(slot);
        }
        Ok(InstallOutcome {
            installer: self.installer(),
            step,
            exit_code: match ended {
                Ended::Exited(code) => code,
                _ => None,
            },
            timed_out: matches!(ended, Ended::TimedOut),
            cancelled: matches!(ended, Ended::Cancelled),
            created_venv: created && step == InstallStep::Install,
            venv: relative,
            duration: started.elapsed(),
        })
    }

    /// One of the install sandboxes, built on first use on a blocking thread.
    async fn sandbox(&self, network: Network) -> Result<Arc<Sandbox>, InstallError> {
        if !cfg!(target_os = "linux") && self.settings.sandbox_mode != SandboxMode::Off {
            return Err(InstallError::Unsupported);
        }
        let cell = match network {
            Network::IndexOnly => &self.online,
            Network::None => &self.offline,
        };
        let built = cell
            .get_or_init(|| async {
                let settings = self.settings.clone();
                let build = move || build_sandbox(&settings, network);
                match tokio::task::spawn_blocking(build).await {
                    Ok(result) => result.map(Arc::new).map_err(Arc::new),
                    Err(_) => Err(Arc::new(SandboxError::ProbeLost)),
                }
            })
            .await;
        built.clone().map_err(InstallError::Sandbox)
    }

    /// Proves the project's `.venv` (a real folder inside, or none yet; an existing one made
    /// from the server's `--python`) and holds the project's folder open for what follows.
    fn prepare_venv(&self, project: &ProjectDir, venv: &Path) -> Result<VenvTarget, InstallError> {
        match std::fs::symlink_metadata(venv) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(InstallError::Venv(e)),
            Ok(meta) if meta.file_type().is_symlink() => return Err(InstallError::VenvIsLink),
            Ok(meta) if !meta.is_dir() => return Err(InstallError::VenvNotDir),
            Ok(_) => {
                self.check_venv_dir(venv)?;
                // An empty folder (an install that failed before it made anything) is made anew.
                let empty = std::fs::read_dir(venv)
                    .map_err(InstallError::Venv)?
                    .next()
                    .is_none();
                if !empty {
                    self.check_base_interpreter(venv)?;
                }
            }
        }
        VenvTarget::open_project(&self.projects, project)
    }

    /// `venv` is a real folder whose real path is itself, inside the projects folder.
    fn check_venv_dir(&self, venv: &Path) -> Result<(), InstallError> {
        let meta = std::fs::symlink_metadata(venv).map_err(InstallError::Venv)?;
        if meta.file_type().is_symlink() {
            return Err(InstallError::VenvIsLink);
        }
        if !meta.is_dir() {
            return Err(InstallError::VenvNotDir);
        }
        let real = dunce::canonicalize(venv).map_err(InstallError::Venv)?;
        if real != venv || !real.starts_with(&self.projects) || real == self.projects {
            return Err(InstallError::VenvOutside);
        }
        Ok(())
    }

    /// An existing venv's `bin/python` must resolve to the server's interpreter: the install
    /// starts it.
    fn check_base_interpreter(&self, venv: &Path) -> Result<(), InstallError> {
        let python = venv.join("bin").join("python");
        let real = std::fs::canonicalize(&python)
            .map_err(|e| InstallError::ForeignVenv(format!("bin/python: {e}")))?;
        let ours = std::fs::canonicalize(&self.settings.python)
            .unwrap_or_else(|_| self.settings.python.clone());
        if real != ours {
            return Err(InstallError::ForeignVenv(format!(
                "bin/python is {}",
                real.display()
            )));
        }
        Ok(())
    }

    /// The project's own cache folder (made owner-only when missing): no install writes
    /// another project's cache, so a project's planted venv (see the module header) cannot
    /// poison what other projects install.
    fn project_cache(&self, project: &ProjectDir) -> io::Result<PathBuf> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        project.relative().hash(&mut hasher);
        let dir = self.cache.join(format!("project-{:016x}", hasher.finish()));
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        if std::fs::symlink_metadata(&dir)?.file_type().is_symlink() {
            return Err(io::Error::other("the project's cache folder is a link"));
        }
        Ok(dir)
    }

    /// A private scratch folder for one install (removed with it).
    fn scratch(&self) -> io::Result<tempfile::TempDir> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tempfile::Builder::new()
            .prefix(&format!("install-{n}-"))
            .tempdir_in(self.root.path())
    }

    /// The steps that make the venv: uv's one, or `venv` without pip then `ensurepip` (its own
    /// step, so that its output reaches the caller: `venv` swallows it).
    fn venv_commands(&self, venv: &Path) -> Vec<Command> {
        match &self.settings.uv {
            Some(uv) => vec![Command::new(uv).args([
                OsStr::new("--no-config"),
                OsStr::new("--color"),
                OsStr::new("never"),
                OsStr::new("venv"),
                OsStr::new("--no-python-downloads"),
                OsStr::new("--python"),
                self.settings.python.as_os_str(),
                venv.as_os_str(),
            ])],
            None => vec![
                Command::new(&self.settings.python).args([
                    OsStr::new("-m"),
                    OsStr::new("venv"),
                    OsStr::new("--without-pip"),
                    venv.as_os_str(),
                ]),
                Command::new(&venv.join("bin").join("python")).args([
                    OsStr::new("-m"),
                    OsStr::new("ensurepip"),
                    OsStr::new("--default-pip"),
                ]),
            ],
        }
    }

    /// The fetch step's commands: the requirements and their dependencies resolved against the
    /// index and downloaded, by uv into its cache (installed into a throwaway venv of the
    /// scratch), or by a throwaway venv's pip as wheels into the scratch (`pip wheel`: built
    /// there, with `--allow-sdist`).
    fn fetch_commands(
        &self,
        scratch: &Path,
        cache: &Path,
        wanted: &Wanted<'_>,
    ) -> Result<Vec<Command>, InstallError> {
        let fetch_venv = scratch.join(FETCH_VENV);
        let mut commands = self.venv_commands(&fetch_venv);
        let requirements = match wanted {
            Wanted::Requirements(requirements) => *requirements,
            Wanted::Lock(_) => {
                commands.push(self.sync_command(&fetch_venv, cache, scratch, true)?);
                return Ok(commands);
            }
        };
        let python = fetch_venv.join("bin").join("python");
        let index = OsStr::new(self.settings.index.url());
        let requirements = requirements.iter().map(|r| OsString::from(r.to_arg()));
        let fetch = match &self.settings.uv {
            Some(uv) => {
                let mut cmd = self
                    .uv_pip_install(uv, cache, &python)
                    .args([OsStr::new("--index-url"), index]);
                if !self.settings.allow_sdist {
                    cmd = cmd.args([OsStr::new("--no-build")]);
                }
                cmd.owned_args(requirements)
            }
            None => {
                let mut cmd = Command::new(&python).args([
                    OsStr::new("-m"),
                    OsStr::new("pip"),
                    OsStr::new("wheel"),
                    OsStr::new("--isolated"),
                    OsStr::new("--no-input"),
                    OsStr::new("--disable-pip-version-check"),
                    OsStr::new("--progress-bar"),
                    OsStr::new("off"),
                    OsStr::new("--cache-dir"),
                    cache.join("pip").as_os_str(),
                    OsStr::new("--wheel-dir"),
                    scratch.join(WHEELS_DIR).as_os_str(),
                    OsStr::new("--index-url"),
                    index,
                ]);
                if !self.settings.allow_sdist {
                    cmd = cmd.args([OsStr::new("--only-binary"), OsStr::new(":all:")]);
                }
                cmd.owned_args(requirements)
            }
        };
        commands.push(fetch);
        Ok(commands)
    }

    /// The install step's command, without the network: uv from its cache (`--offline`), pip
    /// from the fetched wheels only (`--no-index`).
    fn install_command(
        &self,
        venv: &Path,
        cache: &Path,
        scratch: &Path,
        requirements: &[Requirement],
    ) -> Command {
        let python = venv.join("bin").join("python");
        let requirements = requirements.iter().map(|r| OsString::from(r.to_arg()));
        match &self.settings.uv {
            Some(uv) => {
                let mut cmd = self.uv_pip_install(uv, cache, &python).args([
                    OsStr::new("--offline"),
                    OsStr::new("--index-url"),
                    OsStr::new(self.settings.index.url()),
                ]);
                if !self.settings.allow_sdist {
                    cmd = cmd.args([OsStr::new("--no-build")]);
                }
                cmd.owned_args(requirements)
            }
            None => Command::new(&python)
                .args([
                    OsStr::new("-m"),
                    OsStr::new("pip"),
                    OsStr::new("install"),
                    OsStr::new("--isolated"),
                    OsStr::new("--no-input"),
                    OsStr::new("--disable-pip-version-check"),
                    OsStr::new("--no-compile"),
                    OsStr::new("--progress-bar"),
                    OsStr::new("off"),
                    OsStr::new("--no-cache-dir"),
                    OsStr::new("--no-index"),
                    OsStr::new("--only-binary"),
                    OsStr::new(":all:"),
                    OsStr::new("--find-links"),
                    scratch.join(WHEELS_DIR).as_os_str(),
                ])
                .owned_args(requirements),
        }
    }

    /// uv with no configuration of the server's user, plain output, and the install's cache.
    fn uv(uv: &Path, cache: &Path) -> Command {
        Command::new(uv).args([
            OsStr::new("--no-config"),
            OsStr::new("--color"),
            OsStr::new("never"),
            OsStr::new("--no-progress"),
            OsStr::new("--cache-dir"),
            cache.join("uv").as_os_str(),
        ])
    }

    /// `uv pip install` into `python`'s environment, with the install's cache.
    fn uv_pip_install(&self, uv: &Path, cache: &Path, python: &Path) -> Command {
        Self::uv(uv, cache).args([
            OsStr::new("pip"),
            OsStr::new("install"),
            OsStr::new("--no-python-downloads"),
            OsStr::new("--python"),
            python.as_os_str(),
        ])
    }

    /// `uv sync` of the lock and pyproject in `scratch` into `venv` (see the module header);
    /// `--offline` from the cache the fetch step filled, unless `online`.
    fn sync_command(
        &self,
        venv: &Path,
        cache: &Path,
        scratch: &Path,
        online: bool,
    ) -> Result<Command, InstallError> {
        let uv = self
            .settings
            .uv
            .as_deref()
            .ok_or(InstallError::LockNeedsUv)?;
        let python = venv.join("bin").join("python");
        let mut cmd = Self::uv(uv, cache).args([
            OsStr::new("sync"),
            OsStr::new("--frozen"),
            OsStr::new("--no-install-project"),
            OsStr::new("--no-python-downloads"),
            OsStr::new("--python"),
            python.as_os_str(),
            OsStr::new("--project"),
            scratch.as_os_str(),
        ]);
        if !online {
            cmd = cmd.args([OsStr::new("--offline")]);
        }
        if !self.settings.allow_sdist {
            cmd = cmd.args([OsStr::new("--no-build")]);
        }
        cmd.env.push((
            OsString::from("UV_PROJECT_ENVIRONMENT"),
            venv.as_os_str().to_os_string(),
        ));
        Ok(cmd)
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    /// The installer's environment: the runs' allowlist, scratch HOME and temp folders, and
    /// settings that keep uv and pip from reading anything of the server's user.
    fn env<'a>(&'a self, scratch: &'a Path) -> Vec<(&'a OsStr, &'a OsStr)> {
        let scratch = scratch.as_os_str();
        let set: [(&OsStr, &OsStr); 14] = [
            (OsStr::new("HOME"), scratch),
            (OsStr::new("TMPDIR"), scratch),
            (OsStr::new("XDG_CONFIG_HOME"), scratch),
            (OsStr::new("XDG_CACHE_HOME"), scratch),
            (OsStr::new("XDG_DATA_HOME"), scratch),
            (OsStr::new("PYTHONNOUSERSITE"), OsStr::new("1")),
            (OsStr::new("PYTHONIOENCODING"), OsStr::new("utf-8")),
            (OsStr::new("PYTHONUNBUFFERED"), OsStr::new("1")),
            (OsStr::new("PIP_CONFIG_FILE"), OsStr::new("/dev/null")),
            (OsStr::new("PIP_NO_INPUT"), OsStr::new("1")),
            (OsStr::new("UV_NO_CONFIG"), OsStr::new("1")),
            (OsStr::new("UV_PYTHON_DOWNLOADS"), OsStr::new("never")),
            (OsStr::new("UV_NO_PROGRESS"), OsStr::new("1")),
            (OsStr::new("NO_COLOR"), OsStr::new("1")),
        ];
        let kept = self
            .env
            .iter()
            .filter(|(name, _)| !set.iter().any(|(n, _)| n == name))
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()));
        kept.chain(set).collect()
    }
}

/// What the installers read about the system (missing ones are skipped).
const DISTRIBUTION_FILES: &[&str] = &[
    "/etc/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/redhat-release",
    "/etc/alpine-release",
];

/// Which network an install sandbox has.
#[derive(Debug, Clone, Copy)]
enum Network {
    /// The host's, TCP to the index's port only (the fetch step).
    IndexOnly,
    /// None, as runs (the steps that start the project's venv).
    None,
}

/// The throwaway venv of the fetch step, in the install's scratch.
const FETCH_VENV: &str = "fetch-venv";
/// Where the pip fetch step leaves the wheels, in the install's scratch.
const WHEELS_DIR: &str = "wheels";

/// An install sandbox's policy (see the module header) made into a [`Sandbox`]. Blocking.
fn build_sandbox(settings: &InstallSettings, network: Network) -> Result<Sandbox, SandboxError> {
    let mut read_paths = if settings.sandbox_mode == SandboxMode::Off {
        Vec::new()
    } else {
        python_read_paths(&settings.python)?
    };
    if let Some(folder) = settings.uv.as_deref().and_then(Path::parent) {
        read_paths.push(folder.to_path_buf());
    }
    // pip names the distribution in its User-Agent and fails when it cannot read these.
    read_paths.extend(DISTRIBUTION_FILES.iter().map(PathBuf::from));
    Sandbox::new(pyrun_sandbox::SandboxPolicy {
        read_paths,
        // Each install's `.venv` and cache are added to its own slot.
        write_paths: Vec::new(),
        allow_network: matches!(network, Network::IndexOnly),
        limits: install_limits(settings.timeout),
        tcp_connect_ports: match network {
            Network::IndexOnly => Some(vec![settings.index.port()]),
            Network::None => None,
        },
        ..pyrun_sandbox::SandboxPolicy::bare(settings.sandbox_mode)
    })
}

/// The checked lock and the pyproject made from it, in the install's scratch: what `uv sync`
/// reads instead of the project's own files.
fn write_sync_project(scratch: &Path, lock: &CheckedLock) -> io::Result<()> {
    std::fs::write(scratch.join("uv.lock"), lock.text())?;
    std::fs::write(scratch.join("pyproject.toml"), lock.pyproject())
}

/// `mathpkg/.venv`, or `.venv` for the projects folder itself.
fn relative_venv(project: &ProjectDir) -> String {
    match project.relative() {
        "" | "." => VENV_NAME.to_owned(),
        dir => format!("{dir}/{VENV_NAME}"),
    }
}

/// A program and its argv, owned.
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Command {
    program: PathBuf,
    args: Vec<OsString>,
    /// Set on top of the installers' environment.
    env: Vec<(OsString, OsString)>,
}

impl Command {
    fn new(program: &Path) -> Self {
        Self {
            program: program.to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    fn args<'a>(mut self, args: impl IntoIterator<Item = &'a OsStr>) -> Self {
        self.args.extend(args.into_iter().map(OsStr::to_os_string));
        self
    }

    fn owned_args(mut self, args: impl IntoIterator<Item = OsString>) -> Self {
        self.args.extend(args);
        self
    }
}

/// How a step ended.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
enum Ended {
    Exited(Option<i32>),
    TimedOut,
    Cancelled,
}

/// What every step of one install shares.
struct Steps<'a> {
    installs: &'a Installs,
    scratch: &'a Path,
    live: &'a Arc<LiveOutput>,
    deadline: tokio::time::Instant,
    cancel: &'a CancellationToken,
}

impl Steps<'_> {
    /// Starts `cmd` in the install sandbox and waits for its end, the deadline or cancellation;
    /// its whole process group is killed whatever happened.
    #[cfg(target_os = "linux")]
    async fn run(
        &self,
        sandbox: &Sandbox,
        slot: &pyrun_sandbox::SandboxSlot,
        cmd: &Command,
    ) -> Result<Ended, InstallError> {
        use super::live_output::Stream;
        use super::runner::{read_live, ProcessTree, DRAIN_GRACE, REAP_GRACE};
        let spec = pyrun_sandbox::spawn::Spec {
            program: &cmd.program,
            argv0: None,
            args: cmd.args.iter().map(OsString::as_os_str).collect(),
            env: {
                let mut env = self.installs.env(self.scratch);
                env.extend(cmd.env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())));
                env
            },
            cwd: self.scratch,
            stdin_piped: false,
        };
        let child = sandbox
            .spawn(slot, &spec, self.scratch)
            .map_err(|e| match e {
                SandboxError::Spawn(pyrun_sandbox::spawn::SpawnError::Start { what, source }) => {
                    InstallError::Spawn { what, source }
                }
                other => InstallError::Sandbox(Arc::new(other)),
            })?;
        let mut child =
            super::child::AsyncChild::new(child).map_err(|source| InstallError::Spawn {
                what: "the installer's pipes could not be registered",
                source,
            })?;
        let tree = ProcessTree::of(child.id());
        let stop = CancellationToken::new();
        // Both pipes into one stream: the installer's lines in the order they came.
        let out = tokio::spawn(read_live(
            child.stdout.take(),
            Arc::clone(self.live),
            Stream::Stdout,
            stop.clone(),
        ));
        let err = tokio::spawn(read_live(
            child.stderr.take(),
            Arc::clone(self.live),
            Stream::Stdout,
            stop.clone(),
        ));
        let ended = tokio::select! {
            status = child.wait() => Ended::Exited(status.ok().and_then(|s| s.code())),
            _ = tokio::time::sleep_until(self.deadline) => Ended::TimedOut,
            _ = self.cancel.cancelled() => Ended::Cancelled,
            _ = self.installs.shutdown.cancelled() => Ended::Cancelled,
        };
        tree.kill();
        if !matches!(ended, Ended::Exited(_)) {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
        }
        let grace = {
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::time::sleep(DRAIN_GRACE).await;
                stop.cancel();
            })
        };
        let _ = out.await;
        let _ = err.await;
        grace.abort();
        Ok(ended)
    }

    #[cfg(not(target_os = "linux"))]
    async fn run(
        &self,
        _sandbox: &Sandbox,
        _slot: &pyrun_sandbox::SandboxSlot,
        _cmd: &Command,
    ) -> Result<Ended, InstallError> {
        let _ = (
            self.installs,
            self.scratch,
            self.live,
            self.deadline,
            self.cancel,
        );
        Err(InstallError::Unsupported)
    }
}

/// The project's folder, held open (reached beneath the projects folder, no link on the way),
/// where its `.venv` is made, opened and, unfinished, removed: a run that swaps the project's
/// folder for a link meanwhile changes nothing of that.
struct VenvTarget {
    project: std::fs::File,
}

impl VenvTarget {
    fn open_project(projects: &Path, project: &ProjectDir) -> Result<Self, InstallError> {
        let project = match project.relative() {
            "" | "." => std::fs::File::open(projects),
            relative => super::paths::open_beneath(projects, Path::new(relative)),
        };
        match project {
            Ok(project) => Ok(Self { project }),
            Err(e) if e.raw_os_error() == Some(libc_eloop()) => Err(InstallError::VenvOutside),
            Err(e) => Err(InstallError::Venv(e)),
        }
    }

    /// Makes `.venv` when missing and opens it (never through a link); true when it was made
    /// here, or was an empty folder.
    #[cfg(target_os = "linux")]
    fn open(&self) -> Result<(std::fs::File, bool), InstallError> {
        use rustix::fs::{mkdirat, openat, Mode, OFlags};
        let made = match mkdirat(&self.project, VENV_NAME, Mode::from_raw_mode(0o755)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(e) => return Err(InstallError::Venv(e.into())),
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let venv = match openat(&self.project, VENV_NAME, flags, Mode::empty()) {
            Ok(fd) => std::fs::File::from(fd),
            Err(rustix::io::Errno::LOOP) => return Err(InstallError::VenvIsLink),
            Err(rustix::io::Errno::NOTDIR) => return Err(InstallError::VenvNotDir),
            Err(e) => return Err(InstallError::Venv(e.into())),
        };
        let empty = std::fs::read_dir(fd_path(&venv))
            .map_err(InstallError::Venv)?
            .next()
            .is_none();
        Ok((venv, made || empty))
    }

    #[cfg(not(target_os = "linux"))]
    fn open(&self) -> Result<(std::fs::File, bool), InstallError> {
        let _ = &self.project;
        Err(InstallError::Unsupported)
    }
}

/// `ELOOP`: `openat2` met a link on the way.
fn libc_eloop() -> i32 {
    #[cfg(unix)]
    return libc::ELOOP;
    #[cfg(not(unix))]
    return 40;
}

/// The path of an open file's descriptor (Linux's magic link to that very file).
fn fd_path(file: &std::fs::File) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        PathBuf::new()
    }
}

/// A venv being made: removed on drop unless it was finished, through the project's open
/// folder and only while `.venv` there is still the folder made (same device and inode).
struct UnfinishedVenv<'a> {
    target: &'a VenvTarget,
    made: Option<(u64, u64)>,
}

impl<'a> UnfinishedVenv<'a> {
    fn new(target: &'a VenvTarget, venv: &std::fs::File) -> Self {
        Self {
            target,
            made: identity(venv),
        }
    }

    fn finished(&mut self) {
        self.made = None;
    }
}

/// A file's (device, inode).
fn identity(file: &std::fs::File) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        file.metadata().ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
}

impl Drop for UnfinishedVenv<'_> {
    fn drop(&mut self) {
        let Some(made) = self.made else { return };
        #[cfg(not(unix))]
        let _ = made;
        let venv = fd_path(&self.target.project).join(VENV_NAME);
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            match std::fs::symlink_metadata(&venv) {
                Ok(m) if m.is_dir() && (m.dev(), m.ino()) == made => {}
                _ => {
                    tracing::warn!("a half-made venv was replaced meanwhile: left alone");
                    return;
                }
            }
        }
        // `remove_dir_all` removes a link put in its place, never what the link points to.
        if let Err(e) = std::fs::remove_dir_all(&venv) {
            tracing::warn!(%e, "a half-made venv was not removed");
        }
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

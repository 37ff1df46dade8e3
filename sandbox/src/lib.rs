//! pyrun-sandbox: turns a [`SandboxPolicy`] into kernel rules around every run, and starts runs
//! inside them. Knows nothing of MCP, HTTP, tokio or the command line.
//!
//! [`Sandbox::new`] probes the kernel once; [`Sandbox::slot`] prepares the lasting rules of a run
//! slot (its scratch folder, cgroups, Landlock ruleset); on Linux, [`Sandbox::spawn`] starts a
//! run in a slot through our own `clone`/`exec` child (`spawn/`), which applies the steps below
//! between clone and exec. Everything that allocates or may fail is prepared in the server
//! process; the child runs only raw syscalls. If a layer that [`Sandbox::new`] reported as active
//! cannot be applied, the child fails before `exec` and the run never starts: the sandbox fails
//! closed.
//!
//! Linux steps in the child, in this order (see `linux/mod.rs` and `spawn/`):
//! 1. join the slot's cgroups (`pids.max`, `memory.limit_in_bytes`), while still having the rights to;
//! 2. rlimits: address space, CPU seconds, file size, open files, processes, no core dumps;
//! 3. `setns` into the user + network namespaces made at start-up (`linux/namespaces.rs`; `unshare`
//!    per run where joining is refused): no capabilities outside, and no network interfaces but a
//!    downed loopback (only the user namespace with `--allow-network`);
//! 4. `setns` into the slot's mount namespace (`linux/mount.rs`): the host read-only, the projects
//!    folder at `/projects` with only the run's own project writable (`protected.rs`), the
//!    scratch at `/tmp`, protected names read-only;
//! 5. with the `pid-ns` layer, a pid namespace of its own whose pid 1 (`spawn/init.rs`) reaps
//!    orphans and forwards signals; the interpreter is pid 2;
//! 6. `PR_SET_NO_NEW_PRIVS`, then Landlock: read-only Python and system files, read-write projects
//!    folder (the view narrows it to the run's project: rulesets are per slot, not per run) and
//!    scratch, nothing else; no signals or abstract sockets out of the sandbox; no TCP;
//! 7. seccomp, last: no ptrace, mount, bpf, keyctl, io_uring, namespaces, module loading, `socket()`
//!    (any family without `--allow-network`, `AF_UNIX` always), no `setsid`/`setpgid`, no set-id
//!    mode bits, owners or xattrs, no `prlimit64` on other processes, no `CLONE_PARENT`.
//!
//! Why no process escapes the runner's kill: the child is in its own process group, which the
//! runner kills. The only ways out of a process group are `setsid` and `setpgid`, which seccomp
//! refuses, so double-forked daemons and `start_new_session=True` children stay in the group and
//! die with it; with a pid namespace, whatever is left dies with its pid 1. The per-run pids
//! cgroup bounds how many processes a run can make, also for root, for whom `RLIMIT_NPROC` is not
//! enforced.
//!
//! Other platforms: the runner builds a `std::process::Command` and hands it to
//! [`Sandbox::confine`]. Windows gets a kill-on-close Job Object per run with memory and
//! process-count limits ([`Sandbox::assign_job`]); macOS and other Unixes get rlimits (a
//! `pre_exec` hook) and the process group only.

#![allow(unsafe_code)] // the one crate that talks to the kernel directly; every block has its SAFETY

use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux::ChildSteps;
pub mod os;
#[cfg(all(unix, not(target_os = "linux")))]
mod other_unix;
mod protected;
#[cfg(target_os = "linux")]
pub mod spawn;
#[cfg(unix)]
mod unix_limits;
#[cfg(windows)]
mod windows;

pub use protected::RunScope;
#[cfg(windows)]
pub use windows::RunJob;

/// The kernel's Landlock ABI version (0 without Landlock): package installs need 4 (TCP rules).
pub fn landlock_abi() -> i64 {
    #[cfg(target_os = "linux")]
    return linux::landlock_abi();
    #[cfg(not(target_os = "linux"))]
    0
}

/// How much isolation the server insists on (`--sandbox`, env `PYRUN_SANDBOX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxMode {
    /// Refuse to start unless every layer is available on this machine.
    Strict,
    /// Apply every layer this machine supports and report which ones.
    Standard,
    /// No isolation: scripts run with the server's own rights.
    Off,
}

impl SandboxMode {
    /// Every mode, as the command line spells them.
    pub const NAMES: [&'static str; 3] = ["strict", "standard", "off"];

    pub fn name(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Standard => "standard",
            Self::Off => "off",
        }
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "strict" => Ok(Self::Strict),
            "standard" => Ok(Self::Standard),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "unknown sandbox mode '{other}' (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Per-run resource limits. A value of 0 means "no limit" for that resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Address space per process, and memory of the whole run where a memory cgroup exists.
    pub memory_bytes: u64,
    /// CPU seconds per process (keep it at least the run timeout).
    pub cpu_secs: u64,
    /// Largest file a run may write.
    pub file_size_bytes: u64,
    /// Open file descriptors per process.
    pub open_files: u64,
    /// Processes (and threads) of the whole run.
    pub processes: u64,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 2048 << 20,
            cpu_secs: 300,
            file_size_bytes: 1024 << 20,
            open_files: 1024,
            processes: 64,
        }
    }
}

/// Names inside the projects folder that runs may read but not change (Linux: a read-only bind
/// over each, wherever it lies in the part of the folder a run may write): repository metadata
/// the user's git runs (hooks, `core.fsmonitor`), environments the user's Python runs, settings
/// and workflows that tools load, bytecode Python trusts. `.env*` files and any folder holding a
/// `pyvenv.cfg` are protected too (see [`is_protected_name`]). One a run creates does not stay
/// (see [`Sandbox::created_protected`]). Clients are never served them either.
pub const PROTECTED_NAMES: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".envrc",
    ".vscode",
    ".idea",
    ".github",
    ".pre-commit-config.yaml",
    "__pycache__",
];

/// Whether an entry of the projects folder named `name` is protected by its name alone: one of
/// [`PROTECTED_NAMES`], or `.env` and its variants (`.env.local`...).
pub fn is_protected_name(name: &[u8]) -> bool {
    PROTECTED_NAMES.iter().any(|n| n.as_bytes() == name) || name.starts_with(b".env")
}

/// What of the projects folder a run may write (`--write-scope`, env `PYRUN_WRITE_SCOPE`), where
/// runs have a file view of their own (Linux with the mount-ns layer); elsewhere, all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WriteScope {
    /// Its own project only (see [`RunProject`]); the rest is read-only.
    #[default]
    Project,
    /// The whole projects folder (protected names stay read-only).
    All,
}

impl WriteScope {
    /// Every scope, as the command line spells them.
    pub const NAMES: [&'static str; 2] = ["project", "all"];
}

impl std::str::FromStr for WriteScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "project" => Ok(Self::Project),
            "all" => Ok(Self::All),
            other => Err(format!(
                "unknown write scope '{other}' (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// The project of a run: the part of the projects folder it may write under
/// [`WriteScope::Project`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RunProject {
    /// No project (inline code without one, the install's steps): it writes only its scratch.
    None,
    /// A script directly in the projects folder: the folder's own files, not its subfolders.
    Top,
    /// The top-level folder (one name, relative to the projects folder) that holds its script.
    Folder(PathBuf),
}

impl RunProject {
    /// The project of a run working in `dir` (canonical, on the host) of `projects`: the first
    /// name of `dir` below `projects`, [`RunProject::Top`] for `projects` itself,
    /// [`RunProject::None`] outside it.
    pub fn of(projects: &Path, dir: &Path) -> Self {
        match dir.strip_prefix(projects) {
            Ok(rel) => match rel.components().next() {
                Some(std::path::Component::Normal(name)) => Self::Folder(PathBuf::from(name)),
                _ => Self::Top,
            },
            Err(_) => Self::None,
        }
    }
}

/// Where a run sees the projects folder when the sandbox gives it its own file view (Linux).
pub const RUN_PROJECTS_DIR: &str = "/projects";
/// Where a run sees its scratch folder (its HOME and TMPDIR) in that view.
pub const RUN_SCRATCH_DIR: &str = "/tmp";
/// Where a run sees the server's bytecode cache in that view.
pub const RUN_PYCACHE_DIR: &str = "/pycache";
/// Where a run sees the server's support modules (its matplotlib backend) in that view.
pub const RUN_SUPPORT_DIR: &str = "/pyrun";

/// What a run may touch. System directories Python needs (`/usr`, `/lib*`, `/etc/ld.so.cache`, a few
/// devices) are added by the sandbox itself; the interpreter's own trees are the caller's to add
/// (the run layer asks the interpreter which it reads).
#[derive(Clone, Debug)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// Readable (and executable) trees: projects folder, Python prefixes and site-packages.
    pub read_paths: Vec<PathBuf>,
    /// Writable trees: the projects folder. The per-run scratch dir is added by `confine`.
    pub write_paths: Vec<PathBuf>,
    pub allow_network: bool,
    pub limits: ResourceLimits,
    /// The projects folder (canonical): shown to runs at [`RUN_PROJECTS_DIR`] in a read-only
    /// view of the host (Linux). `None`: no view; runs see host paths.
    pub projects: Option<PathBuf>,
    /// Scripts may read the projects folder but not write it (they write only their scratch).
    pub read_only_projects: bool,
    /// What of the projects folder a run may write, when it may write it at all.
    pub write_scope: WriteScope,
    /// The server's bytecode cache (canonical): read-only to runs, at [`RUN_PYCACHE_DIR`] in
    /// their view (Linux) or at its host path without one; added to the readable trees here.
    pub pycache: Option<PathBuf>,
    /// The server's support modules for runs (canonical; its matplotlib backend): read-only to
    /// runs in every mode, at [`RUN_SUPPORT_DIR`] in their view (Linux) or at its host path
    /// without one; added to the readable trees here.
    pub support: Option<PathBuf>,
    /// With `allow_network`: `Some(ports)` lets TCP connect only to these ports and denies every
    /// TCP bind (Landlock ABI 4, Linux 6.7). [`Sandbox::new`] fails when the kernel cannot
    /// enforce it, whatever the mode but off: a caller that names ports relies on them. `None`:
    /// TCP as `allow_network` says. Used by package installs (the index's port only).
    pub tcp_connect_ports: Option<Vec<u16>>,
}

impl SandboxPolicy {
    /// A policy in `mode` with nothing granted beyond the system's own trees: no extra paths, no
    /// network, default limits, no view of a projects folder, no bytecode cache. Callers add what
    /// they grant with struct update syntax.
    pub fn bare(mode: SandboxMode) -> Self {
        Self {
            mode,
            read_paths: Vec::new(),
            write_paths: Vec::new(),
            allow_network: false,
            limits: ResourceLimits::default(),
            projects: None,
            read_only_projects: false,
            write_scope: WriteScope::Project,
            pycache: None,
            support: None,
            tcp_connect_ports: None,
        }
    }
}

/// A folder an install's processes see at its host path besides their scratch (Linux: bound
/// into their view and given a Landlock rule): the project read-only, its venv writable.
#[derive(Clone, Debug)]
pub struct Grant {
    /// Where the processes name it: its host path.
    pub at: PathBuf,
    /// What is shown there when not `at` itself: the magic link of a descriptor the caller holds
    /// open (`/proc/self/fd/N`), so that a folder swapped for a link after the caller's checks
    /// changes nothing.
    pub held: Option<PathBuf>,
    pub writable: bool,
}

impl Grant {
    /// `at` itself, writable.
    pub fn writable(at: &Path) -> Self {
        Self {
            at: at.to_path_buf(),
            held: None,
            writable: true,
        }
    }

    /// The path the rules are made from: the held descriptor's link, else `at`.
    pub fn source(&self) -> &Path {
        self.held.as_deref().unwrap_or(&self.at)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "--sandbox strict: this machine lacks {missing}; run with --sandbox standard to use the layers it has"
    )]
    StrictUnavailable { missing: String },
    #[error("cannot prepare the sandbox ({what}): {source}")]
    Prepare {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the Landlock ruleset: {0}")]
    Landlock(String),
    #[error("cannot compile the seccomp filter: {0}")]
    Seccomp(String),
    #[error("the sandbox probe ended without an answer (see the server log)")]
    ProbeLost,
    #[error(
        "TCP connections cannot be limited to chosen ports on this kernel (Landlock ABI {abi}; \
         ABI 4, Linux 6.7, is needed)"
    )]
    PortRulesUnavailable { abi: i64 },
    /// The caller could not learn the trees an interpreter reads (the run layer asks it), so
    /// no policy could be made for it.
    #[error("cannot ask the interpreter {python} for its paths: {reason}")]
    PythonPaths { python: PathBuf, reason: String },
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Spawn(#[from] spawn::SpawnError),
}

impl SandboxError {
    #[cfg(any(target_os = "linux", windows))]
    fn prepare(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Prepare {
            what: what.into(),
            source,
        }
    }
}

/// The probed, precomputed sandbox. Cheap to share (`Send + Sync`); one per server.
#[derive(Debug)]
pub struct Sandbox {
    mode: SandboxMode,
    /// The server's bytecode cache (host path); `None` with the sandbox off.
    pycache: Option<PathBuf>,
    /// The server's support modules (host path), in every mode.
    support: Option<PathBuf>,
    /// What runs may write of the projects folder, and its protected names; `None` with the
    /// sandbox off (scripts are trusted) or without a projects folder.
    guard: Option<protected::ProjectGuard>,
    #[cfg(target_os = "linux")]
    imp: Option<linux::LinuxSandbox>,
    #[cfg(all(unix, not(target_os = "linux")))]
    imp: Option<other_unix::UnixSandbox>,
    #[cfg(windows)]
    imp: Option<windows::JobSandbox>,
    /// Starts runs; remembers when this kernel needs the fork-like fallback.
    #[cfg(target_os = "linux")]
    spawner: spawn::Spawner,
}

impl Sandbox {
    /// Probe the kernel once at start-up. Strict: error if any layer is missing. Off: loud warning.
    pub fn new(mut policy: SandboxPolicy) -> Result<Sandbox, SandboxError> {
        let mode = policy.mode;
        if mode == SandboxMode::Off {
            tracing::warn!(
                "SANDBOX OFF: scripts run with all the rights of this server (files, network, processes); \
                 use --sandbox standard unless every script is trusted"
            );
            return Ok(Sandbox {
                mode,
                pycache: None,
                support: policy.support,
                guard: None,
                imp: None,
                #[cfg(target_os = "linux")]
                spawner: spawn::Spawner::new(),
            });
        }
        let pycache = policy.pycache.clone();
        // Runs read the cache (read-only: it is not among the writable trees).
        policy.read_paths.extend(pycache.iter().cloned());
        let support = policy.support.clone();
        policy.read_paths.extend(support.iter().cloned());
        let (projects, read_only, scope) = (
            policy.projects.clone(),
            policy.read_only_projects,
            policy.write_scope,
        );
        #[cfg(target_os = "linux")]
        let imp = linux::LinuxSandbox::new(policy)?;
        #[cfg(all(unix, not(target_os = "linux")))]
        let imp = other_unix::UnixSandbox::new(policy)?;
        #[cfg(windows)]
        let imp = windows::JobSandbox::new(policy)?;
        #[cfg(target_os = "linux")]
        let has_view = imp.has_view();
        #[cfg(not(target_os = "linux"))]
        let has_view = false;
        // Without a view of their own, runs may write the whole projects folder (Landlock and
        // the Job Object know no project): what they create is looked for everywhere.
        let scope = if has_view { scope } else { WriteScope::All };
        let guard = projects.map(|p| protected::ProjectGuard::new(p, read_only, scope));
        Ok(Sandbox {
            mode,
            pycache,
            support,
            guard,
            imp: Some(imp),
            #[cfg(target_os = "linux")]
            spawner: spawn::Spawner::new(),
        })
    }

    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// Names of the active layers, for start-up logs, `/health` and every run's output.
    pub fn layers(&self) -> Vec<&'static str> {
        let mut layers = match &self.imp {
            Some(imp) => imp.layers(),
            None => Vec::new(),
        };
        // The runner always puts a run in its own process group and kills the group.
        if cfg!(unix) && !layers.contains(&"process-group") {
            layers.push("process-group");
        }
        layers
    }

    /// The lasting rules of a run slot whose runs write in `scratch` (their HOME and TMPDIR): made
    /// once per slot and used by each of its runs, so a run pays only for joining them.
    pub fn slot(&self, scratch: &Path) -> Result<SandboxSlot, SandboxError> {
        #[cfg(target_os = "linux")]
        let imp = match &self.imp {
            Some(imp) => Some(imp.slot(scratch)?),
            None => None,
        };
        #[cfg(not(target_os = "linux"))]
        let _ = scratch;
        Ok(SandboxSlot {
            #[cfg(target_os = "linux")]
            imp,
        })
    }

    /// Like [`Sandbox::slot`], with `grants` (existing folders) shown besides the scratch, at
    /// their host paths: a package install's project and target environment. Each such slot has
    /// its own ruleset and view.
    pub fn slot_granting(
        &self,
        scratch: &Path,
        grants: &[Grant],
    ) -> Result<SandboxSlot, SandboxError> {
        #[cfg(target_os = "linux")]
        let imp = match &self.imp {
            Some(imp) => Some(imp.slot_granting(scratch, grants)?),
            None => None,
        };
        #[cfg(not(target_os = "linux"))]
        let _ = (scratch, grants);
        Ok(SandboxSlot {
            #[cfg(target_os = "linux")]
            imp,
        })
    }

    /// True when runs see the neutral paths ([`RUN_PROJECTS_DIR`], [`RUN_SCRATCH_DIR`]) instead
    /// of the host's.
    pub fn has_view(&self) -> bool {
        #[cfg(target_os = "linux")]
        if let Some(imp) = &self.imp {
            return imp.has_view();
        }
        false
    }

    /// What a run of `project` may write, and the protected names there now (a walk through a
    /// memo of folder listings kept valid by inotify watches; see `protected.rs`). Give it to
    /// [`Sandbox::spawn_scoped`], then to [`Sandbox::created_protected`] once the run is over.
    pub fn run_scope(&self, project: &RunProject) -> RunScope {
        match &self.guard {
            Some(guard) => guard.scope(project),
            None => RunScope::nothing(),
        }
    }

    /// The protected entries that appeared in `scope`'s writable part since it was made,
    /// relative to the projects folder: what a run created that must not stay (see
    /// [`PROTECTED_NAMES`]). Empty with the sandbox off.
    pub fn created_protected(&self, scope: &RunScope) -> Vec<PathBuf> {
        match &self.guard {
            Some(guard) => guard.created(scope),
            None => Vec::new(),
        }
    }

    /// The projects folder (canonical) whose runs this sandbox confines; `None` with the
    /// sandbox off or without one.
    pub fn projects_dir(&self) -> Option<&Path> {
        self.guard.as_ref().map(|g| g.projects())
    }

    /// The project of a run working in `dir` (canonical, on the host): see [`RunProject::of`].
    pub fn project_of(&self, dir: &Path) -> RunProject {
        match &self.guard {
            Some(guard) => RunProject::of(guard.projects(), dir),
            None => RunProject::None,
        }
    }

    /// The server's bytecode cache on the host (what runs see at [`Sandbox::pycache_prefix`]);
    /// `None` when there is none or the sandbox is off.
    pub fn pycache_dir(&self) -> Option<&Path> {
        self.pycache.as_deref()
    }

    /// Where runs find the server's bytecode cache (their `PYTHONPYCACHEPREFIX`):
    /// [`RUN_PYCACHE_DIR`] in their own view, the host path without one (Landlock keeps it
    /// read-only where it exists). `None` when there is no cache or the sandbox is off.
    pub fn pycache_prefix(&self) -> Option<PathBuf> {
        let cache = self.pycache.as_ref()?;
        Some(if self.has_view() {
            PathBuf::from(RUN_PYCACHE_DIR)
        } else {
            cache.clone()
        })
    }

    /// Where runs find the server's support modules (a `PYTHONPATH` entry): [`RUN_SUPPORT_DIR`]
    /// in their own view, the host path without one. `None` when the server has none.
    pub fn support_dir(&self) -> Option<PathBuf> {
        let support = self.support.as_ref()?;
        Some(if self.has_view() {
            PathBuf::from(RUN_SUPPORT_DIR)
        } else {
            support.clone()
        })
    }

    /// A search path (`PATH`) with only the folders that exist in a run's file view: a run's
    /// world shows no host layout (a home folder's pyenv or cargo folders). Unchanged without a
    /// view.
    pub fn search_path_in_view(&self, value: &std::ffi::OsStr) -> std::ffi::OsString {
        #[cfg(target_os = "linux")]
        if let Some(imp) = &self.imp {
            if imp.shows(Path::new("/")).is_some() {
                let kept: Vec<PathBuf> = std::env::split_paths(value)
                    .filter(|dir| imp.shows(dir) == Some(true))
                    .collect();
                return std::env::join_paths(kept).unwrap_or_default();
            }
        }
        value.to_os_string()
    }

    /// Where a run sees the host path `path` (the neutral form inside the projects folder when
    /// runs have their own view; `path` itself otherwise).
    pub fn view_path(&self, path: &Path) -> PathBuf {
        #[cfg(target_os = "linux")]
        if let Some(imp) = &self.imp {
            return imp.view_path(path);
        }
        path.to_path_buf()
    }

    /// Other platforms: installs the policy on the runner's command, for a run in `slot` (made
    /// by [`Sandbox::slot`] of this sandbox). Fails closed: on error the command must not be
    /// spawned.
    #[cfg(not(target_os = "linux"))]
    pub fn confine(
        &self,
        cmd: &mut std::process::Command,
        slot: &SandboxSlot,
    ) -> Result<(), SandboxError> {
        let _ = slot;
        match &self.imp {
            Some(imp) => imp.confine(cmd),
            None => Ok(()),
        }
    }
}

#[cfg(target_os = "linux")]
impl Sandbox {
    /// Linux: starts `spec` for a run in `slot` (made by [`Sandbox::slot`] of this sandbox), in
    /// its own process group, with every active layer applied in the child before `exec`; with
    /// the sandbox off, unconfined. This is the one way the server starts a run.
    ///
    /// `script_dir` (the script's folder, canonical, on the host) decides the run's project
    /// ([`Sandbox::project_of`]): what it may write, and which protected names the slot's view
    /// holds read-only. `spec`'s paths are as the run sees them ([`Sandbox::view_path`]).
    pub fn spawn(
        &self,
        slot: &SandboxSlot,
        spec: &spawn::Spec<'_>,
        script_dir: &Path,
    ) -> Result<spawn::Child, SandboxError> {
        let scope = self.run_scope(&self.project_of(script_dir));
        self.spawn_scoped(slot, spec, &scope)
    }

    /// [`Sandbox::spawn`] for a run of `scope` ([`Sandbox::run_scope`]): the slot's view is
    /// rebuilt when it was built for another scope.
    pub fn spawn_scoped(
        &self,
        slot: &SandboxSlot,
        spec: &spawn::Spec<'_>,
        scope: &RunScope,
    ) -> Result<spawn::Child, SandboxError> {
        let steps = match (&self.imp, &slot.imp) {
            (Some(imp), Some(slot)) => Some(imp.child_steps(slot, scope)?),
            (Some(_), None) => {
                return Err(SandboxError::Landlock(
                    "a slot made with the sandbox off cannot confine a run".into(),
                ))
            }
            (None, _) => None,
        };
        let enter = || steps.as_ref().map_or(Ok(()), ChildSteps::enter);
        let run_user = || steps.as_ref().map_or(Ok(()), ChildSteps::become_run_user);
        let confine = || steps.as_ref().map_or(Ok(()), ChildSteps::confine);
        let hooks = steps.as_ref().map(|steps| spawn::Hooks {
            enter: &enter,
            run_user: &run_user,
            confine: &confine,
            pid_namespace: steps.pid_namespace(),
        });
        Ok(self.spawner.spawn(spec, hooks)?)
    }
}

/// A run slot's lasting sandbox rules (Linux: its Landlock ruleset and cgroups). Dropping it
/// removes them.
#[derive(Debug)]
pub struct SandboxSlot {
    #[cfg(target_os = "linux")]
    imp: Option<linux::LinuxSlot>,
}

impl SandboxSlot {
    /// True when nothing of an earlier run is left in the slot's cgroups: it may take a new run.
    pub fn is_idle(&self) -> bool {
        #[cfg(target_os = "linux")]
        if let Some(imp) = &self.imp {
            return imp.is_idle();
        }
        true
    }

    /// Kills whatever an earlier run left in the slot's cgroups. Blocking (a few ms at most).
    pub fn kill_leftovers(&self) {
        #[cfg(target_os = "linux")]
        if let Some(imp) = &self.imp {
            imp.kill_leftovers();
        }
    }
}

//! The probed sandbox, the crate's one entry point: [`Sandbox::new`] probes the kernel once and
//! precomputes every layer (the platform's module does the work: `linux/`, `other_unix.rs`,
//! `windows.rs`); [`Sandbox::slot`] makes a run slot's lasting rules; [`Sandbox::spawn`] (Linux)
//! and [`Sandbox::confine`] (elsewhere) start runs under them. The order of the steps a run's
//! child takes is in `lib.rs`.

use std::path::{Path, PathBuf};

use crate::error::SandboxError;
#[cfg(target_os = "linux")]
use crate::linux::{self, ChildSteps};
#[cfg(all(unix, not(target_os = "linux")))]
use crate::other_unix;
use crate::policy::{Grant, MissingLayer, RunProject, SandboxMode, SandboxPolicy, WriteScope};
use crate::policy::{RUN_PYCACHE_DIR, RUN_SUPPORT_DIR};
use crate::protected::{self, LeftBehind, RunScope};
#[cfg(target_os = "linux")]
use crate::spawn;
#[cfg(windows)]
use crate::windows::{self, RunJob};

/// The kernel's Landlock ABI version (0 without Landlock): package installs need 4 (TCP rules).
pub fn landlock_abi() -> i64 {
    #[cfg(target_os = "linux")]
    return linux::landlock_abi();
    #[cfg(not(target_os = "linux"))]
    0
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

    /// The layers runs do not get from this server that the platform has (Linux), each with
    /// why and what would bring it; also said in the log at start, one line each. Empty with
    /// the sandbox off (the operator's choice, warned about) and on other systems.
    pub fn missing_layers(&self) -> Vec<MissingLayer> {
        #[cfg(target_os = "linux")]
        if let Some(imp) = &self.imp {
            return imp.missing_layers();
        }
        Vec::new()
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

    /// The folders (names) [`Sandbox::slot`] makes in a slot's scratch for the run's view to
    /// mount the interpreter's trees under `/tmp` on: they stay, empty, while the slot lives
    /// (runs cannot reach them), so a slot's clean-up must keep them. Empty unless an
    /// interpreter lies under `/tmp`.
    pub fn scratch_mount_points(&self) -> &[std::ffi::OsString] {
        #[cfg(target_os = "linux")]
        if let Some(imp) = &self.imp {
            return imp.scratch_mount_points();
        }
        &[]
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

    /// What a run left in `scope`'s writable part since it was made, relative to the projects
    /// folder: the protected entries that were not there before it, told apart by identity
    /// (device and inode), not by path, so a protected entry replaced at its path counts as new
    /// and the user's own one moved elsewhere does not (see [`PROTECTED_NAMES`] and
    /// [`LeftBehind`]). Empty with the sandbox off.
    pub fn created_protected(&self, scope: &RunScope) -> LeftBehind {
        match &self.guard {
            Some(guard) => guard.created(scope, self.has_view()),
            None => LeftBehind::default(),
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

#[cfg(windows)]
impl Sandbox {
    /// Windows only: puts a freshly spawned run (its process handle, e.g. tokio's
    /// `Child::raw_handle()`) into a new kill-on-close Job Object with the run's limits. Keep the
    /// returned [`RunJob`] until the run ends; dropping it kills every process left in the job.
    /// On error, kill the child: it must not run outside its job. With `--sandbox off` this
    /// returns `Ok(None)`.
    pub fn assign_job(
        &self,
        process: std::os::windows::io::RawHandle,
    ) -> Result<Option<RunJob>, SandboxError> {
        match &self.imp {
            Some(imp) => imp.assign_job(process).map(Some),
            None => Ok(None),
        }
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

//! Linux sandbox: probes the kernel once, then gives each run the steps its child takes between
//! clone and exec ([`ChildSteps`], run by `spawn/`; the order is in `lib.rs`).
//!
//! [`LinuxSandbox::new`] prepares the layers once, one function each, in this order (each step
//! needs what the ones before it found):
//! 1. seccomp: the filter compiled (`seccomp.rs`, `bpf.rs`); the probe's child installs it;
//! 2. cgroups: which controllers this machine gives a run (`cgroup.rs`);
//! 3. idmap ([`run_uid_maps`]): whether runs may take a kernel uid of their own, which a root
//!    server gives only where a pids cgroup bounds a run (`idmap.rs`);
//! 4. namespaces ([`probed_namespaces`]): the shared user (+ network) namespaces, mapped for
//!    that uid, and the probe: one forked child tries to join them, make a pid namespace,
//!    restrict itself with Landlock and install the filter (`namespaces.rs`);
//! 5. Landlock ([`landlock_rules`]): the policy's trees and the system's (`landlock.rs`);
//! 6. mount ([`file_view`]): the file view showing what Landlock lets a process read, built once
//!    to prove it works (`mount.rs`, `world.rs`);
//! 7. the report ([`LayerReport`]): the layers the probe and the view proved, then the run-uid
//!    layer settled against the view ([`settle_run_uid`]), rlimits and cgroups, what this
//!    Landlock ABI adds; `strict` refuses when one is missing.

mod bpf;
mod cgroup;
mod idmap;
mod landlock;
mod mount;
mod mount_op;
mod namespaces;
mod seccomp;
mod shm;
mod world;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::SandboxError;
use crate::policy::{Grant, MissingLayer, ResourceLimits, SandboxMode, SandboxPolicy};
use crate::policy::{RUN_PROJECTS_DIR, RUN_PYCACHE_DIR, RUN_SCRATCH_DIR, RUN_SUPPORT_DIR};
use crate::protected::RunScope;
use crate::unix_limits::RlimitTable;
use cgroup::{RunCgroups, SlotCgroups};
use idmap::Idmaps;
use landlock::FsRules;
use mount::{MountPlan, ViewSpec};
use namespaces::Namespaces;
use seccomp::{SeccompFilters, Sockets};
use shm::SlotShm;

/// Landlock ABI that scopes signals and abstract UNIX sockets to the sandbox (Linux 6.12).
const LANDLOCK_SCOPED_ABI: i64 = 6;
/// Landlock ABI that governs TCP bind and connect by port (Linux 6.7).
const LANDLOCK_NET_ABI: i64 = 4;

/// The kernel's Landlock ABI version, 0 when Landlock is unavailable.
pub(super) fn landlock_abi() -> i64 {
    landlock::kernel_abi()
}

/// What the kernel let a throw-away child do, found at start-up.
#[derive(Debug, Clone, Copy)]
struct Probe {
    landlock_abi: i64,
    namespaces: bool,
    seccomp: bool,
    /// A pid namespace could be made after joining the user namespace.
    pid_namespace: bool,
}

#[derive(Debug)]
pub(super) struct LinuxSandbox {
    layers: Vec<&'static str>,
    /// The layers runs do not get, each with why and what would bring it.
    missing: Vec<MissingLayer>,
    rlimits: RlimitTable,
    fs: Option<FsRules>,
    namespaces: Option<Arc<Namespaces>>,
    seccomp: Option<Arc<SeccompFilters>>,
    cgroups: RunCgroups,
    view: Option<ViewTemplate>,
    pid_namespace: bool,
    /// Runs take a kernel uid of their own (`idmap.rs`): the `run-uid` layer.
    idmaps: Option<Arc<Idmaps>>,
}

/// What every slot's file view holds (`mount.rs`), known to work on this machine.
#[derive(Debug)]
struct ViewTemplate {
    /// `None`: folders at their host paths (an install's view).
    projects: Option<PathBuf>,
    /// The host paths a process may read anyway (Landlock's read list): its whole world.
    shown: Vec<PathBuf>,
    /// Without `projects`: the policy's writable trees, writable at their host paths.
    writable: Vec<PathBuf>,
    pycache: Option<PathBuf>,
    support: Option<PathBuf>,
    /// The interpreter's trees under `/tmp`, shown inside the scratch's mount there.
    in_scratch: Vec<PathBuf>,
    /// What each slot's scratch holds for them to be mounted on ([`scratch_mount_points`]).
    mount_points: Vec<std::ffi::OsString>,
}

impl ViewTemplate {
    /// The plan of a view for a slot whose runs write in `scratch`, see `shm` at `/dev/shm` and
    /// are granted `grants`, for runs of `scope`.
    fn plan(
        &self,
        scratch: &Path,
        shm: Option<&Path>,
        grants: &[Grant],
        scope: &RunScope,
    ) -> std::io::Result<MountPlan> {
        MountPlan::new(&ViewSpec {
            projects: self.projects.as_deref(),
            scratch,
            shown: &self.shown,
            shm,
            grants,
            host_writable: &self.writable,
            pycache: self.pycache.as_deref(),
            support: self.support.as_deref(),
            writable: &scope.writable,
            read_only: &scope.read_only_binds(),
            in_scratch: &self.in_scratch,
        })
    }
}

/// A run slot's own rules, made once and used by each of its runs: the Landlock ruleset that
/// includes the slot's scratch dir, and the slot's cgroups.
#[derive(Debug)]
pub(super) struct LinuxSlot(Arc<SlotRules>);

#[derive(Debug)]
struct SlotRules {
    ruleset: Option<OwnedFd>,
    cgroups: SlotCgroups,
    scratch: PathBuf,
    /// The folder its runs see at `/dev/shm` (with a view).
    shm: Option<SlotShm>,
    /// Folders shown at their host paths besides (an install's project and venv).
    grants: Vec<Grant>,
    /// The slot's mount namespace and the scope (project, protected names) it was built for.
    view: Mutex<Option<(RunScope, Arc<OwnedFd>)>>,
}

impl LinuxSlot {
    pub(super) fn is_idle(&self) -> bool {
        self.0.cgroups.is_empty() && self.0.shm.as_ref().is_none_or(SlotShm::is_empty)
    }

    pub(super) fn kill_leftovers(&self) {
        self.0.cgroups.kill_leftovers();
        if let Some(shm) = &self.0.shm {
            shm.empty();
        }
    }
}

impl LinuxSandbox {
    /// Probes this machine once and prepares every layer it has, in the order of the module
    /// header; a layer missing under `strict`, or a port rule this kernel cannot enforce, is an
    /// error.
    pub(super) fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        // The probe tries the strict filter; runs may get the one with `AF_UNIX` once the layers
        // that make it safe are known (below).
        let mut filters = SeccompFilters::compile(Sockets {
            network: policy.allow_network,
            unix: false,
        })?;
        let flags = namespace_flags(policy.allow_network);
        let cgroups = RunCgroups::probe(&policy.limits);
        let root = rustix::process::geteuid().is_root();
        let idmaps = run_uid_maps(&policy, &cgroups, root);
        let (namespaces, probe) = probed_namespaces(flags, idmaps.as_ref(), &filters);
        let fs = landlock_rules(&policy);
        let view = file_view(&policy, namespaces.as_deref(), &fs, idmaps.as_ref())?;

        let mut report = LayerReport::default();
        let pid_namespace = report.probed(&probe, policy.allow_network, view.is_some());
        let (idmaps, namespaces) =
            settle_run_uid(idmaps, view.is_some(), namespaces, flags, &mut report);
        report.own_uid(
            idmaps.is_some(),
            view.is_some(),
            root,
            &policy.limits,
            &cgroups,
        );
        report.limits(&policy.limits, &cgroups, root);
        report.landlock_abi(probe.landlock_abi, policy.tcp_connect_ports.is_some())?;
        let (layers, missing) = report.settle(policy.mode)?;
        // Installs (no projects folder) never need UNIX sockets and keep them closed.
        if policy.projects.is_some() && crate::policy::unix_sockets_given(&layers) {
            filters = SeccompFilters::compile(Sockets {
                network: policy.allow_network,
                unix: true,
            })?;
        } else if policy.projects.is_some() && probe.seccomp {
            tracing::info!(
                "sandbox: runs may not open UNIX sockets (multiprocessing's forkserver and \
                 Manager fail): that needs their own file view (mount-ns) and Landlock's scopes \
                 (Linux 6.12+)"
            );
        }

        Ok(Self {
            layers,
            missing,
            rlimits: RlimitTable::new(&policy.limits, idmaps.is_none()),
            fs: (probe.landlock_abi > 0).then_some(fs),
            namespaces,
            seccomp: probe.seccomp.then(|| Arc::new(filters)),
            cgroups,
            view,
            pid_namespace,
            idmaps,
        })
    }

    /// The folders each slot's scratch holds for the view to mount the interpreter's trees
    /// under `/tmp` on: a slot's clean-up keeps them (empty; runs cannot reach them).
    pub(super) fn scratch_mount_points(&self) -> &[std::ffi::OsString] {
        self.view.as_ref().map_or(&[], |t| &t.mount_points[..])
    }

    /// True when runs see the neutral paths (a view with the projects folder at `/projects`).
    pub(super) fn has_view(&self) -> bool {
        self.view.as_ref().is_some_and(|t| t.projects.is_some())
    }

    pub(super) fn layers(&self) -> Vec<&'static str> {
        self.layers.clone()
    }

    pub(super) fn missing_layers(&self) -> Vec<MissingLayer> {
        self.missing.clone()
    }

    /// The rules of a slot whose runs write in `scratch`: its Landlock ruleset and its cgroups.
    pub(super) fn slot(&self, scratch: &Path) -> Result<LinuxSlot, SandboxError> {
        self.slot_granting(scratch, &[])
    }

    /// A slot whose processes also see `grants` (a package install's project and venv).
    pub(super) fn slot_granting(
        &self,
        scratch: &Path,
        grants: &[Grant],
    ) -> Result<LinuxSlot, SandboxError> {
        if let Some(template) = &self.view {
            make_mount_points(scratch, &template.mount_points)
                .map_err(|e| SandboxError::prepare("the slot's mount points", e))?;
        }
        let shm = match &self.view {
            Some(_) => Some(
                SlotShm::new(scratch)
                    .map_err(|e| SandboxError::prepare("the slot's /dev/shm", e))?,
            ),
            None => None,
        };
        // Landlock rules hold on inodes: the folder's rule holds at `/dev/shm` in the view.
        let landlock_grants: Vec<Grant> = grants
            .iter()
            .cloned()
            .chain(shm.iter().map(|shm| Grant::writable(shm.path())))
            .collect();
        let ruleset = match &self.fs {
            Some(fs) => match fs.ruleset_fd_granting(scratch, &landlock_grants)? {
                Some(fd) => Some(fd),
                None => return Err(SandboxError::Landlock("kernel refused the ruleset".into())),
            },
            None => None,
        };
        Ok(LinuxSlot(Arc::new(SlotRules {
            ruleset,
            cgroups: self.cgroups.make_slot()?,
            scratch: scratch.to_path_buf(),
            shm,
            grants: grants.to_vec(),
            view: Mutex::new(None),
        })))
    }

    /// The steps of a run in `slot` of `scope`; (re)builds the slot's view when it was built
    /// for another scope (another project, or protected names that came or went).
    pub(super) fn child_steps(
        &self,
        slot: &LinuxSlot,
        scope: &RunScope,
    ) -> Result<ChildSteps, SandboxError> {
        let mount_ns = match &self.view {
            Some(template) => Some(self.slot_view(template, &slot.0, scope)?),
            None => None,
        };
        Ok(ChildSteps {
            slot: Arc::clone(&slot.0),
            rlimits: self.rlimits.clone(),
            namespaces: self.namespaces.clone(),
            mount_ns,
            seccomp: self.seccomp.clone(),
            pid_namespace: self.pid_namespace,
            run_user: self.idmaps.is_some(),
        })
    }

    fn slot_view(
        &self,
        template: &ViewTemplate,
        slot: &SlotRules,
        scope: &RunScope,
    ) -> Result<Arc<OwnedFd>, SandboxError> {
        let mut view = slot
            .view
            .lock()
            .map_err(|_| SandboxError::Landlock("a slot's view lock was poisoned".into()))?;
        if let Some((held, ns)) = view.as_ref() {
            if held == scope {
                return Ok(Arc::clone(ns));
            }
        }
        let user = self
            .namespaces
            .as_deref()
            .and_then(Namespaces::user)
            .ok_or_else(|| SandboxError::Landlock("no shared user namespace".into()))?;
        let ns = template
            .plan(
                &slot.scratch,
                slot.shm.as_ref().map(SlotShm::path),
                &slot.grants,
                scope,
            )
            .and_then(|plan| plan.build(user, self.idmaps.as_deref()))
            .map(Arc::new)
            .map_err(|e| SandboxError::prepare("the run's file view", e))?;
        *view = Some((scope.clone(), Arc::clone(&ns)));
        Ok(ns)
    }
}

impl LinuxSandbox {
    /// Whether `path` (a host path) exists in the processes' file view: `None` without a view.
    pub(super) fn shows(&self, path: &Path) -> Option<bool> {
        let template = self.view.as_ref()?;
        Some(template.shown.iter().any(|tree| path.starts_with(tree)))
    }

    /// Where a run sees the host path `path`: under [`RUN_PROJECTS_DIR`]
    /// when it lies in the projects folder and runs have a view; as it is otherwise.
    pub(super) fn view_path(&self, path: &Path) -> PathBuf {
        let projects = self.view.as_ref().and_then(|t| t.projects.as_deref());
        match projects.map(|projects| path.strip_prefix(projects)) {
            Some(Ok(rel)) => Path::new(RUN_PROJECTS_DIR).join(rel),
            _ => path.to_path_buf(),
        }
    }
}

/// The namespaces each run enters: a user namespace (no capabilities outside it) and, without
/// `--allow-network`, a network namespace with only a downed loopback.
fn namespace_flags(allow_network: bool) -> libc::c_int {
    if allow_network {
        libc::CLONE_NEWUSER
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNET
    }
}

/// The idmap step (`idmap.rs`): whether runs may take a kernel uid of their own, and the
/// idmapped clones of the folders they must own then. A run's own uid is counted by
/// RLIMIT_NPROC across every run: a root server gives one only where a pids cgroup bounds a
/// run's processes.
fn run_uid_maps(policy: &SandboxPolicy, cgroups: &RunCgroups, root: bool) -> Option<Idmaps> {
    let pids_cgroup = policy.limits.processes == 0
        || cgroups.controllers().any(|c| c == cgroup::Controller::Pids);
    if root && !pids_cgroup {
        tracing::warn!(
            "sandbox: runs keep the server's kernel uid 0: no pids cgroup to bound their \
             processes under a uid of their own"
        );
        return None;
    }
    let owned: Vec<&Path> = [policy.pycache.as_deref(), policy.support.as_deref()]
        .into_iter()
        .flatten()
        .chain(policy.write_paths.iter().map(PathBuf::as_path))
        .filter(|folder| folder.is_dir())
        .collect();
    Idmaps::probe(policy.projects.as_deref(), &owned)
}

/// The namespaces step (`namespaces.rs`), with the probe of every kernel layer: namespaces made
/// once and joined by every run (cheap), instead of made per run (~0.6 ms for a network
/// namespace); per-run unshare when the kernel refuses to let a child join them. `None` when
/// the kernel allows neither.
fn probed_namespaces(
    flags: libc::c_int,
    idmaps: Option<&Idmaps>,
    filters: &SeccompFilters,
) -> (Option<Arc<Namespaces>>, Probe) {
    let mut namespaces = Namespaces::shared(flags, idmaps.map(|_| idmap::RUN_KUID)).map(Arc::new);
    let mut probe = probe(namespaces.as_deref(), flags, filters);
    if !probe.namespaces && namespaces.is_some() {
        tracing::debug!("sandbox: joining shared namespaces failed; unsharing per run");
        namespaces = None;
        probe = probe_unshared(flags, filters);
    }
    let namespaces = probe
        .namespaces
        .then(|| namespaces.unwrap_or_else(|| Arc::new(Namespaces::unshared(flags))));
    (namespaces, probe)
}

/// The Landlock step (`landlock.rs`): the policy's trees plus the system's, and the TCP port
/// rule when the caller names ports.
fn landlock_rules(policy: &SandboxPolicy) -> FsRules {
    FsRules::new(
        &policy.read_paths,
        &policy.write_paths,
        policy.allow_network,
    )
    .connecting_only_to(policy.tcp_connect_ports.clone())
}

/// The mount step (`mount.rs`): every process gets a view, a run's (the projects at
/// `/projects`) or, without a projects folder, an install's (its folders at their host paths),
/// showing exactly what `fs` lets it read; built once here to prove this machine can. `None`
/// without a user namespace, or when this machine cannot build it; an error when an
/// interpreter's tree lies where a run's view shows a folder of the server
/// ([`interpreter_places`]).
fn file_view(
    policy: &SandboxPolicy,
    namespaces: Option<&Namespaces>,
    fs: &FsRules,
    idmaps: Option<&Idmaps>,
) -> Result<Option<ViewTemplate>, SandboxError> {
    let Some(user) = namespaces.and_then(Namespaces::user) else {
        return Ok(None);
    };
    let in_scratch = match policy.projects {
        Some(_) => interpreter_places(policy)?,
        None => Vec::new(),
    };
    let template = ViewTemplate {
        projects: policy.projects.clone(),
        shown: fs.shown(),
        writable: match policy.projects {
            Some(_) => Vec::new(),
            None => policy.write_paths.clone(),
        },
        pycache: policy.pycache.clone(),
        support: policy.support.clone(),
        mount_points: scratch_mount_points(&in_scratch),
        in_scratch,
    };
    Ok(probe_view(&template, user, idmaps).then_some(template))
}

/// The `run-uid` layer, settled once the view is known: a run under the shared namespace's map
/// owns only what its view attaches idmapped, so without a view runs join namespaces mapped as
/// before (made again without the map).
fn settle_run_uid(
    idmaps: Option<Idmaps>,
    has_view: bool,
    mut namespaces: Option<Arc<Namespaces>>,
    flags: libc::c_int,
    report: &mut LayerReport,
) -> (Option<Arc<Idmaps>>, Option<Arc<Namespaces>>) {
    let idmaps = match (idmaps, has_view) {
        (Some(idmaps), true) => {
            report.active.push("run-uid");
            Some(Arc::new(idmaps))
        }
        (Some(_), false) => {
            // Possible here but not given: `strict` refuses (where the filesystem cannot
            // idmap, only the probe's warning is said).
            report.missing.push(MissingLayer {
                layer: "run-uid",
                why: "runs of this root server keep kernel uid 0 (they have no view to own \
                      their folders through)",
                hint: "bring back the mount-ns layer (see its line)",
            });
            if namespaces.as_deref().and_then(Namespaces::user).is_some() {
                namespaces = Some(Arc::new(
                    Namespaces::shared(flags, None).unwrap_or_else(|| Namespaces::unshared(flags)),
                ));
            }
            None
        }
        (None, _) => None,
    };
    (idmaps, namespaces)
}

/// The layers a sandbox has, in the order runs report them, and those it lacks, each with what
/// its absence leaves open and what would bring it.
#[derive(Debug, Default)]
struct LayerReport {
    active: Vec<&'static str>,
    /// Missing on this machine: `strict` refuses to start without them.
    missing: Vec<MissingLayer>,
    /// Not given by a server of this user (only root can): `strict` serves without them.
    not_given: Vec<MissingLayer>,
}

/// What brings back a layer that needs unprivileged user namespaces.
const USERNS_HINT: &str = "allow unprivileged user namespaces (sysctl user.max_user_namespaces \
                           above 0; on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0)";
/// What brings back a layer only a root server gives.
const ROOT_HINT: &str = "run the server as root: it gives each run a uid and cgroups of its own";

impl LayerReport {
    fn note(&mut self, ok: bool, layer: &'static str, why: &'static str, hint: &'static str) {
        if ok {
            self.active.push(layer);
        } else {
            self.missing.push(MissingLayer { layer, why, hint });
        }
    }

    /// The layers the probe's child tried, and the view. Returns whether runs get a pid
    /// namespace (the kernel allows one and the spawner supports it).
    fn probed(&mut self, probe: &Probe, allow_network: bool, has_view: bool) -> bool {
        self.note(
            probe.landlock_abi > 0,
            "landlock",
            "files outside the allowed trees are readable and writable",
            "a Linux kernel with Landlock enabled (5.13 or later, `landlock` in its lsm= list)",
        );
        self.note(
            probe.seccomp,
            "seccomp",
            "dangerous syscalls (ptrace, mount, setsid...) are allowed",
            "a kernel with seccomp filters (CONFIG_SECCOMP_FILTER)",
        );
        let ns_layer = if allow_network {
            "user-ns"
        } else {
            "user-netns"
        };
        self.note(
            probe.namespaces,
            ns_layer,
            "the network and the server's capabilities are reachable",
            USERNS_HINT,
        );
        let pid_namespace = probe.pid_namespace && crate::spawn::PID_NAMESPACE_SUPPORTED;
        self.note(
            pid_namespace,
            "pid-ns",
            "scripts can see, signal and limit other processes of the server's user",
            USERNS_HINT,
        );
        self.note(
            has_view,
            "mount-ns",
            "files outside the projects folder can have their mode, owner and times changed, \
             every host path can be looked up, and runs see host paths",
            "the log line before this one says why the view could not be built; it needs \
             user namespaces and mount_setattr (Linux 5.12 or later)",
        );
        pid_namespace
    }

    /// The layers only a root server gives, when this one does not give them: a uid of the
    /// runs' own (a root server without one has said why already), and the cgroups.
    fn own_uid(
        &mut self,
        run_uid: bool,
        has_view: bool,
        root: bool,
        limits: &ResourceLimits,
        cgroups: &RunCgroups,
    ) {
        if run_uid || !has_view {
            return;
        }
        let has = |c| cgroups.controllers().any(|have| have == c);
        if root {
            // Without a pids cgroup, `cgroup-pids` is missing and says so.
            if limits.processes == 0 || has(cgroup::Controller::Pids) {
                self.not_given.push(MissingLayer {
                    layer: "run-uid",
                    why: "runs of this root server keep kernel uid 0",
                    hint: "the warning before this line says why: an account file naming the \
                           runs' uid, or a filesystem that cannot be idmapped",
                });
            }
            return;
        }
        self.not_given.push(MissingLayer {
            layer: "run-uid",
            why: "runs keep the server's uid: they own what the server's user owns outside \
                  their view",
            hint: ROOT_HINT,
        });
        if limits.processes > 0 && !has(cgroup::Controller::Pids) {
            self.not_given.push(MissingLayer {
                layer: "cgroup-pids",
                why: "the process count is bounded for the server's user as a whole \
                      (RLIMIT_NPROC), not per run",
                hint: ROOT_HINT,
            });
        }
        if limits.memory_bytes > 0 && !has(cgroup::Controller::Memory) {
            self.not_given.push(MissingLayer {
                layer: "cgroup-memory",
                why: "memory is bounded per process (RLIMIT_AS), not for a run as a whole",
                hint: ROOT_HINT,
            });
        }
    }

    /// The limits: rlimits and the process group always, the cgroup controllers this machine
    /// has; a root server's process count is bounded by a pids cgroup only.
    fn limits(&mut self, limits: &ResourceLimits, cgroups: &RunCgroups, root: bool) {
        self.active.push("rlimits");
        self.active.push("process-group");
        let controllers: Vec<_> = cgroups.controllers().collect();
        for c in &controllers {
            self.active.push(c.layer());
        }
        let pids_bounded =
            limits.processes == 0 || !root || controllers.contains(&cgroup::Controller::Pids);
        if !pids_bounded {
            self.missing.push(MissingLayer {
                layer: "cgroup-pids",
                why: "the process count is not limited (RLIMIT_NPROC does not apply to root)",
                hint: "mount the cgroup v1 pids controller, writable by the server",
            });
        }
    }

    /// What this Landlock ABI adds: TCP port rules (required when the caller names ports: it
    /// fails closed, whatever the mode) and scopes for signals and abstract sockets (the
    /// `landlock-scopes` layer, which UNIX sockets need: [`crate::policy::unix_sockets_given`]).
    fn landlock_abi(&mut self, abi: i64, tcp_ports: bool) -> Result<(), SandboxError> {
        if tcp_ports {
            if abi < LANDLOCK_NET_ABI {
                return Err(SandboxError::PortRulesUnavailable { abi });
            }
            self.active.push("landlock-tcp-ports");
        }
        // Without Landlock at all, the `landlock` layer is reported missing already.
        if abi >= LANDLOCK_SCOPED_ABI {
            self.active.push("landlock-scopes");
        } else if abi > 0 {
            self.missing.push(MissingLayer {
                layer: "landlock-scopes",
                why: "scripts may signal processes of the same user, and may not open UNIX \
                      sockets (Landlock ABI < 6)",
                hint: "Linux 6.12 or later",
            });
        }
        Ok(())
    }

    /// `strict` refuses a sandbox with a layer missing on this machine; otherwise each layer
    /// runs do not get is warned about, one line each. The active layers, in order, and those
    /// runs do not get.
    fn settle(
        self,
        mode: SandboxMode,
    ) -> Result<(Vec<&'static str>, Vec<MissingLayer>), SandboxError> {
        if mode == SandboxMode::Strict && !self.missing.is_empty() {
            let missing = self
                .missing
                .iter()
                .map(|m| format!("{} ({})", m.layer, m.why))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(SandboxError::StrictUnavailable { missing });
        }
        let missing: Vec<MissingLayer> = self.missing.into_iter().chain(self.not_given).collect();
        for m in &missing {
            tracing::warn!(
                layer = m.layer,
                "sandbox: runs lack the {} layer: {}; hint: {}",
                m.layer,
                m.why,
                m.hint
            );
        }
        Ok((self.active, missing))
    }
}

/// Where the interpreter's trees lie against the view's own places: the trees under the
/// scratch's place ([`RUN_SCRATCH_DIR`]), which the view shows read-only at their own paths
/// inside the scratch's mount (`mount.rs`), or an error for a tree under a place that shows
/// one of the server's folders (the projects at `/projects`, the bytecode cache at `/pycache`,
/// the support modules at `/pyrun`) or that is `/tmp` itself: runs could not reach it there.
/// The projects folder, the cache and the support modules are bound wherever they lie, and so
/// is what lies in them.
fn interpreter_places(policy: &SandboxPolicy) -> Result<Vec<PathBuf>, SandboxError> {
    let bound = [
        policy.projects.as_deref(),
        policy.pycache.as_deref(),
        policy.support.as_deref(),
    ];
    let mut in_scratch = Vec::new();
    let places = [
        (RUN_PROJECTS_DIR, "the projects folder"),
        (RUN_PYCACHE_DIR, "the server's bytecode cache"),
        (RUN_SUPPORT_DIR, "the server's support modules"),
        (RUN_SCRATCH_DIR, "its own scratch folder"),
    ];
    for tree in &policy.read_paths {
        if bound.iter().flatten().any(|b| tree.starts_with(b)) {
            continue;
        }
        let Some(&(under, instead)) = places.iter().find(|(dir, _)| tree.starts_with(dir)) else {
            continue;
        };
        if under == RUN_SCRATCH_DIR && tree != Path::new(RUN_SCRATCH_DIR) {
            in_scratch.push(tree.clone());
        } else {
            return Err(SandboxError::InterpreterHidden {
                tree: tree.clone(),
                under,
                instead,
            });
        }
    }
    Ok(in_scratch)
}

/// The names of the folders a slot's scratch holds for the view to mount on: the first part
/// of each tree under `/tmp` (`mount.rs`). Made with the slot, kept by its clean-up.
fn scratch_mount_points(in_scratch: &[PathBuf]) -> Vec<std::ffi::OsString> {
    let mut names: Vec<std::ffi::OsString> = in_scratch
        .iter()
        .filter_map(|tree| tree.strip_prefix(RUN_SCRATCH_DIR).ok())
        .filter_map(|rel| rel.components().next())
        .map(|first| first.as_os_str().to_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Makes `names` in `scratch` (empty folders, owner-only; an existing one is kept).
fn make_mount_points(scratch: &Path, names: &[std::ffi::OsString]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    for name in names {
        match std::fs::DirBuilder::new()
            .mode(0o700)
            .create(scratch.join(name))
        {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Builds a view once at start-up in a temporary scratch: true when this machine can.
fn probe_view(template: &ViewTemplate, user: &OwnedFd, idmaps: Option<&Idmaps>) -> bool {
    let built = tempfile::tempdir().and_then(|scratch| {
        make_mount_points(scratch.path(), &template.mount_points)?;
        let shm = SlotShm::new(scratch.path())?;
        template
            .plan(scratch.path(), Some(shm.path()), &[], &RunScope::nothing())
            .and_then(|plan| plan.build(user, idmaps))
    });
    match built {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!("sandbox: runs get no file view of their own: {e}");
            false
        }
    }
}

/// Everything the child does between fork (or `clone`) and exec, prepared in the server.
#[derive(Debug)]
pub struct ChildSteps {
    slot: Arc<SlotRules>,
    rlimits: RlimitTable,
    namespaces: Option<Arc<Namespaces>>,
    mount_ns: Option<Arc<OwnedFd>>,
    seccomp: Option<Arc<SeccompFilters>>,
    pid_namespace: bool,
    /// Give up the namespace's root for the run's own uid ([`ChildSteps::become_run_user`]).
    run_user: bool,
}

impl ChildSteps {
    /// Whether the spawner must put the run in a pid namespace of its own, with a pid 1 in front.
    pub fn pid_namespace(&self) -> bool {
        self.pid_namespace
    }

    /// Runs in the child, first: cgroups, rlimits, namespaces, the slot's view (which moves the
    /// child to the view's root: the spawner changes to the run's folder after these steps).
    /// Any error aborts the spawn, so no run starts half-confined. Async-signal-safe: raw
    /// syscalls only, no allocation.
    pub fn enter(&self) -> std::io::Result<()> {
        self.slot.cgroups.join()?;
        self.rlimits.apply()?;
        if let Some(namespaces) = &self.namespaces {
            namespaces.enter()?;
        }
        if let Some(mount_ns) = &self.mount_ns {
            // SAFETY: setns takes an fd we own (open for the whole call) and a flag.
            if unsafe { libc::setns(mount_ns.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Runs after [`ChildSteps::enter`] and after the spawner made the pid namespace (the last
    /// step that needs a capability), before pid 1 or the interpreter starts: the run takes
    /// its own kernel uid (`idmap.rs`) when the server gives it one. Same rules as `enter`.
    pub fn become_run_user(&self) -> std::io::Result<()> {
        if self.run_user {
            namespaces::become_run_user()?;
        }
        Ok(())
    }

    /// Runs in the process that execs the interpreter, last: no new privileges, Landlock,
    /// seccomp. Same rules as [`ChildSteps::enter`].
    pub fn confine(&self) -> std::io::Result<()> {
        no_new_privs()?;
        if let Some(ruleset) = &self.slot.ruleset {
            landlock::restrict_self(ruleset)?;
        }
        if let Some(filters) = &self.seccomp {
            filters.install()?;
        }
        Ok(())
    }
}

fn no_new_privs() -> std::io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Tries each layer in a forked child, entering `shared` namespaces (or unsharing `flags` when
/// there are none), and reports which ones the kernel accepted.
fn probe(shared: Option<&Namespaces>, flags: libc::c_int, filters: &SeccompFilters) -> Probe {
    match shared {
        Some(ns) => probe_with(|| ns.enter().is_ok(), filters),
        None => probe_unshared(flags, filters),
    }
}

fn probe_unshared(flags: libc::c_int, filters: &SeccompFilters) -> Probe {
    let ns = Namespaces::unshared(flags);
    probe_with(|| ns.enter().is_ok(), filters)
}

/// `enter_namespaces` runs in the forked child: raw syscalls only.
fn probe_with(enter_namespaces: impl Fn() -> bool, filters: &SeccompFilters) -> Probe {
    let landlock_abi = landlock::kernel_abi();
    // A ruleset denying nothing useful, only to prove landlock_restrict_self works here.
    let ruleset = if landlock_abi > 0 {
        FsRules::new(&[], &[], false)
            .ruleset_fd(Path::new("/"))
            .ok()
            .flatten()
    } else {
        None
    };
    const NS_OK: i32 = 1;
    const LANDLOCK_OK: i32 = 2;
    const SECCOMP_OK: i32 = 4;
    const PID_NS_OK: i32 = 8;
    // SAFETY: fork in a possibly multi-threaded process: the child below makes only raw
    // syscalls on data prepared before the fork, then `_exit`s without running destructors.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut ok = 0;
        if enter_namespaces() {
            ok |= NS_OK;
            // SAFETY: unshare only changes this (forked, about to exit) process's namespaces.
            if unsafe { libc::unshare(libc::CLONE_NEWPID) } == 0 {
                ok |= PID_NS_OK;
            }
        }
        let nnp = no_new_privs().is_ok();
        if let (true, Some(fd)) = (nnp, &ruleset) {
            if landlock::restrict_self(fd).is_ok() {
                ok |= LANDLOCK_OK;
            }
        }
        if nnp && filters.install().is_ok() {
            ok |= SECCOMP_OK;
        }
        // SAFETY: leaves the forked child at once, as required after fork in a threaded process.
        unsafe { libc::_exit(ok) };
    }
    let ok = namespaces::wait_exit_code(pid).unwrap_or_else(|| {
        tracing::warn!("sandbox: probe child failed; treating every layer as unavailable");
        0
    });
    Probe {
        landlock_abi: if ok & LANDLOCK_OK != 0 {
            landlock_abi
        } else {
            0
        },
        namespaces: ok & NS_OK != 0,
        seccomp: ok & SECCOMP_OK != 0,
        pid_namespace: ok & PID_NS_OK != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(read: &[&str]) -> SandboxPolicy {
        SandboxPolicy {
            read_paths: read.iter().map(PathBuf::from).collect(),
            projects: Some(PathBuf::from("/srv/projects")),
            pycache: Some(PathBuf::from("/var/cache/pyrun")),
            ..SandboxPolicy::bare(SandboxMode::Standard)
        }
    }

    #[test]
    fn trees_under_tmp_are_shown_in_the_scratch_and_each_first_part_gets_a_mount_point() {
        let shown = interpreter_places(&policy(&["/usr", "/tmp/a/venv", "/tmp/a/b", "/tmp/c"]));
        let shown = shown.unwrap();
        assert_eq!(
            shown,
            ["/tmp/a/venv", "/tmp/a/b", "/tmp/c"].map(PathBuf::from)
        );
        assert_eq!(scratch_mount_points(&shown), ["a", "c"]);
        // The server's own folders are bound wherever they lie, with what is in them.
        let policy = SandboxPolicy {
            projects: Some(PathBuf::from("/tmp/p")),
            ..policy(&["/tmp/p/.venv"])
        };
        assert_eq!(interpreter_places(&policy).unwrap(), Vec::<PathBuf>::new());
    }

    #[test]
    fn a_tree_where_runs_see_a_folder_of_the_server_is_refused_with_the_place() {
        for (tree, under) in [
            ("/projects/venv", "/projects"),
            ("/pycache/x", "/pycache"),
            ("/pyrun/bin", "/pyrun"),
            ("/tmp", "/tmp"),
        ] {
            let err = interpreter_places(&policy(&["/usr", tree])).unwrap_err();
            let said = err.to_string();
            assert!(
                matches!(err, SandboxError::InterpreterHidden { under: u, .. } if u == under),
                "{said}"
            );
            assert!(said.contains(tree) && said.contains("hint: "), "{said}");
        }
    }
}

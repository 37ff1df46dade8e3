//! Linux sandbox: probes the kernel once, then confines each run in a `pre_exec` hook (steps in `sandbox/mod.rs`).

mod bpf;
mod cgroup;
mod landlock;
mod seccomp;

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;

use super::unix_limits::RlimitTable;
use super::{SandboxError, SandboxMode, SandboxPolicy};
use cgroup::RunCgroups;
use landlock::FsRules;
use seccomp::SeccompFilters;

/// Landlock ABI that scopes signals and abstract UNIX sockets to the sandbox (Linux 6.12).
const LANDLOCK_SCOPED_ABI: i64 = 6;

/// What the kernel let a throw-away child do, found at start-up.
#[derive(Debug, Clone, Copy)]
struct Probe {
    landlock_abi: i64,
    namespaces: bool,
    seccomp: bool,
}

#[derive(Debug)]
pub(super) struct LinuxSandbox {
    layers: Vec<&'static str>,
    rlimits: RlimitTable,
    fs: Option<FsRules>,
    namespaces: libc::c_int,
    seccomp: Option<Arc<SeccompFilters>>,
    cgroups: RunCgroups,
}

impl LinuxSandbox {
    pub(super) fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        let filters = SeccompFilters::compile(policy.allow_network)?;
        let namespaces = if policy.allow_network {
            libc::CLONE_NEWUSER
        } else {
            libc::CLONE_NEWUSER | libc::CLONE_NEWNET
        };
        let probe = probe(namespaces, &filters);
        let cgroups = RunCgroups::probe(&policy.limits);
        let root = rustix::process::geteuid().is_root();

        let mut layers = Vec::new();
        let mut missing = Vec::new();
        let mut note = |ok: bool, layer: &'static str, why: &'static str| {
            if ok {
                layers.push(layer);
            } else {
                missing.push((layer, why));
            }
        };
        note(
            probe.landlock_abi > 0,
            "landlock",
            "files outside the allowed trees are readable and writable",
        );
        note(
            probe.seccomp,
            "seccomp",
            "dangerous syscalls (ptrace, mount, setsid...) are allowed",
        );
        let ns_layer = if policy.allow_network {
            "user-ns"
        } else {
            "user-netns"
        };
        note(
            probe.namespaces,
            ns_layer,
            "the network and the server's capabilities are reachable",
        );
        layers.push("rlimits");
        layers.push("process-group");
        let cgroup_controllers: Vec<_> = cgroups.controllers().collect();
        for c in &cgroup_controllers {
            layers.push(c.layer());
        }
        let pids_bounded = policy.limits.processes == 0
            || !root
            || cgroup_controllers.contains(&cgroup::Controller::Pids);
        if !pids_bounded {
            missing.push((
                "cgroup-pids",
                "the process count is not limited (RLIMIT_NPROC does not apply to root)",
            ));
        }
        let unscoped = probe.landlock_abi > 0 && probe.landlock_abi < LANDLOCK_SCOPED_ABI;
        if unscoped {
            missing.push((
                "landlock-scopes",
                "scripts may signal processes of the same user (Landlock ABI < 6)",
            ));
        }

        if policy.mode == SandboxMode::Strict && !missing.is_empty() {
            let missing = missing
                .iter()
                .map(|(layer, why)| format!("{layer} ({why})"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(SandboxError::StrictUnavailable { missing });
        }
        for (layer, why) in &missing {
            tracing::warn!(layer, "sandbox layer unavailable on this machine: {why}");
        }

        Ok(Self {
            layers,
            rlimits: RlimitTable::new(&policy.limits),
            fs: (probe.landlock_abi > 0).then(|| {
                FsRules::new(
                    &policy.read_paths,
                    &policy.write_paths,
                    policy.allow_network,
                )
            }),
            namespaces: if probe.namespaces { namespaces } else { 0 },
            seccomp: probe.seccomp.then(|| Arc::new(filters)),
            cgroups,
        })
    }

    pub(super) fn layers(&self) -> Vec<&'static str> {
        self.layers.clone()
    }

    pub(super) fn confine(
        &self,
        cmd: &mut std::process::Command,
        scratch: &Path,
    ) -> Result<(), SandboxError> {
        let ruleset = match &self.fs {
            Some(fs) => match fs.ruleset_fd(scratch)? {
                Some(fd) => Some(fd),
                None => return Err(SandboxError::Landlock("kernel refused the ruleset".into())),
            },
            None => None,
        };
        let steps = ChildSteps {
            cgroups: self.cgroups.prepare_run()?,
            rlimits: self.rlimits.clone(),
            namespaces: self.namespaces,
            ruleset,
            seccomp: self.seccomp.clone(),
        };
        // SAFETY: the hook runs in the forked child before exec; `ChildSteps::apply` only makes
        // raw syscalls on data prepared here (no allocation, no locks), so it is async-signal-safe
        // even though the server is multi-threaded.
        unsafe {
            cmd.pre_exec(move || steps.apply());
        }
        Ok(())
    }
}

/// Everything the child does between fork and exec, prepared in the server.
struct ChildSteps {
    cgroups: cgroup::Joiner,
    rlimits: RlimitTable,
    namespaces: libc::c_int,
    ruleset: Option<OwnedFd>,
    seccomp: Option<Arc<SeccompFilters>>,
}

impl ChildSteps {
    /// Runs in the child: any error aborts the spawn, so no run starts half-confined.
    fn apply(&self) -> std::io::Result<()> {
        self.cgroups.join()?;
        self.rlimits.apply()?;
        if self.namespaces != 0 {
            unshare(self.namespaces)?;
        }
        no_new_privs()?;
        if let Some(ruleset) = &self.ruleset {
            landlock::restrict_self(ruleset)?;
        }
        if let Some(filters) = &self.seccomp {
            filters.install()?;
        }
        Ok(())
    }
}

fn unshare(flags: libc::c_int) -> std::io::Result<()> {
    // SAFETY: unshare only changes the calling process's namespaces; no memory is passed.
    if unsafe { libc::unshare(flags) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
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

/// Tries each layer in a forked child and reports which ones the kernel accepted.
fn probe(namespaces: libc::c_int, filters: &SeccompFilters) -> Probe {
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
    // SAFETY: fork in a possibly multi-threaded process: the child below makes only raw
    // syscalls on data prepared before the fork, then `_exit`s without running destructors.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut ok = 0;
        if unshare(namespaces).is_ok() {
            ok |= NS_OK;
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
    let mut status = 0;
    let waited = pid > 0 && {
        // SAFETY: waits for the child forked above; `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        rc == pid && libc::WIFEXITED(status)
    };
    let ok = if waited { libc::WEXITSTATUS(status) } else { 0 };
    if !waited {
        tracing::warn!("sandbox: probe child failed; treating every layer as unavailable");
    }
    Probe {
        landlock_abi: if ok & LANDLOCK_OK != 0 {
            landlock_abi
        } else {
            0
        },
        namespaces: ok & NS_OK != 0,
        seccomp: ok & SECCOMP_OK != 0,
    }
}

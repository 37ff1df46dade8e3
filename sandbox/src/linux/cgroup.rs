//! Per-run cgroups (v1 `pids` and `memory`): bound a run's process count and total memory.
//!
//! At start-up the server creates `pyrun-mcp-<pid>-<n>-<nanos>` under its own cgroup in each
//! hierarchy it can write to. Each run slot (see the server's `run/slots.rs`) gets `slot-<n>` below it, with
//! `pids.max` / `memory.limit_in_bytes` set, once; every run of the slot joins it by writing `0`
//! to a `tasks` fd opened when the slot was made. Reusing the cgroups spares each run two `mkdir`s,
//! their limit writes and the `rmdir`s (most of the sandbox's cost per run when they were made per
//! run). A slot's cgroups are removed with the slot, after any process still inside is killed.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::SandboxError;
use crate::policy::ResourceLimits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Controller {
    Pids,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }

    pub(super) fn layer(self) -> &'static str {
        match self {
            Controller::Pids => "cgroup-pids",
            Controller::Memory => "cgroup-memory",
        }
    }

    /// The limit file and value for a run, or `None` when that limit is off.
    fn limit(self, limits: &ResourceLimits) -> Option<(&'static str, u64)> {
        match self {
            Controller::Pids => (limits.processes > 0).then_some(("pids.max", limits.processes)),
            Controller::Memory => {
                (limits.memory_bytes > 0).then_some(("memory.limit_in_bytes", limits.memory_bytes))
            }
        }
    }
}

/// The server's own cgroup in one hierarchy, under which run cgroups are made.
#[derive(Debug)]
struct Hierarchy {
    controller: Controller,
    base: PathBuf,
}

#[derive(Debug)]
pub(super) struct RunCgroups {
    hierarchies: Vec<Hierarchy>,
    limits: ResourceLimits,
    next: AtomicU64,
}

/// One slot's cgroups, with their `tasks` files open; removed on drop (processes inside killed).
#[derive(Debug)]
pub(super) struct SlotCgroups {
    joined: Vec<(PathBuf, File)>,
}

impl SlotCgroups {
    /// Moves the calling process into the slot's cgroups. Async-signal-safe: one write per cgroup.
    pub(super) fn join(&self) -> std::io::Result<()> {
        for (_, file) in &self.joined {
            // SAFETY: writes one byte from a static buffer to an fd owned by `file`.
            let n = unsafe { libc::write(file.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if n != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// True when no process is left in any of the slot's cgroups.
    pub(super) fn is_empty(&self) -> bool {
        self.joined.iter().all(|(dir, _)| {
            fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|t| t.trim().is_empty())
        })
    }

    /// SIGKILLs whatever is left in the slot's cgroups (blocking: waits a little for them to go).
    pub(super) fn kill_leftovers(&self) {
        for (dir, _) in &self.joined {
            kill_all(dir);
        }
    }
}

impl Drop for SlotCgroups {
    fn drop(&mut self) {
        for (dir, file) in std::mem::take(&mut self.joined) {
            drop(file);
            kill_all(&dir);
            if let Err(e) = fs::remove_dir(&dir) {
                tracing::debug!(dir = %dir.display(), %e, "sandbox: slot cgroup not removed");
            }
        }
    }
}

impl RunCgroups {
    /// Sets up the server's cgroup in every wanted hierarchy it can write to; proves each works by
    /// making and removing one slot cgroup with its limit.
    pub(super) fn probe(limits: &ResourceLimits) -> Self {
        let mut hierarchies = Vec::new();
        for controller in [Controller::Pids, Controller::Memory] {
            if controller.limit(limits).is_none() {
                continue;
            }
            match make_base(controller, limits) {
                Ok(base) => hierarchies.push(Hierarchy { controller, base }),
                Err(reason) => tracing::debug!(
                    controller = controller.name(),
                    %reason,
                    "sandbox: no per-run cgroup"
                ),
            }
        }
        Self {
            hierarchies,
            limits: limits.clone(),
            next: AtomicU64::new(0),
        }
    }

    pub(super) fn controllers(&self) -> impl Iterator<Item = Controller> + '_ {
        self.hierarchies.iter().map(|h| h.controller)
    }

    /// Makes one slot's cgroups and opens their `tasks` files for its runs to join.
    pub(super) fn make_slot(&self) -> Result<SlotCgroups, SandboxError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut slot = SlotCgroups { joined: Vec::new() };
        for h in &self.hierarchies {
            let dir = h.base.join(format!("slot-{n}"));
            // On error, `slot` drops and removes the cgroups made so far.
            let tasks = make_run_cgroup(&dir, h.controller, &self.limits)
                .map_err(|e| SandboxError::prepare(format!("cgroup {}", dir.display()), e))?;
            slot.joined.push((dir, tasks));
        }
        Ok(slot)
    }
}

impl Drop for RunCgroups {
    fn drop(&mut self) {
        // Slots still alive keep their cgroups: the base is removed only once it is empty, and a
        // base left behind is swept by the next server (its pid is then dead).
        for h in &self.hierarchies {
            let _ = fs::remove_dir(&h.base);
        }
    }
}

/// Tells apart the sandboxes of one process (tests make many).
static INSTANCES: AtomicU64 = AtomicU64::new(0);

fn make_base(controller: Controller, limits: &ResourceLimits) -> Result<PathBuf, String> {
    let instance = INSTANCES.fetch_add(1, Ordering::Relaxed);
    let mount = mount_point(controller.name()).ok_or("hierarchy not mounted (cgroup v1)")?;
    let own = own_cgroup(controller.name()).ok_or("own cgroup not found in /proc/self/cgroup")?;
    let parent = mount.join(own.trim_start_matches('/'));
    sweep_stale(&parent);
    // The start time makes the name unique even when a dead server's pid comes back.
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let base = parent.join(format!(
        "pyrun-mcp-{}-{}-{started}",
        std::process::id(),
        instance
    ));
    fs::create_dir(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let trial = base.join("probe");
    let result = make_run_cgroup(&trial, controller, limits).map(drop);
    let _ = fs::remove_dir(&trial);
    match result {
        Ok(()) => Ok(base),
        Err(e) => {
            let _ = fs::remove_dir(&base);
            Err(format!("{}: {e}", trial.display()))
        }
    }
}

fn make_run_cgroup(
    dir: &Path,
    controller: Controller,
    limits: &ResourceLimits,
) -> std::io::Result<File> {
    fs::create_dir(dir)?;
    if let Some((file, value)) = controller.limit(limits) {
        fs::write(dir.join(file), value.to_string())?;
        if controller == Controller::Memory {
            // Swap would let a run exceed its memory; absent when swap accounting is off.
            let _ = fs::write(dir.join("memory.memsw.limit_in_bytes"), value.to_string());
        }
    }
    // `tasks`, not `cgroup.procs`: moving only the calling thread (the whole child, which is
    // single-threaded after fork) spares the kernel a threadgroup lock and an RCU grace period
    // (~6 ms per hierarchy measured here).
    OpenOptions::new().write(true).open(dir.join("tasks"))
}

/// Removes the cgroups left by servers that died without cleaning up (SIGKILL, power loss): their
/// name carries the pid, and a pid no longer running owns nothing. Busy or foreign ones stay.
fn sweep_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("pyrun-mcp-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let base = entry.path();
        if let Ok(runs) = fs::read_dir(&base) {
            for run in runs.flatten().filter(|r| r.path().is_dir()) {
                kill_all(&run.path());
                let _ = fs::remove_dir(run.path());
            }
        }
        let _ = fs::remove_dir(&base);
    }
}

/// SIGKILL every process listed in a cgroup, a few rounds in case one was forking.
fn kill_all(dir: &Path) {
    for _ in 0..10 {
        let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) else {
            return;
        };
        let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Where the v1 hierarchy holding `controller` is mounted (from /proc/self/mountinfo).
fn mount_point(controller: &str) -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split(' ');
        let (fstype, _source, options) = (right.next()?, right.next()?, right.next()?);
        let has = fstype == "cgroup" && options.split(',').any(|o| o == controller);
        has.then(|| left.split(' ').nth(4).map(PathBuf::from))?
    })
}

/// This process's cgroup path in the v1 hierarchy holding `controller` (from /proc/self/cgroup).
fn own_cgroup(controller: &str) -> Option<String> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_files_follow_the_limits() {
        let limits = ResourceLimits {
            processes: 32,
            memory_bytes: 0,
            ..ResourceLimits::default()
        };
        assert_eq!(Controller::Pids.limit(&limits), Some(("pids.max", 32)));
        assert_eq!(Controller::Memory.limit(&limits), None);
    }

    #[test]
    fn cgroups_of_dead_servers_are_swept_and_names_never_collide() {
        let (Some(mount), Some(own)) = (mount_point("pids"), own_cgroup("pids")) else {
            eprintln!("skipped: no cgroup v1 pids hierarchy on this machine");
            return;
        };
        let parent = mount.join(own.trim_start_matches('/'));
        // No pid reaches this value (pid_max is at most 2^22), so its server is surely dead.
        let stale = parent.join("pyrun-mcp-999999999-0-0");
        if fs::create_dir_all(stale.join("run-1")).is_err() {
            eprintln!("skipped: cannot create cgroups under {}", parent.display());
            return;
        }
        let limits = ResourceLimits::default();
        let first = make_base(Controller::Pids, &limits).unwrap();
        let second = make_base(Controller::Pids, &limits).unwrap();
        assert!(!stale.exists(), "stale cgroup was not swept");
        assert_ne!(first, second);
        make_run_cgroup(&first.join("run-1"), Controller::Pids, &limits).unwrap();
        for base in [first, second] {
            let _ = fs::remove_dir(base.join("run-1"));
            fs::remove_dir(&base).unwrap();
        }
    }
}

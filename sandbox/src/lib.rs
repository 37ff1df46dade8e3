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
//!    scratch, nothing else; no signals or abstract sockets out of the sandbox; no TCP; path
//!    sockets made in the scratch only;
//! 7. seccomp, last: no ptrace, mount, bpf, keyctl, io_uring, namespaces, module loading, `socket()`
//!    (any family without `--allow-network`; `AF_UNIX` unless the run has its view and Landlock's
//!    scopes, [`unix_sockets_given`]), no `setsid`/`setpgid`, no set-id
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

// The ground floor first: `policy` (and `error`, over `spawn`'s error) import nothing above
// them; the platforms' layers build on those; `sandbox` puts it together. This file only
// declares and re-exports: no module imports from it.
mod beneath;
mod error;
#[cfg(target_os = "linux")]
mod linux;
pub mod os;
#[cfg(all(unix, not(target_os = "linux")))]
mod other_unix;
mod policy;
mod protected;
mod sandbox;
#[cfg(target_os = "linux")]
pub mod spawn;
#[cfg(unix)]
mod unix_limits;
#[cfg(windows)]
mod windows;

#[cfg(all(unix, not(target_os = "linux")))]
pub use beneath::entry_id;
pub use beneath::EntryId;
#[cfg(target_os = "linux")]
pub use beneath::{entry_id_at, give_back, open_beneath};
pub use error::SandboxError;
pub use policy::{
    is_protected_name, unix_sockets_given, Grant, MissingLayer, ResourceLimits, RunProject,
    SandboxMode, SandboxPolicy, WriteScope, PROTECTED_NAMES, RUN_PROJECTS_DIR, RUN_PYCACHE_DIR,
    RUN_SCRATCH_DIR, RUN_SUPPORT_DIR,
};
pub use protected::{Left, LeftBehind, Moved, RunScope, Why};
pub use sandbox::{landlock_abi, Sandbox, SandboxSlot};
#[cfg(windows)]
pub use windows::RunJob;

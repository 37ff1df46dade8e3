//! Warm runs: a run starts in an interpreter that was started ahead of it, in the run's own
//! sandbox, and has already imported what the runs of its kind import.
//!
//! The design is pre-started spares. After a run of a kind (`key::WarmKey`: environment,
//! working folder, caller), one interpreter is started for the next run of that kind exactly as
//! a run would be — its own slot, pid and IPC namespaces, `/tmp`, cgroup, Landlock and seccomp,
//! the run's environment and working folder — running the server's driver
//! (`python/_pyrun_warm.py`). The driver imports the preload set (`learned`), freezes the
//! collector's view of it, says READY and waits for one job: the script and its arguments. It
//! runs that script as `python SCRIPT` would, and exits; the run's end is a cold run's end (the
//! same process tree killed, the same slot checks). A spare is used once: it never sees two
//! runs, nor any caller's code before the run it serves. A run with no spare ready is started
//! through the driver at once (nothing preloaded), so that what it imports is learned too.
//!
//! When a spare starts is `pace`'s and the pool's: after a run of its kind, once no foreground
//! run has been in flight for a moment, and only for a kind whose calls come slower than its
//! spare gets ready; a run waits for a starting spare only while that beats its cold start. So
//! a spare's start never shares the CPU with a run that waits for it (calls back to back or
//! concurrent start cold, as with `--warm off`).
//!
//! Why not a forked zygote: a fork would share the parent's pid namespace, `/tmp`, IPC
//! namespace and process group with its siblings unless the zygote kept the rights to make new
//! ones (`CAP_SYS_ADMIN` in its user namespace, a looser seccomp filter) while it runs preload
//! code. Spares keep every layer exactly; they hide the start-up instead of saving its CPU, and a
//! burst of runs beyond the spares starts cold.
//!
//! Residual differences from a cold run are listed in `docs/runs.md` ("Warm runs").

#[cfg(target_os = "linux")]
pub(crate) mod hold;
#[cfg(target_os = "linux")]
mod key;
#[cfg(target_os = "linux")]
mod learned;
// Elsewhere the runner meets a pool that is always off, so that its code is one for every
// platform.
#[cfg(not(target_os = "linux"))]
mod off;
#[cfg(target_os = "linux")]
mod pace;
#[cfg(target_os = "linux")]
mod pool;

use std::time::Duration;

#[cfg(target_os = "linux")]
pub(crate) use key::{Place, WarmKey};
#[cfg(not(target_os = "linux"))]
pub(crate) use off::{Arrival, Place, Spare, Warm, WarmKey};
#[cfg(target_os = "linux")]
pub(crate) use pool::{await_ready, job_frame, Arrival, Spare, Warm};

/// The driver's file name in the server's support folder.
pub const WARM_DRIVER: &str = "_pyrun_warm.py";
#[cfg(target_os = "linux")]
/// What the driver writes on stdout once its preload is done, before it reads its job.
pub(crate) const READY: &[u8] = b"\x00pyrun-warm-ready\n";
#[cfg(target_os = "linux")]
/// The file in the run's scratch the driver lists the run's imported modules in, at exit.
pub(crate) const REPORT_NAME: &str = ".pyrun-warm-imports";

#[cfg(target_os = "linux")]
/// Room the driver's command line keeps for the run's (`ps` shows the script and its arguments,
/// as for a cold start; the driver writes them over its own argv area).
const CMDLINE_ROOM: usize = 4096;

#[cfg(target_os = "linux")]
/// The driver's argument: the preload names, then spaces that make room for the run's command
/// line.
pub(crate) fn driver_arg(preload: &str) -> String {
    let mut arg = String::with_capacity(preload.len() + CMDLINE_ROOM);
    arg.push_str(preload);
    arg.extend(std::iter::repeat_n(' ', CMDLINE_ROOM));
    arg
}

/// The operator's settings for warm runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmSettings {
    /// Off: every run starts cold (the only mode outside Linux).
    pub enabled: bool,
    /// Spares alive at most (each holds an interpreter with its preload: tens of MB with numpy).
    pub max: usize,
    /// A spare unused this long is stopped.
    pub idle: Duration,
    /// Modules every spare imports besides the defaults and what runs taught it.
    pub preload: Vec<String>,
}

impl Default for WarmSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            max: 4,
            idle: Duration::from_secs(600),
            preload: Vec::new(),
        }
    }
}

/// Whether warm runs can work on this platform (they need the Linux run path).
pub const SUPPORTED: bool = cfg!(target_os = "linux");

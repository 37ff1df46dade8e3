//! A ready spare held still: from its READY until a run takes it, every process of the spare is
//! stopped (`SIGSTOP`), so that what its start-up left running — a thread or a process a venv's
//! `.pth` or a preloaded module started — gets no CPU outside a call.
//!
//! How: one `SIGSTOP` to the spare's process group. The kernel delivers it to every member at
//! once (a member forking at that moment passes it on to its child), a stop cannot be caught or
//! ignored, and no member can leave the group (seccomp refuses `setsid` and `setpgid`). With a pid
//! namespace the group's leader is the run's pid 1, which must keep watching the server's
//! lifeline (a server killed while its spares wait must still take them with it), so pid 1 alone
//! is continued at once; it forwards no `SIGCONT`. Then the stop is checked: every thread of every
//! process below pid 1 (or of the interpreter, without a pid namespace) in a stopped state,
//! within `SETTLE`, the group signalled again between looks. A spare that does not settle is not
//! kept. Resuming is one `SIGCONT` to the group, as a run takes the spare.
//!
//! What could undo it from inside: only a member that is not stopped yet (a stopped thread runs
//! nothing), sending `SIGCONT` to one that is. Other runs cannot name the spare's processes (each
//! run has its own pid namespace). The check after the stop, and the pool's look at every held
//! spare once a second (`still_held`), catch a spare that woke anyway; it is then stopped for good
//! (killed). Without a pid namespace (the sandbox off), a process that left the interpreter's
//! tree (a double fork) is stopped with the group but not looked at again.
//!
//! Why not the cgroup v1 freezer (root servers have one cgroup per slot): a frozen task does not
//! die of `SIGKILL` until it is thawed (seen on this kernel: it sits in `D`), so a spare dropped,
//! reaped or left by a dead server would stay, and pid 1, frozen with its run, could not see the
//! lifeline hang up. A stopped process dies of `SIGKILL` as it is.

use std::io;
use std::time::Duration;

use rustix::process::{kill_process, kill_process_group, Pid, Signal};

use super::super::launch::Spawned;

/// How long the stop may take to reach every thread (a thread reaches it when it next leaves
/// the kernel: at once, unless it waits for the disk or a busy machine schedules it late).
const SETTLE: Duration = Duration::from_secs(2);
/// The pause between two looks while the stop settles.
const LOOK_EVERY: Duration = Duration::from_millis(2);
/// How long the stop is first looked at finely, and how often then.
const FINE_FOR: Duration = Duration::from_millis(3);
const FINE_EVERY: Duration = Duration::from_micros(20);

/// Stops the spare `child` and waits until every thread of it is stopped; an error when it did
/// not settle within [`SETTLE`] (the caller drops the spare) or is gone.
pub(crate) async fn stop(child: &mut Spawned) -> io::Result<()> {
    let began = std::time::Instant::now();
    loop {
        let group = group_of(child)?;
        let init = is_pid_one(group);
        kill_process_group(group, Signal::STOP)?;
        if init {
            // Pid 1 watches the lifeline; it forwards no SIGCONT to the interpreter.
            kill_process(group, Signal::CONT)?;
        }
        // Fine looks first, on a blocking thread: a thread waiting in the kernel (an idle
        // session driver in `read`) stops as soon as it is next scheduled, tens of microseconds
        // on an idle machine, and a session pays this wait after every exec; the runtime's
        // timer (a millisecond at best) would cost it 2-4 ms.
        let top = group.as_raw_nonzero().get();
        let fine = tokio::task::spawn_blocking(move || {
            let until = std::time::Instant::now() + FINE_FOR;
            loop {
                if held_below(top, init) {
                    return true;
                }
                if std::time::Instant::now() > until {
                    return false;
                }
                std::thread::sleep(FINE_EVERY);
            }
        })
        .await
        .unwrap_or(false);
        if fine {
            return Ok(());
        }
        tokio::time::sleep(LOOK_EVERY).await;
        if still_held(child) {
            return Ok(());
        }
        if began.elapsed() > SETTLE {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
    }
}

/// Continues every process of the spare (a run takes it).
pub(crate) fn resume(child: &mut Spawned) -> io::Result<()> {
    kill_process_group(group_of(child)?, Signal::CONT)?;
    Ok(())
}

/// Whether every thread of the spare is stopped (or dead), pid 1 apart.
pub(super) fn still_held(child: &mut Spawned) -> bool {
    let Ok(group) = group_of(child) else {
        return false;
    };
    held_below(group.as_raw_nonzero().get(), is_pid_one(group))
}

/// Whether every thread of the processes of the group led by `top` is stopped (or dead); `top`
/// itself apart when it is pid 1 (`init`).
fn held_below(top: i32, init: bool) -> bool {
    let held = if init { Vec::new() } else { vec![top] };
    held.into_iter()
        .chain(descendants(top))
        .all(all_threads_stopped)
}

/// The spare's process group: its pid, while it is alive and so not reaped (a reaped pid could
/// name another process by now).
fn group_of(child: &mut Spawned) -> io::Result<Pid> {
    if child.has_exited() {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    child
        .id()
        .and_then(|id| Pid::from_raw(id as i32))
        .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

/// Whether `pid` is pid 1 of a pid namespace of its own (its `NSpid` ends in 1).
fn is_pid_one(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{}/status", pid.as_raw_nonzero()))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .map(|ids| {
                    ids.split_whitespace().count() > 1 && ids.split_whitespace().last() == Some("1")
                })
        })
        .unwrap_or(false)
}

/// Every process below `pid` (children of all its threads, recursively).
fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut stack = vec![pid];
    while let Some(parent) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                stack.push(child);
            }
        }
    }
    found
}

/// Whether every thread of `pid` is stopped, a zombie or gone.
fn all_threads_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| {
            // The state follows the parenthesised name (which may itself hold `)`).
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            matches!(state.chars().next(), Some('T' | 't' | 'Z' | 'X') | None)
        })
    })
}

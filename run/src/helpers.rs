//! The server's own helper processes — the interpreter's start-up questions, the bytecode
//! fill, an install's look at its interpreter — started through [`output`] so that [`close`]
//! can kill each one still starting or running and wait until it is reaped before the server
//! exits. Without it, a helper started on a background thread outlived a session that ended
//! within a second (and under Wine hung for good, holding the server's output pipes).
//!
//! Process-wide, as the processes are. Steps of [`output`]: refuse once closing; count the
//! spawn as starting (so [`close`] waits for a spawn in progress); register the child's kill
//! handle; read its pipes; wait for its exit without reaping it (Unix: `waitid(WNOWAIT)`), so
//! that a pid named in the registry is never another process's; unregister; reap.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::process::{Child, Command, Output};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct State {
    closing: bool,
    /// Spawns in progress (not yet registered).
    starting: usize,
    running: BTreeMap<u64, KillHandle>,
    next_id: u64,
}

/// The helpers of one process ([`REGISTRY`]; tests make their own).
struct Registry {
    state: Mutex<State>,
    /// Notified whenever `starting` or `running` shrinks.
    changed: Condvar,
}

static REGISTRY: Registry = Registry::new();

/// `cmd.output()` for a helper: its stdout and stderr captured (stdin as `cmd` says), the
/// process killed by [`close`] if it is still running then. Fails at once after [`close`].
pub fn output(cmd: &mut Command) -> io::Result<Output> {
    REGISTRY.output(cmd)
}

/// Kills every helper still running, refuses new ones, and waits up to `grace` until each
/// spawn in progress has returned and each helper is reaped. Returns how many it killed.
pub fn close(grace: Duration) -> usize {
    REGISTRY.close(grace)
}

/// Whether [`close`] has been called: a helper that failed now was most likely killed by it.
pub fn closing() -> bool {
    REGISTRY.lock().closing
}

impl Registry {
    const fn new() -> Self {
        Self {
            state: Mutex::new(State {
                closing: false,
                starting: 0,
                running: BTreeMap::new(),
                next_id: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn output(&self, cmd: &mut Command) -> io::Result<Output> {
        {
            let mut state = self.lock();
            if state.closing {
                return Err(io::Error::other("the server is shutting down"));
            }
            state.starting += 1;
        }
        let spawned = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn();
        let (mut child, id) = {
            let mut state = self.lock();
            state.starting -= 1;
            self.changed.notify_all();
            let mut child = spawned?;
            let handle = match KillHandle::of(&child) {
                Ok(handle) => handle,
                Err(e) => {
                    // Not killable by `close`: not run at all.
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e);
                }
            };
            if state.closing {
                handle.kill();
            }
            let id = state.next_id;
            state.next_id += 1;
            state.running.insert(id, handle);
            (child, id)
        };
        let read = read_both(&mut child);
        let exited = wait_unreaped(&mut child);
        self.lock().running.remove(&id);
        self.changed.notify_all();
        let status = child.wait();
        exited?;
        let (stdout, stderr) = read?;
        Ok(Output {
            status: status?,
            stdout,
            stderr,
        })
    }

    fn close(&self, grace: Duration) -> usize {
        let deadline = Instant::now() + grace;
        let mut state = self.lock();
        state.closing = true;
        let killed = state.running.len() + state.starting;
        for handle in state.running.values() {
            handle.kill();
        }
        // A spawn in progress registers its child killed already (`closing`).
        while state.starting > 0 || !state.running.is_empty() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        killed
    }
}

/// Both pipes to their end: stderr on a thread of its own, so that neither fills up and blocks
/// the child.
fn read_both(child: &mut Child) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut stdout = Vec::new();
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            pipe.read_to_end(&mut buf).map(|_| buf)
        })
    });
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_end(&mut stdout)?;
    }
    let stderr = match stderr {
        Some(reader) => reader
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the stderr reader panicked")))?,
        None => Vec::new(),
    };
    Ok((stdout, stderr))
}

/// What [`close`] keeps of each running helper: enough to kill it, valid while registered
/// (Unix: the child is not reaped before it is unregistered, so its pid stays its own;
/// Windows: a process handle of the registry's own, so it names that process however long it
/// is kept). The kill itself is the sandbox crate's (`pyrun_sandbox::os`), where the `unsafe`
/// of the Windows call lives.
#[derive(Debug)]
struct KillHandle {
    #[cfg(unix)]
    pid: u32,
    #[cfg(windows)]
    process: std::os::windows::io::OwnedHandle,
}

impl KillHandle {
    fn of(child: &Child) -> io::Result<Self> {
        #[cfg(unix)]
        let handle = Self { pid: child.id() };
        #[cfg(windows)]
        let handle = {
            use std::os::windows::io::AsHandle;
            Self {
                process: child.as_handle().try_clone_to_owned()?,
            }
        };
        Ok(handle)
    }

    fn kill(&self) {
        #[cfg(unix)]
        if let Some(pid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        #[cfg(windows)]
        {
            use std::os::windows::io::AsHandle;
            let _ = pyrun_sandbox::os::terminate_process(self.process.as_handle());
        }
    }
}

/// Waits until `child` has exited, leaving it unreaped on Unix (its pid cannot be reused
/// while the registry names it).
fn wait_unreaped(child: &mut Child) -> io::Result<()> {
    #[cfg(unix)]
    {
        use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
        let pid = i32::try_from(child.id())
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| io::Error::other("a child without a pid"))?;
        loop {
            match waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            ) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => return Ok(()),
            }
        }
    }
    #[cfg(not(unix))]
    child.wait().map(drop)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn close_kills_a_running_helper_waits_for_its_reaping_and_refuses_new_ones() {
        static HELPERS: Registry = Registry::new();
        let quick = HELPERS
            .output(Command::new("sh").args(["-c", "echo out; echo err >&2"]))
            .expect("a helper that ends by itself");
        assert_eq!(quick.stdout, b"out\n");
        assert_eq!(quick.stderr, b"err\n");
        assert!(quick.status.success());

        let slow = std::thread::spawn(|| HELPERS.output(Command::new("sleep").arg("30")));
        let started = Instant::now();
        while HELPERS.lock().running.is_empty() {
            assert!(started.elapsed() < Duration::from_secs(10), "never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(HELPERS.close(Duration::from_secs(10)), 1);
        assert!(
            HELPERS.lock().running.is_empty(),
            "close returned before the reaping"
        );
        let killed = slow.join().unwrap().expect("killed, not failed");
        assert!(!killed.status.success());
        assert!(started.elapsed() < Duration::from_secs(10), "it slept on");
        assert!(HELPERS.output(&mut Command::new("true")).is_err());
    }
}

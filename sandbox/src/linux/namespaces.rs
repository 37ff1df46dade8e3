//! A run's namespaces: a user namespace (no capabilities outside it) and, unless the network is
//! allowed, a network namespace with nothing but a downed loopback.
//!
//! Making a network namespace costs the kernel ~0.6 ms, per run and on the critical path. So the
//! server makes the pair once, in a throw-away child whose namespaces it keeps open by fd, and
//! every run joins them with `setns` (microseconds). Runs then share one empty network
//! namespace: still no interface but a loopback no run can bring up (its capabilities end at
//! `execve`, its uid being unmapped), and the abstract UNIX sockets it would share are closed
//! between runs by Landlock's scopes. When joining is refused, each run unshares its own.
//!
//! What must not be shared between runs is made per run, in the run's first child, after it
//! joined the user namespace ([`PER_RUN`]): an IPC namespace (the host's SysV segments, message
//! queues and semaphores and its POSIX message queues do not exist for a run, and what a run
//! makes dies with it), a UTS namespace and a cgroup namespace (rooted at the run's own cgroup).
//! Each costs the kernel ~0.01-0.03 ms; the pid namespace comes later, in `spawn/`.
//!
//! The shared user namespace also caps the inotify instances and watches of all runs together
//! at a quarter of the uid's host-wide budget (`/proc/sys/user/max_inotify_*`, written from
//! inside it; the kernel charges every level of nested user namespaces): without it, one run
//! holding 127 instances made `inotify_init1` fail for every host process of the server's user.
//!
//! The shared user namespace maps one id, [`RUN_UID`], to the server's own uid and gid: a run
//! looks like `nobody` from inside, as with no map at all, but the namespace can own files (the
//! tmpfs root of a slot's view, `mount.rs`). A run then still has the server's kernel uid; what
//! keeps it from the server's files is Landlock and the read-only view, not the id. A root
//! server that can idmap its folders maps [`RUN_UID`] to a kernel uid of the runs' own instead
//! (`idmap.rs`), and each run takes that id ([`become_run_user`]) once it needs no capability.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

#[derive(Debug)]
pub(super) enum Namespaces {
    /// Made once at start-up; joined by each run.
    Shared { user: OwnedFd, net: Option<OwnedFd> },
    /// Made anew by each run with `unshare(flags)`.
    Unshared(libc::c_int),
}

/// The namespaces every run makes anew, whether it joins the shared ones or unshares its own.
pub(super) const PER_RUN: libc::c_int =
    libc::CLONE_NEWIPC | libc::CLONE_NEWUTS | libc::CLONE_NEWCGROUP;

impl Namespaces {
    /// Namespaces for `flags` (`CLONE_NEWUSER`, optionally `| CLONE_NEWNET`), made by a child that
    /// stops itself until their fds are open here, then is killed. `None` when the kernel refuses.
    ///
    /// With `run_kuid` (a root server giving runs their own uid, `idmap.rs`), [`RUN_UID`] maps
    /// to that kernel uid and gid instead of the server's, and root to root, so that the
    /// server's steps in the namespace keep working until the run gives its ids up.
    pub(super) fn shared(flags: libc::c_int, run_kuid: Option<u32>) -> Option<Self> {
        let caps = InotifyCaps::of_host();
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: fork in a possibly multi-threaded process: the child makes only raw syscalls,
        // then `_exit`s without running destructors.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            die_with_parent(parent);
            // SAFETY: raw syscalls only; SIGSTOP holds the child (and its namespaces) until the
            // server has opened them and kills it.
            unsafe {
                if unshare(flags).is_err() {
                    libc::_exit(1);
                }
                if flags & libc::CLONE_NEWUSER != 0 {
                    caps.write();
                }
                libc::kill(libc::getpid(), libc::SIGSTOP);
                libc::_exit(0);
            }
        }
        if pid < 0 {
            return None;
        }
        let stopped = wait_status(pid, libc::WUNTRACED).is_some_and(|s| libc::WIFSTOPPED(s));
        if stopped && flags & libc::CLONE_NEWUSER != 0 {
            if let Err(e) = map_ids(pid, run_kuid) {
                tracing::debug!(%e, "sandbox: cannot map the run's uid in its user namespace");
            }
            if !caps.written() {
                tracing::warn!(
                    "sandbox: runs' inotify instances are not capped: a run may use up the \
                     server user's host-wide budget"
                );
            }
        }
        let open = |name: &str| {
            File::open(format!("/proc/{pid}/ns/{name}"))
                .map(OwnedFd::from)
                .map_err(|e| tracing::debug!(%e, "sandbox: cannot open the {name} namespace"))
                .ok()
        };
        let shared = if stopped {
            let user = open("user");
            let net = if flags & libc::CLONE_NEWNET != 0 {
                open("net").map(Some)
            } else {
                Some(None)
            };
            match (user, net) {
                (Some(user), Some(net)) => Some(Self::Shared { user, net }),
                _ => None,
            }
        } else {
            None
        };
        if stopped {
            // SAFETY: signals our own stopped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            wait_status(pid, 0);
        }
        shared
    }

    /// The user namespace runs join, when it was made once (not per run).
    pub(super) fn user(&self) -> Option<&OwnedFd> {
        match self {
            Self::Shared { user, .. } => Some(user),
            Self::Unshared(_) => None,
        }
    }

    pub(super) fn unshared(flags: libc::c_int) -> Self {
        Self::Unshared(flags)
    }

    /// Moves the calling (single-threaded, forked) process into the namespaces. Async-signal-safe.
    pub(super) fn enter(&self) -> io::Result<()> {
        match self {
            Self::Shared { user, net } => {
                // The user namespace first: inside it, this process may join its network namespace.
                setns(user, libc::CLONE_NEWUSER)?;
                if let Some(net) = net {
                    setns(net, libc::CLONE_NEWNET)?;
                }
                unshare(PER_RUN)?;
            }
            Self::Unshared(flags) => unshare(*flags | PER_RUN)?,
        }
        name_host()
    }
}

/// The host name a run sees, in its own UTS namespace: not the machine's.
const RUN_HOSTNAME: &[u8] = b"pyrun";

/// Names the run's UTS namespace [`RUN_HOSTNAME`]. Async-signal-safe: one syscall.
fn name_host() -> io::Result<()> {
    // SAFETY: sethostname reads `len` bytes of a static buffer.
    let rc = unsafe { libc::sethostname(RUN_HOSTNAME.as_ptr().cast(), RUN_HOSTNAME.len()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The inotify limits written in the shared user namespace, prepared before the fork: a quarter
/// of the host's per-user budget each, so the host keeps the rest whatever the runs do.
struct InotifyCaps {
    /// (sysctl path, value as text); both NUL-terminated for the raw syscalls of the child.
    limits: [(std::ffi::CString, std::ffi::CString); 2],
    /// The child's report: one byte per limit written (read end, write end).
    report: Option<(OwnedFd, OwnedFd)>,
}

impl InotifyCaps {
    fn of_host() -> Self {
        let cap = |host: &str, inside: &str, fallback: u64| {
            let host = std::fs::read_to_string(host)
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .unwrap_or(fallback);
            let value = (host / 4).max(1).to_string();
            (
                std::ffi::CString::new(inside).unwrap_or_default(),
                std::ffi::CString::new(value).unwrap_or_default(),
            )
        };
        let mut fds = [-1; 2];
        // SAFETY: `fds` is a valid out-array of two ints; the fds pipe2 returns are fresh and
        // owned here.
        let report = unsafe {
            (libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) == 0)
                .then(|| (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
        };
        Self {
            limits: [
                cap(
                    "/proc/sys/fs/inotify/max_user_instances",
                    "/proc/sys/user/max_inotify_instances",
                    128,
                ),
                cap(
                    "/proc/sys/fs/inotify/max_user_watches",
                    "/proc/sys/user/max_inotify_watches",
                    8192,
                ),
            ],
            report,
        }
    }

    /// In the forked child that made the user namespace: raw syscalls only.
    fn write(&self) {
        for (path, value) in &self.limits {
            // SAFETY: open/write/close on NUL-terminated strings made before the fork.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    continue;
                }
                let len = value.as_bytes().len();
                let written = libc::write(fd, value.as_ptr().cast(), len) == len as isize;
                libc::close(fd);
                if let (true, Some((_, report))) = (written, &self.report) {
                    libc::write(report.as_raw_fd(), b"1".as_ptr().cast(), 1);
                }
            }
        }
    }

    /// In the server, once the child stopped: whether it wrote every limit.
    fn written(&self) -> bool {
        let Some((read, _)) = &self.report else {
            return false;
        };
        let mut bytes = [0u8; 2];
        // The child wrote its bytes before it stopped (the pipe does not block).
        // SAFETY: reads into a valid buffer of its length from a pipe we own.
        let read = unsafe { libc::read(read.as_raw_fd(), bytes.as_mut_ptr().cast(), bytes.len()) };
        read == bytes.len() as isize
    }
}

/// The id a run has inside its user namespace (mapped to the server's uid and gid).
pub(super) const RUN_UID: u32 = 65534;

/// Maps [`RUN_UID`] to our own uid and gid in the user namespace of `pid` (stopped, our child).
/// An unprivileged process may map its own ids once `setgroups` is denied.
///
/// With `run_kuid`: root writes the map, so `setgroups` stays allowed (a run drops the
/// server's supplementary groups with it), and root inside is root outside: a process whose
/// ids are unmapped could not make files in the view's tmpfs, and `setresuid` drops the
/// capabilities of a process only when it leaves the namespace's root.
fn map_ids(pid: libc::pid_t, run_kuid: Option<u32>) -> io::Result<()> {
    let write = |name: &str, text: String| std::fs::write(format!("/proc/{pid}/{name}"), text);
    if let Some(kuid) = run_kuid {
        write("uid_map", format!("0 0 1\n{RUN_UID} {kuid} 1\n"))?;
        return write("gid_map", format!("0 0 1\n{RUN_UID} {kuid} 1\n"));
    }
    write(
        "uid_map",
        format!("{RUN_UID} {} 1", rustix::process::geteuid().as_raw()),
    )?;
    write("setgroups", "deny".into())?;
    write(
        "gid_map",
        format!("{RUN_UID} {} 1", rustix::process::getegid().as_raw()),
    )
}

/// Gives up the namespace's root for [`RUN_UID`] (and no supplementary group): every
/// capability goes with it. Async-signal-safe: raw syscalls only.
pub(super) fn become_run_user() -> io::Result<()> {
    let id = RUN_UID as libc::uid_t;
    // SAFETY: setgroups with an empty list, setresgid and setresuid take no memory we own.
    let ok = unsafe {
        libc::setgroups(0, std::ptr::null()) == 0
            && libc::setresgid(id, id, id) == 0
            && libc::setresuid(id, id, id) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn setns(fd: &OwnedFd, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: setns takes an fd we own (open for the whole call) and a flag; no memory is passed.
    if unsafe { libc::setns(fd.as_raw_fd(), kind) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare only changes the calling process's namespaces; no memory is passed.
    if unsafe { libc::unshare(flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Waits for a child forked by the sandbox; its exit code, `None` when it did not exit normally.
/// In a forked child that stops itself until the server kills it: die with the thread that
/// forked it instead (SIGKILL ends even a stopped process), and at once if that already happened.
/// Without this, a server stopped between the fork and the kill (a shutdown during the start-up
/// probe) leaves the stopped child behind for good. Call only in such a child: it may `_exit`.
pub(super) fn die_with_parent(parent: libc::pid_t) {
    // SAFETY: raw syscalls with no memory arguments; `_exit` leaves the forked child only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
}

pub(super) fn wait_exit_code(pid: libc::pid_t) -> Option<i32> {
    wait_status(pid, 0)
        .filter(|&status| libc::WIFEXITED(status))
        .map(|s| libc::WEXITSTATUS(s))
}

/// `waitpid(pid, options)`, retried on EINTR; the status, `None` on error.
pub(super) fn wait_status(pid: libc::pid_t, options: libc::c_int) -> Option<libc::c_int> {
    if pid <= 0 {
        return None;
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, options) };
        if rc == pid {
            return Some(status);
        }
        if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `pid` still exists as a process that is not a zombie.
    fn lives(pid: libc::pid_t) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
                Some(state != 'Z' && state != 'X')
            })
            .unwrap_or(false)
    }

    #[test]
    fn a_stopped_holder_dies_with_the_process_that_forked_it() {
        // The test's child plays the server: it forks a holder that stops itself as the
        // namespace holders do, reports the holder's pid, and exits without killing it.
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid two-int array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child makes raw syscalls only and `_exit`s.
        let server = unsafe { libc::fork() };
        if server == 0 {
            // SAFETY: raw syscalls in the forked children; each leaves by `_exit` or SIGKILL.
            unsafe {
                let parent = libc::getpid();
                let holder = libc::fork();
                if holder == 0 {
                    die_with_parent(parent);
                    libc::kill(libc::getpid(), libc::SIGSTOP);
                    libc::_exit(0);
                }
                let bytes = holder.to_ne_bytes();
                libc::write(fds[1], bytes.as_ptr().cast(), bytes.len());
                // Give the holder time to stop, as the server's wait would.
                libc::usleep(100_000);
                libc::_exit(0);
            }
        }
        let mut bytes = [0u8; 4];
        // SAFETY: reads into a valid buffer of its length.
        let read = unsafe { libc::read(fds[0], bytes.as_mut_ptr().cast(), bytes.len()) };
        assert_eq!(read, 4);
        let holder = libc::pid_t::from_ne_bytes(bytes);
        assert!(wait_exit_code(server).is_some());
        let gone = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !lives(holder)
        });
        if !gone {
            // SAFETY: kills the test's own leftover before failing.
            unsafe { libc::kill(holder, libc::SIGKILL) };
        }
        // SAFETY: closes the pipe's own fds.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert!(
            gone,
            "the stopped holder outlived the process that forked it"
        );
    }
}

//! Linux: the tokio half of starting a run. `pyrun_sandbox` starts the process (its own
//! `clone`/`exec` child, blocking only until the program has exec'd) and hands back plain fds;
//! this registers them with tokio's reactor so that the runner awaits the run's end and reads its
//! pipes without a thread per run.
//!
//! The run layer's one `unsafe` (an audited exception to the workspace's `unsafe_code = "deny"`):
//! tokio makes registering a raw fd with its reactor `unsafe`, because it cannot check that the
//! fd stays open and the same; here it is an `OwnedFd` we own for the registration's whole life.

use std::io;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::unix::pipe;

/// A started run, awaitable. Dropping it before its end kills it and reaps it off the async
/// threads.
#[derive(Debug)]
pub struct AsyncChild {
    /// `None` once reaped or handed to a blocking reaper.
    inner: Option<pyrun_sandbox::spawn::Child>,
    /// A duplicate of the child's pidfd: readable once it has exited.
    exited: AsyncFd<OwnedFd>,
    pub stdin: Option<pipe::Sender>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
}

impl AsyncChild {
    /// Registers `child`'s pidfd and pipes with the current runtime.
    pub fn new(mut child: pyrun_sandbox::spawn::Child) -> io::Result<Self> {
        let pidfd = child.exit_fd().try_clone_to_owned()?;
        // SAFETY: `pidfd` is an `OwnedFd` moved into the `AsyncFd`, which owns it until it is
        // dropped: the fd stays open and refers to the same pidfd for the registration's life.
        let exited = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }
            .map_err(io::Error::from)?;
        let stdin = child
            .stdin
            .take()
            .map(|w| pipe::Sender::from_owned_fd(OwnedFd::from(w)))
            .transpose()?;
        let receiver = |r: Option<std::io::PipeReader>| {
            r.map(|r| pipe::Receiver::from_owned_fd(OwnedFd::from(r)))
                .transpose()
        };
        let stdout = receiver(child.stdout.take())?;
        let stderr = receiver(child.stderr.take())?;
        Ok(Self {
            inner: Some(child),
            exited,
            stdin,
            stdout,
            stderr,
        })
    }

    /// The child's pid (and process group id).
    pub fn id(&self) -> Option<u32> {
        self.inner.as_ref().and_then(|c| c.id())
    }

    /// Waits for the child to exit and reaps it.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            let child = self
                .inner
                .as_mut()
                .ok_or_else(|| io::Error::other("child already reaped"))?;
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            self.exited.readable().await?.clear_ready();
        }
    }

    /// Whether the child has exited (it is then reaped).
    pub fn has_exited(&mut self) -> bool {
        match self.inner.as_mut() {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// Sends SIGKILL to the child (not its group; the runner kills the group).
    pub fn start_kill(&mut self) -> io::Result<()> {
        match self.inner.as_mut() {
            Some(child) => child.start_kill(),
            None => Ok(()),
        }
    }
}

impl Drop for AsyncChild {
    fn drop(&mut self) {
        let Some(mut child) = self.inner.take() else {
            return;
        };
        if child.is_reaped() {
            return;
        }
        let _ = child.start_kill();
        // Reaping after SIGKILL takes microseconds to milliseconds: off the async threads.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(child))),
            Err(_) => drop(child),
        }
    }
}

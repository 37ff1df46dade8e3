//! The one place the run layer waits on a child it started (a run, an installer's step, a venv's
//! bytecode fill) and kills one (a session's interpreter too): its output read into a capped
//! [`LiveOutput`] as it arrives, its end awaited against a deadline, a cancellation and the
//! server's shutdown, its whole process tree killed whatever happened, its pipes drained for a
//! bounded time.
//!
//! Steps, in order: read both pipes on tasks of their own (memory stays flat however much the
//! child writes, and it never blocks on a full pipe); wait for the first of its exit, the
//! deadline, the cancellation, the shutdown; kill its process group, and when it did not exit by
//! itself the child too (on Linux the pid namespace's init, whose death ends every process of
//! the namespace), reaped within [`REAP_GRACE`]; read on until both pipes are at their end, or
//! [`DRAIN_GRACE`] from then for a pipe that a process which escaped the group holds open.
//!
//! A [`Process`] dropped before its end (an abandoned future: client gone, server shutting
//! down) kills its process group on the way out.

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::live_output::{LiveOutput, Stream};

/// A started child, awaitable (Linux: the sandbox's own child; elsewhere tokio's): what
/// supervision waits on, whoever started it.
#[cfg(target_os = "linux")]
pub(crate) type Spawned = super::child::AsyncChild;
#[cfg(not(target_os = "linux"))]
pub(crate) type Spawned = tokio::process::Child;

/// How long pipes are read after the process group is gone. Data the child wrote before dying is
/// already in the pipe; only a process that escaped the group can keep a pipe open this long.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// How long to wait for the kernel to reap a process after SIGKILL.
const REAP_GRACE: Duration = Duration::from_secs(5);
/// What is read from a pipe at a time.
const READ_CHUNK: usize = 16 * 1024;

/// Where a child's output goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sink<'a> {
    /// Its stdout and stderr each to their own stream (a run).
    Apart(&'a Arc<LiveOutput>),
    /// Both pipes into stdout, in the order the lines came (an installer: Linux only).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Merged(&'a Arc<LiveOutput>),
}

/// What ends a child before it exits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits<'a> {
    pub(crate) deadline: tokio::time::Instant,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) shutdown: &'a CancellationToken,
}

/// How a child ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ending {
    /// By itself (the status is `None` when it could not be read).
    Exited(Option<ExitStatus>),
    TimedOut,
    /// Its caller cancelled, or the server shut down.
    Cancelled,
}

impl Ending {
    /// A step that has not failed yet (a success, for chaining steps).
    pub(crate) fn success() -> Self {
        Self::Exited(Some(ExitStatus::default()))
    }

    /// It exited by itself with code 0.
    pub(crate) fn succeeded(&self) -> bool {
        self.exit_code() == Some(0)
    }

    /// Its exit code, when it exited by itself with one.
    pub(crate) fn exit_code(&self) -> Option<i32> {
        match self {
            Self::Exited(status) => status.and_then(|status| status.code()),
            _ => None,
        }
    }

    /// The signal it died of (Unix), when it was not killed here.
    pub(crate) fn signal(&self) -> Option<i32> {
        match self {
            #[cfg(unix)]
            Self::Exited(Some(status)) => std::os::unix::process::ExitStatusExt::signal(status),
            _ => None,
        }
    }

    pub(crate) fn timed_out(&self) -> bool {
        matches!(self, Self::TimedOut)
    }

    pub(crate) fn cancelled(&self) -> bool {
        matches!(self, Self::Cancelled)
    }
}

/// What [`Process::supervise`] saw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Supervised {
    pub(crate) ending: Ending,
    /// When its end was seen (its exit, the deadline, the cancellation).
    pub(crate) exited: Instant,
    /// When the whole tree was dead (before the pipes were drained).
    pub(crate) tree_dead: Instant,
}

/// A started child and its whole process tree, killed together. Fields drop in order: the group
/// is killed before the child goes (which kills and reaps it too).
pub(crate) struct Process {
    tree: ProcessTree,
    /// Windows: the kill-on-close job that holds the whole tree.
    #[cfg(windows)]
    _job: Option<pyrun_sandbox::RunJob>,
    pub(crate) child: Spawned,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl Process {
    /// `child` with its process group (it leads its own group: the sandbox and the `Command`
    /// elsewhere start it so).
    pub(crate) fn new(child: Spawned) -> Self {
        Self {
            tree: ProcessTree::of(child.id()),
            #[cfg(windows)]
            _job: None,
            child,
        }
    }

    /// Windows: the job that holds the tree, kept for the child's life.
    #[cfg(windows)]
    pub(crate) fn with_job(self, job: Option<pyrun_sandbox::RunJob>) -> Self {
        Self { _job: job, ..self }
    }

    /// The child's pid.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Reads its output into `sink` and waits for its end within `limits`, then kills the whole
    /// tree and drains the pipes (the module's steps).
    pub(crate) async fn supervise(&mut self, sink: Sink<'_>, limits: Limits<'_>) -> Supervised {
        let (live, err_stream) = match sink {
            Sink::Apart(live) => (live, Stream::Stderr),
            Sink::Merged(live) => (live, Stream::Stdout),
        };
        let stop_reading = CancellationToken::new();
        let out = tokio::spawn(read_live(
            self.child.stdout.take(),
            Arc::clone(live),
            Stream::Stdout,
            stop_reading.clone(),
        ));
        let err = tokio::spawn(read_live(
            self.child.stderr.take(),
            Arc::clone(live),
            err_stream,
            stop_reading.clone(),
        ));
        let ending = tokio::select! {
            status = self.child.wait() => Ending::Exited(status.ok()),
            _ = tokio::time::sleep_until(limits.deadline) => Ending::TimedOut,
            _ = limits.cancel.cancelled() => Ending::Cancelled,
            _ = limits.shutdown.cancelled() => Ending::Cancelled,
        };
        let exited = Instant::now();
        // Whatever happened, nothing of the child may outlive it.
        self.tree.kill();
        if !matches!(ending, Ending::Exited(_)) {
            self.kill_child().await;
        }
        let tree_dead = Instant::now();
        drain([out, err], stop_reading).await;
        Supervised {
            ending,
            exited,
            tree_dead,
        }
    }

    /// Sends SIGINT to the child alone (on Linux the pid namespace's pid 1, which forwards it).
    /// Its pid cannot name another process: the child is reaped only by [`Self::supervise`] and
    /// [`Self::kill`]. Elsewhere than Unix: nothing.
    pub(crate) fn interrupt(&self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        }
    }

    /// Kills the whole tree and reaps the child (bounded).
    pub(crate) async fn kill(&mut self) {
        self.tree.kill();
        self.kill_child().await;
    }

    /// SIGKILL to the child itself, reaped within [`REAP_GRACE`].
    async fn kill_child(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(REAP_GRACE, self.child.wait()).await;
    }
}

/// Waits for the readers to reach their pipes' end, stopping them [`DRAIN_GRACE`] from now.
async fn drain(readers: [JoinHandle<()>; 2], stop: CancellationToken) {
    let deadline = tokio::spawn(async move {
        tokio::time::sleep(DRAIN_GRACE).await;
        stop.cancel();
    });
    for reader in readers {
        let _ = reader.await;
    }
    deadline.abort();
}

/// A child's process group: killed explicitly at its end, and on drop.
struct ProcessTree {
    #[cfg(unix)]
    group: Option<rustix::process::Pid>,
}

impl ProcessTree {
    /// The group of the child with this pid (its group leader).
    fn of(pid: Option<u32>) -> Self {
        #[cfg(unix)]
        {
            let group = pid
                .and_then(|id| i32::try_from(id).ok())
                .and_then(rustix::process::Pid::from_raw);
            Self { group }
        }
        #[cfg(not(unix))]
        {
            let _ = pid;
            Self {}
        }
    }

    fn kill(&self) {
        #[cfg(unix)]
        if let Some(group) = self.group {
            // ESRCH just means the group is already gone.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads a pipe to its end (or until told to stop) into a capture, which keeps at most its cap.
async fn read_live<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    live: Arc<LiveOutput>,
    which: Stream,
    stop: CancellationToken,
) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut chunk = vec![0; READ_CHUNK];
    loop {
        let read = tokio::select! {
            read = pipe.read(&mut chunk) => read,
            _ = stop.cancelled() => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => live.append(which, &chunk[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -c script`, started as runs are (the sandbox's own child, leading its own process
    /// group) with every layer off, and made awaitable.
    #[cfg(target_os = "linux")]
    fn start(script: &str) -> (Process, tempfile::TempDir) {
        use pyrun_sandbox::{Sandbox, SandboxMode, SandboxPolicy};
        let scratch = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(SandboxPolicy::bare(SandboxMode::Off)).unwrap();
        let slot = sandbox.slot(scratch.path()).unwrap();
        let spec = pyrun_sandbox::spawn::Spec {
            program: std::path::Path::new("/bin/sh"),
            argv0: None,
            args: vec!["-c".as_ref(), script.as_ref()],
            env: vec![("PATH".as_ref(), "/usr/bin:/bin".as_ref())],
            cwd: scratch.path(),
            stdin_piped: false,
        };
        let child = sandbox.spawn(&slot, &spec, scratch.path()).unwrap();
        let child = crate::child::AsyncChild::new(child).unwrap();
        (Process::new(child), scratch)
    }

    #[cfg(target_os = "linux")]
    fn within(wait: Duration) -> (CancellationToken, tokio::time::Instant) {
        (CancellationToken::new(), tokio::time::Instant::now() + wait)
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn past_its_deadline_the_whole_group_dies_and_what_it_wrote_is_kept() {
        // The grandchild stays in the group and holds both pipes open.
        let (mut process, _scratch) = start("echo before; sleep 30 & sleep 30");
        let live = Arc::new(LiveOutput::new(1000));
        let (never, deadline) = within(Duration::from_millis(300));
        let limits = Limits {
            deadline,
            cancel: &never,
            shutdown: &never,
        };
        let supervised = process.supervise(Sink::Apart(&live), limits).await;
        assert!(supervised.ending.timed_out(), "{:?}", supervised.ending);
        assert_eq!(supervised.ending.exit_code(), None);
        // The group died at once: the pipes reached their end, no drain grace was waited out.
        let drained = supervised.tree_dead.elapsed();
        assert!(drained < DRAIN_GRACE, "{drained:?}");
        assert_eq!(live.take_text(Stream::Stdout).0, "before\n");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_process_that_left_the_group_holds_the_pipe_for_the_drain_grace_at_most() {
        // `setsid` takes the grandchild out of the group: the group kill misses it (with the
        // sandbox on, the pid namespace's end takes it), and it keeps stdout open.
        let (mut process, _scratch) = start("setsid sleep 3 & sleep 0.2; echo done; exit 7");
        let live = Arc::new(LiveOutput::new(1000));
        let (never, deadline) = within(Duration::from_secs(30));
        let limits = Limits {
            deadline,
            cancel: &never,
            shutdown: &never,
        };
        let begun = Instant::now();
        let supervised = process.supervise(Sink::Merged(&live), limits).await;
        assert_eq!(supervised.ending.exit_code(), Some(7));
        // Read on for the grace (the sleep still holds the pipe), and not longer.
        let took = begun.elapsed();
        assert!(
            took >= DRAIN_GRACE && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert_eq!(live.take_text(Stream::Stdout).0, "done\n");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_cancellation_or_the_shutdown_ends_it_as_cancelled() {
        for which in 0..2 {
            let (mut process, _scratch) = start("sleep 30");
            let live = Arc::new(LiveOutput::new(1000));
            let (cancel, deadline) = within(Duration::from_secs(30));
            let shutdown = CancellationToken::new();
            [&cancel, &shutdown][which].cancel();
            let limits = Limits {
                deadline,
                cancel: &cancel,
                shutdown: &shutdown,
            };
            let supervised = process.supervise(Sink::Apart(&live), limits).await;
            assert!(supervised.ending.cancelled(), "{:?}", supervised.ending);
        }
    }

    #[tokio::test]
    async fn reading_keeps_the_cap_and_reads_to_the_end() {
        let data = vec![b'x'; 300_000];
        let read = |bytes: &'static [u8], cap| async move {
            let live = Arc::new(LiveOutput::new(cap));
            read_live(
                Some(bytes),
                live.clone(),
                Stream::Stdout,
                CancellationToken::new(),
            )
            .await;
            live.take_text(Stream::Stdout)
        };
        let data: &'static [u8] = data.leak();
        let (text, truncated) = read(data, 1000).await;
        assert_eq!((text.len(), truncated), (1000, true));
        let (text, truncated) = read(&data[..10], 1000).await;
        assert_eq!((text.len(), truncated), (10, false));
        // Exactly the cap is not truncated; the capture never holds more than the cap.
        let (text, truncated) = read(&data[..1000], 1000).await;
        assert_eq!((text.len(), truncated), (1000, false));
        let (text, truncated) = read(data, 100_000).await;
        assert_eq!(text.len(), 100_000);
        assert!(text.capacity() <= 100_000, "{}", text.capacity());
        assert!(truncated);
    }
}

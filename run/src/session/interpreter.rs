//! One session's interpreter: the driver (`python/_pyrun_session.py`) started as a resident run,
//! its request and reply pipes, the drain of what it writes to fds 1 and 2, and one exec at a
//! time with its time limit.
//!
//! An exec: take the pipes (execs of one session wait for each other), send the request frame,
//! await the reply frame. At the time limit (or when the call is cancelled) the interpreter gets
//! SIGINT (the driver turns it into `KeyboardInterrupt` while user code runs) and
//! [`INTERRUPT_GRACE`] to reply; past that, its whole process tree is killed and the session is
//! over. A reply pipe that ends (the interpreter died: `os._exit`, its memory or process limit,
//! code that closed the pipe) or breaks the wire also ends the session. Each exec runs in a task
//! of its own: a call dropped mid-exec leaves it to finish (interrupted) rather than leaving a
//! reply in the pipe for the next exec to misread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::frame::{read_frame, write_frame};
use super::raw_output::RawOutput;
use crate::quarantine::Quarantined;
use crate::runner::{PipeReader, PipeWriter, ResidentRun};

/// How long an interrupted exec has to reply before its session is killed.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(2);
/// How long the bytes an exec wrote to fds 1 and 2 may lag behind its reply (they are in the
/// pipe before it; this only bounds a driver that could not write its marker).
const MARKER_WAIT: Duration = Duration::from_secs(1);

/// The request the driver reads.
#[derive(Serialize)]
struct Request<'a> {
    code: &'a str,
    max_output: usize,
    marker: &'a str,
}

/// The reply the driver writes.
#[derive(Deserialize)]
struct Reply {
    stdout: String,
    stderr: String,
    stdout_truncated: bool,
    stderr_truncated: bool,
    result: Option<String>,
    error: Option<String>,
}

/// What one exec gave back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    pub stdout: String,
    /// What the code wrote to `sys.stderr`, then what its processes wrote to fds 1 and 2.
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// `repr` of the value of a final expression statement, if any (and not None).
    pub result: Option<String>,
    /// The traceback of an exception the code raised (KeyboardInterrupt after a timeout).
    pub error: Option<String>,
    /// The time limit interrupted it.
    pub timed_out: bool,
    pub duration: Duration,
    /// What the session created with a protected name so far, moved to the quarantine once
    /// the exec was over (and the session held still).
    pub quarantined: Vec<Quarantined>,
}

/// Why an exec has no outcome. The session is over in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("the session's interpreter has ended")]
    Ended,
    #[error("the code did not stop within the grace after an interrupt; the session was killed")]
    Killed { timed_out: bool },
    /// Cancelled while an earlier exec of the session still ran: nothing was sent, the session
    /// lives on.
    #[error("the exec was cancelled before it started")]
    CancelledWhileQueued,
}

impl ExecError {
    /// Whether the session is gone with it.
    pub fn ends_session(&self) -> bool {
        !matches!(self, ExecError::CancelledWhileQueued)
    }
}

struct Pipes {
    requests: PipeWriter,
    replies: PipeReader,
}

/// A live interpreter.
pub struct Interpreter {
    run: Mutex<Option<ResidentRun>>,
    pipes: tokio::sync::Mutex<Option<Pipes>>,
    raw: Arc<RawOutput>,
    max_output: usize,
    ended: AtomicBool,
}

impl std::fmt::Debug for Interpreter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interpreter")
            .field("ended", &self.has_ended())
            .finish_non_exhaustive()
    }
}

impl Interpreter {
    /// Takes over a started driver; `max_output` caps each stream of each exec.
    pub fn new(mut run: ResidentRun, max_output: usize) -> Result<Arc<Self>, ExecError> {
        let (requests, replies, stderr) = run.take_pipes().ok_or(ExecError::Ended)?;
        let raw = Arc::new(RawOutput::new(max_output));
        let drain = raw.clone();
        tokio::spawn(async move { drain.drain(stderr).await });
        Ok(Arc::new(Self {
            run: Mutex::new(Some(run)),
            pipes: tokio::sync::Mutex::new(Some(Pipes { requests, replies })),
            raw,
            max_output,
            ended: AtomicBool::new(false),
        }))
    }

    /// Whether it is known to be gone.
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    /// Kills its whole process tree (idempotent).
    pub async fn close(&self) {
        self.ended.store(true, Ordering::Relaxed);
        let run = self
            .run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(run) = run {
            run.kill().await;
        }
    }

    /// Holds the interpreter still until the next exec (nothing it left running gets the CPU
    /// meanwhile, so nothing plants a protected name while nobody looks) and moves out what it
    /// created with one. A session that would not hold still is closed.
    pub async fn hold(&self) -> Result<Vec<Quarantined>, ExecError> {
        let run = self
            .run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(mut run) = run else {
            return Err(ExecError::Ended);
        };
        let held = run.hold().await;
        {
            let mut slot = self
                .run
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Closed meanwhile: `close` found no run to kill; this one is killed below.
            if !self.has_ended() && held.is_ok() {
                *slot = Some(run);
                return held.map_err(|_| ExecError::Ended);
            }
        }
        if let Err(e) = &held {
            tracing::warn!("a session's processes would not hold still between execs: {e}");
        }
        self.ended.store(true, Ordering::Relaxed);
        run.kill().await;
        Err(ExecError::Ended)
    }

    /// Lets a held interpreter go on, for an exec.
    fn resume(&self) -> Result<(), ExecError> {
        let mut run = self
            .run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match run.as_mut() {
            Some(run) => run.resume().map_err(|_| ExecError::Ended),
            None => Err(ExecError::Ended),
        }
    }

    fn interrupt(&self) {
        if let Some(run) = self
            .run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            run.interrupt();
        }
    }

    /// Runs `code`, interrupted after `timeout` or when `cancel` fires. Dropping the future
    /// interrupts the exec, which goes on to its end in its own task.
    pub async fn exec(
        self: &Arc<Self>,
        code: String,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<ExecOutcome, ExecError> {
        let stop = cancel.child_token();
        let _stop_on_drop = stop.clone().drop_guard();
        let this = self.clone();
        let task = tokio::spawn(async move { this.exec_in_task(code, timeout, stop).await });
        task.await.unwrap_or(Err(ExecError::Ended))
    }

    async fn exec_in_task(
        &self,
        code: String,
        timeout: Duration,
        stop: CancellationToken,
    ) -> Result<ExecOutcome, ExecError> {
        // Waiting for an earlier exec of the session: a cancellation meanwhile sends nothing.
        let mut guard = tokio::select! {
            guard = self.pipes.lock() => guard,
            _ = stop.cancelled() => return Err(ExecError::CancelledWhileQueued),
        };
        let outcome = match guard.as_mut().filter(|_| !self.has_ended()) {
            Some(pipes) => self.round_trip(pipes, &code, timeout, stop).await,
            None => Err(ExecError::Ended),
        };
        if outcome.as_ref().is_err_and(ExecError::ends_session) {
            // The wire is in an unknown state: nothing may read it again.
            *guard = None;
            drop(guard);
            self.close().await;
        }
        outcome
    }

    /// One request and its reply.
    async fn round_trip(
        &self,
        pipes: &mut Pipes,
        code: &str,
        timeout: Duration,
        stop: CancellationToken,
    ) -> Result<ExecOutcome, ExecError> {
        let marker = new_marker();
        self.raw.begin(&marker);
        let request = Request {
            code,
            max_output: self.max_output,
            marker: &marker,
        };
        let body = serde_json::to_vec(&request).map_err(|_| ExecError::Ended)?;
        self.resume()?;
        let started = Instant::now();
        // The driver reads only between execs, and it is between execs now: a write that does
        // not go through in the time limit means a driver gone astray.
        let sent = tokio::time::timeout(timeout, write_frame(&mut pipes.requests, &body)).await;
        if !matches!(sent, Ok(Ok(()))) {
            return Err(ExecError::Ended);
        }
        // Replies carry two capped streams, a capped repr and a traceback, JSON-escaped.
        let limit = self.max_output.saturating_mul(16).saturating_add(1 << 20);
        let read = read_frame(&mut pipes.replies, limit);
        tokio::pin!(read);
        let mut timed_out = false;
        let first = tokio::select! {
            reply = &mut read => Some(reply),
            () = tokio::time::sleep(timeout) => { timed_out = true; None }
            () = stop.cancelled() => None,
        };
        let reply = match first {
            Some(reply) => reply,
            None => {
                self.interrupt();
                tokio::time::timeout(INTERRUPT_GRACE, &mut read)
                    .await
                    .map_err(|_| ExecError::Killed { timed_out })?
            }
        };
        let duration = started.elapsed();
        let reply = reply
            .ok()
            .and_then(|body| {
                serde_json::from_slice::<Reply>(&body)
                    .map_err(|e| tracing::warn!("a session's reply is not the driver's: {e}"))
                    .ok()
            })
            .ok_or(ExecError::Ended)?;
        let (raw, raw_cut) = self.raw.finish(MARKER_WAIT).await;
        let quarantined = self.hold().await?;
        let mut stderr = reply.stderr;
        stderr.push_str(&String::from_utf8_lossy(&raw));
        let stderr_cut = cut_to(&mut stderr, self.max_output);
        let mut stdout = reply.stdout;
        let stdout_cut = cut_to(&mut stdout, self.max_output);
        let capped = |text: Option<String>| {
            text.map(|mut text| {
                cut_to(&mut text, self.max_output);
                text
            })
        };
        Ok(ExecOutcome {
            stdout,
            stderr,
            stdout_truncated: reply.stdout_truncated || stdout_cut,
            stderr_truncated: reply.stderr_truncated || raw_cut || stderr_cut,
            result: capped(reply.result),
            error: capped(reply.error),
            timed_out,
            duration,
            quarantined,
        })
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary; whether it cut.
fn cut_to(text: &mut String, max: usize) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut at = max;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text.truncate(at);
    true
}

/// A marker no earlier output can hold by chance: random, and with a NUL byte (text rarely has).
fn new_marker() -> String {
    let mut bytes = [0u8; 16];
    let _ = getrandom::fill(&mut bytes);
    let mut marker = String::from("\u{0}pyrun-end-");
    for b in bytes {
        use std::fmt::Write as _;
        let _ = write!(marker, "{b:02x}");
    }
    marker.push('\u{0}');
    marker
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_keeps_whole_characters() {
        let mut text = "aé".to_owned();
        assert!(cut_to(&mut text, 2));
        assert_eq!(text, "a");
        let mut text = "abc".to_owned();
        assert!(!cut_to(&mut text, 3));
        assert_ne!(new_marker(), new_marker());
    }
}

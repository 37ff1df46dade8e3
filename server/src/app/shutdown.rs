//! What ends the server from outside: SIGTERM, SIGINT and SIGHUP (on Windows Ctrl-C, Ctrl-Break
//! and the console's close) fire the shutdown token — the transport stops, runs are killed,
//! spares and helpers reaped — and a second one ends the process at once. A stop that is still
//! going [`DEADLINE`] after the first signal ends the process anyway.
//!
//! Nothing here writes to stderr but through [`super::stderr`], which cannot fail or block: the
//! stop must not depend on who still reads the server's output.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How long after the first signal the process ends however far its graceful stop got: longer
/// than the HTTP transport's grace for open connections (5 s) plus the engine's wait for runs
/// to end (normally milliseconds).
pub const DEADLINE: Duration = Duration::from_secs(15);

/// The exit status of a process ended by the second signal or the deadline (128 + SIGTERM, as a
/// shell reports a process killed by it).
const FORCED_EXIT: i32 = 143;

/// Waits for the first signal, fires `shutdown`; then ends the process at the second or at the
/// deadline. `signals` was installed early ([`Signals::install`]); spawn this once the server is
/// built: a signal that came in the meantime stops it at once.
pub async fn on_signals(signals: Option<Signals>, shutdown: CancellationToken) {
    let Some(mut signals) = signals else {
        tracing::warn!("cannot listen for signals: only the client's end stops the server");
        return;
    };
    let first = signals.next().await;
    tracing::info!(signal = first, "shutting down");
    shutdown.cancel();
    // A thread, not a task: the runtime may be what is stuck.
    let _ = std::thread::Builder::new()
        .name("stop-deadline".into())
        .spawn(|| {
            std::thread::sleep(DEADLINE);
            end_now(&format!(
                "still stopping {DEADLINE:?} after the signal; ending now"
            ));
        });
    let second = signals.next().await;
    end_now(&format!("{second} again: ending now"));
}

/// Ends the process without waiting for anything. Runs and spares die with it (their death
/// signal); the server's own helpers (the interpreter's start-up questions, the bytecode fill)
/// have none, so they are killed first.
fn end_now(why: &str) -> ! {
    super::stderr::line(&format!("pyrun-mcp: {why}"));
    pyrun_run::helpers::close(Duration::from_millis(200));
    super::stderr::flush(Duration::from_millis(100));
    std::process::exit(FORCED_EXIT)
}

/// The stop signals, caught from [`Signals::install`] on: from then on they no longer kill the
/// process where it stands (a helper half-started, a state file half-written) but wait for
/// [`on_signals`].
#[cfg(unix)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Call within the runtime's context (`Runtime::enter`), before anything starts a process.
    pub fn install() -> Option<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Some(Self {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
        })
    }

    /// The next signal's name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}

/// Windows has no SIGTERM: a console's Ctrl-C, Ctrl-Break and close stand in; a service
/// manager's stop (TerminateProcess) cannot be caught, and runs die with their job object.
#[cfg(windows)]
pub struct Signals {
    ctrl_c: tokio::signal::windows::CtrlC,
    ctrl_break: tokio::signal::windows::CtrlBreak,
    close: tokio::signal::windows::CtrlClose,
}

#[cfg(windows)]
impl Signals {
    pub fn install() -> Option<Self> {
        use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
        Some(Self {
            ctrl_c: ctrl_c().ok()?,
            ctrl_break: ctrl_break().ok()?,
            close: ctrl_close().ok()?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.ctrl_c.recv() => "Ctrl-C",
            _ = self.ctrl_break.recv() => "Ctrl-Break",
            _ = self.close.recv() => "console close",
        }
    }
}

//! A `--server` command the client starts and speaks MCP to over its stdin and stdout. It dies
//! with the client, also with a client killed by a signal (Linux: a parent-death signal;
//! Windows: a job object that kills it when the client's last handle closes; macOS and other
//! Unixes: only its stdin's end, which an MCP stdio server obeys but an HTTP server does not).
//! The handshake is bounded: a command that is no MCP stdio server — it serves HTTP, prints
//! something else, never answers `initialize` — is an error within [`HANDSHAKE`] (at once for a
//! "listening on http://…" line) that says what to fix.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::service::ClientInitializeError;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use tokio::sync::Notify;

use super::{diagnose, McpSession, Target};
use crate::error::ClientError;
use crate::handler::Notifier;

/// How long a started server gets to answer `initialize`. Servers answer in milliseconds once
/// up; this leaves room for an interpreter's or a package runner's cold start.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// What of a stdio server's stderr (its banner and log) reaches ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerLog {
    /// Its error lines (and the `hint:` lines that follow them) only: the terminal is the
    /// script's.
    Errors,
    /// All of it (`--verbose`).
    All,
}

pub(super) async fn connect(
    target: &Target,
    argv: &[String],
    handler: Notifier,
    server_log: ServerLog,
) -> Result<McpSession, ClientError> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| ClientError::Usage("the server command line is empty".into()))?;
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    // pyrun-mcp-server logs at info by default; keep the user's terminal for the script's output
    // unless they asked for server logs. Other servers ignore the variable.
    if std::env::var_os("PYRUN_LOG").is_none() && server_log == ServerLog::Errors {
        command.env("PYRUN_LOG", "warn");
    }
    // Own process group: a terminal's Ctrl-C reaches only us, and we cancel the call cleanly
    // before closing the server's stdin.
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(windows)]
    command.creation_flags(0x0000_0200); // CREATE_NEW_PROCESS_GROUP
    #[cfg(target_os = "linux")]
    death::die_with_client(&mut command);
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ClientError::Connect {
            target: target.display(),
            reason: format!("cannot start `{program}`: {e}"),
        })?;
    #[cfg(windows)]
    if let Some(pid) = transport.id() {
        if let Err(e) = death::join_kill_on_close_job(pid) {
            tracing::warn!(%e, "the server may outlive the client");
        }
    }
    let relay = stderr.map(|stderr| relay_stderr(stderr, server_log));
    let serves_http = async {
        match &relay {
            Some(relay) => relay.serves_http().await,
            None => std::future::pending().await,
        }
    };
    let not_stdio = |what: String| ClientError::NotStdioServer {
        command: target.display(),
        what,
    };
    // Dropping the handshake drops the transport, which kills the child.
    let outcome = tokio::select! {
        outcome = handler.serve(transport) => outcome,
        line = serves_http => {
            return Err(not_stdio(format!("it serves HTTP (it said: {})", line.trim())));
        }
        () = tokio::time::sleep(HANDSHAKE) => {
            let said = relay
                .as_ref()
                .and_then(StderrRelay::last_so_far)
                .map(|line| format!("; its last line on stderr: {}", line.trim()))
                .unwrap_or_default();
            return Err(not_stdio(format!(
                "no answer to MCP `initialize` on its stdout within {}s{said}",
                HANDSHAKE.as_secs()
            )));
        }
    };
    match outcome {
        Ok(session) => Ok(session),
        Err(
            e @ (ClientInitializeError::ConnectionClosed(_)
            | ClientInitializeError::TransportError { .. }),
        ) => {
            // Its last words explain it better than the broken pipe we saw.
            let last = match relay {
                Some(relay) => relay.last_line().await,
                None => None,
            };
            let reason = match last {
                Some(line) => format!(
                    "the server command exited before the MCP handshake; it said: {}",
                    line.trim()
                ),
                None => format!(
                    "the server command ended the MCP handshake ({}) and wrote nothing on stderr",
                    diagnose::root_cause(&e)
                ),
            };
            Err(ClientError::Connect {
                target: target.display(),
                reason,
            })
        }
        Err(other) => Err(ClientError::Protocol(diagnose::chain(&other))),
    }
}

/// What the server said on stderr so far.
#[derive(Default)]
struct Said {
    last: Option<String>,
    last_error: Option<String>,
    /// A line that says it listens on an HTTP address.
    http: Option<String>,
}

impl Said {
    /// The line that best says why it died: its last `error…` line, else its last line.
    fn best(&self) -> Option<String> {
        self.last_error.clone().or_else(|| self.last.clone())
    }
}

/// The stdio server's stderr, passed on to ours line by line as it comes, and watched.
struct StderrRelay {
    task: tokio::task::JoinHandle<()>,
    said: Arc<Mutex<Said>>,
    http_seen: Arc<Notify>,
}

fn relay_stderr(stderr: tokio::process::ChildStderr, server_log: ServerLog) -> StderrRelay {
    use tokio::io::AsyncBufReadExt;
    let said = Arc::new(Mutex::new(Said::default()));
    let http_seen = Arc::new(Notify::new());
    let (record, seen) = (said.clone(), http_seen.clone());
    let task = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        // Whether the lines now are an error's (its own line, then its hints and indented lines).
        let mut in_error = false;
        while let Ok(Some(line)) = lines.next_line().await {
            let error = is_error_line(&line);
            in_error = error
                || is_warning_line(&line)
                || (in_error
                    && (line.starts_with("hint:") || line.starts_with(char::is_whitespace)));
            if server_log == ServerLog::All || in_error {
                crate::term::write_stderr(&format!("{line}\n"));
            }
            let mut said = record.lock().unwrap_or_else(PoisonError::into_inner);
            if error {
                said.last_error = Some(line.clone());
            }
            if said.http.is_none() && says_it_serves_http(&line) {
                said.http = Some(line.clone());
                seen.notify_one();
            }
            if !line.trim().is_empty() {
                said.last = Some(line);
            }
        }
    });
    StderrRelay {
        task,
        said,
        http_seen,
    }
}

/// A line a server wrote about a failure: `error: …` (a refused start), or a log line at level
/// ERROR (`2026-… ERROR target: …`).
fn is_error_line(line: &str) -> bool {
    says_level(line, "error", "ERROR")
}

/// A line a server wrote to warn about its settings (`warning: …`, or a log line at level WARN):
/// shown like an error (a misspelled setting in `.env`, a venv's interpreter the server refused),
/// though it is not what ended a start.
fn is_warning_line(line: &str) -> bool {
    says_level(line, "warning", "WARN")
}

/// A line that starts with `word` (any case: `error: …`), or a log line whose level, among its
/// first three words, is `level` (`2026-… ERROR target: …`, with or without colour codes).
fn says_level(line: &str, word: &str, level: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.to_lowercase().starts_with(word)
        || trimmed
            .split_whitespace()
            .take(3)
            .any(|w| w.ends_with(level))
}

/// "pyrun-mcp listening on http://…", "Uvicorn running on http://…": a server that waits for
/// HTTP clients, not for us on its stdin.
fn says_it_serves_http(line: &str) -> bool {
    let line = line.to_lowercase();
    ["listening on http", "running on http", "serving on http"]
        .iter()
        .any(|words| line.contains(words))
}

impl StderrRelay {
    /// Resolves with the line, once the server said it serves HTTP.
    async fn serves_http(&self) -> String {
        loop {
            let notified = self.http_seen.notified();
            if let Some(line) = self.lock().http.clone() {
                return line;
            }
            notified.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Said> {
        self.said.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The best line so far, without waiting.
    fn last_so_far(&self) -> Option<String> {
        self.lock().best()
    }

    /// The best line, once the server closed its stderr (briefly waited for: a server that
    /// left a child holding it open gives what it said so far).
    async fn last_line(self) -> Option<String> {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.task).await;
        let best = self
            .said
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .best();
        best
    }
}

/// The server's end with the client's, where the platform has a way.
mod death {
    /// Linux: the server gets SIGTERM when the client's thread that started it ends (the
    /// runtime's worker threads live as long as the client does), however the client ended.
    #[cfg(target_os = "linux")]
    #[allow(
        unsafe_code,
        reason = "pre_exec: the death signal is set in the child between fork and exec"
    )]
    pub fn die_with_client(command: &mut tokio::process::Command) {
        use rustix::process::{getpid, getppid, set_parent_process_death_signal, Signal};
        let client = getpid();
        // SAFETY: the closure runs in the forked child before exec and makes only raw system
        // calls (prctl, getppid), which are async-signal-safe; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                set_parent_process_death_signal(Some(Signal::TERM))?;
                // The client died before the death signal was set: nobody will send it.
                if getppid() != Some(client) {
                    return Err(std::io::ErrorKind::Other.into());
                }
                Ok(())
            });
        }
    }

    /// Windows: the server joins a job object that kills its processes when its last handle
    /// closes; the client holds that handle until it exits, however it exits.
    #[cfg(windows)]
    #[allow(
        unsafe_code,
        reason = "Win32 job object calls; each block says why it is sound"
    )]
    pub fn join_kill_on_close_job(pid: u32) -> std::io::Result<()> {
        use std::sync::OnceLock;
        use windows_sys::Win32::Foundation::CloseHandle;
        use windows_sys::Win32::System::JobObjects::{
            AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation,
            SetInformationJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
            JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
        };
        use windows_sys::Win32::System::Threading::{
            OpenProcess, PROCESS_SET_QUOTA, PROCESS_TERMINATE,
        };
        // The job's handle as a number (a raw handle is not `Sync`); never closed: the
        // process's exit closes it.
        static JOB: OnceLock<Option<usize>> = OnceLock::new();
        let job = JOB.get_or_init(|| {
            // SAFETY: null security attributes and name create an anonymous job.
            let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
            if job.is_null() {
                return None;
            }
            let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
            info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
            // SAFETY: `info` is a valid JOBOBJECT_EXTENDED_LIMIT_INFORMATION of the size passed,
            // for the information class that expects it; `job` is a valid job handle.
            let ok = unsafe {
                SetInformationJobObject(
                    job,
                    JobObjectExtendedLimitInformation,
                    (&info as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
                    std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                )
            };
            (ok != 0).then_some(job as usize)
        });
        let job = job.ok_or_else(std::io::Error::last_os_error)?;
        // SAFETY: opening a process by id has no memory effects; the handle is checked.
        let process = unsafe { OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, 0, pid) };
        if process.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both handles are valid for the call.
        let ok = unsafe { AssignProcessToJobObject(job as _, process) };
        let error = std::io::Error::last_os_error();
        // SAFETY: `process` was opened above and is closed once.
        unsafe { CloseHandle(process) };
        if ok == 0 {
            return Err(error);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_told_from_the_rest_of_a_servers_log() {
        for error in [
            "error: the projects folder ./nowhere does not exist",
            "2026-12-08T00:00:00.1Z ERROR pyrun_mcp_server: cannot bind",
            "  ERROR pyrun_mcp_server::app: boom",
        ] {
            assert!(is_error_line(error), "{error}");
        }
        for other in [
            "pyrun-mcp serving over stdio; projects folder: /tmp/p",
            "pyrun-mcp protection: landlock, seccomp (an ERROR later is not this line's level)",
        ] {
            assert!(!is_error_line(other), "{other}");
        }
        let warning = "2026-12-08T00:00:00.1Z  WARN pyrun_mcp_server: PYTHON_TIMOUT is no setting";
        assert!(is_warning_line(warning) && !is_error_line(warning));
        assert!(!is_warning_line(
            "2026-12-08T00:00:00.1Z  INFO pyrun_mcp_server: ready"
        ));
        assert!(!is_warning_line(
            "pyrun-mcp serving over stdio (WARN later)"
        ));
    }

    #[test]
    fn http_banners_are_recognised() {
        assert!(says_it_serves_http(
            "pyrun-mcp listening on http://127.0.0.1:8765"
        ));
        assert!(says_it_serves_http(
            "INFO:     Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)"
        ));
        assert!(!says_it_serves_http("pyrun-mcp serving over stdio"));
    }
}

//! The audit log: who did what. Every MCP tool call becomes one JSON line (`--audit-log`, default
//! `audit.jsonl` in the state folder): the time, the principal (the static token, an OAuth client,
//! the local user, or anonymous), the transport and its session, the tool, the file it ran, how
//! many arguments it got, how it ended, how long it took and which sandbox layers held it.
//!
//! Never written: what a script printed, the values of its arguments, its stdin, tokens or any
//! other secret. A line is built from the [`Caller`], the transport's [`Channel`] and the
//! [`CallNotes`] the tool fills in; none of them holds such a value.
//!
//! Steps of a write: serialize the line (outside the lock), take the lock, rotate when the file
//! would pass its size limit (`audit.jsonl` → `audit.jsonl.1` → … → dropped after [`KEEP`]),
//! append the line with one `write`. The file is made 0600 on Unix, its folder 0700. Writing never
//! fails a tool call: an error is logged once (and once more when writing works again), and the
//! file is reopened at the next call.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use pyrun_run::caller::Caller;

/// A log grows to this size before it is rotated.
const MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Rotated files kept beside the live one (`FILE.1` is the newest).
const KEEP: usize = 5;
/// A file name the tool could not resolve is recorded as asked, cut to this many bytes.
const MAX_ASKED_NAME: usize = 512;

/// The transport a call came over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    Stdio,
    StreamableHttp,
    Sse,
}

/// Where a call came from, as its transport knows it: put in a request's extensions by a
/// transport that has no other way to say it (the SSE one); stdio and `/mcp` are recognized by the
/// handler itself.
#[derive(Clone, Debug)]
pub struct Channel {
    pub transport: TransportKind,
    /// The MCP session, when the transport has sessions.
    pub session_id: Option<Arc<str>>,
}

/// What a tool tells the audit log about its call while it runs (the handler puts a fresh one
/// in each call's extensions). Only names, counts and outcomes: never values or output.
#[derive(Clone, Debug, Default)]
pub struct CallNotes(Arc<Mutex<RunNotes>>);

/// The facts of one run, as [`CallNotes`] collects them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunNotes {
    /// The file relative to the projects folder, or the name as asked when it did not resolve.
    pub file_name: Option<String>,
    pub arg_count: Option<usize>,
    /// The size of the code a `run_python_code` call sent, in bytes (never the code).
    pub code_bytes: Option<usize>,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    pub sandbox: Option<Vec<&'static str>>,
}

impl CallNotes {
    /// Updates the notes (a poisoned lock is taken over: the notes are plain values).
    pub fn note(&self, f: impl FnOnce(&mut RunNotes)) {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The name a caller asked for that did not resolve, cut to a bounded length.
    pub fn asked_file(&self, name: &str) {
        let mut end = name.len().min(MAX_ASKED_NAME);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let name = name[..end].to_owned();
        self.note(|n| n.file_name = Some(name));
    }

    fn take(&self) -> RunNotes {
        std::mem::take(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// One finished tool call, as the handler saw it.
pub struct FinishedCall<'a> {
    pub caller: &'a Caller,
    pub channel: &'a Channel,
    pub tool: &'a str,
    pub notes: &'a CallNotes,
    /// True when the tool did not do its job: a tool error (a refused path, a sandbox that
    /// failed) or a protocol error (unknown tool, invalid arguments).
    pub refused: bool,
    pub duration: Duration,
}

/// One line of the log.
#[derive(Debug, Serialize)]
struct Line<'a> {
    time: String,
    principal: Principal<'a>,
    transport: TransportKind,
    session_id: Option<&'a str>,
    tool: &'a str,
    file_name: Option<String>,
    arg_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code_bytes: Option<usize>,
    exit_code: Option<i32>,
    timed_out: bool,
    cancelled: bool,
    refused: bool,
    duration_ms: u64,
    sandbox: Option<Vec<&'static str>>,
}

/// Who called, for the log: the kind, and for an OAuth client its id and name.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Principal<'a> {
    Local,
    Token,
    Anonymous,
    Oauth {
        client_id: &'a str,
        client_name: &'a str,
    },
}

impl<'a> From<&'a Caller> for Principal<'a> {
    fn from(caller: &'a Caller) -> Self {
        match caller {
            Caller::Local => Self::Local,
            Caller::BearerToken => Self::Token,
            Caller::Anonymous => Self::Anonymous,
            Caller::OAuthClient(client) => Self::Oauth {
                client_id: &client.id,
                client_name: &client.name,
            },
        }
    }
}

/// The audit log, or nothing when it is off.
#[derive(Debug)]
pub struct AuditLog {
    file: Option<Mutex<LogFile>>,
}

impl AuditLog {
    /// No log (`--audit-log off`, or no state folder).
    pub fn off() -> Self {
        Self { file: None }
    }

    /// The log at `path`, opened now so that a problem shows at start-up; a file that cannot be
    /// opened is logged and tried again at each call.
    pub fn open(path: PathBuf) -> Self {
        Self::with_limits(path, MAX_BYTES, KEEP)
    }

    fn with_limits(path: PathBuf, max_bytes: u64, keep: usize) -> Self {
        let mut file = LogFile {
            path,
            open: None,
            max_bytes,
            keep,
            failing: false,
        };
        if let Err(error) = file.reopen() {
            file.failed(&error);
        }
        Self {
            file: Some(Mutex::new(file)),
        }
    }

    pub fn is_on(&self) -> bool {
        self.file.is_some()
    }

    /// Appends the call's line. Never fails: see the module's header.
    pub fn record(&self, call: &FinishedCall<'_>) {
        let Some(file) = &self.file else { return };
        let notes = call.notes.take();
        let line = Line {
            time: rfc3339_utc(SystemTime::now()),
            principal: call.caller.into(),
            transport: call.channel.transport,
            session_id: call.channel.session_id.as_deref(),
            tool: call.tool,
            file_name: notes.file_name,
            arg_count: notes.arg_count,
            code_bytes: notes.code_bytes,
            exit_code: notes.exit_code,
            timed_out: notes.timed_out,
            cancelled: notes.cancelled,
            refused: call.refused,
            duration_ms: u64::try_from(call.duration.as_millis()).unwrap_or(u64::MAX),
            sandbox: notes.sandbox,
        };
        let Ok(mut bytes) = serde_json::to_vec(&line) else {
            return; // plain strings and numbers: cannot fail
        };
        bytes.push(b'\n');
        lock(file).append(&bytes);
    }
}

fn lock(file: &Mutex<LogFile>) -> MutexGuard<'_, LogFile> {
    // A panic while holding the lock leaves at worst a closed file, which the next write reopens.
    file.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    /// The open file and its size; the size is `None` for what is not a regular file (a pipe,
    /// `/dev/stderr`), which is never rotated.
    open: Option<(File, Option<u64>)>,
    max_bytes: u64,
    /// Rotated files kept (at least 1).
    keep: usize,
    /// An error was logged and nothing has been written since.
    failing: bool,
}

impl LogFile {
    fn append(&mut self, line: &[u8]) {
        match self.try_append(line) {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::info!(path = %self.path.display(), "audit log written again");
            }
            Ok(()) => {}
            Err(error) => {
                self.open = None;
                self.failed(&error);
            }
        }
    }

    fn try_append(&mut self, line: &[u8]) -> std::io::Result<()> {
        let len = line.len() as u64;
        let full =
            matches!(self.open, Some((_, Some(size))) if size > 0 && size + len > self.max_bytes);
        if full {
            self.open = None;
            self.rotate()?;
        }
        if self.open.is_none() {
            self.reopen()?;
        }
        let Some((file, size)) = &mut self.open else {
            return Err(std::io::Error::other("not open"));
        };
        file.write_all(line)?;
        if let Some(size) = size {
            *size += len;
        }
        Ok(())
    }

    /// FILE.(n-1) → FILE.n, …, FILE → FILE.1; the oldest is overwritten.
    fn rotate(&self) -> std::io::Result<()> {
        for n in (1..self.keep).rev() {
            match std::fs::rename(numbered(&self.path, n), numbered(&self.path, n + 1)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::rename(&self.path, numbered(&self.path, 1))
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        // A missing folder (the state folder on first use) is made owner-only; an existing one,
        // even a link (macOS's /tmp), is the user's choice.
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if std::fs::symlink_metadata(dir).is_err() {
                pyrun_run::state_dir::create_owner_only(dir)?;
            }
        }
        let mut options = std::fs::OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&self.path)?;
        let meta = file.metadata()?;
        let size = meta.is_file().then_some(meta.len());
        self.open = Some((file, size));
        Ok(())
    }

    fn failed(&mut self, error: &std::io::Error) {
        if !self.failing {
            self.failing = true;
            tracing::warn!(
                path = %self.path.display(),
                %error,
                "cannot write the audit log; tool calls go on unrecorded until it works again"
            );
        }
    }
}

/// `FILE.n`.
fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// `2026-11-05T13:05:54.123Z`.
fn rfc3339_utc(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyrun_run::caller::OAuthClient;
    use serde_json::Value;

    fn call<'a>(
        caller: &'a Caller,
        channel: &'a Channel,
        notes: &'a CallNotes,
    ) -> FinishedCall<'a> {
        FinishedCall {
            caller,
            channel,
            tool: "run_python",
            notes,
            refused: false,
            duration: Duration::from_millis(42),
        }
    }

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_line_names_who_how_what_and_the_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/audit.jsonl");
        let log = AuditLog::open(path.clone());
        let caller = Caller::OAuthClient(OAuthClient {
            id: "https://claude.ai/oauth/metadata".into(),
            name: "Claude".into(),
        });
        let channel = Channel {
            transport: TransportKind::StreamableHttp,
            session_id: Some("abc123".into()),
        };
        let notes = CallNotes::default();
        notes.note(|n| {
            *n = RunNotes {
                file_name: Some("mathpkg/main.py".into()),
                arg_count: Some(2),
                code_bytes: None,
                exit_code: Some(3),
                timed_out: false,
                cancelled: false,
                sandbox: Some(vec!["landlock", "seccomp"]),
            }
        });
        log.record(&call(&caller, &channel, &notes));
        let stdio = Channel {
            transport: TransportKind::Stdio,
            session_id: None,
        };
        let listed = CallNotes::default();
        log.record(&FinishedCall {
            tool: "list_python_files",
            ..call(&Caller::Local, &stdio, &listed)
        });

        let lines = lines(&path);
        assert_eq!(lines.len(), 2);
        let run = &lines[0];
        let time = run["time"].as_str().unwrap();
        assert!(
            time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
            "{time}"
        );
        assert_eq!(
            run["principal"],
            serde_json::json!({"kind": "oauth", "client_id": "https://claude.ai/oauth/metadata", "client_name": "Claude"})
        );
        assert_eq!(run["transport"], "streamable-http");
        assert_eq!(run["session_id"], "abc123");
        assert_eq!(run["tool"], "run_python");
        assert_eq!(run["file_name"], "mathpkg/main.py");
        assert_eq!(run["arg_count"], 2);
        assert_eq!(run["exit_code"], 3);
        assert_eq!(run["timed_out"], false);
        assert_eq!(run["refused"], false);
        assert_eq!(run["duration_ms"], 42);
        assert_eq!(run["sandbox"], serde_json::json!(["landlock", "seccomp"]));
        let list = &lines[1];
        assert_eq!(list["principal"], serde_json::json!({"kind": "local"}));
        assert_eq!(list["transport"], "stdio");
        assert_eq!(list["session_id"], Value::Null);
        assert_eq!(list["file_name"], Value::Null);
        for caller in [Caller::BearerToken, Caller::Anonymous] {
            let kind = serde_json::to_value(Principal::from(&caller)).unwrap();
            assert_eq!(kind["kind"], caller.key().as_ref());
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_the_owners_alone_and_so_is_its_folder() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/audit.jsonl");
        let _log = AuditLog::open(path.clone());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn a_full_file_is_rotated_and_the_oldest_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let channel = Channel {
            transport: TransportKind::Sse,
            session_id: Some("s".into()),
        };
        let notes = CallNotes::default();
        let long = "x".repeat(100);
        let record = |log: &AuditLog, n: usize| {
            notes.note(|notes| notes.file_name = Some(format!("{long}{n}.py")));
            log.record(&call(&Caller::BearerToken, &channel, &notes));
        };
        // Room for two lines per file (they differ in length by a byte or so of the time).
        let probe = dir.path().join("probe.jsonl");
        record(&AuditLog::open(probe.clone()), 0);
        let limit = std::fs::metadata(&probe).unwrap().len() * 5 / 2;
        let log = AuditLog::with_limits(path.clone(), limit, 2);
        for n in 0..7 {
            record(&log, n);
        }
        let names = |p: &Path| -> Vec<String> {
            lines(p)
                .iter()
                .map(|l| l["file_name"].as_str().unwrap()[100..].to_owned())
                .collect()
        };
        assert_eq!(names(&path), ["6.py"]);
        assert_eq!(names(&numbered(&path, 1)), ["4.py", "5.py"]);
        assert_eq!(names(&numbered(&path, 2)), ["2.py", "3.py"]);
        assert!(!numbered(&path, 3).exists());
        for file in [path.clone(), numbered(&path, 1)] {
            assert!(std::fs::metadata(&file).unwrap().len() <= limit);
        }
    }

    #[test]
    fn a_failing_log_never_fails_the_call_and_recovers() {
        let dir = tempfile::tempdir().unwrap();
        // The folder is a file: opening fails.
        let blocker = dir.path().join("state");
        std::fs::write(&blocker, "").unwrap();
        let path = blocker.join("audit.jsonl");
        let log = AuditLog::open(path.clone());
        let channel = Channel {
            transport: TransportKind::Stdio,
            session_id: None,
        };
        let notes = CallNotes::default();
        log.record(&call(&Caller::Local, &channel, &notes));
        std::fs::remove_file(&blocker).unwrap();
        log.record(&call(&Caller::Local, &channel, &notes));
        assert_eq!(lines(&path).len(), 1);
    }

    #[test]
    fn an_asked_name_is_cut_on_a_character_boundary() {
        let notes = CallNotes::default();
        notes.asked_file(&"é".repeat(MAX_ASKED_NAME));
        let name = notes.take().file_name.unwrap();
        assert!(name.len() <= MAX_ASKED_NAME && name.len() >= MAX_ASKED_NAME - 1);
    }

    #[test]
    fn times_are_rfc3339_utc() {
        let at = |secs: u64, ms: u64| {
            rfc3339_utc(
                std::time::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(ms),
            )
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_700_000_000, 999), "2023-11-14T22:13:20.999Z");
        assert_eq!(at(4_102_444_799, 0), "2099-12-31T23:59:59.000Z");
    }
}

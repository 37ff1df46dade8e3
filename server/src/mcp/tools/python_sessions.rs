//! The sessions room (`--allow-inline-code`): `session_start`, `session_exec`, `session_stop`,
//! `list_sessions`. Its router joins the server's with `run_python_code`'s, only with the flag.
//! They adapt `pyrun_run::session` to MCP: arguments in, a session looked up for its owner, a result
//! out.
//!
//! Results: a Python exception in the caller's code is a normal result with `error` set (like a
//! run's nonzero exit); a bad or foreign id, a session that died or was killed, and a refused
//! start are tool errors.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::client_message::ClientMessage;
use crate::mcp::call::arguments::{check_code, effective_timeout};
use crate::mcp::call::{optional_project, project_env, CallContext};
use crate::mcp::present::quarantine_note::quarantine_note;
use crate::mcp::present::reply::{
    fmt_secs, listing, millis, push_section, refusal, rfc3339, structured, truncation_note,
};
use crate::mcp::present::run_hint;
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_run::engine::placement::RunMode;
use pyrun_run::quarantine::moved_paths;
use pyrun_run::session::{ExecError, ExecOutcome, Session, SessionError, INTERRUPT_GRACE};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionStartArgs {
    /// A folder of the projects folder to work in (relative to it, e.g. `mathpkg`; `""` for the
    /// folder itself): the working directory, and where imports look first. When omitted, the
    /// session works in its own empty scratch folder.
    #[serde(default)]
    pub project: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionExecArgs {
    #[serde(flatten)]
    pub session: SessionIdArgs,
    /// Python code to run in the session, as in a REPL cell: statements, and optionally a final
    /// expression whose repr comes back as `result`. Variables, imports and open files persist.
    pub code: String,
    /// Seconds before the code is interrupted (KeyboardInterrupt; the session lives on); may
    /// lower the server's limit, never raise it.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionIdArgs {
    /// The id session_start returned.
    pub session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListSessionsArgs {}

/// A started session.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StartedSession {
    /// The session's id, for session_exec and session_stop.
    pub session_id: String,
    /// The folder it works in, relative to the projects folder; null: its own scratch folder.
    pub project: Option<String>,
}

/// What one session_exec gave back.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecReport {
    /// What the code printed to sys.stdout (capped).
    pub stdout: String,
    /// What it printed to sys.stderr, then what its processes wrote straight to file
    /// descriptors 1 and 2 (os.write, subprocesses) (capped).
    pub stderr: String,
    /// The repr of the value of a final expression, like a REPL; null when there is none (or
    /// it is None).
    pub result: Option<String>,
    /// The traceback of an exception the code raised; null when it raised none.
    pub error: Option<String>,
    /// Whether the time limit interrupted the code (`error` then holds the KeyboardInterrupt).
    pub timed_out: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// Wall time of the exec in milliseconds.
    pub duration_ms: u64,
    /// Protected names (a `.git`, a `__pycache__`, `.env`...) the session created in the
    /// projects folder, moved to the server's quarantine after the exec (relative paths).
    pub quarantined: Vec<String>,
    /// What the caller may want to know: a `timeout_seconds` above the server's limit was cut
    /// to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// One line of `list_sessions`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionSummary {
    pub session_id: String,
    /// The folder it works in, relative to the projects folder; null: its own scratch folder.
    pub project: Option<String>,
    /// When it was started (RFC 3339, UTC).
    pub started_at: String,
    /// When it last ran code, or was started (RFC 3339, UTC).
    pub last_used_at: String,
    /// How many session_exec calls it has had.
    pub execs: u64,
}

/// The caller's sessions, oldest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
}

#[tool_router(router = sessions_router, vis = "pub(in crate::mcp)")]
impl PyRunServer {
    /// Start a persistent Python session: an interpreter that keeps variables, imports and open
    /// files between session_exec calls, under the same sandbox and limits as run_python. With
    /// `project` it works in that folder of the projects folder.
    #[tool(
        title = "Start a Python session",
        annotations(title = "Start a Python session", open_world_hint = false),
        output_schema = schema_for_output::<StartedSession>()
    )]
    async fn session_start(
        &self,
        Parameters(args): Parameters<SessionStartArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let project = match optional_project(self.engine(), args.project.as_deref()) {
            Ok(project) => project,
            Err(message) => return Ok(refusal(message)),
        };
        let caller = self.caller(&ctx);
        let shown = project.as_ref().map(|dir| dir.relative().to_owned());
        let python = match project_env(self.engine(), project.as_ref()).await {
            Ok(env) => env,
            Err(message) => return Ok(refusal(message)),
        };
        let started = self
            .app
            .engine
            .sessions()
            .start(&caller.key(), project.as_ref(), shown, python.as_deref())
            .await;
        let session = match started {
            Ok(session) => session,
            Err(e) => return Ok(refusal(not_started(e))),
        };
        tracing::info!(%caller, session = %session.id, "python session started");
        let mut text = String::new();
        let _ = write!(
            text,
            "Started Python session {} ({}).\nRun code with session_exec {{\"session_id\": \"{}\", \
             \"code\": \"...\"}}; close it with session_stop.",
            session.id,
            match &session.project {
                Some(project) if project.is_empty() => "in the projects folder".to_owned(),
                Some(project) => format!("in {project}"),
                None => "in its own scratch folder".to_owned(),
            },
            session.id,
        );
        let started = StartedSession {
            session_id: session.id.clone(),
            project: session.project.clone(),
        };
        Ok(structured(text, &started))
    }

    /// Run Python code in a session and return what it printed, the repr of a final expression
    /// (`result`) and the traceback of an exception (`error`). At the time limit the code gets
    /// KeyboardInterrupt; code that ignores it is killed with its session.
    #[tool(
        title = "Run code in a Python session",
        annotations(title = "Run code in a Python session", open_world_hint = false),
        output_schema = schema_for_output::<ExecReport>()
    )]
    async fn session_exec(
        &self,
        Parameters(args): Parameters<SessionExecArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // What the audit log learns of this call: the code's size, never the code or output.
        let call = self.call_context(&ctx);
        call.notes.note(|n| n.code_bytes = Some(args.code.len()));
        if let Err(message) = check_code(&args.code, self.app.config.inline.max_code_bytes) {
            return Ok(refusal(message));
        }
        let limit = self.engine().time_limit(RunMode::Call);
        let timeout = match effective_timeout(args.timeout_seconds, limit) {
            Ok(t) => t,
            Err(message) => return Ok(refusal(message)),
        };
        let session = match find_session(&call, &args.session.session_id) {
            Ok(session) => session,
            Err(message) => return Ok(refusal(message)),
        };
        let sessions = self.engine().sessions();
        match sessions.exec(&session, args.code, timeout, &ctx.ct).await {
            Ok(outcome) => {
                call.notes.note(|n| n.timed_out = outcome.timed_out);
                let mut result = exec_result(call.app, outcome, timeout);
                // A `timeout_seconds` above the server's limit was cut to it: say so.
                let cap = run_hint::capped(args.timeout_seconds, limit, run_hint::RUN_TIMEOUT);
                if let Some(note) = cap {
                    run_hint::add(&mut result, &note);
                }
                Ok(result)
            }
            Err(e) => {
                tracing::info!(session = %session.id, "python session gone: {e}");
                Ok(refusal(session_gone(&session, e, timeout)))
            }
        }
    }

    /// Close a Python session: its interpreter and every process it started are killed.
    #[tool(
        title = "Close a Python session",
        annotations(title = "Close a Python session", destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<StartedSession>()
    )]
    async fn session_stop(
        &self,
        Parameters(args): Parameters<SessionIdArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = self.call_context(&ctx);
        let session = match find_session(&call, &args.session_id) {
            Ok(session) => session,
            Err(message) => return Ok(refusal(message)),
        };
        self.engine()
            .sessions()
            .stop(&call.caller.key(), &session.id)
            .await;
        let text = format!("Closed Python session {}.", session.id);
        let stopped = StartedSession {
            session_id: session.id.clone(),
            project: session.project.clone(),
        };
        Ok(structured(text, &stopped))
    }

    /// List your open Python sessions, oldest first.
    #[tool(
        title = "List Python sessions",
        annotations(title = "List Python sessions", read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<SessionList>()
    )]
    async fn list_sessions(
        &self,
        Parameters(_): Parameters<ListSessionsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let owner = self.caller(&ctx);
        let sessions: Vec<SessionSummary> = self
            .app
            .engine
            .sessions()
            .list(&owner.key())
            .iter()
            .map(|session| summary(session))
            .collect();
        let text = listing(&sessions, "(no sessions)", |s| {
            format!(
                "{}  {}  started {}  last used {}  {} execs",
                s.session_id,
                s.project
                    .as_deref()
                    .map_or("(scratch)", |p| if p.is_empty() { "." } else { p }),
                s.started_at,
                s.last_used_at,
                s.execs,
            )
        });
        Ok(structured(text, &SessionList { sessions }))
    }
}

/// The caller's session with this id, or the one message for unknown, closed and foreign ids.
fn find_session(call: &CallContext, id: &str) -> Result<Arc<Session>, ClientMessage> {
    call.app
        .engine
        .sessions()
        .get(&call.caller.key(), id)
        .ok_or_else(|| unknown_session(call.app, id))
}

fn unknown_session(app: &App, id: &str) -> ClientMessage {
    ClientMessage::new("no Python session with id ")
        .given(id)
        .then(" (sessions close after ")
        .duration(app.engine.sessions().settings().idle_timeout)
        .then(" unused, when their interpreter ends, and with a server restart)")
        .hint("start one with session_start; list_sessions shows yours")
}

fn not_started(e: SessionError) -> ClientMessage {
    match e {
        SessionError::CallerFull { max } => ClientMessage::new("you have ")
            .number(max)
            .then(" Python sessions open, the most one caller may hold")
            .hint(
                "close one with session_stop (list_sessions shows them); the server's \
                 operator can raise --max-python-sessions-per-caller",
            ),
        SessionError::ServerFull { max } => ClientMessage::new("")
            .number(max)
            .then(" Python sessions are open on this server, the most it allows")
            .hint(
                "close one of yours with session_stop, or try again later (unused sessions \
                 close by themselves); the server's operator can raise --max-python-sessions",
            ),
        SessionError::NoId => {
            tracing::error!("{e}");
            ClientMessage::new("the server could not draw a session id")
                .hint("the server's log has the details")
        }
        SessionError::Start(e) => ClientMessage::from(e),
    }
}

fn session_gone(session: &Session, e: ExecError, timeout: Duration) -> ClientMessage {
    let start = "start a new one with session_start (what it held is lost)";
    match e {
        ExecError::Ended => ClientMessage::new("the Python session ")
            .given(&session.id)
            .then(
                " has ended: its interpreter exited (os._exit, its memory or process limit, \
                 or code that closed its own pipes) and the \
                 session is gone",
            )
            .hint(start),
        ExecError::CancelledWhileQueued => ClientMessage::new(
            "the call was cancelled before its code started: the Python \
                 session ",
        )
        .given(&session.id)
        .then(" was still running an earlier session_exec, and lives on"),
        ExecError::Killed { timed_out } => {
            let why = if timed_out {
                ClientMessage::new("the code was still running at the time limit (")
                    .duration(timeout)
                    .then(")")
            } else {
                ClientMessage::new("the call was cancelled while the code ran")
            };
            why.then(" and did not stop within ")
                .duration(INTERRUPT_GRACE)
                .then(" of its KeyboardInterrupt: the Python session ")
                .given(&session.id)
                .then(" was killed with every process it started, and is gone")
                .hint(
                    "start a new one with session_start; code that runs long belongs in a \
                     file run with start_python",
                )
        }
    }
}

/// An exec's result: the structured report, and text in the familiar shape.
fn exec_result(app: &App, outcome: ExecOutcome, timeout: Duration) -> CallToolResult {
    // Tracebacks and raw output may name files by host path (the sandbox off, or modules of
    // the projects folder): relative, as in run results.
    let stderr = app.engine.without_host_folder(&outcome.stderr);
    let error = outcome
        .error
        .as_deref()
        .map(|e| app.engine.without_host_folder(e));
    let report = ExecReport {
        stdout: outcome.stdout,
        stderr,
        result: outcome.result,
        error,
        timed_out: outcome.timed_out,
        stdout_truncated: outcome.stdout_truncated,
        stderr_truncated: outcome.stderr_truncated,
        duration_ms: millis(outcome.duration),
        quarantined: moved_paths(&outcome.quarantined),
        hint: None,
    };
    let mut text = render_exec(&report, timeout);
    if let Some(note) = quarantine_note(&outcome.quarantined, "session") {
        push_section(&mut text, &note);
    }
    structured(text, &report)
}

/// The text of an exec: its output, the traceback, the result, and what was cut.
fn render_exec(report: &ExecReport, timeout: Duration) -> String {
    let mut text = report.stdout.clone();
    if !report.stderr.is_empty() {
        push_section(&mut text, "--- stderr ---\n");
        text.push_str(&report.stderr);
    }
    if let Some(error) = &report.error {
        push_section(&mut text, error);
    }
    if let Some(result) = &report.result {
        push_section(&mut text, result);
    }
    if report.timed_out {
        push_section(
            &mut text,
            &format!(
                "[Interrupted at the time limit ({} s); the session lives on]",
                fmt_secs(timeout)
            ),
        );
    }
    if let Some(note) = truncation_note(report.stdout_truncated, report.stderr_truncated) {
        push_section(&mut text, &note);
    }
    if text.is_empty() {
        text.push_str("(no output)");
    }
    text
}

fn summary(session: &Session) -> SessionSummary {
    SessionSummary {
        session_id: session.id.clone(),
        project: session.project.clone(),
        started_at: rfc3339(session.started_at),
        last_used_at: rfc3339(session.last_used_at()),
        execs: session.execs(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_text_shows_output_traceback_result_and_cuts() {
        let report = ExecReport {
            stdout: "hi".into(),
            stderr: "warn\n".into(),
            result: Some("2".into()),
            error: None,
            timed_out: false,
            stdout_truncated: true,
            stderr_truncated: false,
            duration_ms: 1,
            quarantined: Vec::new(),
            hint: None,
        };
        assert_eq!(
            render_exec(&report, Duration::from_secs(30)),
            "hi\n--- stderr ---\nwarn\n2\n[Output truncated: stdout over the limit]"
        );
        let quiet = ExecReport {
            stdout: String::new(),
            stderr: String::new(),
            result: None,
            error: None,
            stdout_truncated: false,
            ..report
        };
        assert_eq!(render_exec(&quiet, Duration::from_secs(1)), "(no output)");
    }
}

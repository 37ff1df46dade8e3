//! The background room: `start_python`, `get_run`, `cancel_run`, `list_runs`. They adapt
//! `pyrun_run::background` to MCP: arguments in, a record looked up for its owner, a result out.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::app::App;
use crate::client_message::ClientMessage;
use crate::mcp::call::start_run::{file_run, start_refused};
use crate::mcp::call::{
    call_notes, python_info, script_call, take_stdin, CallContext, RunPythonArgs,
};
use crate::mcp::present::artifact_blocks::{self, Presented};
use crate::mcp::present::reply::{
    fmt_secs, listing, millis, refusal, rfc3339, structured, truncation_note, PAGE_BYTES,
};
use crate::mcp::present::run_hint;
use crate::mcp::protocol::apps::run_viewer_tool_meta;
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_run::background::{RunEnd, RunKind, RunRecord, LOCAL_BACKEND};
use pyrun_run::engine::placement::RunMode;
use pyrun_run::engine::Engine;
use pyrun_run::live_output::Stream;
/// The longest `get_run` waits for news.
const MAX_WAIT_SECS: f64 = 30.0;
/// How long `cancel_run` waits for the killed run to be reaped before it answers.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetRunArgs {
    #[serde(flatten)]
    pub run: RunIdArgs,
    /// Wait up to this many seconds (0 to 30) for the run to end or print more; 0 answers at once.
    #[serde(default)]
    pub wait_seconds: Option<f64>,
    /// Return stdout from this byte offset (the previous answer's next_stdout_offset).
    #[serde(default)]
    pub stdout_offset: Option<u64>,
    /// Return stderr from this byte offset (the previous answer's next_stderr_offset).
    #[serde(default)]
    pub stderr_offset: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunIdArgs {
    /// The id start_python returned.
    pub run_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListRunsArgs {}

pub use pyrun_api::{RunList, RunState, RunSummary, StartedRun};

#[tool_router(router = background_router, vis = "pub(in crate::mcp)")]
impl PyRunServer {
    /// Start a Python file in the background and return its run id at once; follow it with
    /// get_run. For scripts that take longer than a tool call may wait (training, downloads).
    #[tool(
        title = "Start a Python file in the background",
        annotations(title = "Start a Python file in the background", open_world_hint = false),
        output_schema = schema_for_output::<StartedRun>(),
        meta = run_viewer_tool_meta()
    )]
    async fn start_python(
        &self,
        Parameters(mut args): Parameters<RunPythonArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let notes = call_notes(&ctx);
        let call = match script_call(self.engine(), &args, RunMode::Background, &notes).await {
            Ok(call) => call,
            Err(message) => return Ok(refusal(message)),
        };
        let owner = self.caller(&ctx);
        let upload = args.stdin_upload.take();
        if let Err(message) = take_stdin(
            &self.state.stdin,
            &owner,
            &mut args.stdin,
            upload.as_deref(),
        ) {
            return Ok(refusal(message));
        }
        let asked_timeout = args.limit.timeout_seconds;
        let run = match file_run(self.engine(), &call, &args) {
            Ok(run) => run,
            Err(message) => return Ok(refusal(message)),
        };
        let started = self
            .engine()
            .start_background(&owner, &run, RunKind::Background);
        let record = match started.await {
            Ok(record) => record,
            Err(refused) => return Ok(refusal(start_refused(self.engine(), refused))),
        };
        tracing::info!(%owner, run_id = %record.id, script = %record.file_name, "background run started");
        let status = record.status();
        let mut text = String::new();
        let _ = write!(
            text,
            "Started {} as run {} ({status}).\nFollow it with get_run {{\"run_id\": \"{}\", \
             \"wait_seconds\": 30}}; stop it with cancel_run.",
            record.file_name, record.id, record.id
        );
        let hint = run_hint::capped(
            asked_timeout,
            self.engine().time_limit(RunMode::Background),
            run_hint::BACKGROUND_TIMEOUT,
        );
        if let Some(hint) = &hint {
            let _ = write!(text, "\nhint: {hint}");
        }
        let started = StartedRun {
            run_id: record.id.clone(),
            status,
            hint,
        };
        Ok(structured(text, &started))
    }

    /// Read a background run: its status, exit code and output from the given offsets. With
    /// wait_seconds it waits (up to 30 s) until the run ends or prints more.
    #[tool(
        title = "Read a background run",
        annotations(title = "Read a background run", read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<RunState>()
    )]
    async fn get_run(
        &self,
        Parameters(args): Parameters<GetRunArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let wait = match args.wait_seconds {
            None => Duration::ZERO,
            Some(secs) if (0.0..=MAX_WAIT_SECS).contains(&secs) => Duration::from_secs_f64(secs),
            Some(secs) => {
                return Ok(refusal(
                    ClientMessage::new("wait_seconds must be between 0 and 30, got ").number(secs),
                ))
            }
        };
        let record = match find_run(&self.call_context(&ctx), &args.run.run_id) {
            Ok(record) => record,
            Err(message) => return Ok(refusal(message)),
        };
        let (out, err) = (
            args.stdout_offset.unwrap_or(0),
            args.stderr_offset.unwrap_or(0),
        );
        if !wait.is_zero() {
            record.wait_for_news(wait, out, err).await;
        }
        Ok(run_state(&self.app, &record, out, err).await)
    }

    /// Stop a background run: its whole process tree is killed.
    #[tool(
        title = "Cancel a background run",
        annotations(title = "Cancel a background run", destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<RunState>()
    )]
    async fn cancel_run(
        &self,
        Parameters(args): Parameters<RunIdArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let record = match find_run(&self.call_context(&ctx), &args.run_id) {
            Ok(record) => record,
            Err(message) => return Ok(refusal(message)),
        };
        record.cancel();
        let _ = tokio::time::timeout(CANCEL_WAIT, record.ended()).await;
        Ok(run_state(&self.app, &record, 0, 0).await)
    }

    /// List your background runs (and MCP task runs), newest first.
    #[tool(
        title = "List background runs",
        annotations(title = "List background runs", read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<RunList>()
    )]
    async fn list_runs(
        &self,
        Parameters(_): Parameters<ListRunsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let owner = self.caller(&ctx);
        let runs: Vec<RunSummary> = self
            .engine()
            .runs()
            .list(&owner.key())
            .iter()
            .map(|record| summary(record))
            .collect();
        let text = listing(&runs, "(no runs)", |run| {
            format!(
                "{}  {:<9}  {}  {}  {} s{}{}",
                run.run_id,
                run.status,
                run.started_at,
                run.file_name,
                fmt_secs(Duration::from_millis(run.duration_ms)),
                run.exit_code
                    .map(|c| format!("  exit {c}"))
                    .unwrap_or_default(),
                run.backend
                    .as_deref()
                    .map(|b| format!("  on {b}"))
                    .unwrap_or_default(),
            )
        });
        Ok(structured(text, &RunList { runs }))
    }
}

/// The caller's run with this id, or the one message for unknown, expired and foreign ids.
fn find_run(call: &CallContext, id: &str) -> Result<Arc<RunRecord>, ClientMessage> {
    call.app
        .engine
        .find_run(&call.caller.key(), id)
        .ok_or_else(|| unknown_run(&call.app.engine, id))
}

fn unknown_run(engine: &Engine, id: &str) -> ClientMessage {
    let retention = engine.runs().settings().retention;
    ClientMessage::new("no run with id ")
        .given(id)
        .then(" (runs are kept for ")
        .duration(retention)
        .then(" after they end, and are gone after a server restart)")
}

/// A run's state as a tool result, its output read from the given offsets; once it has
/// ended, with the files it left (images inline within the budget, a link for each).
async fn run_state(app: &App, record: &RunRecord, out: u64, err: u64) -> CallToolResult {
    // The status first: when it says ended, the pages read after it hold the final output.
    let status = record.status();
    let stdout = record.live.read(Stream::Stdout, out, PAGE_BYTES);
    let stderr = record.live.read(Stream::Stderr, err, PAGE_BYTES);
    let at_end = stdout.next_offset == record.live.len(Stream::Stdout)
        && stderr.next_offset == record.live.len(Stream::Stderr);
    if at_end && status.has_ended() {
        record.mark_end_seen();
    }
    let (exit_code, error, quarantined, warm) = match record.end() {
        Some(RunEnd::Finished(outcome)) => (
            outcome.exit_code,
            None,
            pyrun_run::quarantine::moved_paths(&outcome.quarantined),
            outcome.warm,
        ),
        Some(RunEnd::Failed(reason)) => (None, Some(reason.clone()), Vec::new(), false),
        None => (None, None, Vec::new(), false),
    };
    let mut presented = match record.end() {
        Some(RunEnd::Finished(outcome)) => match &outcome.artifacts {
            Some(collected) => {
                artifact_blocks::present(app, record.owner(), &record.id, collected).await
            }
            None => Presented::default(),
        },
        _ => Presented::default(),
    };
    let state = RunState {
        run_id: record.id.clone(),
        file_name: record.file_name.clone(),
        status,
        exit_code,
        stdout: stdout.text,
        stderr: app.engine.without_host_folder(&stderr.text),
        next_stdout_offset: stdout.next_offset,
        next_stderr_offset: stderr.next_offset,
        stdout_truncated: stdout.truncated,
        stderr_truncated: stderr.truncated,
        duration_ms: millis(record.duration()),
        error,
        artifacts: std::mem::take(&mut presented.artifacts),
        skipped_artifacts: std::mem::take(&mut presented.skipped),
        quarantined,
        python: python_info(&app.engine, record.python.as_deref()),
        warm,
    };
    let text = render_state(&state, !at_end);
    let mut result = structured(text, &state);
    presented.add_blocks_to(&mut result);
    result
}

/// The text of a run's state: a status line, the output page, then what to do next.
fn render_state(state: &RunState, more: bool) -> String {
    let mut text = format!(
        "[run {} ({}): {}",
        state.run_id, state.file_name, state.status
    );
    if let Some(code) = state.exit_code {
        let _ = write!(text, ", exit code {code}");
    }
    let _ = write!(
        text,
        ", {} s]",
        fmt_secs(Duration::from_millis(state.duration_ms))
    );
    if let Some(error) = &state.error {
        let _ = write!(text, "\n{error}");
    }
    if !state.stdout.is_empty() {
        text.push('\n');
        text.push_str(&state.stdout);
    }
    if !state.stderr.is_empty() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("--- stderr ---\n");
        text.push_str(&state.stderr);
    }
    if let Some(note) = truncation_note(state.stdout_truncated, state.stderr_truncated) {
        text.push('\n');
        text.push_str(&note);
    }
    if !state.quarantined.is_empty() {
        let _ = write!(
            text,
            "\n[Protected names the run created were moved to the server's quarantine: {}]",
            state.quarantined.join(", ")
        );
    }
    if more {
        let _ = write!(
            text,
            "\n[More output: call get_run with stdout_offset {} and stderr_offset {}]",
            state.next_stdout_offset, state.next_stderr_offset
        );
    } else if !state.status.has_ended() {
        let _ = write!(
            text,
            "\n[Still going: call get_run with stdout_offset {}, stderr_offset {} and wait_seconds 30]",
            state.next_stdout_offset, state.next_stderr_offset
        );
    }
    text
}

fn summary(record: &RunRecord) -> RunSummary {
    let exit_code = match record.end() {
        Some(RunEnd::Finished(outcome)) => outcome.exit_code,
        _ => None,
    };
    RunSummary {
        run_id: record.id.clone(),
        file_name: record.file_name.clone(),
        status: record.status(),
        exit_code,
        duration_ms: millis(record.duration()),
        started_at: rfc3339(record.started_at),
        kind: record.kind,
        backend: (record.backend != LOCAL_BACKEND).then(|| record.backend.to_owned()),
    }
}

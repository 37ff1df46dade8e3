//! The run room: `run_python` (a file of the projects folder, waited for; with `--detach-after`
//! handed over to the background when it runs long) and `list_python_files`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::client_message::push_escaped;
use crate::mcp::call::start_run::{file_run, start_refused};
use crate::mcp::call::waited_run::{
    ended_result, report_value, run_in_call, run_message, too_long_to_show, RunReport,
};
use crate::mcp::call::{
    python_info, script_call, take_stdin, with_progress, CallContext, RunPythonArgs, ScriptCall,
};
use crate::mcp::present::live_chunks::ChunkCursor;
use crate::mcp::present::reply::{fmt_secs, millis, refusal, structured, PAGE_BYTES};
use crate::mcp::present::run_hint;
use crate::mcp::protocol::apps::run_viewer_tool_meta;
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_run::background::RunRecord;
use pyrun_run::engine::placement::RunMode;
use pyrun_run::engine::{Engine, Started};
use pyrun_run::live_output::Stream;
use pyrun_run::paths::ProjectPath;
use pyrun_run::runner::RunRequest;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListFilesArgs {
    /// A subfolder of the projects folder to list; the whole folder when omitted.
    #[serde(default)]
    pub directory: Option<String>,
}

/// The runnable files.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileList {
    /// Paths relative to the projects folder, with `/` separators, sorted. (The text listing
    /// shows one per line, with control characters and backslashes escaped.)
    pub files: Vec<String>,
}

#[tool_router(router = run_router, vis = "pub(in crate::mcp)")]
impl PyRunServer {
    /// Run a Python file from the projects folder and return its output and exit code.
    #[tool(
        title = "Run a Python file",
        annotations(title = "Run a Python file", open_world_hint = false),
        output_schema = schema_for_output::<RunReport>(),
        meta = run_viewer_tool_meta()
    )]
    async fn run_python(
        &self,
        Parameters(mut args): Parameters<RunPythonArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // What the audit log learns of this call: names, counts and the outcome, never values.
        let call = self.call_context(&ctx);
        let engine = self.engine();
        let checked = match script_call(engine, &args, RunMode::Call, &call.notes).await {
            Ok(checked) => checked,
            Err(message) => return Ok(refusal(message)),
        };
        let upload = args.stdin_upload.take();
        let uploads = &self.state.stdin;
        if let Err(message) = take_stdin(uploads, &call.caller, &mut args.stdin, upload.as_deref())
        {
            return Ok(refusal(message));
        }
        // In the call, or (a remote run, or with --detach-after) in the background registry,
        // unlisted until it is handed over: the engine's choice.
        let started = match file_run(engine, &checked, &args) {
            Ok(run) => engine.start_call(&call.caller, &run).await,
            Err(message) => return Ok(refusal(message)),
        };
        let ScriptCall {
            script,
            timeout,
            python,
        } = checked;
        let result = match started {
            Err(refused) => return Ok(refusal(start_refused(engine, refused))),
            Ok(Started::Registered {
                record,
                hand_over_after,
            }) => {
                let after = hand_over_after.unwrap_or(Duration::MAX);
                run_detachable(&call, record, &script, after, timeout, &ctx).await
            }
            Ok(Started::InCall) => {
                let request = RunRequest {
                    python,
                    ..RunRequest::new(&script, &args.args, args.stdin.as_deref(), timeout)
                };
                run_in_call(&call, request, &ctx).await
            }
        };
        Ok(with_cap_note(engine, result, &args))
    }

    /// List the Python files that run_python accepts, relative to the projects folder.
    #[tool(
        title = "List Python files",
        annotations(title = "List Python files", read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<FileList>()
    )]
    async fn list_python_files(
        &self,
        Parameters(args): Parameters<ListFilesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let dir = match self.engine().root().resolve_dir(args.directory.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return Ok(refusal(e.into())),
        };
        let files = self.engine().list_scripts(dir).await;
        let text = if files.is_empty() {
            "(no Python files)".to_owned()
        } else {
            // A file name (scripts can make files) must not add lines of its own to the listing.
            let mut text = String::new();
            for file in &files {
                if !text.is_empty() {
                    text.push('\n');
                }
                push_escaped(&mut text, file);
            }
            text
        };
        Ok(structured(text, &FileList { files }))
    }
}

/// A `timeout_seconds` above the server's limit was cut to it: the result says so.
fn with_cap_note(
    engine: &Engine,
    mut result: CallToolResult,
    args: &RunPythonArgs,
) -> CallToolResult {
    if let Some(note) = run_hint::capped(
        args.limit.timeout_seconds,
        engine.time_limit(RunMode::Call),
        run_hint::RUN_TIMEOUT,
    ) {
        run_hint::add(&mut result, &note);
    }
    result
}

/// `--detach-after`: waits for a run started in the background registry (unlisted) for
/// `after`; one that ends in time is reported as usual, one still going is handed over (listed,
/// its id returned). Until then the call owns the run: a cancelled or dropped call kills it.
async fn run_detachable(
    call: &CallContext<'_>,
    record: Arc<RunRecord>,
    script: &ProjectPath,
    after: Duration,
    timeout: Duration,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let engine = &call.app.engine;
    let held = engine.hold(&record);
    let wait = async {
        tokio::select! {
            () = record.ended() => true,
            () = tokio::time::sleep(after) => false,
            () = ctx.ct.cancelled() => {
                record.cancel();
                record.ended().await;
                true
            }
        }
    };
    let ended = match ctx.meta.get_progress_token() {
        Some(token) => {
            let message = |elapsed| run_message(engine, script.into(), &record.live, elapsed);
            with_progress(ctx, token, message, wait).await
        }
        None => wait.await,
    };
    if !ended {
        held.hand_over();
        return handed_over(engine, &record, script, after);
    }
    // Its result shows only the head and tail: the record stays so that get_run and the
    // output's link read the whole. Otherwise it goes once its result (which reads its
    // files and backend from the registry) is built.
    let held = if too_long_to_show(call.app, &record.live) {
        held.keep();
        None
    } else {
        Some(held)
    };
    let raw = ChunkCursor::asked(ctx).is_some();
    let result = ended_result(call, &record, script, timeout, raw).await;
    drop(held);
    result
}

/// The result of a `run_python` handed over to the background.
fn handed_over(
    engine: &Engine,
    record: &RunRecord,
    script: &ProjectPath,
    after: Duration,
) -> CallToolResult {
    let stdout = record.live.read(Stream::Stdout, 0, PAGE_BYTES);
    let stderr = record.live.read(Stream::Stderr, 0, PAGE_BYTES);
    tracing::info!(run_id = %record.id, script = script.relative(), "run handed over to the background");
    let mut text = String::new();
    let _ = write!(
        text,
        "{} is still running after {} s; it goes on in the background as run {}.\n\
         Follow it with get_run {{\"run_id\": \"{}\", \"stdout_offset\": {}, \
         \"stderr_offset\": {}, \"wait_seconds\": 30}}; stop it with cancel_run.",
        script.relative(),
        fmt_secs(after),
        record.id,
        record.id,
        stdout.next_offset,
        stderr.next_offset,
    );
    let stderr_text = engine.without_host_folder(&stderr.text);
    if !stdout.text.is_empty() || !stderr_text.is_empty() {
        text.push_str("\n--- output so far ---\n");
        text.push_str(&stdout.text);
        if !stderr_text.is_empty() {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("--- stderr ---\n");
            text.push_str(&stderr_text);
        }
    }
    let report = RunReport {
        stdout: stdout.text,
        stderr: stderr_text,
        exit_code: None,
        timed_out: false,
        stdout_truncated: stdout.truncated,
        stderr_truncated: stderr.truncated,
        duration_ms: millis(record.duration()),
        sandbox: engine.layers_now().into_iter().map(str::to_owned).collect(),
        artifacts: Vec::new(),
        skipped_artifacts: Vec::new(),
        quarantined: Vec::new(),
        run_id: Some(record.id.clone()),
        status: Some(record.status()),
        python: python_info(engine, record.python.as_deref()),
        hint: None,
        signal: None,
        warm: false,
        stdout_cut: None,
        stderr_cut: None,
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(report_value(report));
    result
}

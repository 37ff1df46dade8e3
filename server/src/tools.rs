//! The MCP handler: tool arguments in, a [`ProjectPath`] and a runner call, an MCP result out. The
//! only module that builds MCP result types.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::audit::{CallNotes, Channel, FinishedCall, TransportKind};
use crate::client_message::{push_escaped, ClientMessage};
use crate::run_files::{ArtifactInfo, Presented, SkippedArtifact};
use pyrun_run::background::{BackgroundRequest, RunEnd, RunKind, RunRecord};
use pyrun_run::caller::Caller;
use pyrun_run::live_output::{LiveOutput, Stream};
use pyrun_run::paths::ProjectPath;
use pyrun_run::python_env::{EnvError, PythonEnv};
use pyrun_run::runner::{ArtifactTarget, Pool, RunOutcome, RunRequest, RunSource};

/// How often a run that the caller follows with a progress token reports that it is still going.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// A notification that cannot be sent in this time is dropped, so a slow client cannot stall a run.
pub(crate) const NOTIFY_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunPythonArgs {
    /// Path of the .py file, relative to the projects folder (e.g. `hello_world.py` or
    /// `mathpkg/main.py`; `/projects/mathpkg/main.py` names the same file).
    pub file_name: String,
    /// Command-line arguments for the script (its `sys.argv[1:]`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Text given to the script on standard input; it sees end-of-file at once when omitted.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Seconds before the run is killed; may lower the server's limit, never raise it.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
}

/// The structured result of a run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunReport {
    /// The script's standard output (lossy UTF-8, capped).
    pub stdout: String,
    /// The script's standard error (lossy UTF-8, capped).
    pub stderr: String,
    /// The exit code; null when the process was killed (timeout, cancellation, signal).
    pub exit_code: Option<i32>,
    /// Whether the run was killed for taking too long.
    pub timed_out: bool,
    /// Whether stdout was cut at the server's output limit.
    pub stdout_truncated: bool,
    /// Whether stderr was cut at the server's output limit.
    pub stderr_truncated: bool,
    /// Wall time of the run in milliseconds.
    pub duration_ms: u64,
    /// The isolation layers that protected this run.
    pub sandbox: Vec<String>,
    /// The files the run left in `PYRUN_OUTPUT_DIR`, each readable at its `uri`.
    pub artifacts: Vec<ArtifactInfo>,
    /// Files it left that were not kept, with the reason.
    pub skipped_artifacts: Vec<SkippedArtifact>,
    /// Set when the run went on in the background (`--detach-after`): follow it with get_run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// `running` when the run went on in the background; absent when it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The interpreter it ran with.
    pub python: PythonInfo,
}

/// The interpreter of a run (or of a listing): its version and the virtual environment used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PythonInfo {
    /// The interpreter's version, e.g. `3.11.2`.
    pub version: String,
    /// The virtual environment used, relative to the projects folder with `/` separators (e.g.
    /// `.venv` or `mathpkg/.venv`); null: the server's interpreter without one.
    pub venv: Option<String>,
}

impl From<&PythonEnv> for PythonInfo {
    fn from(env: &PythonEnv) -> Self {
        Self {
            version: env.version.clone(),
            venv: env.venv.as_ref().map(|venv| venv.relative.clone()),
        }
    }
}

impl RunReport {
    /// The same JSON as its `Serialize`, but moving the output strings instead of copying them:
    /// a run's result then holds its (up to twice `--max-output-bytes`) output fewer times.
    fn into_value(self) -> serde_json::Value {
        use serde_json::Value;
        let fields = [
            ("stdout", Value::String(self.stdout)),
            ("stderr", Value::String(self.stderr)),
            ("exit_code", self.exit_code.map_or(Value::Null, Value::from)),
            ("timed_out", Value::Bool(self.timed_out)),
            ("stdout_truncated", Value::Bool(self.stdout_truncated)),
            ("stderr_truncated", Value::Bool(self.stderr_truncated)),
            ("duration_ms", Value::from(self.duration_ms)),
            (
                "sandbox",
                Value::Array(self.sandbox.into_iter().map(Value::String).collect()),
            ),
            ("artifacts", to_array(&self.artifacts)),
            ("skipped_artifacts", to_array(&self.skipped_artifacts)),
        ];
        let optional = [("run_id", self.run_id), ("status", self.status)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, Value::String(v))));
        let python = serde_json::to_value(&self.python).unwrap_or(Value::Null);
        Value::Object(
            fields
                .into_iter()
                .chain(optional)
                .chain(std::iter::once(("python", python)))
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    }
}

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

/// The MCP server: one per session, cheap to clone.
#[derive(Debug, Clone)]
pub struct PyRunServer {
    pub(crate) app: Arc<App>,
    /// Over stdio: the local user. Over HTTP: `None`, each request carries its own caller.
    local: Option<Caller>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl PyRunServer {
    /// A handler for HTTP sessions: each request's caller comes from the auth layer.
    pub fn new(app: Arc<App>) -> Self {
        Self::with_caller(app, None)
    }

    /// A handler for the stdio client, the local user.
    pub fn for_stdio(app: Arc<App>) -> Self {
        Self::with_caller(app, Some(Caller::Local))
    }

    fn with_caller(app: Arc<App>, local: Option<Caller>) -> Self {
        Self {
            tool_router: Self::routers(&app),
            app,
            local,
        }
    }

    /// The tools this server offers (`list_packages` always): `run_python_code` and the session
    /// tools only with `--allow-inline-code`, `install_packages` only with `--allow-install` (not
    /// listed, and unknown when called, without them).
    fn routers(app: &App) -> ToolRouter<Self> {
        let router = Self::tool_router() + Self::run_tools_router() + Self::packages_router();
        #[cfg(feature = "conformance")] // test-only fixtures, see conformance.rs
        let router = router + crate::conformance::tool_router();
        let router = if app.config.inline.allowed {
            router + Self::inline_code_router() + Self::sessions_router()
        } else {
            router
        };
        if app.config.install.allowed {
            router + Self::install_router()
        } else {
            router
        }
    }

    /// Run a Python file from the projects folder and return its output and exit code.
    #[tool(
        annotations(title = "Run a Python file", open_world_hint = false),
        output_schema = schema_for_output::<RunReport>()
    )]
    async fn run_python(
        &self,
        Parameters(args): Parameters<RunPythonArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // What the audit log learns of this call: names, counts and the outcome, never values.
        let notes = ctx
            .extensions
            .get::<CallNotes>()
            .cloned()
            .unwrap_or_default();
        notes.note(|n| n.arg_count = Some(args.args.len()));
        let script = match self.app.root.resolve_script(&args.file_name) {
            Ok(script) => script,
            Err(e) => {
                notes.asked_file(&args.file_name);
                return Ok(refusal(e.into()));
            }
        };
        notes.note(|n| n.file_name = Some(script.relative().to_owned()));
        let timeout = match effective_timeout(args.timeout_seconds, self.app.config.timeout) {
            Ok(t) => t,
            Err(message) => return Ok(refusal(message)),
        };
        let python = match self.run_env(script.directory()).await {
            Ok(env) => env,
            Err(message) => return Ok(refusal(message)),
        };
        let caller = self.caller(&ctx);
        if let Some(after) = self.app.config.background.detach_after {
            let request = BackgroundRequest {
                script: script.clone(),
                args: args.args.clone(),
                stdin: args.stdin.clone(),
                timeout,
                pool: Pool::Foreground,
                python: python.clone(),
            };
            // When no background run can be kept, the run goes on as a plain call.
            if let Ok(record) =
                self.app
                    .runs
                    .start(&caller.key(), RunKind::Background, request, false)
            {
                return Ok(self
                    .run_detachable(record, &script, after, timeout, &ctx, &notes)
                    .await);
            }
        }
        let request = RunRequest {
            python,
            ..RunRequest::new(&script, &args.args, args.stdin.as_deref(), timeout)
        };
        Ok(self.run_in_call(request, &caller, &ctx, &notes).await)
    }

    /// List the Python files that run_python accepts, relative to the projects folder.
    #[tool(
        annotations(title = "List Python files", read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<FileList>()
    )]
    async fn list_python_files(
        &self,
        Parameters(args): Parameters<ListFilesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let root = &self.app.root;
        let dir = match root.resolve_dir(args.directory.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return Ok(refusal(e.into())),
        };
        let app = self.app.clone();
        let files = tokio::task::spawn_blocking(move || app.root.list_scripts(&dir))
            .await
            .unwrap_or_default();
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

    /// A run the call waits for (`run_python`, `run_python_code`): its output followed with
    /// progress notifications when the caller asked for them, the files it leaves kept under a
    /// new run id for the caller, its result or a refusal.
    pub(crate) async fn run_in_call(
        &self,
        request: RunRequest<'_>,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        notes: &CallNotes,
    ) -> CallToolResult {
        let (source, timeout) = (request.source, request.timeout);
        let live = ctx
            .meta
            .get_progress_token()
            .map(|_| Arc::new(LiveOutput::new(self.app.runner.max_output())));
        // Every run gets a run id, under which the files it leaves are kept for its caller.
        let artifacts = pyrun_run::artifacts::new_run_id()
            .map_err(|e| tracing::warn!(%e, "no run id: the run's artifacts are dropped"))
            .ok()
            .map(|run_id| ArtifactTarget {
                store: Arc::clone(&self.app.artifacts),
                run_id,
                owner: caller.key().into_owned(),
                retention: self.app.runs.settings().retention,
            });
        let run_id = artifacts.as_ref().map(|t| t.run_id.clone());
        let request = RunRequest {
            live: live.clone(),
            artifacts,
            ..request
        };
        let run = self.app.runner.run(request, &ctx.ct);
        let outcome = match (ctx.meta.get_progress_token(), &live) {
            (Some(token), Some(live)) => {
                let progress = Progress::new(self, ctx, token, source, live);
                progress.around(run).await
            }
            _ => run.await,
        };
        match outcome {
            Ok(mut outcome) => {
                if let Some(live) = &live {
                    outcome.stdout = live.take_text(Stream::Stdout).0;
                    outcome.stderr = live.take_text(Stream::Stderr).0;
                }
                self.finished(outcome, run_id.as_deref(), caller, source, timeout, notes)
                    .await
            }
            Err(e) => {
                let span = tracing::warn_span!("run", %caller, script = source.shown());
                refusal(span.in_scope(|| e.into()))
            }
        }
    }

    /// A run that ended: logged, noted for the audit log, reported with the files it left
    /// (kept under `run_id` for the caller).
    async fn finished(
        &self,
        outcome: RunOutcome,
        run_id: Option<&str>,
        caller: &Caller,
        source: RunSource<'_>,
        timeout: Duration,
        notes: &CallNotes,
    ) -> CallToolResult {
        tracing::info!(
            %caller,
            script = source.shown(),
            exit_code = outcome.exit_code,
            timed_out = outcome.timed_out,
            cancelled = outcome.cancelled,
            ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            "run ended"
        );
        // A run has ended: the sandbox was probed before it started.
        let sandbox = self.app.runner.sandbox().layers_now().unwrap_or_default();
        notes.note(|n| {
            n.exit_code = outcome.exit_code;
            n.timed_out = outcome.timed_out;
            n.cancelled = outcome.cancelled;
            n.sandbox = Some(sandbox.clone());
        });
        let presented = match (&outcome.artifacts, run_id) {
            (Some(collected), Some(run_id))
                if !collected.kept.is_empty() || !collected.skipped.is_empty() =>
            {
                crate::run_files::present(&self.app, &caller.key(), run_id, collected).await
            }
            _ => Presented::default(),
        };
        self.report(outcome, timeout, sandbox, presented)
    }

    /// `--detach-after`: waits for a run started in the background registry (unlisted) for
    /// `after`; one that ends in time is reported as usual, one still going is handed over (listed,
    /// its id returned). Until then the call owns the run: a cancelled or dropped call kills it.
    async fn run_detachable(
        &self,
        record: Arc<RunRecord>,
        script: &ProjectPath,
        after: Duration,
        timeout: Duration,
        ctx: &RequestContext<RoleServer>,
        notes: &CallNotes,
    ) -> CallToolResult {
        let mut owned = OwnedRun {
            app: &self.app,
            record: &record,
            handed_over: false,
        };
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
                Progress::new(self, ctx, token, script.into(), &record.live)
                    .around(wait)
                    .await
            }
            None => wait.await,
        };
        if !ended {
            owned.handed_over = true;
            self.app.runs.show(&record);
            return self.handed_over(&record, script, after);
        }
        self.ended_result(&record, &self.caller(ctx), script, timeout, notes)
            .await
    }

    /// The `run_python` result of a run of the registry that has ended (its output copied: a
    /// task's run stays readable with get_run).
    async fn ended_result(
        &self,
        record: &RunRecord,
        caller: &Caller,
        script: &ProjectPath,
        timeout: Duration,
        notes: &CallNotes,
    ) -> CallToolResult {
        match record.end() {
            Some(RunEnd::Finished(outcome)) => {
                let mut outcome = outcome.clone();
                outcome.stdout = record.live.read(Stream::Stdout, 0, usize::MAX).text;
                outcome.stderr = record.live.read(Stream::Stderr, 0, usize::MAX).text;
                self.finished(
                    outcome,
                    Some(&record.id),
                    caller,
                    script.into(),
                    timeout,
                    notes,
                )
                .await
            }
            // Built from a `ClientMessage` by the registry.
            Some(RunEnd::Failed(reason)) => {
                CallToolResult::error(vec![ContentBlock::text(reason.clone())])
            }
            None => refusal(ClientMessage::new("the run has not ended")),
        }
    }

    /// `run_python` for a client that declared the Tasks extension: the run goes to the
    /// background registry (kind `task`, the background time limit and pool) and the call
    /// returns a task at once. Bad arguments are answered as the tool would, without a task.
    async fn run_python_as_task(
        &self,
        request: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let args: RunPythonArgs = serde_json::from_value(arguments).map_err(|e| {
            ErrorData::invalid_params(format!("failed to deserialize parameters: {e}"), None)
        })?;
        let notes = ctx
            .extensions
            .get::<CallNotes>()
            .cloned()
            .unwrap_or_default();
        notes.note(|n| n.arg_count = Some(args.args.len()));
        let script = match self.app.root.resolve_script(&args.file_name) {
            Ok(script) => script,
            Err(e) => {
                notes.asked_file(&args.file_name);
                return Ok(refusal(e.into()).into());
            }
        };
        notes.note(|n| n.file_name = Some(script.relative().to_owned()));
        let settings = self.app.runs.settings();
        let timeout = match effective_timeout(args.timeout_seconds, settings.timeout) {
            Ok(t) => t,
            Err(message) => return Ok(refusal(message).into()),
        };
        let python = match self.run_env(script.directory()).await {
            Ok(env) => env,
            Err(message) => return Ok(refusal(message).into()),
        };
        let caller = self.caller(ctx);
        let owner = caller.key().into_owned();
        let request = BackgroundRequest {
            script: script.clone(),
            args: args.args,
            stdin: args.stdin,
            timeout,
            pool: Pool::Background,
            python,
        };
        let record = match self.app.runs.start(&owner, RunKind::Task, request, true) {
            Ok(record) => record,
            Err(e) => return Ok(refusal(self.full(e)).into()),
        };
        tracing::info!(%caller, run_id = %record.id, script = script.relative(), "task started");
        let (status_server, end_server) = (self.clone(), self.clone());
        let created = self.app.tasks.spawn(
            &owner,
            record,
            script.clone(),
            timeout + settings.retention,
            move |run, script| status_server.task_status(run, script),
            move |run| async move {
                end_server
                    .ended_result(&run, &caller, &script, timeout, &CallNotes::default())
                    .await
            },
        );
        Ok(CallToolResponse::Task(created))
    }

    /// A task's status message: where its run is and the last line it printed.
    fn task_status(&self, run: &RunRecord, script: &ProjectPath) -> String {
        let status = run.status();
        let message = ClientMessage::new("")
            .then(status.as_str())
            .then(" ")
            .path(script)
            .then(" (")
            .number(run.duration().as_secs())
            .then(" s)");
        let message = match run.live.last_line() {
            Some(line) => message.then(": ").output(&self.without_host_folder(&line)),
            None => message,
        };
        message.into_string()
    }

    /// The result of a `run_python` handed over to the background.
    fn handed_over(
        &self,
        record: &RunRecord,
        script: &ProjectPath,
        after: Duration,
    ) -> CallToolResult {
        let stdout = record
            .live
            .read(Stream::Stdout, 0, crate::run_tools::PAGE_BYTES);
        let stderr = record
            .live
            .read(Stream::Stderr, 0, crate::run_tools::PAGE_BYTES);
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
        let stderr_text = self.without_host_folder(&stderr.text);
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
            duration_ms: u64::try_from(record.duration().as_millis()).unwrap_or(u64::MAX),
            sandbox: self
                .app
                .runner
                .sandbox()
                .layers_now()
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            artifacts: Vec::new(),
            skipped_artifacts: Vec::new(),
            run_id: Some(record.id.clone()),
            status: Some(record.status().as_str().to_owned()),
            python: self.python_info(record.python.as_deref()),
        };
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(report.into_value());
        result
    }

    /// Who sent this request: the stdio client, or what the HTTP auth layer admitted (an HTTP
    /// request without one counts as anonymous: the least it could be).
    pub(crate) fn caller(&self, ctx: &RequestContext<RoleServer>) -> Caller {
        if let Some(local) = &self.local {
            return local.clone();
        }
        // `/sse` + `/messages` put the caller in the request; rmcp's `/mcp` passes the whole
        // request parts, whose extensions hold it.
        let extensions = &ctx.extensions;
        extensions
            .get::<Caller>()
            .or_else(|| {
                extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<Caller>())
            })
            .cloned()
            .unwrap_or(Caller::Anonymous)
    }

    /// The transport a request came over and its MCP session: stdio has one client and no
    /// session id; `/sse` + `/messages` put a [`Channel`] in the request; rmcp's `/mcp` passes
    /// the request's parts, whose `mcp-session-id` header names the session (none when stateless).
    fn channel(&self, ctx: &RequestContext<RoleServer>) -> Channel {
        if self.local.is_some() {
            return Channel {
                transport: TransportKind::Stdio,
                session_id: None,
            };
        }
        if let Some(channel) = ctx.extensions.get::<Channel>() {
            return channel.clone();
        }
        let session_id = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|id| id.to_str().ok())
            .map(Arc::from);
        Channel {
            transport: TransportKind::StreamableHttp,
            session_id,
        }
    }

    /// Tracebacks name files by absolute path; show them relative to the projects folder instead,
    /// so results never reveal where the folder lives on the host. Without the sandbox's own
    /// view, runs see their scratch at its host path too: it is cut to the slot's name
    /// (`slot-3/_pyrun_inline.py`).
    pub(crate) fn without_host_folder(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for folder in [self.app.root.path(), self.app.runner.scratch_root()] {
            let mut prefix = folder.to_string_lossy().into_owned();
            prefix.push(std::path::MAIN_SEPARATOR);
            if text.contains(&prefix) {
                text = text.replace(&prefix, "");
            }
        }
        text
    }

    /// The environment a run in `dir` uses (its nearest checked venv, or the server's
    /// interpreter), or why it is refused.
    pub(crate) async fn python_env(
        &self,
        dir: &std::path::Path,
    ) -> Result<Arc<PythonEnv>, ClientMessage> {
        self.find_env(dir).await.map_err(ClientMessage::from)
    }

    /// [`Self::python_env`] for a run: `None` (the runner's own interpreter) when the
    /// interpreter could not be asked what it is, so that the run is refused as before, by the
    /// sandbox's probe that asks it too (or, with the sandbox off, fails as that interpreter does).
    pub(crate) async fn run_env(
        &self,
        dir: &std::path::Path,
    ) -> Result<Option<Arc<PythonEnv>>, ClientMessage> {
        match self.find_env(dir).await {
            Ok(env) => Ok(Some(env)),
            Err(EnvError::Interpreter(e)) => {
                tracing::warn!(error = %e, "the interpreter could not be asked what it is");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`Self::run_env`] of code that runs in `project`, or with none in its scratch: then the
    /// projects folder's own environment.
    pub(crate) async fn project_env(
        &self,
        project: Option<&pyrun_run::paths::ProjectDir>,
    ) -> Result<Option<Arc<PythonEnv>>, ClientMessage> {
        let dir = project.map_or(self.app.root.path(), |dir| dir.absolute());
        self.run_env(dir).await
    }

    /// `PythonEnvs::for_dir`: a few `stat`s, done in place once the interpreters have been asked
    /// what they are; the first time, on a blocking thread (that asks them).
    async fn find_env(&self, dir: &std::path::Path) -> Result<Arc<PythonEnv>, EnvError> {
        let envs = &self.app.python_envs;
        if envs.interpreters().asked() {
            return envs.for_dir(dir);
        }
        let (envs, dir) = (envs.clone(), dir.to_path_buf());
        tokio::task::spawn_blocking(move || envs.for_dir(&dir))
            .await
            .unwrap_or_else(|_| {
                Err(EnvError::Interpreter(Arc::new(
                    pyrun_sandbox::SandboxError::ProbeLost,
                )))
            })
    }

    /// What a result says of the interpreter: `env`'s, else the server's own (a run whose
    /// environment is not known here: one handed over, or started without one).
    pub(crate) fn python_info(&self, env: Option<&PythonEnv>) -> PythonInfo {
        match env {
            Some(env) => env.into(),
            None => match self.app.python_envs.default_env() {
                Ok(env) => env.as_ref().into(),
                Err(_) => PythonInfo {
                    version: String::new(),
                    venv: None,
                },
            },
        }
    }

    fn report(
        &self,
        mut outcome: RunOutcome,
        timeout: Duration,
        sandbox: Vec<&'static str>,
        mut presented: Presented,
    ) -> CallToolResult {
        outcome.stderr = self.without_host_folder(&outcome.stderr);
        let text = render_text(&outcome, timeout);
        let report = RunReport {
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            stdout_truncated: outcome.stdout_truncated,
            stderr_truncated: outcome.stderr_truncated,
            duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            sandbox: sandbox.into_iter().map(str::to_owned).collect(),
            artifacts: std::mem::take(&mut presented.artifacts),
            skipped_artifacts: std::mem::take(&mut presented.skipped),
            run_id: None,
            status: None,
            python: self.python_info(outcome.python.as_deref()),
        };
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(report.into_value());
        presented.add_blocks_to(&mut result);
        result
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PyRunServer {
    /// Every tool call: the router runs the tool, the audit log records who called it, over what,
    /// and how it ended (also when the call is dropped before it ends).
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.app.audit.is_on() {
            return self.route(request, context).await;
        }
        let notes = CallNotes::default();
        let mut audited = AuditedCall {
            app: &self.app,
            caller: self.caller(&context),
            channel: self.channel(&context),
            tool: request.name.clone(),
            notes: notes.clone(),
            started: Instant::now(),
            refused: None,
        };
        context.extensions.insert(notes);
        let response = self.route(request, context).await;
        audited.refused = Some(match &response {
            Ok(CallToolResponse::Complete(result)) => result.is_error == Some(true),
            Ok(_) => false,
            Err(_) => true,
        });
        response
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let owner = self.caller(&context);
        let task = self.app.tasks.get(&owner.key(), &request.task_id)?;
        Ok(GetTaskResult::new(task))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.caller(&context);
        self.app.tasks.cancel(&owner.key(), &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.caller(&context);
        self.app.tasks.update(&owner.key(), &request.task_id)
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tasks()
            .build();
        let info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("pyrun-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Runs the Python files of one projects folder. Call list_python_files to see \
                 them, then run_python with a file_name relative to that folder.",
            );
        #[cfg(feature = "conformance")]
        let info = crate::conformance::extend_info(info);
        info
    }

    #[cfg(feature = "conformance")]
    crate::conformance_handlers!();

    // Resources and prompts: `resources.rs`, `prompts.rs`; the conformance fixtures join them.
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        #[cfg(feature = "conformance")]
        let first_page = request.as_ref().is_none_or(|r| r.cursor.is_none());
        let result = crate::resources::list(&self.app, request).await;
        #[cfg(feature = "conformance")]
        let result = result.map(|own| crate::conformance::with_resources(own, first_page));
        result
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let result = crate::resources::templates();
        #[cfg(feature = "conformance")]
        let result = crate::conformance::with_resource_templates(result);
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        #[cfg(feature = "conformance")]
        if uri.starts_with("test://") {
            return crate::conformance::read_resource(&request).map(Into::into);
        }
        if uri.starts_with(crate::resources::RUNS_PREFIX) {
            let caller = self.caller(&ctx);
            return crate::run_files::read_resource(&self.app, &caller, uri)
                .await
                .map(Into::into);
        }
        crate::resources::read(&self.app, uri).await.map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let result = crate::prompts::list();
        #[cfg(feature = "conformance")]
        let result = crate::conformance::with_prompts(result);
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        #[cfg(feature = "conformance")]
        if request.name.starts_with("test_") {
            return crate::conformance::get_prompt(&request).map(Into::into);
        }
        crate::prompts::get(&self.app, request)
            .await
            .map(Into::into)
    }

    /// A session that initialized hears `resources/list_changed` until it closes.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.app.watch.add_peer(context.peer);
    }

    /// 2026-07-28 sessions opt in to `resources/list_changed` with `subscriptions/listen`.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.resources_list_changed = requested.resources_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.app.watch.subscribe();
        let wants = context.accepted().resources_list_changed == Some(true);
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed(), if wants => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let send = context.sink().notify_resource_list_changed();
                    let _ = tokio::time::timeout(NOTIFY_TIMEOUT, send).await;
                }
            }
        }
    }
}

impl PyRunServer {
    /// Runs a tool call: `run_python` as a task when the client declared the Tasks extension,
    /// everything else through the router.
    async fn route(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Only a request that declares the extension in its own `_meta` (the 2026-07-28
        // envelope) gets a task: clients such as the MCP Inspector declare it at `initialize` on
        // the 2025-11-25 protocol too but expect a plain result there.
        let wants_task = context
            .meta
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if wants_task && request.name == "run_python" {
            return self.run_python_as_task(request, &context).await;
        }
        self.tool_router
            .call(ToolCallContext::new(self, request, context))
            .await
    }
}

/// A tool call on its way to the audit log: recorded when dropped, so a call whose future is
/// dropped before it ends (its client went away) is recorded too, as cancelled.
struct AuditedCall<'a> {
    app: &'a App,
    caller: Caller,
    channel: Channel,
    tool: std::borrow::Cow<'static, str>,
    notes: CallNotes,
    started: Instant,
    /// Set when the call ended; `None` when it was dropped first.
    refused: Option<bool>,
}

impl Drop for AuditedCall<'_> {
    fn drop(&mut self) {
        if self.refused.is_none() {
            self.notes.note(|n| n.cancelled = true);
        }
        self.app.audit.record(&FinishedCall {
            caller: &self.caller,
            channel: &self.channel,
            tool: &self.tool,
            notes: &self.notes,
            refused: self.refused.unwrap_or(false),
            duration: self.started.elapsed(),
        });
    }
}

/// A run's progress notifications: every [`PROGRESS_EVERY`], how long it has run and the last
/// line it printed.
struct Progress<'a> {
    server: &'a PyRunServer,
    ctx: &'a RequestContext<RoleServer>,
    token: rmcp::model::ProgressToken,
    source: RunSource<'a>,
    live: &'a LiveOutput,
}

impl<'a> Progress<'a> {
    fn new(
        server: &'a PyRunServer,
        ctx: &'a RequestContext<RoleServer>,
        token: rmcp::model::ProgressToken,
        source: RunSource<'a>,
        live: &'a LiveOutput,
    ) -> Self {
        Self {
            server,
            ctx,
            token,
            source,
            live,
        }
    }

    /// Awaits `work` while telling the caller that it is still going.
    async fn around<F: std::future::Future>(self, work: F) -> F::Output {
        tokio::pin!(work);
        let mut ticks = tokio::time::interval(PROGRESS_EVERY);
        ticks.tick().await; // the first tick is immediate
        let started = tokio::time::Instant::now();
        loop {
            tokio::select! {
                result = &mut work => return result,
                _ = ticks.tick() => {
                    let secs = started.elapsed().as_secs_f64();
                    let param = ProgressNotificationParam::new(self.token.clone(), secs.floor())
                        .with_message(self.message(secs).into_string());
                    let send = self.ctx.peer.notify_progress(param);
                    let _ = tokio::time::timeout(NOTIFY_TIMEOUT, send).await;
                }
            }
        }
    }

    /// `running train.py (12 s): epoch 3/10 loss 0.41` (inline code: `running inline code …`)
    fn message(&self, secs: f64) -> ClientMessage {
        let message = match self.source {
            RunSource::Script(script) => ClientMessage::new("running ").path(script),
            RunSource::Inline { .. } => ClientMessage::new("running inline code"),
        };
        let message = message.then(" (").number(secs.round()).then(" s)");
        match self.live.last_line() {
            Some(line) => message
                .then(": ")
                .output(&self.server.without_host_folder(&line)),
            None => message,
        }
    }
}

/// A run started for a `run_python` call that may hand it over: killed and forgotten with the
/// call unless it was handed over.
struct OwnedRun<'a> {
    app: &'a App,
    record: &'a RunRecord,
    handed_over: bool,
}

impl Drop for OwnedRun<'_> {
    fn drop(&mut self) {
        if !self.handed_over {
            self.record.cancel();
            self.app.runs.remove(&self.record.id);
        }
    }
}

/// The caller's timeout, which may lower the server's limit but never raise it.
pub(crate) fn effective_timeout(
    requested: Option<f64>,
    limit: Duration,
) -> Result<Duration, ClientMessage> {
    match requested {
        None => Ok(limit),
        Some(secs) if secs.is_finite() && secs > 0.0 => {
            Ok(Duration::try_from_secs_f64(secs).map_or(limit, |d| d.min(limit)))
        }
        Some(secs) => Err(ClientMessage::new(
            "timeout_seconds must be a positive number of seconds, got ",
        )
        .number(secs)),
    }
}

/// The text shown to people and models, in the seed's familiar shape.
fn render_text(outcome: &RunOutcome, timeout: Duration) -> String {
    let mut text = outcome.stdout.clone();
    let section = |text: &mut String, line: &str| {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(line);
    };
    if !outcome.stderr.is_empty() {
        section(&mut text, "--- stderr ---\n");
        text.push_str(&outcome.stderr);
    }
    if let Some(code) = outcome.exit_code.filter(|c| *c != 0) {
        section(&mut text, &format!("[Process exited with code {code}]"));
    }
    if outcome.timed_out {
        section(
            &mut text,
            &format!("[Timed out after {} s]", fmt_secs(timeout)),
        );
    }
    if outcome.cancelled {
        section(&mut text, "[Cancelled]");
    }
    if outcome.exit_code.is_none() && !outcome.timed_out && !outcome.cancelled {
        section(&mut text, "[Process was killed by a signal]");
    }
    let mut cut = Vec::new();
    if outcome.stdout_truncated {
        cut.push("stdout");
    }
    if outcome.stderr_truncated {
        cut.push("stderr");
    }
    if !cut.is_empty() {
        let mut line = String::new();
        let _ = write!(
            line,
            "[Output truncated: {} over the limit]",
            cut.join(" and ")
        );
        section(&mut text, &line);
    }
    if text.is_empty() {
        text.push_str("(no output)");
    }
    text
}

pub(crate) fn fmt_secs(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs:.1}")
    }
}

fn to_array<T: Serialize>(items: &[T]) -> serde_json::Value {
    serde_json::to_value(items).unwrap_or_else(|_| serde_json::Value::Array(Vec::new()))
}

pub(crate) fn structured<T: Serialize>(text: String, value: &T) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = serde_json::to_value(value).ok();
    result
}

/// A refused call: a tool error the model can read and correct, never a protocol error.
pub(crate) fn refusal(message: ClientMessage) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into_string())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_moved_report_is_the_serialized_report() {
        let report = RunReport {
            stdout: "out \u{1F600}\n".into(),
            stderr: "err".into(),
            exit_code: Some(3),
            timed_out: true,
            stdout_truncated: true,
            stderr_truncated: false,
            duration_ms: 42,
            sandbox: vec!["landlock".into(), "seccomp".into()],
            artifacts: vec![ArtifactInfo {
                name: "plot.png".into(),
                size: 3,
                mime_type: "image/png".into(),
                uri: "pyrun://runs/run_0/files/plot.png".into(),
            }],
            skipped_artifacts: vec![SkippedArtifact {
                name: "pipe".into(),
                reason: "not a regular file (FIFO)".into(),
            }],
            run_id: None,
            status: None,
            python: PythonInfo {
                version: "3.11.2".into(),
                venv: Some("a/.venv".into()),
            },
        };
        let serialized = serde_json::to_value(&report).unwrap();
        assert_eq!(report.clone().into_value(), serialized);
        let killed = RunReport {
            exit_code: None,
            run_id: Some("run_0123".into()),
            status: Some("running".into()),
            ..report
        };
        assert_eq!(
            killed.clone().into_value(),
            serde_json::to_value(&killed).unwrap()
        );
    }

    fn outcome() -> RunOutcome {
        RunOutcome {
            stdout: String::new(),
            stderr: String::new(),
            exit_code: Some(0),
            timed_out: false,
            cancelled: false,
            stdout_truncated: false,
            stderr_truncated: false,
            duration: Duration::from_millis(5),
            artifacts: None,
            python: None,
        }
    }

    #[test]
    fn text_has_the_familiar_shape() {
        let o = RunOutcome {
            stdout: "a\nb".into(),
            stderr: "boom\n".into(),
            exit_code: Some(1),
            ..outcome()
        };
        assert_eq!(
            render_text(&o, Duration::from_secs(30)),
            "a\nb\n--- stderr ---\nboom\n[Process exited with code 1]"
        );
        let o = RunOutcome {
            stdout: "partial\n".into(),
            exit_code: None,
            timed_out: true,
            stdout_truncated: true,
            ..outcome()
        };
        assert_eq!(
            render_text(&o, Duration::from_secs(2)),
            "partial\n[Timed out after 2 s]\n[Output truncated: stdout over the limit]"
        );
        assert_eq!(
            render_text(&outcome(), Duration::from_secs(1)),
            "(no output)"
        );
    }

    #[test]
    fn timeout_may_lower_never_raise() {
        let limit = Duration::from_secs(30);
        assert_eq!(effective_timeout(None, limit), Ok(limit));
        assert_eq!(
            effective_timeout(Some(2.5), limit),
            Ok(Duration::from_millis(2500))
        );
        assert_eq!(effective_timeout(Some(999.0), limit), Ok(limit));
        assert_eq!(effective_timeout(Some(1e300), limit), Ok(limit));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(effective_timeout(Some(bad), limit).is_err());
        }
    }
}

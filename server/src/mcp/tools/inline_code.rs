//! The inline-code room: `run_python_code` (`--allow-inline-code`), Python code sent in the call,
//! run as a script is. Its router joins the server's only with the flag, so without it the tool is
//! neither listed nor callable.
//!
//! Steps: check the code (size cap first, then empty, then NUL bytes: nothing is written for a
//! refused call); prove `project` as `list_python_files` proves `directory`; hand the runner a
//! [`RunSource::Inline`] (it writes the code into the run's own scratch, never into the projects
//! folder) and report as `run_python` does.

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mcp::call::arguments::{check_code, effective_timeout};
use crate::mcp::call::waited_run::{run_in_call, RunReport};
use crate::mcp::call::{optional_project, project_env, take_stdin, TimeLimit};
use crate::mcp::present::reply::refusal;
use crate::mcp::present::run_hint;
use crate::mcp::protocol::apps::run_viewer_tool_meta;
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_run::engine::placement::RunMode;
use pyrun_run::runner::{RunRequest, RunSource};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunPythonCodeArgs {
    /// The Python source to run, as the text of a .py file (at most the server's
    /// --max-code-bytes, 256 KiB unless the operator changed it).
    pub code: String,
    /// A folder of the projects folder to run in (relative to it, e.g. `mathpkg`; `""` for the
    /// folder itself): the working directory, and where imports look first. When omitted, the
    /// code runs in its own empty scratch folder.
    #[serde(default)]
    pub project: Option<String>,
    /// Command-line arguments for the code (its `sys.argv[1:]`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Text given to the code on standard input; it sees end-of-file at once when omitted.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Instead of `stdin`: the id `upload_stdin` returned for text sent in pieces (too large
    /// for one request); the run takes the upload.
    #[serde(default)]
    pub stdin_upload: Option<String>,
    #[serde(flatten)]
    pub limit: TimeLimit,
}

#[tool_router(router = inline_router, vis = "pub(in crate::mcp)")]
impl PyRunServer {
    /// Run Python code sent in the call and return its output and exit code, under the same
    /// sandbox and limits as run_python. The code runs from a private scratch folder (never
    /// saved in the projects folder); with `project` it works in that folder of the projects
    /// folder. Files it writes to $PYRUN_OUTPUT_DIR come back as artifacts.
    #[tool(
        title = "Run Python code",
        annotations(title = "Run Python code", open_world_hint = false),
        output_schema = schema_for_output::<RunReport>(),
        meta = run_viewer_tool_meta()
    )]
    async fn run_python_code(
        &self,
        Parameters(mut args): Parameters<RunPythonCodeArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // What the audit log learns of this call: sizes, counts and the outcome, never the code.
        let call = self.call_context(&ctx);
        call.notes.note(|n| {
            n.arg_count = Some(args.args.len());
            n.code_bytes = Some(args.code.len());
        });
        if let Err(message) = check_code(&args.code, self.app.config.inline.max_code_bytes) {
            return Ok(refusal(message));
        }
        let project = match optional_project(self.engine(), args.project.as_deref()) {
            Ok(project) => project,
            Err(message) => return Ok(refusal(message)),
        };
        let timeout = match effective_timeout(
            args.limit.timeout_seconds,
            self.engine().time_limit(RunMode::Call),
        ) {
            Ok(t) => t,
            Err(message) => return Ok(refusal(message)),
        };
        let python = match project_env(self.engine(), project.as_ref()).await {
            Ok(env) => env,
            Err(message) => return Ok(refusal(message)),
        };
        let upload = args.stdin_upload.take();
        let uploads = &self.state.stdin;
        if let Err(message) = take_stdin(uploads, &call.caller, &mut args.stdin, upload.as_deref())
        {
            return Ok(refusal(message));
        }
        let source = RunSource::Inline {
            code: &args.code,
            cwd: project.as_ref(),
        };
        let request = RunRequest {
            python,
            ..RunRequest::new(source, &args.args, args.stdin.as_deref(), timeout)
        };
        let mut result = run_in_call(&call, request, &ctx).await;
        if let Some(note) = run_hint::capped(
            args.limit.timeout_seconds,
            self.engine().time_limit(RunMode::Call),
            run_hint::RUN_TIMEOUT,
        ) {
            run_hint::add(&mut result, &note);
        }
        Ok(result)
    }
}

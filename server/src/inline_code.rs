//! `run_python_code` (`--allow-inline-code`): Python code sent in the call, run as a script is.
//! Its router joins the server's only with the flag, so without it the tool is neither listed nor
//! callable.
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

use crate::client_message::ClientMessage;
use crate::run_tools::call_notes;
use crate::tools::{effective_timeout, refusal, PyRunServer, RunReport};
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
    /// Seconds before the run is killed; may lower the server's limit, never raise it.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
}

#[tool_router(router = inline_code_router, vis = "pub(crate)")]
impl PyRunServer {
    /// Run Python code sent in the call and return its output and exit code, under the same
    /// sandbox and limits as run_python. The code runs from a private scratch folder (never
    /// saved in the projects folder); with `project` it works in that folder of the projects
    /// folder. Files it writes to $PYRUN_OUTPUT_DIR come back as artifacts.
    #[tool(
        annotations(title = "Run Python code", open_world_hint = false),
        output_schema = schema_for_output::<RunReport>()
    )]
    async fn run_python_code(
        &self,
        Parameters(args): Parameters<RunPythonCodeArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // What the audit log learns of this call: sizes, counts and the outcome, never the code.
        let notes = call_notes(&ctx);
        notes.note(|n| {
            n.arg_count = Some(args.args.len());
            n.code_bytes = Some(args.code.len());
        });
        if let Err(message) = check_code(&args.code, self.app.config.inline.max_code_bytes) {
            return Ok(refusal(message));
        }
        let project = match &args.project {
            Some(project) => match self.app.root.resolve_project(Some(project)) {
                Ok(dir) => Some(dir),
                Err(e) => return Ok(refusal(e.into())),
            },
            None => None,
        };
        let timeout = match effective_timeout(args.timeout_seconds, self.app.config.timeout) {
            Ok(t) => t,
            Err(message) => return Ok(refusal(message)),
        };
        let python = match self.project_env(project.as_ref()).await {
            Ok(env) => env,
            Err(message) => return Ok(refusal(message)),
        };
        let caller = self.caller(&ctx);
        let source = RunSource::Inline {
            code: &args.code,
            cwd: project.as_ref(),
        };
        let request = RunRequest {
            python,
            ..RunRequest::new(source, &args.args, args.stdin.as_deref(), timeout)
        };
        Ok(self.run_in_call(request, &caller, &ctx, &notes).await)
    }
}

/// Code a run may be given: within `max_bytes`, not empty (nor only blanks), no NUL byte (Python
/// refuses source with one, after the run has started).
pub(crate) fn check_code(code: &str, max_bytes: usize) -> Result<(), ClientMessage> {
    if code.len() > max_bytes {
        return Err(ClientMessage::new("the code is ")
            .number(code.len())
            .then(" bytes, more than the ")
            .number(max_bytes)
            .then(" bytes this server accepts (--max-code-bytes)")
            .hint("put longer code in a file of the projects folder and run it with run_python"));
    }
    if code.trim().is_empty() {
        return Err(ClientMessage::new(
            "the code is empty: there is nothing to run",
        ));
    }
    if code.contains('\0') {
        return Err(ClientMessage::new(
            "the code contains a NUL byte, which Python source may not hold",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_checked_for_size_emptiness_and_nul_bytes() {
        assert!(check_code("print(1)", 8).is_ok());
        let over = check_code("print(12)", 8).unwrap_err();
        assert!(
            over.as_str().contains("9 bytes, more than the 8 bytes"),
            "{over}"
        );
        assert!(over.as_str().contains("--max-code-bytes"), "{over}");
        for empty in ["", " \n\t"] {
            assert!(check_code(empty, 8).unwrap_err().as_str().contains("empty"));
        }
        assert!(check_code("a=1\0", 8).unwrap_err().as_str().contains("NUL"));
    }
}

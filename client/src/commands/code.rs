//! `code CODE | --file PATH`: run_python_code, a run reported as `run` reports a file's.

use rmcp::model::JsonObject;
use serde_json::json;

use crate::cli::{CodeArgs, CodeSource};
use crate::commands::run::{self, RunReport};
use crate::commands::run_arguments::{put_stdin, read_text, stdin_of};
use crate::error::ClientError;
use crate::session::Session;

/// The tool `code` calls.
pub const TOOL: &str = "run_python_code";

/// Checks what needs no server: code and stdin cannot both come from our stdin.
pub fn check(args: &CodeArgs) -> Result<(), ClientError> {
    let code_from_stdin = args
        .source
        .file
        .as_deref()
        .is_some_and(|f| f.as_os_str() == "-");
    let stdin_from_stdin = args.stdin
        || args
            .stdin_file
            .as_deref()
            .is_some_and(|f| f.as_os_str() == "-");
    if code_from_stdin && stdin_from_stdin {
        return Err(ClientError::Usage(
            "the code and its stdin cannot both be read from this command's stdin: \
             give the code as an argument or a file"
                .into(),
        ));
    }
    Ok(())
}

pub async fn execute(
    session: &Session,
    args: &CodeArgs,
    live: bool,
) -> Result<RunReport, ClientError> {
    let mut arguments = JsonObject::new();
    arguments.insert("code".into(), json!(source_text(&args.source)?));
    if let Some(project) = &args.project {
        arguments.insert("project".into(), json!(project));
    }
    if !args.args.is_empty() {
        arguments.insert("args".into(), json!(args.args));
    }
    if let Some(source) = stdin_of(args.stdin, args.stdin_file.as_deref())? {
        put_stdin(session, &mut arguments, source).await?;
    }
    if let Some(seconds) = args.script_timeout {
        arguments.insert("timeout_seconds".into(), json!(seconds));
    }
    run::execute_tool(session, TOOL, arguments, live).await
}

/// The source as given, or read from its file (`-`: our stdin).
pub fn source_text(source: &CodeSource) -> Result<String, ClientError> {
    match (&source.code, &source.file) {
        (_, Some(path)) => read_text(path, "code"),
        (Some(code), None) => Ok(code.clone()),
        (None, None) => Err(ClientError::Usage(
            "no code given: pass CODE or --file PATH".into(),
        )),
    }
}

//! `run`'s flags as the arguments of `run_python` and `start_python`: what the waited `run` and
//! a detached start (`runs`) both send.

use std::io::Read;

use rmcp::model::JsonObject;
use serde_json::{json, Value};

use crate::cli::RunArgs;
use crate::error::ClientError;

/// The tool a waited `run` calls.
pub const TOOL: &str = "run_python";

/// `run`'s flags as `run_python` (and `start_python`) arguments.
pub fn arguments(args: &RunArgs) -> Result<JsonObject, ClientError> {
    let mut arguments = JsonObject::new();
    arguments.insert("file_name".into(), json!(args.file));
    let script_args: Vec<&String> = args.script_args.iter().chain(&args.args).collect();
    if !script_args.is_empty() {
        arguments.insert("args".into(), json!(script_args));
    }
    if let Some(path) = &args.stdin_file {
        arguments.insert("stdin".into(), Value::String(read_stdin_file(path)?));
    } else if let Some(text) = &args.stdin_text {
        arguments.insert("stdin".into(), Value::String(text.clone()));
    }
    if let Some(seconds) = args.script_timeout {
        arguments.insert("timeout_seconds".into(), json!(seconds));
    }
    Ok(arguments)
}

fn read_stdin_file(path: &std::path::Path) -> Result<String, ClientError> {
    let io_error = |source| ClientError::Io {
        context: format!("cannot read {}", path.display()),
        source,
    };
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut bytes).map_err(io_error)?;
    } else {
        bytes = std::fs::read(path).map_err(io_error)?;
    }
    String::from_utf8(bytes).map_err(|_| ClientError::BadArguments {
        tool: TOOL.into(),
        reason: format!("{} is not UTF-8 text", path.display()),
    })
}

//! `session start|exec|stop|list`: Python sessions (session_start, session_exec, session_stop,
//! list_sessions), each call's result returned whole (for `--json`) with the fields the text
//! output shows.

use rmcp::model::{CallToolResult, JsonObject};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::json;

use crate::error::{exit_code, ClientError};
use crate::session::Session;

/// A started session.
#[derive(Debug, Clone, Deserialize)]
pub struct Started {
    pub session_id: String,
    #[serde(default)]
    pub project: Option<String>,
}

/// What one `session_exec` did.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Exec {
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    /// The repr of a final expression.
    #[serde(default)]
    pub result: Option<String>,
    /// The traceback of an exception it raised.
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub timed_out: bool,
}

impl Exec {
    /// 124 when it timed out, 1 when it raised, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.timed_out {
            exit_code::TIMEOUT
        } else if self.error.is_some() {
            exit_code::FAILURE
        } else {
            0
        }
    }
}

/// One open session in `list_sessions`.
#[derive(Debug, Clone, Deserialize)]
pub struct Summary {
    pub session_id: String,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub last_used_at: String,
    #[serde(default)]
    pub execs: u64,
}

#[derive(Debug, Clone, Deserialize)]
struct List {
    #[serde(default)]
    sessions: Vec<Summary>,
}

/// A call's whole result and what its structured content says.
pub struct Answer<T> {
    pub result: CallToolResult,
    pub value: T,
}

pub async fn start(
    session: &Session,
    project: Option<&str>,
) -> Result<Answer<Started>, ClientError> {
    let mut arguments = JsonObject::new();
    if let Some(project) = project {
        arguments.insert("project".into(), json!(project));
    }
    structured(session, "session_start", arguments).await
}

pub async fn exec(
    session: &Session,
    session_id: &str,
    code: &str,
    timeout: Option<f64>,
) -> Result<Answer<Exec>, ClientError> {
    let mut arguments = JsonObject::new();
    arguments.insert("session_id".into(), json!(session_id));
    arguments.insert("code".into(), json!(code));
    if let Some(seconds) = timeout {
        arguments.insert("timeout_seconds".into(), json!(seconds));
    }
    structured(session, "session_exec", arguments).await
}

pub async fn stop(session: &Session, session_id: &str) -> Result<CallToolResult, ClientError> {
    let mut arguments = JsonObject::new();
    arguments.insert("session_id".into(), json!(session_id));
    checked(session, "session_stop", arguments).await
}

pub async fn list(session: &Session) -> Result<Answer<Vec<Summary>>, ClientError> {
    let answer: Answer<List> = structured(session, "list_sessions", JsonObject::new()).await?;
    Ok(Answer {
        result: answer.result,
        value: answer.value.sessions,
    })
}

/// A tool call whose `isError` result is an error carrying its text.
pub async fn checked(
    session: &Session,
    tool: &str,
    arguments: JsonObject,
) -> Result<CallToolResult, ClientError> {
    let result = session.call_tool(tool, arguments).await?;
    if result.is_error == Some(true) {
        return Err(ClientError::tool_failed(tool, &result));
    }
    Ok(result)
}

/// A checked call whose structured content reads as `T`.
pub async fn structured<T: DeserializeOwned>(
    session: &Session,
    tool: &str,
    arguments: JsonObject,
) -> Result<Answer<T>, ClientError> {
    let result = checked(session, tool, arguments).await?;
    let value = result
        .structured_content
        .clone()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| {
            ClientError::Protocol(format!(
                "`{tool}` answered without the structured result it declares"
            ))
        })?;
    Ok(Answer { result, value })
}

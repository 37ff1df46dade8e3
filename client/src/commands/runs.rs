//! The server's background runs: `run --detach` (start_python), `runs` (list_runs),
//! `logs RUN_ID [--follow]` (get_run, long-polled with the stream offsets) and `cancel RUN_ID`
//! (cancel_run). Runs live in the server and belong to the caller (the token), so they outlive
//! this client; `lib.rs` refuses these commands for a stdio server, which does not.

use pyrun_api::RunStatus;
use rmcp::model::{CallToolResult, JsonObject};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::cli::RunArgs;
use crate::commands::run_arguments;
use crate::error::{exit_code, ClientError};
use crate::session::Session;

pub const START: &str = "start_python";
pub const GET: &str = "get_run";
pub const CANCEL: &str = "cancel_run";
pub const LIST: &str = "list_runs";

/// How long one `get_run` of `logs --follow` waits for news (the tool's maximum).
const WAIT_SECONDS: u64 = 30;

/// Run ids are `run_` and 32 lowercase hex digits; anything else is a typo, caught before
/// connecting.
pub fn check_run_id(id: &str) -> Result<(), ClientError> {
    let hex = id.strip_prefix("run_").unwrap_or("");
    if hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(ClientError::Usage(format!(
            "`{id}` is not a run id: run ids are `run_` and 32 lowercase hex digits, as \
             `run --detach` prints them (`runs` lists yours)"
        )))
    }
}

/// `start_python`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StartedRun {
    pub run_id: String,
    pub status: RunStatus,
    /// The whole result, for `--json`.
    #[serde(skip)]
    pub raw: Value,
}

/// One answer of `get_run` or `cancel_run`: the run's state and a page of its output.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RunState {
    pub run_id: String,
    #[serde(default)]
    pub file_name: String,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default)]
    pub next_stdout_offset: u64,
    #[serde(default)]
    pub next_stderr_offset: u64,
    #[serde(default)]
    pub stdout_truncated: bool,
    #[serde(default)]
    pub stderr_truncated: bool,
    pub duration_ms: Option<u64>,
    /// Why a `failed` run could not start.
    pub error: Option<String>,
    /// The signal that killed the script, as the server gave it (a number or a name).
    #[serde(default)]
    pub signal: Option<Value>,
    /// The structured result as sent.
    #[serde(skip)]
    pub raw: Value,
}

impl RunState {
    fn from_result(tool: &str, result: &CallToolResult) -> Result<Self, ClientError> {
        let raw = structured(tool, result)?;
        let mut state: Self = parse(tool, &raw)?;
        state.raw = raw;
        Ok(state)
    }

    /// The streams whose capture the server cut short.
    pub fn truncated_streams(&self) -> Vec<&'static str> {
        [
            ("stdout", self.stdout_truncated),
            ("stderr", self.stderr_truncated),
        ]
        .into_iter()
        .filter_map(|(stream, cut)| cut.then_some(stream))
        .collect()
    }

    /// Our exit code for an ended run, by `run`'s rules: the script's code, 124 when it timed
    /// out, 1 when it was cancelled or killed; 0 while it goes on.
    pub fn exit_code(&self) -> u8 {
        match self.status {
            RunStatus::Exited => self
                .exit_code
                .and_then(|code| u8::try_from(code).ok())
                .unwrap_or(exit_code::FAILURE),
            RunStatus::TimedOut => exit_code::TIMEOUT,
            RunStatus::Cancelled | RunStatus::Failed => exit_code::FAILURE,
            RunStatus::Queued | RunStatus::Running | RunStatus::Unknown => 0,
        }
    }
}

/// What `logs` read: the last state, all output read, and the last result (for its artifacts).
#[derive(Debug, Clone)]
pub struct RunLog {
    pub last: RunState,
    pub stdout: String,
    pub stderr: String,
    pub result: CallToolResult,
}

impl RunLog {
    /// The last structured result with the whole output read in place of the last page, for
    /// `--json`.
    pub fn to_json(&self) -> Value {
        let mut value = self.last.raw.clone();
        if let Some(object) = value.as_object_mut() {
            object.insert("stdout".into(), json!(self.stdout));
            object.insert("stderr".into(), json!(self.stderr));
        }
        value
    }
}

/// One row of `list_runs`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    #[serde(default)]
    pub file_name: String,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    #[serde(default)]
    pub started_at: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Debug, Clone)]
pub struct RunList {
    pub runs: Vec<RunSummary>,
    pub raw: Value,
}

/// `run --detach`: start_python with `run`'s arguments.
pub async fn start(session: &Session, args: &RunArgs) -> Result<StartedRun, ClientError> {
    let result = call(
        session,
        START,
        run_arguments::arguments(session, args).await?,
    )
    .await?;
    let raw = structured(START, &result)?;
    let mut started: StartedRun = parse(START, &raw)?;
    started.raw = raw;
    Ok(started)
}

pub async fn list(session: &Session) -> Result<RunList, ClientError> {
    let result = call(session, LIST, JsonObject::new()).await?;
    let raw = structured(LIST, &result)?;
    #[derive(Deserialize)]
    struct Runs {
        runs: Vec<RunSummary>,
    }
    let Runs { runs } = parse(LIST, &raw)?;
    Ok(RunList { runs, raw })
}

pub async fn cancel(session: &Session, run_id: &str) -> Result<RunState, ClientError> {
    let mut arguments = JsonObject::new();
    arguments.insert("run_id".into(), json!(run_id));
    let result = call(session, CANCEL, arguments).await?;
    RunState::from_result(CANCEL, &result)
}

/// After Ctrl-C or the timeout stopped following a run that `run` started: cancels it, briefly
/// and without the limits that already fired; a failure changes nothing for the exit code.
pub async fn cancel_after_stop(session: &Session, run_id: &str) {
    let mut arguments = JsonObject::new();
    arguments.insert("run_id".into(), json!(run_id));
    let _ = session
        .call_tool_unguarded(CANCEL, arguments, std::time::Duration::from_secs(3))
        .await;
}

/// `logs`: reads the run's output from the start, page after page, handing each page to
/// `on_page` as it comes. Without `follow` it stops once it has read what is there; with it, it
/// long-polls until the run has ended and every byte is read. A run that could not start is
/// an error carrying the server's reason.
pub async fn logs(
    session: &Session,
    run_id: &str,
    follow: bool,
    mut on_page: impl FnMut(&RunState),
) -> Result<RunLog, ClientError> {
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let mut offsets = (0u64, 0u64);
    let mut wait = 0;
    loop {
        let mut arguments = JsonObject::new();
        arguments.insert("run_id".into(), json!(run_id));
        arguments.insert("wait_seconds".into(), json!(wait));
        arguments.insert("stdout_offset".into(), json!(offsets.0));
        arguments.insert("stderr_offset".into(), json!(offsets.1));
        let result = call(session, GET, arguments).await?;
        let state = RunState::from_result(GET, &result)?;
        on_page(&state);
        stdout.push_str(&state.stdout);
        stderr.push_str(&state.stderr);
        match next_read(&state, offsets, follow)? {
            Some(next_wait) => {
                offsets = (state.next_stdout_offset, state.next_stderr_offset);
                wait = next_wait;
            }
            None if state.status == RunStatus::Failed => {
                return Err(ClientError::RunFailed {
                    run_id: run_id.into(),
                    reason: state
                        .error
                        .clone()
                        .unwrap_or_else(|| "the server gave no reason".into()),
                });
            }
            None => {
                return Ok(RunLog {
                    last: state,
                    stdout,
                    stderr,
                    result,
                })
            }
        }
    }
}

/// After a page read from `asked` offsets: `None` when `logs` is done (everything read, and the
/// run ended or we are not following), else how long the next `get_run` may wait: not at all
/// after a page with output (more may be waiting), up to [`WAIT_SECONDS`] after an empty one.
fn next_read(page: &RunState, asked: (u64, u64), follow: bool) -> Result<Option<u64>, ClientError> {
    let drained = page.stdout.is_empty() && page.stderr.is_empty();
    if !drained && (page.next_stdout_offset, page.next_stderr_offset) == asked {
        return Err(ClientError::Protocol(format!(
            "`{GET}` sent output but did not move its offsets past it; reading on would repeat it"
        )));
    }
    Ok(match (drained, page.status.has_ended() || !follow) {
        (true, true) => None,
        (true, false) => Some(WAIT_SECONDS),
        (false, _) => Some(0),
    })
}

/// The whole capture of one stream of a kept run, from its start up to `len` bytes, read in
/// `get_run` pages as the server presents them (stderr without the host's folders, as its live
/// chunks and results are): what completes a waited run's result that was cut for a model.
pub async fn read_capture(
    session: &Session,
    run_id: &str,
    stdout: bool,
    len: u64,
) -> Result<String, ClientError> {
    let (mine, other) = if stdout {
        ("stdout_offset", "stderr_offset")
    } else {
        ("stderr_offset", "stdout_offset")
    };
    let mut text = String::new();
    let mut offset = 0u64;
    while offset < len {
        let mut arguments = JsonObject::new();
        arguments.insert("run_id".into(), json!(run_id));
        arguments.insert(mine.into(), json!(offset));
        // Past its end: the other stream sends nothing.
        arguments.insert(other.into(), json!(u64::MAX));
        let state = RunState::from_result(GET, &call(session, GET, arguments).await?)?;
        let (page, next) = if stdout {
            (state.stdout, state.next_stdout_offset)
        } else {
            (state.stderr, state.next_stderr_offset)
        };
        if next <= offset {
            return Err(ClientError::Protocol(format!(
                "`{GET}` stopped at byte {offset} of {len} of run {run_id}'s capture"
            )));
        }
        text.push_str(&page);
        offset = next;
    }
    Ok(text)
}

/// A tool call whose `isError` result becomes the error (e.g. an unknown run id).
async fn call(
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

fn structured(tool: &str, result: &CallToolResult) -> Result<Value, ClientError> {
    result.structured_content.clone().ok_or_else(|| {
        ClientError::Protocol(format!(
            "`{tool}` answered without structured content; is this a pyrun-mcp server with \
             background runs?"
        ))
    })
}

fn parse<T: serde::de::DeserializeOwned>(tool: &str, value: &Value) -> Result<T, ClientError> {
    serde_json::from_value(value.clone()).map_err(|e| {
        ClientError::Protocol(format!("`{tool}` answered in an unexpected shape: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn state(value: Value) -> Result<RunState, ClientError> {
        let mut result = CallToolResult::success(vec![ContentBlock::text("x")]);
        result.structured_content = Some(value);
        RunState::from_result(GET, &result)
    }

    const ID: &str = "run_0123456789abcdef0123456789abcdef";

    #[test]
    fn run_ids_are_checked_before_connecting() {
        assert!(check_run_id(ID).is_ok());
        for bad in [
            "",
            "run_",
            "0123456789abcdef0123456789abcdef",
            "run_0123456789ABCDEF0123456789ABCDEF",
            "run_0123456789abcdef0123456789abcde",
            "run_0123456789abcdef0123456789abcdef0",
            "run_../../etc/passwd0123456789abcde",
        ] {
            assert!(
                matches!(check_run_id(bad), Err(ClientError::Usage(m)) if m.contains("not a run id")),
                "{bad:?} passed"
            );
        }
    }

    #[test]
    fn a_get_run_answer_is_read_with_its_offsets() {
        let s = state(json!({
            "run_id": ID, "file_name": "train.py", "status": "running", "exit_code": null,
            "stdout": "epoch 1\n", "stderr": "", "next_stdout_offset": 8, "next_stderr_offset": 0,
            "stdout_truncated": false, "stderr_truncated": false, "duration_ms": 1200,
            "artifacts": [], "skipped_artifacts": []
        }));
        let s = s.expect("parses");
        assert_eq!(s.status, RunStatus::Running);
        assert_eq!((s.next_stdout_offset, s.stdout.as_str()), (8, "epoch 1\n"));
        assert_eq!(s.exit_code(), 0);
        assert!(!s.status.has_ended());
    }

    #[test]
    fn ended_runs_exit_like_run_does() {
        let code = |status: &str, exit: Value| {
            state(json!({"run_id": ID, "status": status, "exit_code": exit}))
                .map(|s| s.exit_code())
                .ok()
        };
        assert_eq!(code("exited", json!(0)), Some(0));
        assert_eq!(code("exited", json!(3)), Some(3));
        assert_eq!(code("exited", json!(-9)), Some(1));
        assert_eq!(code("exited", Value::Null), Some(1));
        assert_eq!(code("timed_out", Value::Null), Some(124));
        assert_eq!(code("cancelled", Value::Null), Some(1));
        assert_eq!(code("queued", Value::Null), Some(0));
        // A status added later is read as still going, not as a parse failure.
        assert_eq!(code("paused", Value::Null), Some(0));
    }

    #[test]
    fn logs_reads_on_until_the_run_ended_and_every_page_is_read() {
        let page = |status: &str, out: &str, next: u64| {
            state(json!({"run_id": ID, "status": status, "stdout": out,
                "next_stdout_offset": next}))
            .expect("parses")
        };
        let follow = true;
        // A page with output: read on at once, following or not, ended or not.
        assert_eq!(
            next_read(&page("running", "a", 1), (0, 0), follow).ok(),
            Some(Some(0))
        );
        assert_eq!(
            next_read(&page("running", "a", 1), (0, 0), !follow).ok(),
            Some(Some(0))
        );
        assert_eq!(
            next_read(&page("exited", "a", 1), (0, 0), follow).ok(),
            Some(Some(0))
        );
        // Nothing new: following waits for news; otherwise, and once ended, done.
        assert_eq!(
            next_read(&page("running", "", 1), (1, 0), follow).ok(),
            Some(Some(WAIT_SECONDS))
        );
        assert_eq!(
            next_read(&page("queued", "", 0), (0, 0), !follow).ok(),
            Some(None)
        );
        assert_eq!(
            next_read(&page("exited", "", 1), (1, 0), follow).ok(),
            Some(None)
        );
        assert_eq!(
            next_read(&page("cancelled", "", 1), (1, 0), follow).ok(),
            Some(None)
        );
        // Output without moving the offsets would print it forever.
        assert!(matches!(
            next_read(&page("running", "a", 1), (1, 0), follow),
            Err(ClientError::Protocol(m)) if m.contains("offsets")
        ));
    }

    #[test]
    fn answers_without_structure_are_protocol_errors() {
        let result = CallToolResult::success(vec![ContentBlock::text("x")]);
        assert!(matches!(
            RunState::from_result(GET, &result),
            Err(ClientError::Protocol(_))
        ));
        assert!(matches!(
            state(json!({"status": "running"})),
            Err(ClientError::Protocol(m)) if m.contains("run_id")
        ));
    }

    #[test]
    fn the_json_of_a_log_holds_all_output_read() {
        let last = state(json!({"run_id": ID, "status": "exited", "exit_code": 0,
            "stdout": "b", "next_stdout_offset": 2}))
        .expect("parses");
        let log = RunLog {
            last,
            stdout: "ab".into(),
            stderr: String::new(),
            result: CallToolResult::success(vec![]),
        };
        let value = log.to_json();
        assert_eq!(value["stdout"], "ab");
        assert_eq!(value["exit_code"], 0);
    }
}

//! What the tool rooms build their answers from, and the one place they share: refusals (a
//! tool error the model can read), structured results, page sizes, listings, URI segments, and
//! how a result names the interpreter.

use std::time::Duration;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

use crate::client_message::ClientMessage;
use pyrun_run::background::{BackgroundSettings, StartError};
use pyrun_run::python_env::PythonEnv;

/// A notification that cannot be sent in this time is dropped, so a slow client cannot stall a run.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(2);

/// The most output one `get_run` (or a handed-over `run_python`) returns per stream; pass the
/// next offset back for more.
pub const PAGE_BYTES: usize = 256 * 1024;

pub use pyrun_api::PythonInfo;

/// What a result says of an environment's interpreter.
pub fn python_info_of(env: &PythonEnv) -> PythonInfo {
    PythonInfo {
        version: env.version.clone(),
        venv: env.venv.as_ref().map(|venv| venv.relative.clone()),
    }
}

/// A refused call: a tool error the model can read and correct, never a protocol error.
pub fn refusal(message: ClientMessage) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into_string())])
}

/// A result with `text` for people and models and `value` as its structured content.
pub fn structured<T: Serialize>(text: String, value: &T) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = serde_json::to_value(value).ok();
    result
}

/// The text of a listing: one line per item, or `empty` when there is none.
pub fn listing<T>(items: &[T], empty: &str, line: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        return empty.to_owned();
    }
    let text = items.iter().map(line).collect::<Vec<_>>().join("\n");
    text.trim_end().to_owned()
}

pub fn to_array<T: Serialize>(items: &[T]) -> serde_json::Value {
    serde_json::to_value(items).unwrap_or_else(|_| serde_json::Value::Array(Vec::new()))
}

/// Why no background run (nor task) could be started.
pub fn runs_full(e: StartError, settings: &BackgroundSettings) -> ClientMessage {
    let (max, whose, flag) = match e {
        StartError::Full { max } => (max, "", "--max-background-runs"),
        StartError::CallerFull { max } => (max, " of yours", "--max-background-runs-per-caller"),
        StartError::NoRunId => {
            tracing::error!("{e}");
            return ClientMessage::new("the server could not draw a run id")
                .hint("the server's log has the details");
        }
    };
    ClientMessage::new("")
        .number(max)
        .then(" background runs")
        .then(whose)
        .then(" are kept at once (queued, running, or ended less than ")
        .duration(settings.retention)
        .then(" ago) and none of yours can make room")
        .hint(
            "read a finished run of yours to its end with get_run (it may then make room), \
             cancel one with cancel_run, or wait",
        )
        .then(" (the server's operator can raise ")
        .then(flag)
        .then(")")
}

/// What a URI segment keeps as it is: RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes each `/`-separated segment of a relative path (RFC 3986 unreserved kept): how
/// project files and artifacts are named in URIs.
pub fn encode_segments(relative: &str) -> String {
    let mut out = String::with_capacity(relative.len());
    for (i, segment) in relative.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.extend(utf8_percent_encode(segment, SEGMENT));
    }
    out
}

/// Appends `part` to a result's text, on a line of its own.
pub fn push_section(text: &mut String, part: &str) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(part);
}

/// `[Output truncated: stdout and stderr over the limit]`, when either stream was cut.
pub fn truncation_note(stdout: bool, stderr: bool) -> Option<String> {
    let cut = match (stdout, stderr) {
        (false, false) => return None,
        (true, false) => "stdout",
        (false, true) => "stderr",
        (true, true) => "stdout and stderr",
    };
    Some(format!("[Output truncated: {cut} over the limit]"))
}

/// `30` or `2.5`: seconds as results show them.
pub fn fmt_secs(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs:.1}")
    }
}

pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An RFC 3339 UTC time to the second, as listings show them.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

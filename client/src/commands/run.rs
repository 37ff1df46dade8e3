//! `run FILE [-- ARGS…]`: run_python, reporting the script's output and exit code.

use pyrun_api::{ArtifactInfo, OutputCut, RunStatus, SkippedArtifact};
use rmcp::model::{CallToolResult, JsonObject};
use serde::Deserialize;
use serde_json::Value;

use crate::cli::RunArgs;
use crate::commands::{run_arguments, runs};
use crate::error::{exit_code, ClientError};
use crate::live::Printed;
use crate::session::Session;

pub use crate::commands::run_arguments::TOOL;

#[derive(Debug, Clone)]
pub struct RunReport {
    /// The whole result, for `--json`.
    pub result: CallToolResult,
    pub outcome: RunOutcome,
    /// Which streams the server cut short ("stdout", "stderr").
    pub truncated: Vec<&'static str>,
    /// The files the run left in its output folder, and the ones the server did not keep.
    pub artifacts: Artifacts,
    /// What was printed while the run went (live output); the rest of the result follows it.
    pub printed: Printed,
    /// The server's word on a setting behind the run's failure or cut (`--allow-network`, a
    /// limit), one line each.
    pub hint: Option<String>,
    /// The streams the result cut to a model's size, with where their whole capture is.
    pub cuts: Vec<(&'static str, OutputCut)>,
    /// What the whole capture could not give back: notes for after the output.
    pub gaps: Vec<String>,
}

/// The structured `artifacts` and `skipped_artifacts` of a result, for the notes after a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Artifacts {
    #[serde(default)]
    pub artifacts: Vec<ArtifactInfo>,
    #[serde(default, rename = "skipped_artifacts")]
    pub skipped: Vec<SkippedArtifact>,
}

impl Artifacts {
    pub fn of(structured: Option<&Value>) -> Self {
        structured
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// pyrun-mcp's structured result.
    Finished {
        stdout: String,
        stderr: String,
        exit_code: Option<i32>,
        timed_out: bool,
        /// The signal that killed it, as the server gave it (a number or a name).
        signal: Option<Value>,
    },
    /// The server moved the run to the background (`--detach-after`) while it still went on;
    /// it is followed with `get_run` in the same session.
    HandedOver { run_id: String },
    /// A server without `structuredContent`: only text to show.
    Unstructured,
}

/// The part of `structuredContent` we use.
#[derive(Debug, Deserialize)]
struct Structured {
    #[serde(default)]
    stdout: String,
    #[serde(default)]
    stderr: String,
    exit_code: Option<i32>,
    #[serde(default)]
    timed_out: bool,
    #[serde(default)]
    stdout_truncated: bool,
    #[serde(default)]
    stderr_truncated: bool,
    #[serde(default)]
    signal: Option<Value>,
    #[serde(default)]
    hint: Option<String>,
    #[serde(default)]
    stdout_cut: Option<OutputCut>,
    #[serde(default)]
    stderr_cut: Option<OutputCut>,
    /// Only in a result handed over to the background (with `status` running or queued).
    run_id: Option<String>,
    status: Option<RunStatus>,
}

impl RunReport {
    pub fn from_result(result: CallToolResult) -> Self {
        let structured = result
            .structured_content
            .clone()
            .and_then(|v| serde_json::from_value::<Structured>(v).ok());
        let artifacts = Artifacts::of(result.structured_content.as_ref());
        let Some(s) = structured else {
            return Self {
                result,
                outcome: RunOutcome::Unstructured,
                truncated: vec![],
                artifacts,
                printed: Printed::default(),
                hint: None,
                cuts: vec![],
                gaps: vec![],
            };
        };
        let truncated = [
            ("stdout", s.stdout_truncated),
            ("stderr", s.stderr_truncated),
        ]
        .into_iter()
        .filter_map(|(name, cut)| cut.then_some(name))
        .collect();
        let cuts = [("stdout", s.stdout_cut), ("stderr", s.stderr_cut)]
            .into_iter()
            .filter_map(|(name, cut)| Some((name, cut?)))
            .collect();
        let going = matches!(s.status, Some(RunStatus::Running | RunStatus::Queued));
        let outcome = match s.run_id {
            Some(run_id) if going => RunOutcome::HandedOver { run_id },
            _ => RunOutcome::Finished {
                stdout: s.stdout,
                stderr: s.stderr,
                exit_code: s.exit_code,
                timed_out: s.timed_out,
                signal: s.signal.filter(|v| !v.is_null()),
            },
        };
        Self {
            result,
            outcome,
            truncated,
            artifacts,
            printed: Printed::default(),
            hint: s.hint.filter(|h| !h.trim().is_empty()),
            cuts,
            gaps: vec![],
        }
    }

    /// The script's exit code as ours: 124 on timeout, 1 if it was killed or the tool failed.
    pub fn exit_code(&self) -> u8 {
        match &self.outcome {
            RunOutcome::Finished {
                timed_out: true, ..
            } => exit_code::TIMEOUT,
            RunOutcome::Finished {
                exit_code: Some(code),
                ..
            } => u8::try_from(*code).unwrap_or(exit_code::FAILURE),
            RunOutcome::Finished {
                exit_code: None, ..
            } => exit_code::FAILURE,
            RunOutcome::Unstructured if self.result.is_error == Some(true) => exit_code::FAILURE,
            // Followed to its end by the caller, whose exit code is the run's.
            RunOutcome::Unstructured | RunOutcome::HandedOver { .. } => 0,
        }
    }
}

/// `live`: print the script's output as it comes (a pyrun-mcp server sends it when asked);
/// whatever stops the call, what arrived stays printed.
pub async fn execute(
    session: &Session,
    args: &RunArgs,
    live: bool,
) -> Result<RunReport, ClientError> {
    let arguments = run_arguments::arguments(session, args).await?;
    execute_tool(session, TOOL, arguments, live).await
}

/// A run through `tool` (`run_python`, `run_python_code`), whose result is a run report.
pub async fn execute_tool(
    session: &Session,
    tool: &str,
    arguments: JsonObject,
    live: bool,
) -> Result<RunReport, ClientError> {
    let (result, printed) = if live {
        session.call_tool_live(tool, arguments).await
    } else {
        (session.call_tool(tool, arguments).await, Printed::default())
    };
    let mut report = RunReport::from_result(result?);
    report.printed = printed;
    // A refused call (missing file, path outside the folder) is the tool's error, not the script's.
    if report.outcome == RunOutcome::Unstructured && report.result.is_error == Some(true) {
        return Err(ClientError::tool_failed(tool, &report.result));
    }
    if live {
        complete(session, &mut report).await;
    }
    Ok(report)
}

/// Puts back what the result cut from its streams (it is sized for a model: the head and the
/// tail of each) from the run's whole capture, which the server keeps under the cut's run id.
/// Past the server's `--max-output-bytes` only the tail was kept: that gap is noted instead.
/// A stream that cannot be completed keeps the result's text, and says why.
async fn complete(session: &Session, report: &mut RunReport) {
    let RunOutcome::Finished { stdout, stderr, .. } = &mut report.outcome else {
        return;
    };
    for (name, cut) in std::mem::take(&mut report.cuts) {
        let shown = if name == "stdout" {
            &mut *stdout
        } else {
            &mut *stderr
        };
        match whole_stream(session, name, &cut, shown).await {
            Ok(whole) => {
                *shown = whole.text;
                report.truncated.retain(|stream| *stream != name);
                if whole.dropped > 0 {
                    report.gaps.push(format!(
                        "the server dropped {} bytes of the script's {name}: it kept the first {} \
                         (--max-output-bytes) and the last {} of {} bytes, printed above",
                        whole.dropped, cut.captured_bytes, whole.tail_bytes, cut.total_bytes
                    ));
                }
            }
            Err(why) => report.gaps.push(format!(
                "the result showed only the head and tail of the script's {name}, and its \
                 whole capture could not be read: {why}"
            )),
        }
    }
}

/// A stream put back whole, but for what the server dropped.
struct Whole {
    text: String,
    dropped: u64,
    tail_bytes: u64,
}

async fn whole_stream(
    session: &Session,
    name: &str,
    cut: &OutputCut,
    shown: &str,
) -> Result<Whole, ClientError> {
    let run_id = cut.run_id.as_deref().ok_or_else(|| {
        ClientError::Protocol("the server could not keep it (its run list is full)".into())
    })?;
    let mut text =
        runs::read_capture(session, run_id, name == "stdout", cut.captured_bytes).await?;
    if cut.captured_bytes >= cut.total_bytes {
        return Ok(Whole {
            text,
            dropped: 0,
            tail_bytes: 0,
        });
    }
    // Past the capture the server counted bytes and kept only the last ones: the result's tail.
    let tail_bytes = cut
        .total_bytes
        .saturating_sub(cut.head_bytes.saturating_add(cut.omitted_bytes));
    let tail_start = cut.total_bytes - tail_bytes;
    let tail = result_tail(shown, name, cut)
        .ok_or_else(|| ClientError::Protocol("the result's cut line was not found".into()))?;
    if tail_start < cut.captured_bytes {
        // The tail begins inside the capture: keep the capture up to it (its text is its bytes
        // unless it held invalid UTF-8 or named the host's folders).
        let keep = usize::try_from(tail_start).unwrap_or(usize::MAX);
        if text.len() as u64 != cut.captured_bytes || !text.is_char_boundary(keep) {
            return Err(ClientError::Protocol(
                "its tail overlaps its capture at a place the client cannot find".into(),
            ));
        }
        text.truncate(keep);
    }
    text.push_str(tail);
    Ok(Whole {
        text,
        dropped: tail_start.saturating_sub(cut.captured_bytes),
        tail_bytes,
    })
}

/// The tail a cut result shows: what follows the line the server put between head and tail.
fn result_tail<'a>(shown: &'a str, name: &str, cut: &OutputCut) -> Option<&'a str> {
    let line = format!(
        "[... {} bytes ({} lines) of {name} cut here:",
        cut.omitted_bytes, cut.omitted_lines
    );
    let start = shown.find(&line)?;
    let end = shown[start..].find('\n')? + start + 1;
    Some(&shown[end..])
}

/// The note for a script killed before it exited, naming the signal when the server sent it
/// (`9` or `"SIGKILL"`); the number alone when the name is not one we know.
pub fn killed_note(signal: Option<&Value>) -> String {
    let named = match signal {
        Some(Value::Number(n)) => n.as_i64().map(|n| match signal_name(n) {
            Some(name) => format!("{name} (signal {n})"),
            None => format!("signal {n}"),
        }),
        Some(Value::String(name)) if !name.is_empty() => Some(name.clone()),
        _ => None,
    };
    match named {
        Some(signal) => format!("the script was killed by {signal} before it exited"),
        None => "the script was killed before it exited".into(),
    }
}

/// The Linux names of the signals that end a script.
fn signal_name(number: i64) -> Option<&'static str> {
    Some(match number {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;
    use serde_json::json;

    fn report(structured: Value) -> RunReport {
        let mut result = CallToolResult::success(vec![ContentBlock::text("x")]);
        result.structured_content = Some(structured);
        RunReport::from_result(result)
    }

    #[test]
    fn exit_code_follows_the_script() {
        assert_eq!(
            report(json!({"stdout": "hi\n", "stderr": "", "exit_code": 0, "timed_out": false}))
                .exit_code(),
            0
        );
        assert_eq!(
            report(json!({"stdout": "", "stderr": "boom", "exit_code": 3, "timed_out": false}))
                .exit_code(),
            3
        );
        assert_eq!(
            report(json!({"exit_code": null, "timed_out": true})).exit_code(),
            124
        );
        assert_eq!(
            report(json!({"exit_code": null, "timed_out": false})).exit_code(),
            1
        );
        assert_eq!(
            report(json!({"exit_code": -9, "timed_out": false})).exit_code(),
            1
        );
    }

    #[test]
    fn a_killed_script_names_its_signal_or_its_number() {
        let note = |v: Value| killed_note(Some(&v));
        assert_eq!(
            note(json!(9)),
            "the script was killed by SIGKILL (signal 9) before it exited"
        );
        assert_eq!(
            note(json!(64)),
            "the script was killed by signal 64 before it exited"
        );
        assert_eq!(
            note(json!("SIGXCPU")),
            "the script was killed by SIGXCPU before it exited"
        );
        assert_eq!(killed_note(None), "the script was killed before it exited");
        let r = report(json!({"exit_code": null, "timed_out": false, "signal": 11}));
        assert!(matches!(
            r.outcome,
            RunOutcome::Finished { signal: Some(ref s), .. } if s == &json!(11)
        ));
    }

    #[test]
    fn truncation_is_reported() {
        let r =
            report(json!({"exit_code": 0, "stdout_truncated": true, "stderr_truncated": false}));
        assert_eq!(r.truncated, vec!["stdout"]);
    }

    #[test]
    fn artifacts_and_skipped_files_are_read_from_the_result() {
        let r = report(json!({"exit_code": 0,
            "artifacts": [{"name": "figure-1.png", "size": 2048, "mime_type": "image/png",
                           "uri": "pyrun://runs/run_1/files/figure-1.png"}],
            "skipped_artifacts": [{"name": "big.bin", "reason": "larger than the 64 MiB limit per file"}]}));
        assert_eq!(r.artifacts.artifacts.len(), 1);
        assert_eq!(r.artifacts.artifacts[0].size, 2048);
        assert_eq!(r.artifacts.skipped[0].name, "big.bin");
        // Older servers send neither.
        assert_eq!(
            report(json!({"exit_code": 0})).artifacts,
            Artifacts::default()
        );
    }

    #[test]
    fn a_run_handed_over_to_the_background_is_told_apart_from_an_ended_one() {
        let id = "run_0123456789abcdef0123456789abcdef";
        let r = report(
            json!({"stdout": "so far\n", "exit_code": null, "timed_out": false,
            "run_id": id, "status": "running"}),
        );
        assert_eq!(r.outcome, RunOutcome::HandedOver { run_id: id.into() });
        // A finished run that carries its id (artifacts) is still a finished run.
        let r = report(json!({"exit_code": 0, "run_id": id, "status": "exited"}));
        assert!(matches!(
            r.outcome,
            RunOutcome::Finished {
                exit_code: Some(0),
                ..
            }
        ));
    }

    #[test]
    fn the_tail_of_a_cut_result_follows_its_cut_line() {
        let cut: OutputCut =
            serde_json::from_value(json!({"omitted_bytes": 70, "omitted_lines": 7,
            "total_bytes": 100, "captured_bytes": 50, "head_bytes": 20}))
            .unwrap_or_else(|e| panic!("{e}"));
        let shown = "head [... 1 bytes (1 lines) of stdout cut here: not ours]\n\
                     [... 70 bytes (7 lines) of stdout cut here: more]\nlast\nend";
        assert_eq!(result_tail(shown, "stdout", &cut), Some("last\nend"));
        assert_eq!(result_tail(shown, "stderr", &cut), None);
    }

    #[test]
    fn a_foreign_server_gives_text_only() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("hello")]);
        assert_eq!(RunReport::from_result(result.clone()).exit_code(), 0);
        result.is_error = Some(true);
        assert_eq!(RunReport::from_result(result).exit_code(), 1);
    }
}

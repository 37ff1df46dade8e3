//! A run the call waits for (`run_python`, `run_python_code`, and a `run_python` task or
//! hand-over once its run has ended): its output followed with progress notifications, the files
//! it leaves kept under a run id for its caller, and its result — [`RunReport`] and the text in
//! the seed's familiar shape, each stream sized for a model (`output_cut`). When a stream was
//! cut, the run's record (its whole capture) is kept in the background registry, unlisted, so
//! the link and get_run read the rest under the same owner rules and retention as a
//! background run's.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use crate::app::App;
use crate::client_message::ClientMessage;
use crate::mcp::call::{python_info, with_progress, CallContext, Progress};
use crate::mcp::present::artifact_blocks::{self, Presented};
use crate::mcp::present::live_chunks::ChunkCursor;
use crate::mcp::present::output_cut;
use crate::mcp::present::progress_frames;
use crate::mcp::present::quarantine_note::quarantine_note;
use crate::mcp::present::reply::{
    fmt_secs, millis, push_section, refusal, to_array, truncation_note,
};
use crate::mcp::present::run_hint;
use pyrun_run::background::{RunEnd, RunRecord};
use pyrun_run::engine::Engine;
use pyrun_run::live_output::{LiveOutput, Stream};
use pyrun_run::paths::ProjectPath;
use pyrun_run::quarantine::moved_paths;
use pyrun_run::runner::{RunOutcome, RunRequest, RunSource};

pub use pyrun_api::RunReport;

/// A report's JSON as its `Serialize` writes it, but moving the output strings instead of
/// copying them: a run's result then holds its (up to twice `--max-output-bytes`) output fewer
/// times.
pub(in crate::mcp) fn report_value(report: RunReport) -> serde_json::Value {
    use serde_json::Value;
    let fields = [
        ("stdout", Value::String(report.stdout)),
        ("stderr", Value::String(report.stderr)),
        (
            "exit_code",
            report.exit_code.map_or(Value::Null, Value::from),
        ),
        ("timed_out", Value::Bool(report.timed_out)),
        ("warm", Value::Bool(report.warm)),
        ("stdout_truncated", Value::Bool(report.stdout_truncated)),
        ("stderr_truncated", Value::Bool(report.stderr_truncated)),
        ("duration_ms", Value::from(report.duration_ms)),
        (
            "sandbox",
            Value::Array(report.sandbox.into_iter().map(Value::String).collect()),
        ),
        ("artifacts", to_array(&report.artifacts)),
        ("skipped_artifacts", to_array(&report.skipped_artifacts)),
        (
            "quarantined",
            Value::Array(report.quarantined.into_iter().map(Value::String).collect()),
        ),
    ];
    let cuts = [
        ("stdout_cut", report.stdout_cut),
        ("stderr_cut", report.stderr_cut),
    ]
    .into_iter()
    .filter_map(|(k, cut)| Some((k, serde_json::to_value(cut?).ok()?)));
    let optional = [
        ("run_id", report.run_id),
        (
            "status",
            report.status.map(|status| status.as_str().to_owned()),
        ),
        ("hint", report.hint),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, Value::String(v))))
    .chain(report.signal.map(|signal| ("signal", Value::from(signal))));
    let python = serde_json::to_value(&report.python).unwrap_or(Value::Null);
    Value::Object(
        fields
            .into_iter()
            .chain(optional)
            .chain(std::iter::once(("python", python)))
            .chain(cuts)
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

/// How much of the end of a run's stderr the hint reads for the failure it names.
const HINT_STDERR_BYTES: usize = 64 * 1024;

/// A run the call waits for (`run_python`, `run_python_code`): its output followed with
/// progress notifications when the caller asked for them, the files it leaves kept under a
/// new run id for the caller, its result or a refusal.
pub(in crate::mcp) async fn run_in_call(
    call: &CallContext<'_>,
    request: RunRequest<'_>,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let began = std::time::Instant::now();
    let engine = &call.app.engine;
    let (source, timeout) = (request.source, request.timeout);
    let caller = &call.caller;
    let key = caller.key();
    // The result reads the output from its capture, and keeps it when it was too long to
    // show; the files it leaves are kept for its caller under its run id.
    let in_call = engine.call_run(&key);
    let live = &in_call.live;
    let run = engine.run_in_call(&in_call, request, &key, &ctx.ct);
    let outcome = match ctx.meta.get_progress_token() {
        Some(token) => {
            let chunks = ChunkCursor::asked(ctx);
            let message = |elapsed| Progress {
                message: run_message(engine, source, live, elapsed),
                meta: chunks
                    .as_ref()
                    .and_then(|c| c.next(live, |text| engine.without_host_folder(text))),
            };
            with_progress(ctx, token, message, run).await
        }
        None => run.await,
    };
    match outcome {
        Ok(outcome) => {
            let kept = if too_long_to_show(call.app, live) {
                engine.keep_ended(&in_call, &outcome, &key, source)
            } else {
                None
            };
            let output = RunOutput {
                live,
                kept_as: kept.as_deref(),
                raw: ChunkCursor::asked(ctx).is_some(),
            };
            let result = finished(
                call,
                outcome,
                output,
                in_call.run_id.as_deref(),
                source,
                timeout,
            )
            .await;
            // Where a call's time goes after its run (`PYRUN_LOG=pyrun_run::steps=debug`).
            let us = began.elapsed().as_micros();
            tracing::debug!(target: "pyrun_run::steps", step = "result built", us);
            result
        }
        Err(e) => {
            let span = tracing::warn_span!("run", %caller, script = source.shown());
            refusal(span.in_scope(|| e.into()))
        }
    }
}

/// Whether a stream of `live` is longer than a result shows.
pub(in crate::mcp) fn too_long_to_show(app: &App, live: &LiveOutput) -> bool {
    let budget = app.config.max_result_output_bytes as u64;
    [Stream::Stdout, Stream::Stderr]
        .into_iter()
        .any(|which| live.totals(which).written > budget)
}

/// A run that ended: logged, noted for the audit log, reported with the files it left
/// (kept under `run_id` for the caller) and its output as `output` holds it.
async fn finished(
    call: &CallContext<'_>,
    outcome: RunOutcome,
    output: RunOutput<'_>,
    run_id: Option<&str>,
    source: RunSource<'_>,
    timeout: Duration,
) -> CallToolResult {
    let (app, caller) = (call.app, &call.caller);
    tracing::info!(
        %caller,
        script = source.shown(),
        exit_code = outcome.exit_code,
        timed_out = outcome.timed_out,
        cancelled = outcome.cancelled,
        ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
        "run ended"
    );
    // A run has ended: the sandbox was probed before it started. A remote run had none of
    // this machine's layers (the worker's container is its boundary).
    let sandbox = app.engine.sandbox_layers(&caller.key(), run_id);
    call.notes.note(|n| {
        n.exit_code = outcome.exit_code;
        n.timed_out = outcome.timed_out;
        n.cancelled = outcome.cancelled;
        n.sandbox = Some(sandbox.clone());
    });
    let presented = match (&outcome.artifacts, run_id) {
        (Some(collected), Some(run_id))
            if !collected.kept.is_empty() || !collected.skipped.is_empty() =>
        {
            artifact_blocks::present(app, &caller.key(), run_id, collected).await
        }
        _ => Presented::default(),
    };
    // The run's stderr lives in its capture, not in the outcome; its end names the failure.
    let stderr_end = output.live.tail(Stream::Stderr, HINT_STDERR_BYTES);
    let stderr_end = String::from_utf8_lossy(&stderr_end);
    let hint = run_hint::for_outcome(&outcome, &stderr_end, timeout, &app.config, &sandbox);
    let mut result = report(app, outcome, output, timeout, sandbox, presented);
    if let Some(hint) = hint {
        run_hint::add(&mut result, &hint);
    }
    result
}

/// The `run_python` result of a run of the registry that has ended (its output copied: a
/// task's run stays readable with get_run).
/// `raw`: the caller followed the live output (see [`RunOutput::raw`]).
pub(in crate::mcp) async fn ended_result(
    call: &CallContext<'_>,
    record: &RunRecord,
    script: &ProjectPath,
    timeout: Duration,
    raw: bool,
) -> CallToolResult {
    match record.end() {
        Some(RunEnd::Finished(outcome)) => {
            // The record stays for a task; a hand-over keeps it when the output was cut.
            let output = RunOutput {
                live: &record.live,
                kept_as: Some(&record.id),
                raw,
            };
            finished(
                call,
                outcome.clone(),
                output,
                Some(&record.id),
                script.into(),
                timeout,
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

/// A run's progress message: `running train.py (12 s): epoch 3/10 loss 0.41` (inline code:
/// `running inline code …`).
pub(in crate::mcp) fn run_message(
    engine: &Engine,
    source: RunSource<'_>,
    live: &LiveOutput,
    elapsed: Duration,
) -> ClientMessage {
    let message = match source {
        RunSource::Script(script) => ClientMessage::new("running ").path(script),
        RunSource::Inline { .. } => ClientMessage::new("running inline code"),
    };
    let message = message
        .then(" (")
        .number(elapsed.as_secs_f64().round())
        .then(" s)");
    match live.last_line() {
        Some(line) => message
            .then(": ")
            .output(&engine.without_host_folder(&line)),
        None => message,
    }
}

fn report(
    app: &App,
    mut outcome: RunOutcome,
    output: RunOutput<'_>,
    timeout: Duration,
    sandbox: Vec<&'static str>,
    mut presented: Presented,
) -> CallToolResult {
    let budget = app.config.max_result_output_bytes;
    let shown = |which| output_cut::show(output.live, which, budget, output.kept_as);
    let (stdout, stderr) = (shown(Stream::Stdout), shown(Stream::Stderr));
    outcome.stdout = stdout.text;
    outcome.stderr = app.engine.without_host_folder(&stderr.text);
    if !output.raw {
        outcome.stdout = progress_frames::collapse(&outcome.stdout).into_owned();
        outcome.stderr = progress_frames::collapse(&outcome.stderr).into_owned();
    }
    let cuts = (stdout.cut, stderr.cut);
    let text = render_text(&outcome, timeout, (cuts.0.is_some(), cuts.1.is_some()));
    let report = RunReport {
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        exit_code: outcome.exit_code,
        timed_out: outcome.timed_out,
        stdout_truncated: outcome.stdout_truncated,
        stderr_truncated: outcome.stderr_truncated,
        duration_ms: millis(outcome.duration),
        sandbox: sandbox.into_iter().map(str::to_owned).collect(),
        artifacts: std::mem::take(&mut presented.artifacts),
        skipped_artifacts: std::mem::take(&mut presented.skipped),
        quarantined: moved_paths(&outcome.quarantined),
        run_id: None,
        status: None,
        python: python_info(&app.engine, outcome.python.as_deref()),
        hint: None,
        signal: outcome.signal,
        warm: outcome.warm,
        stdout_cut: cuts.0,
        stderr_cut: cuts.1,
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(report_value(report));
    presented.add_blocks_to(&mut result);
    result
}

/// Where a result reads a run's output: its capture, and the run id under which the whole stays
/// readable (when it does).
#[derive(Clone, Copy)]
pub(in crate::mcp) struct RunOutput<'a> {
    pub live: &'a LiveOutput,
    pub kept_as: Option<&'a str>,
    /// The caller follows the live output to print it for a person (it asked for chunks): its
    /// result keeps every byte. Otherwise a model reads it, and `\r` frames are collapsed.
    pub raw: bool,
}

/// The text shown to people and models, in the seed's familiar shape. `cut` says which streams
/// show only their head and tail (their own line says what was cut: no second note).
fn render_text(outcome: &RunOutcome, timeout: Duration, cut: (bool, bool)) -> String {
    let mut text = outcome.stdout.clone();
    if !outcome.stderr.is_empty() {
        push_section(&mut text, "--- stderr ---\n");
        text.push_str(&outcome.stderr);
    }
    if let Some(code) = outcome.exit_code.filter(|c| *c != 0) {
        push_section(&mut text, &format!("[Process exited with code {code}]"));
    }
    if outcome.timed_out {
        push_section(
            &mut text,
            &format!("[Timed out after {} s]", fmt_secs(timeout)),
        );
    }
    if outcome.cancelled {
        push_section(&mut text, "[Cancelled]");
    }
    if outcome.exit_code.is_none() && !outcome.timed_out && !outcome.cancelled {
        let line = match outcome.signal {
            Some(signal) => format!(
                "[Process was killed by signal {}]",
                run_hint::signal_name(signal)
            ),
            None => "[Process was killed by a signal]".to_owned(),
        };
        push_section(&mut text, &line);
    }
    let truncated = (
        outcome.stdout_truncated && !cut.0,
        outcome.stderr_truncated && !cut.1,
    );
    if let Some(note) = truncation_note(truncated.0, truncated.1) {
        push_section(&mut text, &note);
    }
    if let Some(note) = quarantine_note(&outcome.quarantined, "run") {
        push_section(&mut text, &note);
    }
    if text.is_empty() {
        text.push_str("(no output)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyrun_api::{ArtifactInfo, PythonInfo, SkippedArtifact};

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
                preview: None,
            }],
            skipped_artifacts: vec![SkippedArtifact {
                name: "pipe".into(),
                reason: "not a regular file (FIFO)".into(),
            }],
            quarantined: vec!["a/.vscode".into()],
            run_id: None,
            status: None,
            python: PythonInfo {
                version: "3.11.2".into(),
                venv: Some("a/.venv".into()),
            },
            hint: Some("network off: --allow-network".into()),
            signal: Some(9),
            warm: true,
            stdout_cut: Some(pyrun_api::OutputCut {
                omitted_bytes: 10,
                omitted_lines: 2,
                total_bytes: 30,
                captured_bytes: 30,
                head_bytes: 8,
                uri: Some("pyrun://runs/run_0/stdout".into()),
                run_id: Some("run_0".into()),
            }),
            stderr_cut: None,
        };
        let serialized = serde_json::to_value(&report).unwrap();
        assert_eq!(report_value(report.clone()), serialized);
        let killed = RunReport {
            exit_code: None,
            run_id: Some("run_0123".into()),
            status: Some(pyrun_api::RunStatus::Running),
            ..report
        };
        assert_eq!(
            report_value(killed.clone()),
            serde_json::to_value(&killed).unwrap()
        );
    }

    fn outcome() -> RunOutcome {
        RunOutcome {
            stdout: String::new(),
            stderr: String::new(),
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            cancelled: false,
            stdout_truncated: false,
            stderr_truncated: false,
            duration: Duration::from_millis(5),
            artifacts: None,
            python: None,
            quarantined: Vec::new(),
            warm: false,
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
            render_text(&o, Duration::from_secs(30), (false, false)),
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
            render_text(&o, Duration::from_secs(2), (false, false)),
            "partial\n[Timed out after 2 s]\n[Output truncated: stdout over the limit]"
        );
        assert_eq!(
            render_text(&outcome(), Duration::from_secs(1), (false, false)),
            "(no output)"
        );
    }
}

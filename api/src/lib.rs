//! The vocabulary pyrun-mcp's server and client share: what a run is called ([`RunStatus`],
//! [`RunKind`]), what a run answers ([`RunReport`], [`RunState`], [`StartedRun`], [`RunList`])
//! and the files it leaves ([`ArtifactInfo`], [`SkippedArtifact`]). Defined once, serialized by
//! the server and read by the client, the bench and the tests, never mirrored as strings; and
//! the one [`grammar`] of setting values (booleans, numbers, sizes, durations) both read.
//!
//! Serde only (with the `schema` feature, the JSON Schemas the server's tools declare): the
//! client that reads these pulls in nothing of the sandbox or the server. The doc comments are
//! the schemas' descriptions a model reads.

pub mod grammar;
pub mod live_output;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// It waits for a turn.
    Queued,
    Running,
    /// It ran to its end; the exit code says how.
    Exited,
    TimedOut,
    Cancelled,
    /// It could not start (the sandbox, the interpreter…).
    Failed,
    /// A status this side does not know (a newer peer's); read as still going. A server never
    /// sends it.
    #[serde(other)]
    Unknown,
}

impl RunStatus {
    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Exited => "exited",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }

    /// Whether the run is over (exited, timed out, cancelled or failed to start).
    pub fn has_ended(self) -> bool {
        matches!(
            self,
            Self::Exited | Self::TimedOut | Self::Cancelled | Self::Failed
        )
    }
}

/// The word on the wire, padded as a string would be (`{:<9}` lines up a listing).
impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// How a background run came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// `start_python`, or a `run_python` handed over to the background.
    Background,
    /// A `run_python` the client asked to run as an MCP task.
    Task,
    /// A kind this side does not know (a newer peer's).
    #[serde(other)]
    Unknown,
}

impl RunKind {
    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Background => "background",
            Self::Task => "task",
            Self::Unknown => "unknown",
        }
    }
}

/// One kept artifact, as structured results list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct ArtifactInfo {
    /// Its path inside the run's output folder (`PYRUN_OUTPUT_DIR`), `/`-separated.
    pub name: String,
    /// Bytes.
    pub size: u64,
    pub mime_type: String,
    /// `pyrun://runs/{run_id}/files/{name}`: read it with `resources/read`.
    pub uri: String,
    /// For a CSV/TSV (its counts, header and first rows) or a small JSON file (pretty-printed):
    /// the same preview as the result's text, bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// A file the run left that was not kept, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct SkippedArtifact {
    /// Its path inside the output folder, with control characters escaped.
    pub name: String,
    /// Why it was not kept, in a sentence.
    pub reason: String,
}

/// The interpreter of a run (or of a listing): its version and the virtual environment used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct PythonInfo {
    /// The interpreter's version, e.g. `3.11.2`.
    pub version: String,
    /// The virtual environment used, relative to the projects folder with `/` separators (e.g.
    /// `.venv` or `mathpkg/.venv`); null: the server's interpreter without one.
    pub venv: Option<String>,
}

/// What a run's result leaves out of one stream: its `stdout` (or `stderr`) shows the head and
/// the tail, and this says what lies between and where to read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct OutputCut {
    /// Bytes between the head and the tail that the result does not show.
    pub omitted_bytes: u64,
    /// Lines among them.
    pub omitted_lines: u64,
    /// Bytes the run wrote to the stream in all.
    pub total_bytes: u64,
    /// Bytes the server kept (the first ones, up to its --max-output-bytes): readable whole at
    /// `uri`, or with get_run from any offset.
    pub captured_bytes: u64,
    /// The byte offset where the omitted part begins: pass it as get_run's stdout_offset (or
    /// stderr_offset) to read on from the head.
    pub head_bytes: u64,
    /// `pyrun://runs/{run_id}/stdout` (or `/stderr`): the whole captured stream, with
    /// `resources/read`. Absent when the server could not keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// The run whose output get_run reads. Absent when the server could not keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// The structured result of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
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
    /// Protected names (`.git`, `.vscode`, `__pycache__`, `.env*`...) the run created in the
    /// projects folder, relative to it: moved to the server's quarantine, not left for the
    /// user's tools to run.
    #[serde(default)]
    pub quarantined: Vec<String>,
    /// Set when the run went on in the background (`--detach-after`): follow it with get_run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// `running` when the run went on in the background; absent when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub status: Option<RunStatus>,
    /// The interpreter it ran with.
    pub python: PythonInfo,
    /// Why the run failed or was cut when a setting of the server caused it (the network off, a
    /// resource limit, the time limit, a capped `timeout_seconds`), naming the setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The signal that killed the run, when one did (`exit_code` is then null).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// It ran in an interpreter the server started ahead of it, with common modules already
    /// imported (a warm run); the same sandbox, limits and meaning as a cold run.
    #[serde(default)]
    pub warm: bool,
    /// Set when `stdout` shows only the head and tail of a long output: what was cut, and
    /// where the whole is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_cut: Option<OutputCut>,
    /// The same for `stderr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_cut: Option<OutputCut>,
}

/// A started run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct StartedRun {
    /// The run's id, for get_run, cancel_run and list_runs.
    pub run_id: String,
    /// `running`, or `queued` while it waits for a turn.
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub status: RunStatus,
    /// Set when `timeout_seconds` was above the server's limit: what it was capped to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Where a background run is, with a page of its output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct RunState {
    pub run_id: String,
    /// The script, relative to the projects folder.
    pub file_name: String,
    /// `queued`, `running`, `exited`, `timed_out`, `cancelled` or `failed` (could not start).
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub status: RunStatus,
    /// The exit code once exited; null while going, or when killed.
    pub exit_code: Option<i32>,
    /// Standard output from the offset asked for (at most 256 KiB).
    pub stdout: String,
    /// Standard error from the offset asked for (at most 256 KiB).
    pub stderr: String,
    /// Pass back as stdout_offset to read on.
    pub next_stdout_offset: u64,
    /// Pass back as stderr_offset to read on.
    pub next_stderr_offset: u64,
    /// Whether stdout was cut at the server's output limit.
    pub stdout_truncated: bool,
    /// Whether stderr was cut at the server's output limit.
    pub stderr_truncated: bool,
    /// Wall time so far, or of the whole run once ended, in milliseconds.
    pub duration_ms: u64,
    /// Why the run could not start (only when `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The files the run left in `PYRUN_OUTPUT_DIR` (once it has ended), each readable at its `uri`.
    pub artifacts: Vec<ArtifactInfo>,
    /// Files it left that were not kept, with the reason.
    pub skipped_artifacts: Vec<SkippedArtifact>,
    /// Protected names the run created in the projects folder (once it has ended), moved to
    /// the server's quarantine.
    #[serde(default)]
    pub quarantined: Vec<String>,
    /// The interpreter it runs with.
    pub python: PythonInfo,
    /// Once it has ended: it ran in an interpreter the server started ahead of it (a warm run).
    #[serde(default)]
    pub warm: bool,
}

/// One line of `list_runs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct RunSummary {
    pub run_id: String,
    pub file_name: String,
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// When it was started (RFC 3339, UTC).
    pub started_at: String,
    /// `background` (start_python, or a run_python handed over) or `task` (an MCP task).
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub kind: RunKind,
    /// Where it runs, when not on the server's machine (`runpod`); absent for local runs. Not
    /// in the output schema: a server without a remote backend lists the tools it always did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub backend: Option<String>,
}

/// The caller's runs, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct RunList {
    pub runs: Vec<RunSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn statuses_travel_as_their_snake_case_words_and_unknown_ones_read_as_going() {
        for status in [
            RunStatus::Queued,
            RunStatus::Running,
            RunStatus::Exited,
            RunStatus::TimedOut,
            RunStatus::Cancelled,
            RunStatus::Failed,
        ] {
            let wire = serde_json::to_value(status).unwrap();
            assert_eq!(wire, json!(status.as_str()));
            assert_eq!(serde_json::from_value::<RunStatus>(wire).unwrap(), status);
        }
        let newer: RunStatus = serde_json::from_value(json!("paused")).unwrap();
        assert_eq!(newer, RunStatus::Unknown);
        assert!(!newer.has_ended());
        assert!(RunStatus::TimedOut.has_ended() && !RunStatus::Queued.has_ended());
        assert_eq!(format!("[{:<9}]", RunStatus::Exited), "[exited   ]");
    }

    #[test]
    fn a_report_without_a_background_status_leaves_the_field_out() {
        let report = RunReport {
            stdout: "hi\n".into(),
            stderr: String::new(),
            exit_code: Some(0),
            timed_out: false,
            stdout_truncated: false,
            stderr_truncated: false,
            duration_ms: 12,
            sandbox: vec!["landlock".into()],
            artifacts: vec![],
            skipped_artifacts: vec![],
            quarantined: vec![],
            run_id: None,
            status: None,
            python: PythonInfo {
                version: "3.11.2".into(),
                venv: None,
            },
            hint: None,
            signal: None,
            warm: false,
            stdout_cut: None,
            stderr_cut: None,
        };
        let wire = serde_json::to_value(&report).unwrap();
        assert!(wire.get("status").is_none() && wire.get("run_id").is_none());
        assert!(wire.get("stdout_cut").is_none());
        let back: RunReport = serde_json::from_value(wire).unwrap();
        assert_eq!(back, report);
    }
}

//! Renders what the commands return: data to stdout (text or `--json`), diagnostics, hints and
//! the interactive menu's lines to stderr. Respects `NO_COLOR`. The spinner is `reporter`'s.

use std::io::IsTerminal;
use std::path::Path;

use pyrun_api::RunStatus;
use rmcp::model::{
    CallToolResult, ContentBlock, GetPromptResult, Prompt, Resource, ResourceContents, Role, Tool,
};
use serde_json::{json, Value};

use crate::commands::artifacts::SaveReport;
use crate::commands::files::FileList;
use crate::commands::ping::PingReport;
use crate::commands::resources::ReadContent;
use crate::commands::run::{killed_note, Artifacts, RunOutcome, RunReport};
use crate::commands::runs::{RunList, RunLog, RunState, StartedRun};
use crate::commands::sessions::{Answer, Exec, Started, Summary};
use crate::error::ClientError;
use crate::term::{write_stderr, write_stdout, write_stdout_bytes};

/// Prints command results and diagnostics.
#[derive(Debug, Clone)]
pub struct Output {
    json: bool,
    color: bool,
}

impl Output {
    pub fn new(json: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            json,
            color: !no_color && std::io::stderr().is_terminal(),
        }
    }

    pub fn json(&self) -> bool {
        self.json
    }

    /// `error: …` plus its `caused by:` chain and `hint:` line, once, on stderr.
    pub fn error(&self, err: &ClientError) {
        let mut text = format!("{} {err}\n", self.paint("error:", "1;31"));
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            text.push_str(&format!("  caused by: {cause}\n"));
            source = cause.source();
        }
        if let Some(hint) = err.hint() {
            text.push_str(&format!("{} {hint}\n", self.paint("hint:", "1;36")));
        }
        write_stderr(&text);
    }

    /// A plain line on stderr (`--verbose` notes).
    pub fn note(&self, text: &str) {
        write_stderr(&format!("{text}\n"));
    }

    pub fn hint(&self, text: &str) {
        write_stderr(&format!("{} {text}\n", self.paint("hint:", "1;36")));
    }

    pub fn tools(&self, tools: &[Tool], verbose: bool) {
        if self.json {
            return print_json(&json!(tools));
        }
        let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
        let mut text = String::new();
        for tool in tools {
            let description = tool.description.as_deref().unwrap_or("");
            if verbose {
                // Whole, each line under the name: the schema below says the rest.
                text.push_str(&format!("{}\n", tool.name));
                for line in description.lines() {
                    text.push_str(&format!("    {line}\n"));
                }
            } else {
                let summary = description.lines().next().unwrap_or("");
                text.push_str(&format!("{:width$}  {summary}\n", tool.name));
            }
            if verbose {
                let schema = serde_json::to_string_pretty(&*tool.input_schema).unwrap_or_default();
                for line in schema.lines() {
                    text.push_str(&format!("    {line}\n"));
                }
            }
        }
        write_stdout(&text);
    }

    /// Text content of a tool result (or the whole result with `--json`).
    pub fn call_result(&self, result: &CallToolResult) {
        if self.json {
            return print_json(&json!(result));
        }
        let mut text = String::new();
        let mut hidden: Vec<(&str, usize)> = Vec::new();
        for block in &result.content {
            match block {
                ContentBlock::Text(t) => {
                    text.push_str(&t.text);
                    if !t.text.ends_with('\n') {
                        text.push('\n');
                    }
                }
                other => match hidden.iter_mut().find(|(k, _)| *k == kind(other)) {
                    Some((_, count)) => *count += 1,
                    None => hidden.push((kind(other), 1)),
                },
            }
        }
        for (kind, count) in hidden {
            let save = if kind == "resource link" {
                " (--save-artifacts DIR saves them)"
            } else {
                ""
            };
            write_stderr(&format!(
                "[{count} {kind} block(s) not shown; use --json{save}]\n"
            ));
        }
        if text.is_empty() {
            if let Some(structured) = &result.structured_content {
                text = format!(
                    "{}\n",
                    serde_json::to_string_pretty(structured).unwrap_or_default()
                );
            }
        }
        write_stdout(&text);
    }

    /// The script's stdout to stdout and stderr to stderr, byte for byte; then notes on what
    /// ended it, and on its artifacts unless they are being saved.
    pub fn run_report(&self, report: &RunReport, saving_artifacts: bool) {
        if self.json {
            return print_json(&json!(report.result));
        }
        match &report.outcome {
            RunOutcome::Finished { stdout, stderr, .. } => {
                match report.printed.rest(stdout, stderr) {
                    Some((stdout, stderr)) => {
                        write_stdout(stdout);
                        write_stderr(stderr);
                    }
                    None => self.hint(
                        "the result's output differs from what was printed live above; \
                         --json shows the result",
                    ),
                }
            }
            RunOutcome::Unstructured => self.call_result(&report.result),
            // `handed_over` told, and `logs` shows the rest.
            RunOutcome::HandedOver { .. } => return,
        }
        match &report.outcome {
            RunOutcome::Finished {
                timed_out: true, ..
            } => self.hint("the script hit its time limit and was stopped (exit 124)"),
            RunOutcome::Finished {
                exit_code: None,
                signal,
                ..
            } => self.hint(&killed_note(signal.as_ref())),
            _ => {}
        }
        self.truncation_notes(&report.truncated);
        for gap in &report.gaps {
            self.hint(gap);
        }
        for line in report.hint.iter().flat_map(|hint| hint.lines()) {
            self.hint(line);
        }
        self.artifact_notes(&report.artifacts, saving_artifacts);
    }

    /// One note per stream the server cut short.
    fn truncation_notes(&self, streams: &[&str]) {
        for stream in streams {
            self.hint(&format!("the server truncated the script's {stream}"));
        }
    }

    /// Names the files a run left (unless they are being saved) and the ones the server skipped.
    fn artifact_notes(&self, artifacts: &Artifacts, saving: bool) {
        if !artifacts.artifacts.is_empty() && !saving {
            let names: Vec<String> = artifacts
                .artifacts
                .iter()
                .map(|a| format!("{} ({})", a.name, human_size(a.size)))
                .collect();
            self.hint(&format!(
                "the run left {} file(s): {}; save them with --save-artifacts DIR",
                names.len(),
                names.join(", ")
            ));
        }
        for skipped in &artifacts.skipped {
            self.hint(&format!("not kept: {}: {}", skipped.name, skipped.reason));
        }
    }

    /// `run` on a server that moved the run to the background (`--detach-after`).
    pub fn handed_over(&self, run_id: &str) {
        if !self.json {
            self.hint(&format!(
                "the server moved the run to the background as {run_id}; following it \
                 (Ctrl-C stops it)"
            ));
        }
    }

    /// `--save-artifacts`: one line per file written, on stderr (stdout carries the run's output).
    pub fn saved_artifacts(&self, report: &SaveReport, dir: &Path) {
        if report.saved.is_empty() && report.failed.is_empty() {
            write_stderr(&format!("no artifacts to save into {}\n", dir.display()));
        }
        let text: String = report
            .saved
            .iter()
            .map(|s| format!("saved {} ({})\n", s.path.display(), human_size(s.bytes)))
            .collect();
        write_stderr(&text);
    }

    /// `run --detach`: the run id alone on stdout (for `id=$(…)`), how to follow it on stderr.
    pub fn started_run(&self, run: &StartedRun) {
        if self.json {
            return print_json(&run.raw);
        }
        write_stdout(&format!("{}\n", run.run_id));
        self.hint(&format!(
            "the run is {}; follow it with `pyrun-mcp-client logs {id} --follow`, stop it \
             with `pyrun-mcp-client cancel {id}`",
            run.status.as_str(),
            id = run.run_id
        ));
    }

    /// A page of `logs`: the run's stdout to stdout and its stderr to stderr, as it arrives.
    pub fn run_page(&self, page: &RunState) {
        if self.json {
            return;
        }
        write_stdout(&page.stdout);
        write_stderr(&page.stderr);
    }

    /// The end of `logs`: the whole log as JSON, or notes on how the run stands.
    pub fn run_log(&self, log: &RunLog, saving_artifacts: bool) {
        if self.json {
            return print_json(&log.to_json());
        }
        let last = &log.last;
        match last.status {
            RunStatus::Queued | RunStatus::Running | RunStatus::Unknown => self.hint(&format!(
                "the run is still {}; `pyrun-mcp-client logs {} --follow` waits for the rest",
                last.status.as_str(),
                last.run_id
            )),
            RunStatus::TimedOut => {
                self.hint("the script hit its time limit and was stopped (exit 124)")
            }
            RunStatus::Cancelled => self.hint("the run was cancelled"),
            RunStatus::Exited if last.exit_code.is_none() => {
                self.hint(&killed_note(last.signal.as_ref()))
            }
            RunStatus::Exited | RunStatus::Failed => {}
        }
        self.truncation_notes(&last.truncated_streams());
        if last.status.has_ended() {
            self.artifact_notes(&Artifacts::of(Some(&last.raw)), saving_artifacts);
        }
    }

    pub fn runs(&self, list: &RunList) {
        if self.json {
            return print_json(&list.raw);
        }
        if list.runs.is_empty() {
            return write_stderr("no runs: the server keeps none for you\n");
        }
        let rows: Vec<[String; 7]> = list
            .runs
            .iter()
            .map(|r| {
                [
                    r.run_id.clone(),
                    r.status.as_str().to_owned(),
                    r.exit_code
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "-".into()),
                    r.duration_ms
                        .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
                        .unwrap_or_else(|| "-".into()),
                    r.started_at.clone(),
                    r.kind.clone(),
                    r.file_name.clone(),
                ]
            })
            .collect();
        let header = ["RUN", "STATUS", "EXIT", "TIME", "STARTED", "KIND", "FILE"].map(String::from);
        write_stdout(&table(&header, &rows));
    }

    /// `session start`: the id alone on stdout, for `sid=$(…)`.
    pub fn session_started(&self, answer: &Answer<Started>) {
        if self.json {
            return print_json(&json!(answer.result));
        }
        write_stdout(&format!("{}\n", answer.value.session_id));
    }

    /// `session exec`: its stdout to stdout, stderr and traceback to stderr, the repr of a final
    /// expression on stdout, a note when it timed out.
    pub fn session_exec(&self, answer: &Answer<Exec>) {
        if self.json {
            return print_json(&json!(answer.result));
        }
        let exec = &answer.value;
        write_stdout(&exec.stdout);
        write_stderr(&exec.stderr);
        if let Some(result) = &exec.result {
            write_stdout(&format!("{result}\n"));
        }
        if let Some(error) = &exec.error {
            write_stderr(&format!("{}\n", error.trim_end()));
        }
        if exec.timed_out {
            self.hint("the code hit its time limit and was stopped (exit 124)");
        }
    }

    /// `session list`.
    pub fn sessions(&self, answer: &Answer<Vec<Summary>>) {
        if self.json {
            return print_json(&json!(answer.result));
        }
        if answer.value.is_empty() {
            return write_stderr("no sessions: you have none open\n");
        }
        let rows: Vec<[String; 4]> = answer
            .value
            .iter()
            .map(|s| {
                [
                    s.session_id.clone(),
                    s.execs.to_string(),
                    s.last_used_at.clone(),
                    s.project.clone().unwrap_or_else(|| "(scratch)".into()),
                ]
            })
            .collect();
        let header = ["SESSION", "EXECS", "LAST USED", "PROJECT"].map(String::from);
        write_stdout(&table(&header, &rows));
    }

    /// `cancel`: how the run stands now (a run that had already ended keeps its state).
    pub fn cancelled_run(&self, state: &RunState) {
        if self.json {
            return print_json(&state.raw);
        }
        let line = match (state.status, state.exit_code) {
            (RunStatus::Cancelled, _) => format!("{} cancelled\n", state.run_id),
            (status, Some(code)) => format!(
                "{} had already ended: {}, exit code {code}\n",
                state.run_id,
                status.as_str()
            ),
            (status, None) => format!("{} is {}\n", state.run_id, status.as_str()),
        };
        write_stdout(&line);
    }

    pub fn resources(&self, resources: &[Resource]) {
        if self.json {
            return print_json(&json!(resources));
        }
        let rows: Vec<[String; 3]> = resources
            .iter()
            .map(|r| {
                [
                    r.uri.clone(),
                    r.mime_type.clone().unwrap_or_default(),
                    r.size.map(human_size).unwrap_or_default(),
                ]
            })
            .collect();
        write_stdout(&table(&["URI", "TYPE", "SIZE"].map(String::from), &rows));
    }

    /// `read`: the bytes to stdout, or where `-o` wrote them.
    pub fn resource_content(&self, content: &ReadContent) {
        match (&content.written_to, self.json) {
            (Some(path), true) => print_json(&json!({
                "uri": content.uri,
                "path": path,
                "bytes": content.bytes.len(),
                "mime_type": content.mime_type,
            })),
            (Some(path), false) => write_stderr(&format!(
                "wrote {} to {}\n",
                human_size(u64::try_from(content.bytes.len()).unwrap_or(u64::MAX)),
                path.display()
            )),
            (None, true) => print_json(&json!(content.result)),
            (None, false) => write_stdout_bytes(&content.bytes),
        }
    }

    pub fn prompts(&self, prompts: &[Prompt]) {
        if self.json {
            return print_json(&json!(prompts));
        }
        let mut text = String::new();
        for prompt in prompts {
            let summary = prompt.description.as_deref().unwrap_or("");
            text.push_str(&format!("{}  {}\n", prompt.name, first_line(summary)));
            for arg in prompt.arguments.iter().flatten() {
                let required = if arg.required == Some(true) {
                    " (required)"
                } else {
                    ""
                };
                let about = arg.description.as_deref().map(first_line).unwrap_or("");
                text.push_str(&format!("    --arg {}=…{required}  {about}\n", arg.name));
            }
        }
        write_stdout(&text);
    }

    /// `prompt`: each message under its role, embedded resources with their URI.
    pub fn prompt_messages(&self, result: &GetPromptResult) {
        if self.json {
            return print_json(&json!(result));
        }
        let mut text = String::new();
        if let Some(description) = &result.description {
            text.push_str(&format!("# {description}\n"));
        }
        for message in &result.messages {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            text.push_str(&format!("\n[{role}]\n"));
            text.push_str(&render_block(&message.content));
        }
        write_stdout(&text);
    }

    pub fn files(&self, list: &FileList) {
        if self.json {
            return print_json(&json!({ "files": list.files }));
        }
        let text: String = list.files.iter().map(|f| format!("{f}\n")).collect();
        write_stdout(&text);
    }

    pub fn ping(&self, report: &PingReport) {
        let ms: Vec<f64> = report
            .rtts
            .iter()
            .map(|d| d.as_secs_f64() * 1000.0)
            .collect();
        if self.json {
            return print_json(&json!({
                "rtt_ms": ms,
                "min_ms": report.min().as_secs_f64() * 1000.0,
                "avg_ms": report.avg().as_secs_f64() * 1000.0,
                "max_ms": report.max().as_secs_f64() * 1000.0,
            }));
        }
        let mut text = String::new();
        for (i, rtt) in ms.iter().enumerate() {
            text.push_str(&format!("ping {}: {rtt:.2} ms\n", i + 1));
        }
        text.push_str(&format!(
            "min/avg/max = {:.2}/{:.2}/{:.2} ms\n",
            report.min().as_secs_f64() * 1000.0,
            report.avg().as_secs_f64() * 1000.0,
            report.max().as_secs_f64() * 1000.0
        ));
        write_stdout(&text);
    }

    /// The interactive file picker's list, numbered from 1, on stderr (it is a question).
    pub fn numbered(&self, items: &[String]) {
        let text: String = items
            .iter()
            .enumerate()
            .map(|(i, item)| format!("  {:>3}) {item}\n", i + 1))
            .collect();
        write_stderr(&text);
    }

    /// The interactive menu's greeting.
    pub fn connected(&self, server: &str) {
        write_stderr(&format!("connected to {server}\n"));
    }

    /// A question of the interactive menu, answered on the same line.
    pub fn prompt(&self, text: &str) {
        write_stderr(text);
    }

    /// The exit code of a script run from the interactive menu.
    pub fn run_exit_code(&self, code: u8) {
        write_stderr(&format!("[exit code {code}]\n"));
    }

    pub fn unknown_choice(&self, choice: &str) {
        write_stderr(&format!("unknown choice `{choice}`\n"));
    }

    fn paint(&self, text: &str, sgr: &str) -> String {
        if self.color {
            format!("\x1b[{sgr}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

fn kind(block: &ContentBlock) -> &'static str {
    match block {
        ContentBlock::Text(_) => "text",
        ContentBlock::Image(_) => "image",
        ContentBlock::Audio(_) => "audio",
        ContentBlock::Resource(_) => "resource",
        ContentBlock::ResourceLink(_) => "resource link",
        _ => "other",
    }
}

/// One content block as text; what has no text form is named with its size.
fn render_block(block: &ContentBlock) -> String {
    let with_newline = |s: &str| {
        if s.ends_with('\n') {
            s.to_owned()
        } else {
            format!("{s}\n")
        }
    };
    match block {
        ContentBlock::Text(t) => with_newline(&t.text),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!(
                    "--- {uri} ---\n{}--- end of {uri} ---\n",
                    with_newline(text)
                )
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[{uri}: {}, about {} base64]\n",
                mime_type.as_deref().unwrap_or("binary"),
                human_size(u64::try_from(blob.len() / 4 * 3).unwrap_or(u64::MAX))
            ),
            _ => "[embedded resource]\n".into(),
        },
        ContentBlock::ResourceLink(link) => format!("[link: {}]\n", link.uri),
        ContentBlock::Image(image) => format!("[image: {}]\n", image.mime_type),
        other => format!("[{} content]\n", kind(other)),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Columns padded to their widest cell, the last one left ragged.
fn table<const N: usize>(header: &[String; N], rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in std::iter::once(header).chain(rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < N {
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 2));
            } else {
                line.push_str(cell);
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// `2048` → `2.0 KiB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn print_json(value: &Value) {
    write_stdout(&format!(
        "{}\n",
        serde_json::to_string_pretty(value).unwrap_or_default()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::PromptMessage;

    #[test]
    fn sizes_read_like_a_person_would_say_them() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(2048), "2.0 KiB");
        assert_eq!(human_size(64 * 1024 * 1024), "64.0 MiB");
    }

    #[test]
    fn tables_align_every_column_but_the_last() {
        let header = ["RUN", "STATUS", "FILE"].map(String::from);
        let rows = [
            ["run_a", "running", "train.py"].map(String::from),
            ["run_bbbbbb", "exited", "x.py"].map(String::from),
        ];
        assert_eq!(
            table(&header, &rows),
            "RUN         STATUS   FILE\n\
             run_a       running  train.py\n\
             run_bbbbbb  exited   x.py\n"
        );
    }

    #[test]
    fn an_embedded_script_is_shown_with_its_uri() {
        let block = ContentBlock::resource(ResourceContents::TextResourceContents {
            uri: "pyrun://projects/calc.py".into(),
            mime_type: Some("text/x-python".into()),
            text: "print(1)".into(),
            meta: None,
        });
        assert_eq!(
            render_block(&block),
            "--- pyrun://projects/calc.py ---\nprint(1)\n--- end of pyrun://projects/calc.py ---\n"
        );
        let message = PromptMessage::new_text(Role::User, "Explain it.");
        assert_eq!(render_block(&message.content), "Explain it.\n");
    }
}

//! Renders what the commands return: data to stdout (text or `--json`), diagnostics, hints and
//! the interactive menu's lines to stderr. Respects `NO_COLOR`. The spinner is `reporter`'s.

use std::io::IsTerminal;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{json, Value};

use crate::commands::files::FileList;
use crate::commands::ping::PingReport;
use crate::commands::run::{RunOutcome, RunReport};
use crate::error::ClientError;
use crate::term::{write_stderr, write_stdout};

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
            let summary = tool
                .description
                .as_deref()
                .and_then(|d| d.lines().next())
                .unwrap_or("");
            text.push_str(&format!("{:width$}  {summary}\n", tool.name));
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
        for block in &result.content {
            match block {
                ContentBlock::Text(t) => {
                    text.push_str(&t.text);
                    if !t.text.ends_with('\n') {
                        text.push('\n');
                    }
                }
                other => write_stderr(&format!(
                    "[{} content not shown; use --json]\n",
                    kind(other)
                )),
            }
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

    /// The script's stdout to stdout and stderr to stderr, byte for byte.
    pub fn run_report(&self, report: &RunReport) {
        if self.json {
            return print_json(&json!(report.result));
        }
        match &report.outcome {
            RunOutcome::Finished { stdout, stderr, .. } => {
                write_stdout(stdout);
                write_stderr(stderr);
            }
            RunOutcome::Unstructured => self.call_result(&report.result),
        }
        match &report.outcome {
            RunOutcome::Finished {
                timed_out: true, ..
            } => self.hint("the script hit its time limit and was stopped (exit 124)"),
            RunOutcome::Finished {
                exit_code: None, ..
            } => self.hint("the script was killed before it exited"),
            _ => {}
        }
        for stream in &report.truncated {
            self.hint(&format!("the server truncated the script's {stream}"));
        }
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

fn print_json(value: &Value) {
    write_stdout(&format!(
        "{}\n",
        serde_json::to_string_pretty(value).unwrap_or_default()
    ));
}

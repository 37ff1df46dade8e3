//! Everything the client prints: data to stdout (text or `--json`), diagnostics, hints and the
//! terminal-only spinner with server progress/log lines to stderr. Respects `NO_COLOR`.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{json, Value};

use crate::commands::files::FileList;
use crate::commands::ping::PingReport;
use crate::commands::run::{RunOutcome, RunReport};
use crate::error::ClientError;

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

/// A closed pipe (`| head`) is not an error worth reporting.
pub fn write_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn write_stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

/// Spinner with elapsed time plus the server's progress and log lines, drawn on stderr only when
/// stderr is a terminal; a no-op otherwise, so piped output stays clean.
#[derive(Debug, Clone, Default)]
pub struct Reporter {
    state: Option<Arc<Mutex<SpinState>>>,
}

#[derive(Debug, Default)]
struct SpinState {
    activity: Option<(String, Instant)>,
    /// The latest progress report, shown after the label.
    detail: String,
    frame: usize,
    drawn: bool,
}

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

impl Reporter {
    /// Must be called inside the tokio runtime (it spawns the ticker).
    pub fn for_terminal(json: bool) -> Self {
        if json || !std::io::stderr().is_terminal() {
            return Self::default();
        }
        let state = Arc::new(Mutex::new(SpinState::default()));
        let ticker = Arc::downgrade(&state);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(Duration::from_millis(100));
            loop {
                interval.tick().await;
                let Some(state) = ticker.upgrade() else { break };
                let mut state = lock(&state);
                state.frame = state.frame.wrapping_add(1);
                draw(&mut state);
            }
        });
        Self { state: Some(state) }
    }

    pub fn begin(&self, label: impl Into<String>) {
        if let Some(state) = &self.state {
            let mut state = lock(state);
            state.activity = Some((label.into(), Instant::now()));
            state.detail.clear();
            draw(&mut state);
        }
    }

    pub fn end(&self) {
        if let Some(state) = &self.state {
            let mut state = lock(state);
            clear(&mut state);
            state.activity = None;
        }
    }

    /// A server progress report: replaces the text after the spinner (progress comes often).
    pub fn progress(&self, text: &str) {
        if let Some(state) = &self.state {
            let mut state = lock(state);
            state.detail = text.to_owned();
            draw(&mut state);
        }
    }

    /// A server log line, printed above the spinner.
    pub fn message(&self, text: &str) {
        if let Some(state) = &self.state {
            let mut state = lock(state);
            clear(&mut state);
            write_stderr(&format!("{text}\n"));
            draw(&mut state);
        }
    }
}

fn lock(state: &Mutex<SpinState>) -> MutexGuard<'_, SpinState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn draw(state: &mut SpinState) {
    if let Some((label, started)) = &state.activity {
        let frame = FRAMES[state.frame % FRAMES.len()];
        write_stderr(&format!(
            "\r\x1b[2K{frame} {label}  {:.1} s  {}",
            started.elapsed().as_secs_f64(),
            state.detail
        ));
        state.drawn = true;
    }
}

fn clear(state: &mut SpinState) {
    if state.drawn {
        write_stderr("\r\x1b[2K");
        state.drawn = false;
    }
}

//! The terminal-only spinner: elapsed time of the request in flight plus the server's progress
//! and log lines, drawn on stderr. Lives apart from `output` so `session` and the rmcp handler can
//! report activity without depending on the renderer of command results.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::term::write_stderr;

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

    /// Runs `print` with the spinner out of the way (the script's live output).
    pub fn above(&self, print: impl FnOnce()) {
        match &self.state {
            Some(state) => {
                let mut state = lock(state);
                clear(&mut state);
                print();
                draw(&mut state);
            }
            None => print(),
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

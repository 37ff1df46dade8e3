//! A run's output as it arrives: the chunks a pyrun-mcp server sends in its progress
//! notifications when asked (`pyrun_api::live_output`), printed at once (stdout to stdout,
//! stderr to stderr) and remembered, so that the run's end prints only the rest of its result
//! and a stop (Ctrl-C, `--timeout`, a lost connection) leaves what came before the error line.

use std::sync::{Arc, Mutex, MutexGuard};

use pyrun_api::live_output::{OutputChunk, CHUNK};
use rmcp::model::JsonObject;

use crate::reporter::Reporter;
use crate::term::{write_stderr, write_stdout};

/// Shared by the rmcp handler (which feeds it) and the session (which opens and closes it
/// around one call).
#[derive(Debug, Clone, Default)]
pub struct LiveSink {
    state: Arc<Mutex<SinkState>>,
}

#[derive(Debug, Default)]
struct SinkState {
    open: bool,
    next_seq: u64,
    /// A chunk went missing: print nothing more live, the result has the rest.
    lost: bool,
    printed: Printed,
}

/// What was printed live during one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}

impl Printed {
    /// What of the result's streams is still to print: what follows the printed part, or
    /// `None` when the result does not start with what was printed.
    pub fn rest<'a>(&self, stdout: &'a str, stderr: &'a str) -> Option<(&'a str, &'a str)> {
        Some((
            stdout.strip_prefix(self.stdout.as_str())?,
            stderr.strip_prefix(self.stderr.as_str())?,
        ))
    }

    pub fn is_empty(&self) -> bool {
        self.stdout.is_empty() && self.stderr.is_empty()
    }
}

impl LiveSink {
    /// Starts taking chunks for a new call.
    pub fn open(&self) {
        *lock(&self.state) = SinkState {
            open: true,
            ..SinkState::default()
        };
    }

    /// Stops taking chunks (one arriving later is dropped: the result has it) and returns
    /// what was printed.
    pub fn close(&self) -> Printed {
        let mut state = lock(&self.state);
        state.open = false;
        std::mem::take(&mut state.printed)
    }

    /// A progress notification's `_meta`: prints the chunk it carries, if the sink is open and
    /// no chunk before it went missing.
    pub fn offer(&self, meta: &JsonObject, reporter: &Reporter) {
        let Some(chunk) = meta
            .get(CHUNK)
            .and_then(|v| serde_json::from_value::<OutputChunk>(v.clone()).ok())
        else {
            return;
        };
        let mut state = lock(&self.state);
        if !state.open || state.lost {
            return;
        }
        // Notifications are handled concurrently: one may overtake another.
        if chunk.seq != state.next_seq {
            state.lost = true;
            return;
        }
        state.next_seq += 1;
        reporter.above(|| {
            write_stdout(&chunk.stdout);
            write_stderr(&chunk.stderr);
        });
        state.printed.stdout.push_str(&chunk.stdout);
        state.printed.stderr.push_str(&chunk.stderr);
    }
}

fn lock(state: &Mutex<SinkState>) -> MutexGuard<'_, SinkState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(stdout: &str, seq: u64) -> JsonObject {
        let mut meta = JsonObject::new();
        meta.insert(
            CHUNK.into(),
            json!({"stdout": stdout, "stderr": "", "seq": seq}),
        );
        meta
    }

    #[test]
    fn chunks_are_kept_in_order_and_the_result_prints_only_the_rest() {
        let sink = LiveSink::default();
        let quiet = Reporter::default();
        sink.offer(&meta("before open\n", 0), &quiet);
        sink.open();
        sink.offer(&meta("a\n", 0), &quiet);
        sink.offer(&meta("b\n", 1), &quiet);
        let printed = sink.close();
        sink.offer(&meta("after close\n", 2), &quiet);
        assert_eq!(printed.stdout, "a\nb\n");
        assert_eq!(printed.rest("a\nb\nc\n", "e\n"), Some(("c\n", "e\n")));
        assert_eq!(printed.rest("other\n", ""), None);
    }

    #[test]
    fn a_missing_chunk_stops_the_live_printing() {
        let sink = LiveSink::default();
        let quiet = Reporter::default();
        sink.open();
        sink.offer(&meta("a\n", 0), &quiet);
        sink.offer(&meta("c\n", 2), &quiet);
        sink.offer(&meta("b\n", 1), &quiet);
        assert_eq!(sink.close().stdout, "a\n");
    }
}

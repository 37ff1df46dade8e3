//! What a session's processes write straight to fds 1 and 2 (`os.write`, subprocesses, C
//! extensions): the driver points both at the stderr pipe, which a task drains all the time
//! (the interpreter never blocks on a full pipe) into a capped buffer.
//!
//! Attribution: each exec's request carries a random marker that the driver writes to the
//! stderr pipe (through its private copy of it) after the code has run and before its reply. The
//! marker is in the pipe before the reply is in the reply pipe, so once the reply has come the
//! bytes up to the marker are the exec's, and what follows belongs to the next one (a
//! subprocess still writing in the background). Code that finds the marker can only mislabel its
//! own output.

use std::sync::Mutex;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::Notify;

use crate::runner::PipeReader;

/// The drain's shared state.
#[derive(Debug, Default)]
pub struct RawOutput {
    state: Mutex<State>,
    news: Notify,
}

#[derive(Debug, Default)]
struct State {
    cap: usize,
    /// Kept bytes of the exec under way (or since the last one), at most `cap`.
    kept: Vec<u8>,
    truncated: bool,
    /// The marker the current exec ends with.
    marker: Option<Vec<u8>>,
    /// Bytes not yet kept: they may be the start of the marker.
    held: Vec<u8>,
    /// Set when the marker was seen: the exec's bytes and whether they were cut.
    done: Option<(Vec<u8>, bool)>,
    /// The pipe reached its end (every writer closed it).
    closed: bool,
}

impl State {
    fn keep(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.len());
        if bytes.len() > room {
            self.truncated = true;
        }
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Takes in bytes read from the pipe.
    fn push(&mut self, bytes: &[u8]) {
        let Some(marker) = self.marker.clone() else {
            return self.keep(bytes);
        };
        self.held.extend_from_slice(bytes);
        let held = std::mem::take(&mut self.held);
        if let Some(at) = find(&held, &marker) {
            self.keep(&held[..at]);
            let exec = (std::mem::take(&mut self.kept), self.truncated);
            self.done = Some(exec);
            self.truncated = false;
            self.marker = None;
            self.keep(&held[at + marker.len()..]);
        } else {
            // All but what could be the marker's beginning.
            let keep_to = held.len().saturating_sub(marker.len() - 1);
            self.keep(&held[..keep_to]);
            self.held = held[keep_to..].to_vec();
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl RawOutput {
    pub fn new(cap: usize) -> Self {
        Self {
            state: Mutex::new(State {
                cap,
                ..State::default()
            }),
            news: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drains the pipe until its end.
    pub async fn drain(&self, mut pipe: PipeReader) {
        let mut chunk = vec![0; 16 * 1024];
        loop {
            match pipe.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => self.lock().push(&chunk[..n]),
            }
            self.news.notify_waiters();
        }
        self.lock().closed = true;
        self.news.notify_waiters();
    }

    /// An exec starts: its output ends at `marker`. What came since the last exec is its start.
    pub fn begin(&self, marker: &str) {
        let mut state = self.lock();
        state.marker = Some(marker.as_bytes().to_vec());
        state.done = None;
        state.held.clear();
    }

    /// The exec's bytes once its marker came through (waiting at most `wait` for it), and
    /// whether they were cut at the cap.
    pub async fn finish(&self, wait: Duration) -> (Vec<u8>, bool) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.news.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if let Some(done) = state.done.take() {
                    return done;
                }
                if state.closed || tokio::time::Instant::now() >= deadline {
                    // No marker (the pipe is gone, or the driver could not write it): what is here.
                    let held = std::mem::take(&mut state.held);
                    state.keep(&held);
                    state.marker = None;
                    let truncated = std::mem::take(&mut state.truncated);
                    return (std::mem::take(&mut state.kept), truncated);
                }
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(cap: usize) -> State {
        State {
            cap,
            ..State::default()
        }
    }

    #[test]
    fn bytes_up_to_the_marker_are_the_execs_even_across_reads() {
        let mut s = state(100);
        s.push(b"before ");
        s.marker = Some(b"@@END@@".to_vec());
        s.push(b"one @@E");
        assert!(s.done.is_none());
        s.push(b"ND@@ next");
        let (bytes, cut) = s.done.take().unwrap();
        assert_eq!(bytes, b"before one ");
        assert!(!cut);
        assert_eq!(s.kept, b" next");
        assert!(s.marker.is_none());
    }

    #[test]
    fn the_cap_holds_and_is_reported_while_the_marker_is_still_found() {
        let mut s = state(4);
        s.marker = Some(b"#M#".to_vec());
        s.push(b"abcdefgh#M");
        s.push(b"#xyz");
        let (bytes, cut) = s.done.take().unwrap();
        assert_eq!(bytes, b"abcd");
        assert!(cut);
        assert_eq!(s.kept, b"xyz");
        assert!(!s.truncated);
    }
}

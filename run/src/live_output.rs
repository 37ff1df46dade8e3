//! A run's output as it arrives: both streams captured up to the cap, readable from any byte
//! offset while the run goes (background runs, `get_run`), with the last line for progress
//! messages and a signal for readers that wait for more.
//!
//! One mutex per stream, held only to append a chunk or copy a page; waiters subscribe to a
//! version counter that every append and the run's end bump, so a long poll sleeps until
//! something happens instead of polling.
//!
//! Past the cap, bytes are not kept but still counted (bytes and lines), and the last
//! [`TAIL_KEEP`] of them stay in a small window: a result can show how a long output *ended*,
//! not only how it began.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;

use tokio::sync::watch;

/// Which stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// The longest last line a progress message carries, in characters.
pub const LAST_LINE_CHARS: usize = 200;
/// How far back from the end a last line is looked for.
const LAST_LINE_SCAN: usize = 4096;

/// The most bytes past the cap kept per stream, the last ones written: the tail a result shows.
pub const TAIL_KEEP: usize = 128 * 1024;

#[derive(Debug, Default)]
struct Captured {
    bytes: Vec<u8>,
    truncated: bool,
    /// Every byte the run wrote to the stream, kept or not.
    written: u64,
    /// Every `\n` the run wrote to the stream, kept or not.
    newlines: u64,
    /// The last bytes written past the cap (at most [`TAIL_KEEP`]; empty until the cap is hit).
    past_cap: VecDeque<u8>,
}

/// How much a run wrote to one stream, and how much of it the capture kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTotals {
    /// Bytes written, kept or not.
    pub written: u64,
    /// Newlines written, kept or not.
    pub newlines: u64,
    /// Bytes kept (readable by offset): at most the cap.
    pub captured: u64,
}

/// A page of one stream read from an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The bytes from the offset as text (lossy UTF-8; a page never ends inside a character
    /// unless the stream itself holds invalid UTF-8 there).
    pub text: String,
    /// The offset to read on from.
    pub next_offset: u64,
    /// Whether the stream was cut at the server's output limit (the capture stops there).
    pub truncated: bool,
}

/// Both streams of one run.
#[derive(Debug)]
pub struct LiveOutput {
    cap: usize,
    stdout: Mutex<Captured>,
    stderr: Mutex<Captured>,
    /// Which stream got the latest bytes (0: none yet, 1: stdout, 2: stderr).
    latest: AtomicU8,
    /// Set when the run got its turn (it may wait in a queue before).
    started: AtomicBool,
    /// Bumped on every append, on start and on the end; readers wait for a change.
    version: watch::Sender<u64>,
}

impl LiveOutput {
    /// A capture keeping at most `cap` bytes per stream.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            stdout: Mutex::default(),
            stderr: Mutex::default(),
            latest: AtomicU8::new(0),
            started: AtomicBool::new(false),
            version: watch::channel(0).0,
        }
    }

    fn stream(&self, which: Stream) -> &Mutex<Captured> {
        match which {
            Stream::Stdout => &self.stdout,
            Stream::Stderr => &self.stderr,
        }
    }

    /// The room left in a stream before its cap.
    pub fn room(&self, which: Stream) -> usize {
        let captured = lock(self.stream(which));
        self.cap.saturating_sub(captured.bytes.len())
    }

    /// Appends bytes read from the run (the caller keeps within [`Self::room`]; what goes past
    /// the cap is dropped and marks the stream truncated).
    pub fn append(&self, which: Stream, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        {
            let mut captured = lock(self.stream(which));
            captured.written += bytes.len() as u64;
            captured.newlines += bytes.iter().filter(|b| **b == b'\n').count() as u64;
            let room = self.cap.saturating_sub(captured.bytes.len());
            let kept = bytes.len().min(room);
            if kept < bytes.len() {
                let past = &bytes[kept..];
                let past = &past[past.len().saturating_sub(TAIL_KEEP)..];
                let window = &mut captured.past_cap;
                let overflow = (window.len() + past.len()).saturating_sub(TAIL_KEEP);
                window.drain(..overflow);
                window.extend(past);
            }
            if kept == 0 && captured.truncated {
                return; // more of what is dropped anyway: nothing for waiters
            }
            if captured.bytes.capacity() - captured.bytes.len() < kept {
                // Doubling, but never past the cap: a short run allocates little.
                let want = captured.bytes.len().max(kept).min(room);
                captured.bytes.reserve_exact(want.max(kept));
            }
            captured.bytes.extend_from_slice(&bytes[..kept]);
            if kept < bytes.len() {
                captured.truncated = true;
            }
        }
        let tag = match which {
            Stream::Stdout => 1,
            Stream::Stderr => 2,
        };
        self.latest.store(tag, Ordering::Relaxed);
        self.bump();
    }

    /// Whether bytes past the cap were dropped from a stream.
    pub fn truncated(&self, which: Stream) -> bool {
        lock(self.stream(which)).truncated
    }

    /// The run got its turn and started.
    pub fn mark_started(&self) {
        self.started.store(true, Ordering::Relaxed);
        self.bump();
    }

    /// Whether the run has started (false while it waits for a turn).
    pub fn has_started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// Wakes waiters: something happened (more output, a start, the end).
    pub fn bump(&self) {
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A receiver that sees every later [`Self::bump`].
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Bytes captured so far in a stream.
    pub fn len(&self, which: Stream) -> u64 {
        lock(self.stream(which)).bytes.len() as u64
    }

    /// Up to `max` bytes of a stream from `offset` (an offset past the end reads nothing and
    /// keeps the end as the next offset).
    pub fn read(&self, which: Stream, offset: u64, max: usize) -> Page {
        let (bytes, next_offset, truncated) = self.page(which, offset, max);
        Page {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            next_offset,
            truncated,
        }
    }

    /// Like [`Self::read`], as the raw bytes (which may hold invalid UTF-8): for offsets
    /// counted in the stream's bytes, which lossy text does not keep.
    pub fn read_bytes(&self, which: Stream, offset: u64, max: usize) -> Vec<u8> {
        self.page(which, offset, max).0
    }

    /// The bytes from `offset`, at most `max` and ending on a character boundary unless the
    /// capture ends first; the offset after them; whether the stream was truncated.
    fn page(&self, which: Stream, offset: u64, max: usize) -> (Vec<u8>, u64, bool) {
        let captured = lock(self.stream(which));
        let len = captured.bytes.len();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(len);
        let mut end = start.saturating_add(max).min(len);
        if end < len {
            end = char_boundary_before(&captured.bytes, start, end);
        }
        (
            captured.bytes[start..end].to_vec(),
            end as u64,
            captured.truncated,
        )
    }

    /// What the run wrote to a stream and what of it was kept.
    pub fn totals(&self, which: Stream) -> StreamTotals {
        let captured = lock(self.stream(which));
        StreamTotals {
            written: captured.written,
            newlines: captured.newlines,
            captured: captured.bytes.len() as u64,
        }
    }

    /// The last `max` bytes the run wrote to a stream (past the cap too, from the window kept
    /// there), as raw bytes: they may start inside a character.
    pub fn tail(&self, which: Stream, max: usize) -> Vec<u8> {
        let captured = lock(self.stream(which));
        let from_window = captured.past_cap.len().min(max);
        let from_capture = (max - from_window).min(captured.bytes.len());
        // Bytes dropped between the capture's end and the window: the capture's end is not
        // contiguous with the window then, so the tail comes from the window alone.
        let gap = captured.written > (captured.bytes.len() + captured.past_cap.len()) as u64;
        let mut tail = Vec::with_capacity(max.min(from_window + from_capture));
        if !gap {
            tail.extend_from_slice(&captured.bytes[captured.bytes.len() - from_capture..]);
        }
        let window = &captured.past_cap;
        tail.extend(window.range(window.len() - from_window..));
        tail
    }

    /// The whole stream as text, taken out of the capture (which is left empty), and whether it
    /// was truncated.
    pub fn take_text(&self, which: Stream) -> (String, bool) {
        let mut captured = lock(self.stream(which));
        let bytes = std::mem::take(&mut captured.bytes);
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned());
        (text, captured.truncated)
    }

    /// The last non-empty line of the stream that was written last, trimmed, at most
    /// [`LAST_LINE_CHARS`] characters (the end of a longer line), control characters dropped.
    pub fn last_line(&self) -> Option<String> {
        let which = match self.latest.load(Ordering::Relaxed) {
            1 => Stream::Stdout,
            2 => Stream::Stderr,
            _ => return None,
        };
        let captured = lock(self.stream(which));
        let bytes = &captured.bytes;
        let tail = &bytes[bytes.len().saturating_sub(LAST_LINE_SCAN)..];
        let text = String::from_utf8_lossy(tail);
        let line = text
            .split(['\n', '\r'])
            .rev()
            .map(str::trim)
            .find(|line| !line.is_empty())?;
        let clean: Vec<char> = line.chars().filter(|c| !c.is_control()).collect();
        let skip = clean.len().saturating_sub(LAST_LINE_CHARS);
        let line: String = clean[skip..].iter().collect();
        (!line.is_empty()).then_some(line)
    }
}

/// A poisoned lock only means a panic elsewhere while appending bytes: the capture is still
/// plain bytes, so go on with it.
fn lock(stream: &Mutex<Captured>) -> std::sync::MutexGuard<'_, Captured> {
    stream
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Moves `end` back (at most 3 bytes, never below `start`) so that it does not split a UTF-8
/// character.
fn char_boundary_before(bytes: &[u8], start: usize, end: usize) -> usize {
    let mut cut = end;
    while cut > start && end - cut < 4 && is_continuation(bytes[cut]) {
        cut -= 1;
    }
    if cut == start || end - cut >= 4 {
        end
    } else {
        cut
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_keep_the_cap_and_say_so() {
        let live = LiveOutput::new(10);
        live.append(Stream::Stdout, b"0123456");
        assert_eq!(live.room(Stream::Stdout), 3);
        live.append(Stream::Stdout, b"789abc");
        assert_eq!(live.len(Stream::Stdout), 10);
        let page = live.read(Stream::Stdout, 0, 100);
        assert_eq!(page.text, "0123456789");
        assert!(page.truncated);
        assert!(!live.read(Stream::Stderr, 0, 100).truncated);
    }

    #[test]
    fn past_the_cap_bytes_and_lines_are_counted_and_the_last_ones_kept() {
        let live = LiveOutput::new(10);
        live.append(Stream::Stdout, b"line 1\nline 2\n");
        assert_eq!(live.tail(Stream::Stdout, 7), b"line 2\n");
        let mut many = Vec::new();
        for i in 0..100_000 {
            many.extend_from_slice(format!("row {i}\n").as_bytes());
        }
        live.append(Stream::Stdout, &many);
        live.append(Stream::Stdout, b"the end\n");
        let totals = live.totals(Stream::Stdout);
        assert_eq!(totals.captured, 10);
        assert_eq!(totals.written, 14 + many.len() as u64 + 8);
        assert_eq!(totals.newlines, 2 + 100_000 + 1);
        assert_eq!(live.tail(Stream::Stdout, 18), b"row 99999\nthe end\n");
        assert_eq!(live.tail(Stream::Stdout, usize::MAX).len(), TAIL_KEEP);
        assert_eq!(live.read(Stream::Stdout, 0, 100).text, "line 1\nlin");
        // Just past the cap, the tail joins the capture's end and the window.
        let live = LiveOutput::new(4);
        live.append(Stream::Stderr, b"abcdef");
        assert_eq!(live.tail(Stream::Stderr, 5), b"bcdef");
    }

    #[test]
    fn pages_follow_offsets_and_never_split_a_character() {
        let live = LiveOutput::new(1000);
        live.append(Stream::Stdout, "aé€b".as_bytes()); // 1 + 2 + 3 + 1 bytes
        let first = live.read(Stream::Stdout, 0, 2);
        assert_eq!((first.text.as_str(), first.next_offset), ("a", 1));
        let second = live.read(Stream::Stdout, first.next_offset, 4);
        assert_eq!((second.text.as_str(), second.next_offset), ("é", 3));
        let rest = live.read(Stream::Stdout, second.next_offset, 100);
        assert_eq!((rest.text.as_str(), rest.next_offset), ("€b", 7));
        let past = live.read(Stream::Stdout, 99, 100);
        assert_eq!((past.text.as_str(), past.next_offset), ("", 7));
    }

    #[test]
    fn the_last_line_is_the_latest_streams_last_non_empty_line_capped() {
        let live = LiveOutput::new(100_000);
        assert_eq!(live.last_line(), None);
        live.append(Stream::Stdout, b"epoch 1\nepoch 2\n\n");
        assert_eq!(live.last_line().as_deref(), Some("epoch 2"));
        live.append(Stream::Stderr, b"warning: \x1b[31mred\x1b[0m\r");
        assert_eq!(live.last_line().as_deref(), Some("warning: [31mred[0m"));
        let long = "x".repeat(500) + "END";
        live.append(Stream::Stdout, long.as_bytes());
        let line = live.last_line().unwrap();
        assert_eq!(line.chars().count(), LAST_LINE_CHARS);
        assert!(line.ends_with("END"));
    }

    #[tokio::test]
    async fn a_waiter_wakes_on_new_output() {
        let live = std::sync::Arc::new(LiveOutput::new(100));
        let mut changes = live.subscribe();
        changes.borrow_and_update();
        let writer = live.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            writer.append(Stream::Stderr, b"hi");
        });
        tokio::time::timeout(std::time::Duration::from_secs(5), changes.changed())
            .await
            .expect("woken")
            .expect("sender alive");
        assert_eq!(live.read(Stream::Stderr, 0, 10).text, "hi");
    }
}

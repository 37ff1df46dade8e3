//! The server's stderr, where its logs and banner lines go: a write never fails, never panics and
//! never blocks the caller, whatever stderr is (a terminal, a pipe nobody reads any more,
//! `/dev/full`).
//!
//! Why: `eprintln!` panics when stderr fails (`EPIPE` once a supervisor's reader went away,
//! `ENOSPC` on `/dev/full`), and so does tracing-subscriber's writer, which reports its own
//! failed write with `eprintln!`. A log line then killed whatever task wrote it — the signal
//! handler's "shutting down" line included, so SIGTERM was ignored — and a stderr pipe that is
//! full but still open would block a worker thread on every log line. So lines are queued
//! (bounded) to one thread that writes them; a line that finds the queue full is dropped and
//! counted, and the writer says how many once it can write again.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Lines waiting for the writer before new ones are dropped.
const QUEUE: usize = 4096;
/// Bytes waiting for the writer before new lines are dropped: a stderr nobody reads holds at
/// most this much of the server's memory, however long the lines (a log line may quote what a
/// client sent).
const QUEUE_BYTES: usize = 4 << 20;
/// The longest write queued whole; a longer one is cut, saying so.
const MAX_LINE: usize = 16 << 10;

struct Sink {
    sender: SyncSender<Vec<u8>>,
    /// Lines queued and not yet written (or given up on).
    pending: Arc<AtomicUsize>,
    /// Their bytes.
    pending_bytes: Arc<AtomicUsize>,
    /// Lines dropped since the writer last said so.
    dropped: Arc<AtomicU64>,
}

/// The queue, its writer thread started on first use; `None` if no thread could be started (then
/// lines are dropped: a server without threads has worse troubles than its log).
fn sink() -> Option<&'static Sink> {
    static SINK: OnceLock<Option<Sink>> = OnceLock::new();
    SINK.get_or_init(|| {
        let (sender, lines) = sync_channel::<Vec<u8>>(QUEUE);
        let pending = Arc::new(AtomicUsize::new(0));
        let pending_bytes = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let (left, left_bytes, lost) = (pending.clone(), pending_bytes.clone(), dropped.clone());
        std::thread::Builder::new()
            .name("stderr".into())
            .spawn(move || {
                let mut stderr = io::stderr();
                for line in lines {
                    let lost = lost.swap(0, Ordering::Relaxed);
                    if lost > 0 {
                        let note = format!("({lost} log lines dropped: stderr was not read)\n");
                        let _ = stderr.write_all(note.as_bytes());
                    }
                    // A failed write is the end of that line, nothing more.
                    let _ = stderr.write_all(&line);
                    left_bytes.fetch_sub(line.len(), Ordering::AcqRel);
                    left.fetch_sub(1, Ordering::AcqRel);
                }
            })
            .ok()?;
        Some(Sink {
            sender,
            pending,
            pending_bytes,
            dropped,
        })
    })
    .as_ref()
}

/// Queues `bytes` for stderr (cut past [`MAX_LINE`]); never waits.
pub fn write(bytes: &[u8]) {
    let Some(sink) = sink() else { return };
    let line = bounded(bytes);
    let size = line.len();
    if sink.pending_bytes.fetch_add(size, Ordering::AcqRel) + size > QUEUE_BYTES {
        sink.pending_bytes.fetch_sub(size, Ordering::AcqRel);
        sink.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    sink.pending.fetch_add(1, Ordering::AcqRel);
    if sink.sender.try_send(line).is_err() {
        sink.pending.fetch_sub(1, Ordering::AcqRel);
        sink.pending_bytes.fetch_sub(size, Ordering::AcqRel);
        sink.dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// `bytes`, or its first [`MAX_LINE`] bytes and a note of how many were cut.
fn bounded(bytes: &[u8]) -> Vec<u8> {
    if bytes.len() <= MAX_LINE {
        return bytes.to_vec();
    }
    let mut line = bytes[..MAX_LINE].to_vec();
    let note = format!("… ({} bytes cut)\n", bytes.len() - MAX_LINE);
    line.extend_from_slice(note.as_bytes());
    line
}

/// Queues `text` and a newline.
pub fn line(text: &str) {
    write(format!("{text}\n").as_bytes());
}

/// Waits, at most `within`, until every line queued so far was written or failed: the process's
/// last lines before it exits. A stderr nobody reads costs this wait and no more.
pub fn flush(within: Duration) {
    let Some(sink) = sink() else { return };
    let deadline = Instant::now() + within;
    while sink.pending.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The log's writer (`tracing_subscriber::fmt().with_writer(stderr::Stderr::new)`): each event
/// is one `write_all`, queued whole.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl Stderr {
    pub fn new() -> Self {
        Self
    }
}

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_write_is_cut_saying_so_and_a_short_one_is_whole() {
        assert_eq!(bounded(b"short\n"), b"short\n");
        let long = vec![b'h'; 400_000];
        let cut = bounded(&long);
        assert!(cut.len() < MAX_LINE + 64, "{}", cut.len());
        assert!(String::from_utf8_lossy(&cut).ends_with("(383616 bytes cut)\n"));
    }
}

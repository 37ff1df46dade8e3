//! The output chunks a followed run sends with its progress notifications, for a caller that
//! asked for them (`pyrun_api::live_output`): the whole lines printed since the last chunk,
//! stderr with the host's folders cut as in the result, so the chunks a client printed are the
//! start of the result's streams.

use std::sync::atomic::{AtomicU64, Ordering};

use pyrun_api::live_output::{OutputChunk, ASK, CHUNK};
use pyrun_run::live_output::{LiveOutput, Stream};
use rmcp::model::NotificationMetaObject;
use rmcp::service::RequestContext;
use rmcp::RoleServer;

/// The most of one stream one chunk carries; the rest goes with the next.
const MAX_CHUNK: usize = 64 * 1024;

/// Where the next chunk starts in each stream, and its number.
#[derive(Debug, Default)]
pub struct ChunkCursor {
    stdout: AtomicU64,
    stderr: AtomicU64,
    seq: AtomicU64,
}

impl ChunkCursor {
    /// A cursor when the call's `_meta` asks for live output.
    pub fn asked(ctx: &RequestContext<RoleServer>) -> Option<Self> {
        let asked = ctx.meta.get(ASK).and_then(serde_json::Value::as_bool);
        (asked == Some(true)).then(Self::default)
    }

    /// The `_meta` of the next progress notification: the new whole lines of both streams,
    /// or `None` when there are none. `cut` is what the result does to stderr.
    pub fn next(
        &self,
        live: &LiveOutput,
        cut: impl Fn(&str) -> String,
    ) -> Option<NotificationMetaObject> {
        let stdout = whole_lines(live, Stream::Stdout, &self.stdout);
        let stderr = whole_lines(live, Stream::Stderr, &self.stderr);
        if stdout.is_empty() && stderr.is_empty() {
            return None;
        }
        let chunk = OutputChunk {
            stdout,
            stderr: if stderr.is_empty() {
                stderr
            } else {
                cut(&stderr)
            },
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
        };
        let mut meta = NotificationMetaObject::new();
        meta.insert(CHUNK.into(), serde_json::to_value(chunk).ok()?);
        Some(meta)
    }
}

/// The stream's text from `cursor` up to its last line end (all of a full page: a line longer
/// than a chunk goes in parts; all of a page that is not UTF-8, whose text is not its bytes),
/// the cursor moved past it.
fn whole_lines(live: &LiveOutput, which: Stream, cursor: &AtomicU64) -> String {
    let from = cursor.load(Ordering::Relaxed);
    let page = live.read(which, from, MAX_CHUNK);
    let read = page.next_offset.saturating_sub(from);
    let exact = page.text.len() as u64 == read;
    let mut text = page.text;
    let mut next = page.next_offset;
    if exact && text.len() < MAX_CHUNK {
        let end = text.rfind('\n').map_or(0, |i| i + 1);
        text.truncate(end);
        next = from + end as u64;
    }
    cursor.store(next, Ordering::Relaxed);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_carry_whole_lines_and_the_rest_follows_later() {
        let live = LiveOutput::new(1 << 20);
        let cursor = AtomicU64::new(0);
        live.append(Stream::Stdout, b"one\ntw");
        assert_eq!(whole_lines(&live, Stream::Stdout, &cursor), "one\n");
        assert_eq!(whole_lines(&live, Stream::Stdout, &cursor), "");
        live.append(Stream::Stdout, b"o\nthree");
        assert_eq!(whole_lines(&live, Stream::Stdout, &cursor), "two\n");
        let long = vec![b'x'; MAX_CHUNK + 10];
        live.append(Stream::Stdout, &long);
        assert_eq!(whole_lines(&live, Stream::Stdout, &cursor).len(), MAX_CHUNK);
    }
}

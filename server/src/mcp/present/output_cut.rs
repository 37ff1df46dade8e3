//! Output sized for a model (shared by the rooms that report runs): a stream longer than
//! `--max-result-output-bytes` shows its head and its tail, half the budget each (cut at a line
//! end when one lies in the second half of the head or the first half of the tail), with one
//! plain line between saying what was cut (bytes and lines) and where the whole capture is:
//! `pyrun://runs/{run_id}/stdout` (or `/stderr`) and get_run's offsets.
//!
//! The tail is how the stream really ended, even past `--max-output-bytes`: the capture counts
//! what it drops and keeps its last bytes (`LiveOutput::tail`).

use std::fmt::Write as _;

use pyrun_api::OutputCut;
use pyrun_run::live_output::{LiveOutput, Stream};

use crate::mcp::present::artifact_blocks::RUNS_PREFIX;

/// What a result shows of one stream.
#[derive(Debug, Default)]
pub struct Shown {
    /// The whole capture, or its head, the line saying what was cut, and the tail.
    pub text: String,
    /// Set when the middle was cut.
    pub cut: Option<OutputCut>,
}

/// `stdout` or `stderr`: how streams are named in URIs, offsets and notes.
pub fn stream_name(which: Stream) -> &'static str {
    match which {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    }
}

/// `pyrun://runs/{run_id}/stdout` (or `/stderr`): a run's whole captured stream.
pub fn output_uri(run_id: &str, which: Stream) -> String {
    format!("{RUNS_PREFIX}{run_id}/{}", stream_name(which))
}

/// The run id and stream of an output URI; `None` for anything else.
pub fn parse_output_uri(uri: &str) -> Option<(&str, Stream)> {
    let rest = uri.strip_prefix(RUNS_PREFIX)?;
    let (run_id, stream) = rest.split_once('/')?;
    let which = match stream {
        "stdout" => Stream::Stdout,
        "stderr" => Stream::Stderr,
        _ => return None,
    };
    pyrun_run::artifacts::is_run_id(run_id).then_some((run_id, which))
}

/// What a result shows of `which`: all of it within `budget` bytes, else the head and the tail.
/// `kept_as` is the run id under which the whole capture stays readable, if it does.
pub fn show(live: &LiveOutput, which: Stream, budget: usize, kept_as: Option<&str>) -> Shown {
    let totals = live.totals(which);
    if totals.written <= budget as u64 {
        return Shown {
            text: live.read(which, 0, usize::MAX).text,
            cut: None,
        };
    }
    let half = budget / 2;
    // Cut in the raw bytes: offsets and counts are the stream's bytes, and lossy text is longer
    // than them where the stream holds invalid UTF-8.
    let mut raw_head = live.read_bytes(which, 0, half);
    if let Some(end) = raw_head
        .iter()
        .rposition(|b| *b == b'\n')
        .filter(|i| *i >= raw_head.len() / 2)
    {
        raw_head.truncate(end + 1);
    }
    let head_bytes = raw_head.len() as u64;
    let head = String::from_utf8_lossy(&raw_head).into_owned();
    let tail_room = usize::try_from(totals.written.saturating_sub(head_bytes))
        .unwrap_or(usize::MAX)
        .min(half);
    let raw = live.tail(which, tail_room);
    let tail = line_aligned_tail(&raw);
    let tail_bytes = tail.len() as u64;
    let tail = String::from_utf8_lossy(tail).into_owned();
    let omitted_bytes = totals.written.saturating_sub(head_bytes + tail_bytes);
    let omitted_lines = totals
        .newlines
        .saturating_sub(count_newlines(&head) + count_newlines(&tail));
    let cut = OutputCut {
        omitted_bytes,
        omitted_lines,
        total_bytes: totals.written,
        captured_bytes: totals.captured,
        head_bytes,
        uri: kept_as.map(|id| output_uri(id, which)),
        run_id: kept_as.map(str::to_owned),
    };
    let mut text = head;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&cut_line(which, &cut, tail_bytes));
    text.push('\n');
    text.push_str(&tail);
    Shown {
        text,
        cut: Some(cut),
    }
}

/// The line between head and tail: what was cut, and where the whole is.
fn cut_line(which: Stream, cut: &OutputCut, tail_bytes: u64) -> String {
    let name = stream_name(which);
    let mut line = format!(
        "[... {} bytes ({} lines) of {name} cut here: this shows its first {} and last {} of {} bytes.",
        cut.omitted_bytes, cut.omitted_lines, cut.head_bytes, tail_bytes, cut.total_bytes
    );
    if cut.captured_bytes < cut.total_bytes {
        let _ = write!(
            line,
            " The server kept its first {} bytes (--max-output-bytes); the rest was counted, not kept.",
            cut.captured_bytes
        );
    }
    match (&cut.uri, &cut.run_id) {
        (Some(uri), Some(run_id)) => {
            let _ = write!(
                line,
                " Whole captured {name}: {uri}, or get_run {{\"run_id\": \"{run_id}\", \"{name}_offset\": {}}}]",
                cut.head_bytes
            );
        }
        _ => line.push_str(
            " The whole output could not be kept for reading (the server's run list is full).]",
        ),
    }
    line
}

/// The tail from its first whole character, and from after its first newline when that lies in
/// its first half (so it starts at a line's beginning).
fn line_aligned_tail(raw: &[u8]) -> &[u8] {
    let start = raw
        .iter()
        .take(3)
        .take_while(|b| **b & 0b1100_0000 == 0b1000_0000)
        .count();
    let raw = &raw[start..];
    match raw.iter().position(|b| *b == b'\n') {
        Some(i) if i < raw.len() / 2 => &raw[i + 1..],
        _ => raw,
    }
}

fn count_newlines(text: &str) -> u64 {
    text.bytes().filter(|b| *b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live_with(text: &str, cap: usize) -> LiveOutput {
        let live = LiveOutput::new(cap);
        live.append(Stream::Stdout, text.as_bytes());
        live
    }

    #[test]
    fn output_within_the_budget_is_shown_whole() {
        let live = live_with("a\nb\n", 1000);
        let shown = show(&live, Stream::Stdout, 1024, None);
        assert_eq!(shown.text, "a\nb\n");
        assert!(shown.cut.is_none());
    }

    #[test]
    fn a_long_output_shows_whole_lines_of_head_and_tail_and_counts_the_rest() {
        let text: String = (0..10_000).map(|i| format!("line {i:05}\n")).collect();
        let live = live_with(&text, 1 << 20);
        let run = format!("run_{}", "ab".repeat(16));
        let shown = show(&live, Stream::Stdout, 1024, Some(&run));
        let cut = shown.cut.unwrap();
        assert!(shown.text.starts_with("line 00000\n"), "{}", shown.text);
        assert!(shown.text.ends_with("line 09999\n"));
        assert_eq!(cut.total_bytes, text.len() as u64);
        assert_eq!(cut.head_bytes % 11, 0, "the head ends at a line end");
        let shown_lines = shown.text.lines().count() as u64 - 1;
        assert_eq!(cut.omitted_lines + shown_lines, 10_000);
        assert_eq!(cut.omitted_bytes, cut.omitted_lines * 11);
        assert!(shown.text.len() < 1024 + 400, "{}", shown.text.len());
        assert!(shown.text.contains(&format!("pyrun://runs/{run}/stdout")));
        assert!(shown
            .text
            .contains(&format!("\"stdout_offset\": {}", cut.head_bytes)));
        assert_eq!(
            parse_output_uri(cut.uri.as_deref().unwrap()),
            Some((run.as_str(), Stream::Stdout))
        );
    }

    #[test]
    fn the_tail_is_how_the_stream_ended_even_past_the_capture() {
        let mut text: String = (0..100_000).map(|i| format!("row {i}\n")).collect();
        text.push_str("Traceback: the end\n");
        let live = live_with(&text, 4096);
        let shown = show(&live, Stream::Stdout, 2048, None);
        assert!(shown.text.ends_with("row 99999\nTraceback: the end\n"));
        assert!(shown.text.contains("kept its first 4096 bytes"));
        assert!(shown.text.contains("could not be kept"));
        assert_eq!(shown.cut.unwrap().captured_bytes, 4096);
    }

    #[test]
    fn invalid_utf8_does_not_shift_the_offsets_and_counts_of_a_cut() {
        let raw: Vec<u8> = b"\xff\n".repeat(5000);
        let live = LiveOutput::new(1 << 20);
        live.append(Stream::Stdout, &raw);
        let run = format!("run_{}", "ef".repeat(16));
        let shown = show(&live, Stream::Stdout, 1024, Some(&run));
        let cut = shown.cut.unwrap();
        assert_eq!(
            cut.head_bytes, 512,
            "the head is the stream's first 512 bytes"
        );
        let tail_bytes = raw.len() as u64 - cut.head_bytes - cut.omitted_bytes;
        assert_eq!(cut.omitted_bytes % 2, 0);
        assert_eq!(cut.omitted_lines, cut.omitted_bytes / 2);
        assert!(tail_bytes <= 512, "{tail_bytes}");
        assert!(shown
            .text
            .contains(&format!("\"stdout_offset\": {}", cut.head_bytes)));
    }

    #[test]
    fn only_output_uris_parse() {
        let run = format!("run_{}", "cd".repeat(16));
        for bad in [
            format!("pyrun://runs/{run}/stdin"),
            format!("pyrun://runs/{run}/files/stdout"),
            "pyrun://runs/run_x/stdout".to_owned(),
        ] {
            assert_eq!(parse_output_uri(&bad), None, "{bad}");
        }
        assert_eq!(
            parse_output_uri(&output_uri(&run, Stream::Stderr)),
            Some((run.as_str(), Stream::Stderr))
        );
    }
}

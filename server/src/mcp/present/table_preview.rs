//! Tables a model can read without another call (shared by the rooms that report runs): a
//! CSV or TSV artifact is previewed as its header, its row and column counts and its first
//! [`PREVIEW_ROWS`] rows (a Markdown table, each cell at most [`CELL_CHARS`] characters); a JSON
//! artifact of at most [`SMALL_JSON_BYTES`] is shown pretty-printed, at most
//! [`PREVIEW_CHARS`] characters. Anything else, or a file that does not parse, has no preview.
//!
//! Counting rows reads the whole file (at most the store's per-file cap), streamed by the `csv`
//! crate: memory stays at one record.

use std::fmt::Write as _;
use std::io::Read;

/// Rows shown after the header.
pub const PREVIEW_ROWS: usize = 10;
/// Characters of one cell shown; a longer one ends with `…`.
pub const CELL_CHARS: usize = 40;
/// Columns shown; more are counted.
pub const PREVIEW_COLUMNS: usize = 20;
/// Characters of one preview.
pub const PREVIEW_CHARS: usize = 4096;
/// The largest JSON artifact previewed.
pub const SMALL_JSON_BYTES: u64 = 64 * 1024;

/// Whether an artifact of this type gets a preview.
pub fn has_preview(mime: &str) -> bool {
    matches!(
        mime,
        "text/csv" | "text/tab-separated-values" | "application/json"
    )
}

/// The preview of an artifact's bytes read from `file`, or `None`.
pub fn preview(file: impl Read, size: u64, mime: &str) -> Option<String> {
    let text = match mime {
        "text/csv" => table(file, b','),
        "text/tab-separated-values" => table(file, b'\t'),
        "application/json" if size <= SMALL_JSON_BYTES => json(file),
        _ => None,
    }?;
    Some(bounded(text, PREVIEW_CHARS))
}

fn table(file: impl Read, delimiter: u8) -> Option<String> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(file);
    let mut records = reader.byte_records();
    let header = records.next()?.ok()?;
    let columns = header.len();
    let mut first = Vec::new();
    let mut rows: u64 = 0;
    for record in records {
        let record = record.ok()?;
        if first.len() < PREVIEW_ROWS {
            first.push(record);
        }
        rows += 1;
    }
    let mut text = format!(
        "{rows} rows x {columns} columns{}:\n",
        if rows > first.len() as u64 {
            format!(" (the header and first {})", first.len())
        } else {
            String::new()
        }
    );
    let shown = columns.min(PREVIEW_COLUMNS);
    push_row(&mut text, &header, shown, columns);
    text.push('|');
    text.push_str(&"---|".repeat(shown + usize::from(columns > shown)));
    text.push('\n');
    for record in &first {
        push_row(&mut text, record, shown, columns);
    }
    Some(text)
}

/// `| a | b |` with each cell cut to [`CELL_CHARS`], `|`, `\` and line breaks escaped.
fn push_row(text: &mut String, record: &csv::ByteRecord, shown: usize, columns: usize) {
    text.push('|');
    for i in 0..shown {
        let cell = record
            .get(i)
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        text.push(' ');
        let mut chars = cell.chars();
        for c in chars.by_ref().take(CELL_CHARS) {
            match c {
                '|' => text.push_str("\\|"),
                // Escaped too: a cell's `\` before its `|` would escape the escape and end the cell.
                '\\' => text.push_str("\\\\"),
                c if c.is_control() => text.push(' '),
                c => text.push(c),
            }
        }
        if chars.next().is_some() {
            text.push('…');
        }
        text.push_str(" |");
    }
    if columns > shown {
        let _ = write!(text, " … {} more |", columns - shown);
    }
    text.push('\n');
}

fn json(mut file: impl Read) -> Option<String> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let pretty = serde_json::to_string_pretty(&value).ok()?;
    Some(pretty + "\n")
}

/// At most `max` characters, cut at a line end, with what was left out said.
fn bounded(text: String, max: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max) else {
        return text;
    };
    let end = text[..cut].rfind('\n').map_or(cut, |i| i + 1);
    let rest = text.len() - end;
    format!(
        "{}… ({rest} more bytes: read the file from its link)\n",
        &text[..end]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_shows_its_counts_header_and_first_rows() {
        let mut csv = String::from("name,score\n");
        for i in 0..25 {
            csv.push_str(&format!("p{i},{}\n", i * 10));
        }
        let text = preview(csv.as_bytes(), csv.len() as u64, "text/csv").unwrap();
        assert!(
            text.starts_with("25 rows x 2 columns (the header and first 10):\n| name | score |\n|---|---|\n| p0 | 0 |\n"),
            "{text}"
        );
        assert!(
            text.contains("| p9 | 90 |") && !text.contains("p10"),
            "{text}"
        );
    }

    #[test]
    fn cells_columns_and_size_are_bounded() {
        let wide: Vec<String> = (0..30).map(|i| format!("c{i}")).collect();
        let tsv = format!("{}\n{}|x\n", wide.join("\t"), "y".repeat(100));
        let text = preview(
            tsv.as_bytes(),
            tsv.len() as u64,
            "text/tab-separated-values",
        )
        .unwrap();
        assert!(text.contains("… 10 more |"), "{text}");
        assert!(text.contains(&format!("| {}… |", "y".repeat(40))), "{text}");
        let long = format!("[{}]", vec!["1234567890"; 2000].join(","));
        let text = preview(long.as_bytes(), long.len() as u64, "application/json").unwrap();
        assert!(text.chars().count() < PREVIEW_CHARS + 100);
        assert!(
            text.contains("more bytes: read the file from its link"),
            "{text}"
        );
    }

    /// The cell separators of a Markdown table row: pipes not escaped by a backslash (a
    /// backslash escapes the next character, itself included).
    fn separators(row: &str) -> usize {
        let (mut count, mut escaped) = (0, false);
        for c in row.chars() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '|') => count += 1,
                _ => {}
            }
        }
        count
    }

    #[test]
    fn a_cell_ending_in_a_backslash_before_a_pipe_stays_one_cell() {
        let csv = "a,b\nx\\|y\\,z\\\\|\n";
        let text = preview(csv.as_bytes(), csv.len() as u64, "text/csv").unwrap();
        let rows: Vec<&str> = text.lines().skip(1).collect();
        for row in &rows {
            assert_eq!(separators(row), 3, "{row:?} in {text}");
        }
    }

    #[test]
    fn json_is_pretty_and_broken_or_large_files_have_no_preview() {
        let text = preview(&b"{\"a\":[1,2]}"[..], 11, "application/json").unwrap();
        assert_eq!(text, "{\n  \"a\": [\n    1,\n    2\n  ]\n}\n");
        assert_eq!(preview(&b"{nope"[..], 5, "application/json"), None);
        assert_eq!(
            preview(&b"{}"[..], SMALL_JSON_BYTES + 1, "application/json"),
            None
        );
        assert_eq!(preview(&b""[..], 0, "text/csv"), None);
        assert_eq!(preview(&b"a,b"[..], 3, "text/plain"), None);
    }
}

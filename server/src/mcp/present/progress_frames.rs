//! `\r` progress frames (a bar redrawn 100 times on one line) collapsed to the last frame of each
//! line, in what a model reads: a result's text and its structured `stdout`/`stderr`. The capture
//! (`get_run`, `pyrun://runs/{id}/stdout`) keeps every byte, and so does the result of a caller
//! that follows the live output to print it for a person (the CLI).

use std::borrow::Cow;

/// Each line as its last `\r` frame; a `\r` that ends a line (CRLF) is kept, not a frame.
pub fn collapse(text: &str) -> Cow<'_, str> {
    if !text.contains('\r') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let (body, cr) = match body.strip_suffix('\r') {
            Some(body) => (body, "\r"),
            None => (body, ""),
        };
        out.push_str(body.rsplit('\r').next().unwrap_or(body));
        out.push_str(cr);
        out.push_str(newline);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::collapse;

    #[test]
    fn each_line_keeps_its_last_frame() {
        let bar: String = (0..=100)
            .map(|i| format!("\r{i:3}% [{}]", "#".repeat(i / 10)))
            .collect();
        let text = format!("start\n{bar}\ndone\n");
        assert_eq!(collapse(&text), "start\n100% [##########]\ndone\n");
        assert_eq!(collapse("a\r\nb\r\n"), "a\r\nb\r\n", "CRLF lines stay");
        assert_eq!(collapse("x 1\rx 2\r\n"), "x 2\r\n");
        assert_eq!(collapse("partial 1\rpartial 2"), "partial 2");
        assert!(matches!(collapse("plain\n"), std::borrow::Cow::Borrowed(_)));
    }
}

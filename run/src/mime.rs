//! MIME types of files, by name, with pictures confirmed by their first bytes: one table for
//! project resources and run artifacts alike.

/// What a file of unknown kind is.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// The MIME type of a file by its extension (the last segment of a `/`-separated path; a name
/// that only starts with a dot has none).
pub fn by_name(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => return OCTET_STREAM,
    };
    match ext.as_str() {
        "py" | "pyi" => "text/x-python",
        "txt" | "log" | "cfg" | "ini" => "text/plain",
        "md" => "text/markdown",
        "rst" => "text/x-rst",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "sh" => "text/x-shellscript",
        "json" => "application/json",
        "ipynb" => "application/x-ipynb+json",
        "toml" => "application/toml",
        "yaml" | "yml" => "application/yaml",
        "xml" => "application/xml",
        "js" => "application/javascript",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "parquet" => "application/vnd.apache.parquet",
        _ => OCTET_STREAM,
    }
}

/// [`by_name`], but a picture type only when `head` (the file's first bytes) starts as such a
/// picture does: a `.png` that is not a PNG is not shown as one.
pub fn sniffed(name: &str, head: &[u8]) -> &'static str {
    let mime = by_name(name);
    let confirmed = match mime {
        "image/png" => head.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => head.starts_with(b"\xff\xd8\xff"),
        "image/gif" => head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a"),
        "image/webp" => head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP",
        _ => true,
    };
    if confirmed {
        mime
    } else {
        OCTET_STREAM
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pictures_are_pictures_only_when_their_bytes_say_so() {
        assert_eq!(sniffed("plot.png", b"\x89PNG\r\n\x1a\n...."), "image/png");
        assert_eq!(sniffed("plot.PNG", b"<html>"), OCTET_STREAM);
        assert_eq!(sniffed("data.csv", b"a,b"), "text/csv");
        assert_eq!(by_name("dir.v2/README"), OCTET_STREAM);
        assert_eq!(by_name(".bashrc"), OCTET_STREAM);
        assert_eq!(by_name("a/b.py"), "text/x-python");
    }
}

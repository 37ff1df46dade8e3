//! `--save-artifacts DIR`: writes each resource a result links to (a run's artifacts) under DIR,
//! read with `resources/read`. The names come from the server, so each one is checked first: a
//! name that is absolute, holds `..`, `.`, a backslash or a control character, or would pass
//! through a symbolic link inside DIR is refused and reported, never written.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, ResourceContents};
use serde_json::Value;

use crate::error::ClientError;
use crate::session::Session;

/// One resource a result links to: its name (a path with `/` separators) and URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactLink {
    pub name: String,
    pub uri: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedArtifact {
    pub path: PathBuf,
    pub bytes: u64,
}

/// What `save` did: the files written, and one sentence per artifact it did not write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaveReport {
    pub saved: Vec<SavedArtifact>,
    pub failed: Vec<String>,
}

impl SaveReport {
    /// `Err` when any artifact was not saved (after `output` has shown the saved ones).
    pub fn into_result(self) -> Result<(), ClientError> {
        if self.failed.is_empty() {
            Ok(())
        } else {
            Err(ClientError::ArtifactsNotSaved(self.failed))
        }
    }
}

/// The result's `resource_link` blocks; without any, its structured `artifacts` (`[{name, uri}]`).
pub fn links(result: &CallToolResult) -> Vec<ArtifactLink> {
    let blocks: Vec<ArtifactLink> = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ResourceLink(link) => Some(ArtifactLink {
                name: link.name.clone(),
                uri: link.uri.clone(),
            }),
            _ => None,
        })
        .collect();
    if !blocks.is_empty() {
        return blocks;
    }
    structured_links(result.structured_content.as_ref())
}

/// `artifacts: [{name, uri}]` of a structured result (`run_python`, `get_run`).
pub fn structured_links(structured: Option<&Value>) -> Vec<ArtifactLink> {
    structured
        .and_then(|s| s.get("artifacts"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| {
            Some(ArtifactLink {
                name: a.get("name")?.as_str()?.to_owned(),
                uri: a.get("uri")?.as_str()?.to_owned(),
            })
        })
        .collect()
}

/// Reads every link and writes it under `dir` (created if missing). Failures of single artifacts
/// are collected in the report; Ctrl-C, the timeout and a lost connection end it.
pub async fn save(
    session: &Session,
    links: &[ArtifactLink],
    dir: &Path,
) -> Result<SaveReport, ClientError> {
    let mut report = SaveReport::default();
    if links.is_empty() {
        return Ok(report);
    }
    fs::create_dir_all(dir).map_err(|source| ClientError::Io {
        context: format!("cannot create {}", dir.display()),
        source,
    })?;
    let mut names = std::collections::HashSet::new();
    for link in links {
        let relative = match safe_relative_path(&link.name) {
            Ok(relative) => relative,
            Err(reason) => {
                report
                    .failed
                    .push(format!("{:?}: refused, {reason}", link.name));
                continue;
            }
        };
        if !names.insert(relative.clone()) {
            report.failed.push(format!(
                "{:?}: refused, the result names it twice",
                link.name
            ));
            continue;
        }
        let contents = match session.read_resource(&link.uri).await {
            Ok(contents) => contents,
            Err(ClientError::Refused { reason, .. }) => {
                report.failed.push(format!("{:?}: {reason}", link.name));
                continue;
            }
            Err(other) => return Err(other),
        };
        let written = resource_bytes(&contents, &link.uri)
            .and_then(|bytes| {
                write_inside(dir, &relative, &bytes)
                    .map(|path| (path, bytes.len()))
                    .map_err(|e| format!("cannot write it: {e}"))
            })
            .map(|(path, len)| SavedArtifact {
                path,
                bytes: u64::try_from(len).unwrap_or(u64::MAX),
            });
        match written {
            Ok(saved) => report.saved.push(saved),
            Err(reason) => report.failed.push(format!("{:?}: {reason}", link.name)),
        }
    }
    Ok(report)
}

/// The bytes of a read resource: its text as UTF-8 or its blob decoded. Of several contents, the
/// one with the asked-for URI (else the first).
pub fn resource_bytes(result: &ReadResourceResult, uri: &str) -> Result<Vec<u8>, String> {
    let uri_of = |c: &ResourceContents| match c {
        ResourceContents::TextResourceContents { uri, .. }
        | ResourceContents::BlobResourceContents { uri, .. } => Some(uri.clone()),
        _ => None,
    };
    let content = result
        .contents
        .iter()
        .find(|c| uri_of(c).as_deref() == Some(uri))
        .or_else(|| result.contents.first())
        .ok_or_else(|| "the server returned no content for it".to_owned())?;
    match content {
        ResourceContents::TextResourceContents { text, .. } => Ok(text.clone().into_bytes()),
        ResourceContents::BlobResourceContents { blob, .. } => {
            base64::engine::general_purpose::STANDARD
                .decode(blob.trim())
                .map_err(|e| format!("the server sent a blob that is not base64: {e}"))
        }
        _ => Err("the server sent content of a kind this client does not know".into()),
    }
}

/// `name` as a path relative to the save folder, or why it cannot be one. The rules of both
/// platforms are checked where they matter (`:` and reserved device names only on Windows).
pub fn safe_relative_path(name: &str) -> Result<PathBuf, String> {
    check_name(name, cfg!(windows))?;
    let path: PathBuf = name.split('/').collect();
    // Belt and braces: what the checks let through must be plain names to the OS as well.
    if path.components().all(|c| matches!(c, Component::Normal(_))) {
        Ok(path)
    } else {
        Err("it is not a plain relative path".into())
    }
}

fn check_name(name: &str, windows: bool) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.chars().any(char::is_control) {
        return Err("the name holds a control character".into());
    }
    if name.starts_with('/') {
        return Err("an absolute path would leave the folder".into());
    }
    if name.contains('\\') {
        return Err("a backslash is a path separator on Windows".into());
    }
    if windows && name.contains(':') {
        return Err("a `:` names a drive or a stream on Windows".into());
    }
    for segment in name.split('/') {
        match segment {
            "" => return Err("the name has an empty path segment".into()),
            "." | ".." => return Err(format!("a `{segment}` segment would leave the folder")),
            _ if windows && is_windows_device(segment) => {
                return Err(format!("`{segment}` is a device name on Windows"))
            }
            _ if windows && segment.ends_with(['.', ' ']) => {
                return Err("Windows drops a trailing dot or space".into())
            }
            _ => {}
        }
    }
    Ok(())
}

fn is_windows_device(segment: &str) -> bool {
    let stem = segment.split('.').next().unwrap_or("").trim_end();
    let upper = stem.to_ascii_uppercase();
    matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || ((upper.starts_with("COM") || upper.starts_with("LPT"))
        && upper.len() == 4
        && upper.as_bytes()[3].is_ascii_digit())
}

/// Writes `bytes` to `dir/relative`, creating folders one level at a time and refusing to pass
/// through (or write onto) a symbolic link, so a link planted in DIR cannot redirect the write.
fn write_inside(dir: &Path, relative: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    let mut path = dir.to_path_buf();
    let mut components = relative.components().peekable();
    while let Some(component) = components.next() {
        path.push(component);
        let last = components.peek().is_none();
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(io::Error::other(format!(
                    "{} is a symbolic link",
                    path.display()
                )))
            }
            Ok(meta) if last && meta.is_dir() => {
                return Err(io::Error::other(format!("{} is a folder", path.display())))
            }
            Ok(meta) if !last && !meta.is_dir() => {
                return Err(io::Error::other(format!(
                    "{} is not a folder",
                    path.display()
                )))
            }
            // An older file of that name goes first, so a hard link to a file elsewhere is
            // replaced, not written through.
            Ok(_) if last => fs::remove_file(&path)?,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !last {
                    fs::create_dir(&path)?;
                }
            }
            Err(e) => return Err(e),
        }
    }
    // `create_new` (O_EXCL) also refuses a link planted after the check above.
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    io::Write::write_all(&mut file, bytes)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::Resource;
    use serde_json::json;

    #[test]
    fn plain_names_and_subfolders_are_kept() {
        for name in [
            "figure-1.png",
            "plots/loss curve.png",
            "données.csv",
            ".hidden",
            "a..b",
        ] {
            let path = safe_relative_path(name);
            assert_eq!(path, Ok(name.split('/').collect::<PathBuf>()), "{name}");
        }
    }

    #[test]
    fn names_that_would_leave_the_folder_are_refused() {
        for name in [
            "",
            "..",
            "../escape.txt",
            "a/../../b",
            "./a",
            "a/./b",
            "/etc/passwd",
            "//server/share",
            "a//b",
            "dir/",
            r"..\escape.txt",
            r"C:\Windows\x",
            r"\\server\share\x",
            "new\nline",
            "nul\0byte",
            "bell\x07",
        ] {
            assert!(safe_relative_path(name).is_err(), "{name:?} was accepted");
        }
    }

    #[test]
    fn windows_rules_refuse_drives_devices_and_trailing_dots() {
        for name in [
            "C:x",
            "C:/x",
            "a:stream",
            "CON",
            "nul.txt",
            "sub/com1.log",
            "x.",
            "x ",
        ] {
            assert!(check_name(name, true).is_err(), "{name:?} was accepted");
        }
        assert!(check_name("console.txt", true).is_ok());
        assert!(check_name("com10", true).is_ok());
        // Harmless on Unix.
        assert!(check_name("12:30.csv", false).is_ok());
    }

    fn link(name: &str, uri: &str) -> ContentBlock {
        ContentBlock::ResourceLink(Resource::new(uri, name))
    }

    #[test]
    fn links_come_from_resource_link_blocks_else_the_structured_artifacts() {
        let uri = "pyrun://runs/run_1/files/a.png";
        let mut result =
            CallToolResult::success(vec![ContentBlock::text("done"), link("a.png", uri)]);
        result.structured_content =
            Some(json!({"artifacts": [{"name": "other", "uri": "pyrun://x"}]}));
        let expected = ArtifactLink {
            name: "a.png".into(),
            uri: uri.into(),
        };
        assert_eq!(links(&result), vec![expected]);

        let mut structured_only = CallToolResult::success(vec![ContentBlock::text("done")]);
        structured_only.structured_content = Some(json!({"artifacts": [
            {"name": "b.csv", "uri": "pyrun://runs/run_1/files/b.csv", "size": 3},
            {"name": "no uri"}
        ]}));
        assert_eq!(
            links(&structured_only),
            vec![ArtifactLink {
                name: "b.csv".into(),
                uri: "pyrun://runs/run_1/files/b.csv".into()
            }]
        );
    }

    #[test]
    fn blobs_are_decoded_and_text_is_utf8() {
        let uri = "pyrun://runs/r/files/a";
        let blob = ReadResourceResult::new(vec![ResourceContents::blob("iVBORw==", uri)]);
        assert_eq!(resource_bytes(&blob, uri), Ok(vec![0x89, b'P', b'N', b'G']));
        let text = ReadResourceResult::new(vec![ResourceContents::text("é\n", uri)]);
        assert_eq!(resource_bytes(&text, uri), Ok("é\n".as_bytes().to_vec()));
        let bad = ReadResourceResult::new(vec![ResourceContents::blob("not base64!", uri)]);
        assert!(resource_bytes(&bad, uri).is_err());
        assert!(resource_bytes(&ReadResourceResult::new(vec![]), uri).is_err());
    }

    #[test]
    fn writes_stay_inside_and_create_subfolders() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write_inside(dir.path(), Path::new("plots/a/fig.png"), b"png");
        assert_eq!(
            path.ok(),
            Some(dir.path().join("plots").join("a").join("fig.png"))
        );
        assert_eq!(
            fs::read(dir.path().join("plots/a/fig.png")).ok(),
            Some(b"png".to_vec())
        );
        // Written again: replaced.
        assert!(write_inside(dir.path(), Path::new("plots/a/fig.png"), b"new").is_ok());
        assert_eq!(
            fs::read(dir.path().join("plots/a/fig.png")).ok(),
            Some(b"new".to_vec())
        );
        assert!(write_inside(dir.path(), Path::new("plots"), b"x").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_inside_the_folder_does_not_redirect_the_write() {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("temp dir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub")).expect("symlink");
        std::os::unix::fs::symlink(outside.path().join("f"), dir.path().join("f"))
            .expect("symlink");
        assert!(write_inside(dir.path(), Path::new("sub/x.txt"), b"x").is_err());
        assert!(write_inside(dir.path(), Path::new("f"), b"x").is_err());
        assert_eq!(
            fs::read_dir(outside.path()).map(Iterator::count).ok(),
            Some(0)
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_hard_link_inside_the_folder_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("temp dir");
        let precious = outside.path().join("precious");
        fs::write(&precious, b"keep").expect("write");
        fs::hard_link(&precious, dir.path().join("a.txt")).expect("hard link");
        assert!(write_inside(dir.path(), Path::new("a.txt"), b"new").is_ok());
        assert_eq!(fs::read(&precious).ok(), Some(b"keep".to_vec()));
        assert_eq!(
            fs::read(dir.path().join("a.txt")).ok(),
            Some(b"new".to_vec())
        );
    }
}

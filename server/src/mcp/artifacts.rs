//! The artifacts room: run artifacts as MCP sees them: the content blocks and structured fields of a result with
//! artifacts (pictures inline within `--max-inline-image-bytes`, a `resource_link` per file,
//! notes for what was skipped), and `resources/read` of `pyrun://runs/{run_id}/files/{name}`.
//!
//! Names in URIs: the artifact's path with `/` separators, each segment percent-encoded (RFC 3986
//! unreserved characters kept). A URI only ever selects an artifact the store knows by exact
//! name for the caller: nothing of it reaches a file path.

use std::fmt::Write as _;
use std::io::Read;
use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, Resource, ResourceContents};
use rmcp::ErrorData;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::client_message::push_escaped;
use super::reply::encode_segments;
use crate::app::App;
use crate::run::artifacts::{is_run_id, Artifact, ArtifactError, ArtifactStore, Collected};
use crate::run::caller::Caller;

/// The scheme and authority of run URIs.
pub const RUNS_PREFIX: &str = "pyrun://runs/";
/// Between the run id and the artifact's name.
const FILES_SEGMENT: &str = "/files/";
/// Read and encoded at a time (a multiple of 3: base64 of each chunk joins without padding).
const ENCODE_CHUNK: usize = 3 * 16 * 1024;

/// `pyrun://runs/{run_id}/files/{name}`, the name's segments encoded as project URIs' are.
pub fn artifact_uri(run_id: &str, name: &str) -> String {
    format!(
        "{RUNS_PREFIX}{run_id}{FILES_SEGMENT}{}",
        encode_segments(name)
    )
}

/// The run id and artifact name of a run URI; `None` for anything else (also a name that does
/// not decode to UTF-8).
pub fn parse_artifact_uri(uri: &str) -> Option<(&str, String)> {
    let rest = uri.strip_prefix(RUNS_PREFIX)?;
    let (run_id, encoded) = rest.split_once(FILES_SEGMENT)?;
    if !is_run_id(run_id) || encoded.is_empty() {
        return None;
    }
    // A `%` must start an escape (the decoder would keep a stray one as it is).
    let escapes_ok = encoded
        .split('%')
        .skip(1)
        .all(|after| after.len() >= 2 && after.as_bytes()[..2].iter().all(u8::is_ascii_hexdigit));
    if !escapes_ok {
        return None;
    }
    let name = percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .ok()?;
    Some((run_id, name.into_owned()))
}

/// One kept artifact, as structured results list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ArtifactInfo {
    /// Its path inside the run's output folder (`PYRUN_OUTPUT_DIR`), `/`-separated.
    pub name: String,
    /// Bytes.
    pub size: u64,
    pub mime_type: String,
    /// `pyrun://runs/{run_id}/files/{name}`: read it with `resources/read`.
    pub uri: String,
}

/// A file the run left that was not kept, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SkippedArtifact {
    /// Its path inside the output folder, with control characters escaped.
    pub name: String,
    /// Why it was not kept, in a sentence.
    pub reason: String,
}

/// What a result shows of a run's artifacts.
#[derive(Debug, Default)]
pub struct Presented {
    /// Lines for the text block: kept files, skipped ones and pictures not inline, with reasons.
    pub notes: String,
    /// Image blocks, then one `resource_link` per artifact.
    pub blocks: Vec<ContentBlock>,
    /// `artifacts` of the structured result.
    pub artifacts: Vec<ArtifactInfo>,
    /// `skipped_artifacts` of the structured result.
    pub skipped: Vec<SkippedArtifact>,
}

impl Presented {
    /// Adds the notes to the result's first text block and the blocks after it.
    pub fn add_blocks_to(&mut self, result: &mut CallToolResult) {
        if !self.notes.is_empty() {
            if let Some(ContentBlock::Text(text)) = result.content.first_mut() {
                if !text.text.ends_with('\n') {
                    text.text.push('\n');
                }
                text.text.push_str(&self.notes);
            }
        }
        result.content.append(&mut self.blocks);
    }
}

/// The blocks, notes and fields for `collected`, the artifacts of `run_id` owned by `owner`.
/// Pictures are read from the store (on a blocking thread) while their total stays within
/// `--max-inline-image-bytes`; the others are named in the notes with the reason.
pub async fn present(app: &App, owner: &str, run_id: &str, collected: &Collected) -> Presented {
    let budget = app.config.artifacts.max_inline_image_bytes;
    let store = Arc::clone(&app.artifacts);
    let (owner_, run_id_) = (owner.to_owned(), run_id.to_owned());
    let images: Vec<Artifact> = collected
        .kept
        .iter()
        .filter(|a| a.is_image())
        .cloned()
        .collect();
    let inline = tokio::task::spawn_blocking(move || {
        inline_images(&store, &owner_, &run_id_, &images, budget)
    })
    .await
    .unwrap_or_default();
    let mut notes = String::new();
    let mut artifacts = Vec::new();
    let mut links = Vec::new();
    for artifact in &collected.kept {
        let uri = artifact_uri(run_id, &artifact.name);
        let _ = write!(notes, "artifact: ");
        push_escaped(&mut notes, &artifact.name);
        let _ = writeln!(
            notes,
            " ({}, {} bytes) {uri}",
            artifact.mime_type, artifact.size
        );
        let mut link = Resource::new(uri.clone(), artifact.name.clone());
        link.mime_type = Some(artifact.mime_type.to_owned());
        link.size = Some(artifact.size);
        links.push(ContentBlock::resource_link(link));
        artifacts.push(ArtifactInfo {
            name: artifact.name.clone(),
            size: artifact.size,
            mime_type: artifact.mime_type.to_owned(),
            uri,
        });
    }
    for (name, outcome) in &inline {
        if let Err(reason) = outcome {
            notes.push_str("not shown inline: ");
            push_escaped(&mut notes, name);
            let _ = writeln!(notes, " ({reason}; read it from its link)");
        }
    }
    let mut skipped = Vec::new();
    for s in &collected.skipped {
        // The store escaped the name already (shown as it is: escaping twice would double `\`).
        let _ = writeln!(notes, "artifact not kept: {} ({})", s.name, s.reason);
        skipped.push(SkippedArtifact {
            name: s.name.clone(),
            reason: s.reason.clone(),
        });
    }
    Presented {
        notes: notes.trim_end().to_owned(),
        blocks: inline
            .into_iter()
            .filter_map(|(_, outcome)| outcome.ok())
            .chain(links)
            .collect(),
        artifacts,
        skipped,
    }
}

/// Each picture as an image block, or the reason it is not one; their bytes together stay
/// within `budget`.
fn inline_images(
    store: &ArtifactStore,
    owner: &str,
    run_id: &str,
    images: &[Artifact],
    budget: u64,
) -> Vec<(String, Result<ContentBlock, String>)> {
    let mut left = budget;
    images
        .iter()
        .map(|image| {
            let outcome = if image.size > left {
                Err(format!(
                    "over the {} bytes of pictures a result shows inline",
                    budget
                ))
            } else {
                match store.read(owner, run_id, &image.name) {
                    Ok(file) => match encode(file.file, file.size) {
                        Ok(data) => {
                            left -= image.size;
                            Ok(ContentBlock::image(data, image.mime_type))
                        }
                        Err(e) => {
                            tracing::warn!(%e, "an artifact could not be read");
                            Err("could not be read".to_owned())
                        }
                    },
                    Err(e) => {
                        tracing::warn!(%e, "an artifact could not be opened");
                        Err("could not be read".to_owned())
                    }
                }
            };
            (image.name.clone(), outcome)
        })
        .collect()
}

/// The file's bytes (at most `size`) as base64, read in chunks straight into the text: the raw
/// bytes are never held whole beside their encoding.
fn encode(file: std::fs::File, size: u64) -> std::io::Result<String> {
    let engine = &base64::engine::general_purpose::STANDARD;
    let mut out = String::with_capacity(usize::try_from(size.div_ceil(3) * 4).unwrap_or(0));
    let mut chunk = vec![0u8; ENCODE_CHUNK];
    let mut file = file.take(size);
    loop {
        let mut filled = 0;
        while filled < chunk.len() {
            match file.read(&mut chunk[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        engine.encode_string(&chunk[..filled], &mut out);
        if filled < chunk.len() {
            return Ok(out);
        }
    }
}

/// `resources/read` of `pyrun://runs/{run_id}/files/{name}` for `caller`: text for UTF-8 text
/// types, else a base64 blob. An unknown, expired or foreign run, an unknown name and a URI that
/// is not one all give the same "resource not found".
pub async fn read_resource(
    app: &App,
    caller: &Caller,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let not_found = || {
        ErrorData::resource_not_found(
            "no artifact at this URI for this caller (a run's artifacts are kept for a while \
             after it ends, and are gone after a server restart)",
            Some(json!({ "uri": uri })),
        )
    };
    let (run_id, name) = parse_artifact_uri(uri).ok_or_else(not_found)?;
    let store = Arc::clone(&app.artifacts);
    let (owner, run_id, name) = (caller.key().into_owned(), run_id.to_owned(), name);
    let read = tokio::task::spawn_blocking(move || {
        let file = store.read(&owner, &run_id, &name)?;
        let mime = file.mime_type;
        if !is_text(mime) {
            return Ok((mime, Err(encode(file.file, file.size)?)));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(file.size).unwrap_or(0));
        file.file.take(file.size).read_to_end(&mut bytes)?;
        // Text that is not UTF-8 goes as a blob.
        let contents = String::from_utf8(bytes)
            .map_err(|e| base64::engine::general_purpose::STANDARD.encode(e.as_bytes()));
        Ok::<_, ArtifactError>((mime, contents))
    })
    .await
    .map_err(|_| not_found())?;
    let (mime, contents) = match read {
        Ok(read) => read,
        Err(ArtifactError::NotFound) => return Err(not_found()),
        Err(ArtifactError::Io(e)) => {
            tracing::warn!(%e, "an artifact could not be read");
            return Err(ErrorData::internal_error(
                "the artifact could not be read",
                None,
            ));
        }
    };
    let contents = match contents {
        Ok(text) => ResourceContents::text(text, uri),
        Err(blob) => ResourceContents::blob(blob, uri),
    }
    .with_mime_type(mime);
    Ok(ReadResourceResult::new(vec![contents]))
}

fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/xml" | "application/yaml" | "image/svg+xml"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_encode_each_segment_and_decode_back() {
        let run = format!("run_{}", "ab".repeat(16));
        let uri = artifact_uri(&run, "plots/a b%ü~.png");
        assert_eq!(
            uri,
            format!("pyrun://runs/{run}/files/plots/a%20b%25%C3%BC~.png")
        );
        assert_eq!(
            parse_artifact_uri(&uri),
            Some((run.as_str(), "plots/a b%ü~.png".to_owned()))
        );
        // Names that look like paths out stay names: they are only looked up, never opened.
        let dots = artifact_uri(&run, "..");
        assert_eq!(
            parse_artifact_uri(&dots).map(|(_, n)| n),
            Some("..".to_owned())
        );
        for bad in [
            "pyrun://runs/run_x/files/a.png".to_owned(),
            format!("pyrun://runs/{run}/files/"),
            format!("pyrun://runs/{run}/files/%zz"),
            format!("pyrun://runs/{run}/files/%ff"),
            format!("pyrun://runs/{run}/other/a.png"),
            format!("pyrun://projects/{run}/files/a.png"),
        ] {
            assert_eq!(parse_artifact_uri(&bad), None, "{bad}");
        }
    }

    #[test]
    fn encoding_in_chunks_is_plain_base64() {
        let bytes: Vec<u8> = (0..(ENCODE_CHUNK * 2 + 7))
            .map(|i| (i % 251) as u8)
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, &bytes).unwrap();
        let got = encode(std::fs::File::open(&path).unwrap(), bytes.len() as u64).unwrap();
        assert_eq!(
            got,
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        );
        // Never more than the size the store recorded.
        let got = encode(std::fs::File::open(&path).unwrap(), 4).unwrap();
        assert_eq!(
            got,
            base64::engine::general_purpose::STANDARD.encode(&bytes[..4])
        );
    }
}

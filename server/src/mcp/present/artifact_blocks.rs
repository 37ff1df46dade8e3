//! What a tool result shows of the files a run left (shared by the rooms that report runs): the
//! content blocks and structured fields (pictures inline, sized by `image_fit`; a
//! `resource_link` per file; a preview of each table, by `table_preview`; notes for what was
//! skipped), and the `pyrun://runs/…` URIs they link to.
//!
//! Names in URIs: the artifact's path with `/` separators, each segment percent-encoded (RFC 3986
//! unreserved characters kept).

use std::fmt::Write as _;
use std::io::Read;
use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, Resource};

use crate::app::App;
use crate::client_message::push_escaped;
use crate::mcp::present::image_fit::{self, Fit};
use crate::mcp::present::reply::encode_segments;
use crate::mcp::present::table_preview;
use pyrun_run::artifacts::{Artifact, ArtifactStore, Collected};

/// Characters of table previews one result shows in all; later tables are links only.
const PREVIEWS_CHARS: usize = 16 * 1024;

/// The scheme and authority of run URIs.
pub const RUNS_PREFIX: &str = "pyrun://runs/";
/// Between the run id and the artifact's name.
pub const FILES_SEGMENT: &str = "/files/";
/// Read and encoded at a time (a multiple of 3: base64 of each chunk joins without padding).
const ENCODE_CHUNK: usize = 3 * 16 * 1024;

/// `pyrun://runs/{run_id}/files/{name}`, the name's segments encoded as project URIs' are.
pub fn artifact_uri(run_id: &str, name: &str) -> String {
    format!(
        "{RUNS_PREFIX}{run_id}{FILES_SEGMENT}{}",
        encode_segments(name)
    )
}

pub use pyrun_api::{ArtifactInfo, SkippedArtifact};

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
/// Pictures are shown inline as `image_fit` sizes them, tables previewed (on blocking
/// threads); what is not shown inline is named in the notes with the reason.
pub async fn present(app: &App, owner: &str, run_id: &str, collected: &Collected) -> Presented {
    let fit = Fit {
        max_edge: app.config.artifacts.max_inline_image_edge,
        budget: app.config.artifacts.max_inline_image_bytes,
    };
    let images: Vec<Artifact> = collected
        .kept
        .iter()
        .filter(|a| a.is_image())
        .cloned()
        .collect();
    let inline =
        image_fit::inline_images(app.engine.artifacts(), owner, run_id, &images, fit).await;
    let previews = previews(app.engine.artifacts(), owner, run_id, &collected.kept).await;
    let mut notes = String::new();
    let mut artifacts = Vec::new();
    let mut links = Vec::new();
    for (artifact, preview) in collected.kept.iter().zip(previews) {
        let uri = artifact_uri(run_id, &artifact.name);
        let _ = write!(notes, "artifact: ");
        push_escaped(&mut notes, &artifact.name);
        let _ = writeln!(
            notes,
            " ({}, {} bytes) {uri}",
            artifact.mime_type, artifact.size
        );
        if let Some(preview) = &preview {
            notes.push_str("preview of ");
            push_escaped(&mut notes, &artifact.name);
            let _ = write!(notes, ": {preview}");
        }
        let mut link = Resource::new(uri.clone(), artifact.name.clone());
        link.mime_type = Some(artifact.mime_type.to_owned());
        link.size = Some(artifact.size);
        links.push(ContentBlock::resource_link(link));
        artifacts.push(ArtifactInfo {
            name: artifact.name.clone(),
            size: artifact.size,
            mime_type: artifact.mime_type.to_owned(),
            uri,
            preview,
        });
    }
    for (name, outcome) in &inline {
        match outcome {
            Err(reason) => {
                notes.push_str("not shown inline: ");
                push_escaped(&mut notes, name);
                let _ = writeln!(notes, " ({reason}; read it from its link)");
            }
            Ok(shown) => {
                if let Some(resized) = &shown.resized {
                    notes.push_str("shown inline scaled: ");
                    push_escaped(&mut notes, name);
                    let _ = writeln!(notes, " ({resized}; the original is at its link)");
                }
            }
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
            .map(|shown| ContentBlock::image(shown.data, shown.mime_type))
            .chain(links)
            .collect(),
        artifacts,
        skipped,
    }
}

/// The preview of each of `kept` (`None` for files without one), read on a blocking thread,
/// within [`PREVIEWS_CHARS`] in all.
async fn previews(
    store: &Arc<ArtifactStore>,
    owner: &str,
    run_id: &str,
    kept: &[Artifact],
) -> Vec<Option<String>> {
    let count = kept.len();
    if !kept.iter().any(|a| table_preview::has_preview(a.mime_type)) {
        return vec![None; count];
    }
    let (store, owner, run_id, kept) = (
        Arc::clone(store),
        owner.to_owned(),
        run_id.to_owned(),
        kept.to_vec(),
    );
    tokio::task::spawn_blocking(move || {
        let mut left = PREVIEWS_CHARS;
        kept.iter()
            .map(|artifact| {
                if !table_preview::has_preview(artifact.mime_type) || left == 0 {
                    return None;
                }
                let file = store.read(&owner, &run_id, &artifact.name).ok()?;
                let preview = table_preview::preview(file.file, file.size, artifact.mime_type)?;
                let chars = preview.chars().count();
                if chars > left {
                    left = 0;
                    return None;
                }
                left -= chars;
                Some(preview)
            })
            .collect()
    })
    .await
    .unwrap_or_else(|_| vec![None; count])
}

/// The file's bytes (at most `size`) as base64, read in chunks straight into the text: the raw
/// bytes are never held whole beside their encoding.
pub fn encode(file: std::fs::File, size: u64) -> std::io::Result<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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

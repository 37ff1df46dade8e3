//! `resources` and `read URI [-o FILE]`: the server's resources (for pyrun-mcp the project files,
//! `pyrun://projects/…`, and the runs' artifacts, `pyrun://runs/…`).

use std::path::{Path, PathBuf};

use rmcp::model::{ReadResourceResult, Resource, ResourceContents};

use crate::commands::artifacts::resource_bytes;
use crate::error::ClientError;
use crate::session::Session;

pub async fn list(session: &Session) -> Result<Vec<Resource>, ClientError> {
    session.list_resources().await
}

/// One read resource: its bytes, and whether they came as text.
#[derive(Debug, Clone)]
pub struct ReadContent {
    pub uri: String,
    pub bytes: Vec<u8>,
    pub text: bool,
    pub mime_type: Option<String>,
    /// The whole result, for `--json`.
    pub result: ReadResourceResult,
    /// Where `-o FILE` wrote it (`None`: for stdout).
    pub written_to: Option<PathBuf>,
}

/// Reads `uri`; with `dest` (other than `-`), writes the bytes there.
pub async fn read(
    session: &Session,
    uri: &str,
    dest: Option<&Path>,
) -> Result<ReadContent, ClientError> {
    let result = session.read_resource(uri).await?;
    let bytes = resource_bytes(&result, uri)
        .map_err(|reason| ClientError::Protocol(format!("reading {uri}: {reason}")))?;
    let (text, mime_type) = match result.contents.first() {
        Some(ResourceContents::TextResourceContents { mime_type, .. }) => (true, mime_type.clone()),
        Some(ResourceContents::BlobResourceContents { mime_type, .. }) => {
            (false, mime_type.clone())
        }
        _ => (false, None),
    };
    let written_to = match dest {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::write(path, &bytes).map_err(|source| ClientError::Io {
                context: format!("cannot write {}", path.display()),
                source,
            })?;
            Some(path.to_path_buf())
        }
        _ => None,
    };
    Ok(ReadContent {
        uri: uri.into(),
        bytes,
        text,
        mime_type,
        result,
        written_to,
    })
}

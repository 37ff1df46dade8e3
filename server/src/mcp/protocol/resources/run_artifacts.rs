//! A run's resources: `resources/read` of `pyrun://runs/{run_id}/files/{name}`, the files a run
//! left, and of `pyrun://runs/{run_id}/stdout` (`/stderr`), the whole captured output of a run
//! whose result showed only its head and tail, for the run's caller (what results show of them:
//! `artifact_blocks`, `output_cut`).
//!
//! A URI only ever selects an artifact the store knows by exact name for the caller: nothing of
//! it reaches a file path.

use std::io::Read;
use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{ReadResourceResult, ResourceContents};
use rmcp::ErrorData;
use serde_json::json;

use crate::app::App;
use crate::mcp::present::artifact_blocks::encode;
use crate::mcp::protocol::resources::read_budget::{ReadBudget, ReadShare};
use pyrun_run::artifacts::ArtifactError;
use pyrun_run::caller::Caller;
use pyrun_run::live_output::Stream;

/// The client's error for a run URI that names nothing this caller may read: an unknown,
/// expired or foreign run, an unknown name and a URI that is not one all look the same.
pub fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        "no artifact at this URI for this caller (a run's artifacts are kept for a while after \
         it ends, and are gone after a server restart)",
        Some(json!({ "uri": uri })),
    )
}

/// `resources/read` of `pyrun://runs/{run_id}/files/{name}` for `caller`: text for UTF-8 text
/// types, else a base64 blob, with its share of the read budget (keep it until the answer is
/// written). Whatever it does not find is [`not_found`].
pub async fn read_artifact(
    app: &App,
    budget: &ReadBudget,
    caller: &Caller,
    uri: &str,
    run_id: &str,
    name: String,
) -> Result<(ReadResourceResult, ReadShare), ErrorData> {
    let not_found = || not_found(uri);
    let store = Arc::clone(app.engine.artifacts());
    let (owner, run_id, name) = (caller.key().into_owned(), run_id.to_owned(), name);
    let found = tokio::task::spawn_blocking(move || store.read(&owner, &run_id, &name))
        .await
        .map_err(|_| not_found())?;
    let (share, read) = match found {
        Ok(file) => {
            let share = budget.take(&caller.key(), file.size).await?;
            let read = tokio::task::spawn_blocking(move || {
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
            (share, read)
        }
        Err(error) => return Err(refusal(error, not_found)),
    };
    let (mime, contents) = read.map_err(|error| refusal(error, not_found))?;
    let contents = match contents {
        Ok(text) => ResourceContents::text(text, uri),
        Err(blob) => ResourceContents::blob(blob, uri),
    }
    .with_mime_type(mime);
    Ok((ReadResourceResult::new(vec![contents]), share))
}

/// `resources/read` of a run's whole captured stdout or stderr (kept, for the run's owner, as
/// long as the run is: its record holds the capture).
pub async fn read_output(
    app: &App,
    budget: &ReadBudget,
    caller: &Caller,
    uri: &str,
    run_id: &str,
    which: Stream,
) -> Result<(ReadResourceResult, ReadShare), ErrorData> {
    let record = app
        .engine
        .runs()
        .get(&caller.key(), run_id)
        .ok_or_else(|| {
            ErrorData::resource_not_found(
                "no run output at this URI for this caller (a run's output is kept for a while \
             after it ends, and is gone after a server restart)",
                Some(json!({ "uri": uri })),
            )
        })?;
    let share = budget.take(&caller.key(), record.live.len(which)).await?;
    let mut text = record.live.read(which, 0, usize::MAX).text;
    if which == Stream::Stderr {
        text = app.engine.without_host_folder(&text);
    }
    let contents = ResourceContents::text(text, uri).with_mime_type("text/plain");
    Ok((ReadResourceResult::new(vec![contents]), share))
}

/// The client's error for an artifact that cannot be read.
fn refusal(error: ArtifactError, not_found: impl FnOnce() -> ErrorData) -> ErrorData {
    match error {
        ArtifactError::NotFound => not_found(),
        ArtifactError::Io(e) => {
            tracing::warn!(%e, "an artifact could not be read");
            ErrorData::internal_error("the artifact could not be read", None)
        }
    }
}

fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/xml" | "application/yaml" | "image/svg+xml"
        )
}

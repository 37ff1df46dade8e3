//! The artifacts room: `resources/read` of `pyrun://runs/{run_id}/files/{name}`, the files a run
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
use crate::mcp::present::artifact_blocks::{encode, FILES_SEGMENT, RUNS_PREFIX};
use crate::mcp::present::output_cut::parse_output_uri;
use crate::mcp::protocol::resources::read_budget::{ReadBudget, ReadShare};
use pyrun_run::artifacts::{is_run_id, ArtifactError};
use pyrun_run::caller::Caller;
use pyrun_run::live_output::Stream;

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

/// `resources/read` of `pyrun://runs/{run_id}/files/{name}` for `caller`: text for UTF-8 text
/// types, else a base64 blob, with its share of the read budget (keep it until the answer is
/// written). An unknown, expired or foreign run, an unknown name and a URI that is not one all
/// give the same "resource not found".
pub async fn read_resource(
    app: &App,
    budget: &ReadBudget,
    caller: &Caller,
    uri: &str,
) -> Result<(ReadResourceResult, ReadShare), ErrorData> {
    let not_found = || {
        ErrorData::resource_not_found(
            "no artifact at this URI for this caller (a run's artifacts are kept for a while \
             after it ends, and are gone after a server restart)",
            Some(json!({ "uri": uri })),
        )
    };
    if let Some((run_id, which)) = parse_output_uri(uri) {
        return read_output(app, budget, caller, uri, run_id, which).await;
    }
    let (run_id, name) = parse_artifact_uri(uri).ok_or_else(not_found)?;
    let store = Arc::clone(&app.artifacts);
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
async fn read_output(
    app: &App,
    budget: &ReadBudget,
    caller: &Caller,
    uri: &str,
    run_id: &str,
    which: Stream,
) -> Result<(ReadResourceResult, ReadShare), ErrorData> {
    let record = app.runs.get(&caller.key(), run_id).ok_or_else(|| {
        ErrorData::resource_not_found(
            "no run output at this URI for this caller (a run's output is kept for a while \
             after it ends, and is gone after a server restart)",
            Some(json!({ "uri": uri })),
        )
    })?;
    let share = budget.take(&caller.key(), record.live.len(which)).await?;
    let mut text = record.live.read(which, 0, usize::MAX).text;
    if which == Stream::Stderr {
        text = app.without_host_folder(&text);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::present::artifact_blocks::artifact_uri;

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
}

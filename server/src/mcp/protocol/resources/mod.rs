//! The resources room: the projects folder as MCP resources — `resources/list` (paged with an
//! opaque cursor), the template `pyrun://projects/{+path}` and `resources/read`, each file proven
//! by `pyrun_run::paths` ([`ProjectRoot::resolve_file`](pyrun_run::paths::ProjectRoot::resolve_file))
//! exactly as `run_python` proves a script; `watch` tells sessions when files appear or go.
//!
//! A URI names a file by its path relative to the folder, each `/`-separated segment
//! percent-encoded (RFC 3986 unreserved characters kept). Reading decodes it and hands the text to
//! the same proof as a `file_name`, so `..`, absolute paths, links out and sibling prefixes get the
//! same refusals; hidden and protected names get theirs. What a read returns is
//! `project_files`'.

pub(in crate::mcp) mod project_files;
pub(in crate::mcp) mod read_budget;
pub(in crate::mcp) mod run_artifacts;
pub mod watch;

use std::sync::Arc;

use base64::Engine as _;
use percent_encoding::percent_decode_str;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, ReadResourceResult,
    Resource, ResourceTemplate,
};
use rmcp::ErrorData;

use crate::app::App;
use crate::client_message::ClientMessage;
use crate::mcp::protocol::resources::project_files::{
    contents, mime_type, not_found, project_uri, read_served, Refused, PROJECTS_PREFIX,
};
use crate::mcp::protocol::resources::read_budget::{ReadBudget, ReadShare};
use crate::mcp::McpState;
use pyrun_run::caller::Caller;
use pyrun_run::paths::PathError;

/// The template clients may fill in.
pub const PROJECTS_TEMPLATE: &str = "pyrun://projects/{+path}";
/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 100;

/// One page of the served files, after the cursor's file.
pub async fn list(
    state: &Arc<McpState>,
    request: Option<PaginatedRequestParams>,
) -> Result<ListResourcesResult, ErrorData> {
    let after = match request.and_then(|r| r.cursor) {
        Some(cursor) => Some(decode_cursor(&cursor).ok_or_else(|| {
            ErrorData::invalid_params(
                ClientMessage::new("the cursor is not one this server gave")
                    .hint("start again without a cursor")
                    .into_string(),
                None,
            )
        })?),
        None => None,
    };
    let state = state.clone();
    let fresh = after.is_none();
    let files = tokio::task::spawn_blocking(move || state.watch.listing(fresh))
        .await
        .unwrap_or_default();
    let start = match &after {
        Some(after) => files.partition_point(|f| f.relative.as_str() <= after.as_str()),
        None => 0,
    };
    let page = files.get(start..).unwrap_or_default();
    let more = page.len() > PAGE_SIZE;
    let page = &page[..page.len().min(PAGE_SIZE)];
    let resources = page
        .iter()
        .map(|file| {
            Resource::new(project_uri(&file.relative), file.relative.clone())
                .with_mime_type(mime_type(&file.relative))
                .with_size(file.size)
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    if more {
        result.next_cursor = page.last().map(|f| encode_cursor(&f.relative));
    }
    Ok(result)
}

/// The one template: any project file by its path.
pub fn templates() -> ListResourceTemplatesResult {
    let template = ResourceTemplate::new(PROJECTS_TEMPLATE, "project-file")
        .with_title("A file of the projects folder")
        .with_description(
            "Any file of the projects folder by its path relative to the folder (hidden and \
             protected files excepted).",
        );
    ListResourceTemplatesResult::with_all_items(vec![template])
}

/// `resources/read` of a `pyrun://projects/...` URI, with its share of the read budget (keep it
/// until the answer is written).
pub async fn read(
    app: &Arc<App>,
    budget: &ReadBudget,
    caller: &Caller,
    uri: &str,
) -> Result<(ReadResourceResult, ReadShare), ErrorData> {
    let Some(encoded) = uri.strip_prefix(PROJECTS_PREFIX) else {
        return Err(not_found(uri));
    };
    let path = percent_decode_str(encoded)
        .decode_utf8()
        .map_err(|_| {
            ErrorData::invalid_params(
                ClientMessage::quoting(uri)
                    .then(" does not decode to a UTF-8 path")
                    .into_string(),
                None,
            )
        })?
        .into_owned();
    let read = read_served(app, budget, caller, move |root| {
        root.resolve_file(&path).map_err(Refused::Path)
    })
    .await?;
    let (file, bytes, share) = read.map_err(|refused| match refused {
        Refused::Path(e) => Refused::Path(naming(e, uri)).into_error(uri),
        read => read.into_error(uri),
    })?;
    Ok((
        ReadResourceResult::new(vec![contents(uri, &file, bytes)]),
        share,
    ))
}

/// The same refusal, naming the URI the caller sent rather than the path it decodes to.
fn naming(e: PathError, uri: &str) -> PathError {
    let uri = uri.to_owned();
    match e {
        PathError::Outside(_) => PathError::Outside(uri),
        PathError::NotFound(_) => PathError::NotFound(uri),
        PathError::Directory(_) => PathError::Directory(uri),
        PathError::NotRegularFile(_) => PathError::NotRegularFile(uri),
        PathError::NotPython(_) => PathError::NotPython(uri),
        PathError::TooManyLinks(_) => PathError::TooManyLinks(uri),
        PathError::Unreadable(_) => PathError::Unreadable(uri),
        PathError::NotServed(_) => PathError::NotServed(uri),
        other @ (PathError::Empty
        | PathError::NulByte
        | PathError::TooLong
        | PathError::BadRoot(_)) => other,
    }
}

fn encode_cursor(relative: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("after:{relative}"))
}

fn decode_cursor(cursor: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    String::from_utf8(bytes)
        .ok()?
        .strip_prefix("after:")
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_a_forged_one_is_refused() {
        assert_eq!(
            decode_cursor(&encode_cursor("x/y z.py")).as_deref(),
            Some("x/y z.py")
        );
        assert_eq!(decode_cursor("not base64 !"), None);
        assert_eq!(decode_cursor("eHl6"), None); // "xyz": no marker
    }
}

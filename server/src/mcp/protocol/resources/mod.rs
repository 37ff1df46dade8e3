//! The resources room: what `resources/list`, `resources/templates/list` and `resources/read`
//! answer. A list is the projects folder's served files (paged with an opaque cursor; the MCP
//! App first for a client that shows apps), the one template is `pyrun://projects/{+path}`. A
//! read parses its URI once (`uri`) and goes to the module that serves that kind:
//! `project_files` (a file of the projects folder, proven by `pyrun_run::paths` exactly as
//! `run_python` proves a script), `run_artifacts` (a run's files and captured output, for its
//! caller), `apps` (the MCP App's page). `read_budget` bounds the bytes reads hold at once;
//! `watch` tells sessions when files appear or go.

pub(in crate::mcp) mod project_files;
pub(in crate::mcp) mod read_budget;
pub(in crate::mcp) mod run_artifacts;
mod uri;
pub mod watch;

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{
    ClientCapabilities, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceResult, Resource, ResourceTemplate,
};
use rmcp::ErrorData;
use serde_json::json;

use crate::app::App;
use crate::client_message::ClientMessage;
use crate::mcp::protocol::apps;
use crate::mcp::protocol::resources::project_files::{mime_type, project_uri};
use crate::mcp::protocol::resources::read_budget::{ReadBudget, ReadShare};
use crate::mcp::protocol::resources::uri::ResourceUri;
use crate::mcp::McpState;
use pyrun_run::caller::Caller;

/// The template clients may fill in.
pub const PROJECTS_TEMPLATE: &str = "pyrun://projects/{+path}";
/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 100;

/// One page of the served files, after the cursor's file; the first page starts with the MCP
/// App for a client that shows apps.
pub async fn list(
    state: &Arc<McpState>,
    request: Option<PaginatedRequestParams>,
    client: Option<&ClientCapabilities>,
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
    if fresh && apps::shows_apps(client) {
        result.resources.insert(0, apps::listed());
    }
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

/// `resources/read`: the URI's kind read once ([`ResourceUri`]), then the one module that
/// serves it, with the read's share of the budget (keep it until the answer is written; an app's
/// page, built in, takes none).
pub async fn read(
    app: &Arc<App>,
    budget: &ReadBudget,
    caller: &Caller,
    uri: &str,
) -> Result<(ReadResourceResult, Option<ReadShare>), ErrorData> {
    let (result, share) = match ResourceUri::parse(uri) {
        ResourceUri::ProjectFile { encoded } => {
            project_files::read_resource(app, budget, caller, uri, encoded).await?
        }
        ResourceUri::RunArtifact { run_id, name } => {
            run_artifacts::read_artifact(app, budget, caller, uri, run_id, name).await?
        }
        ResourceUri::RunOutput { run_id, stream } => {
            run_artifacts::read_output(app, budget, caller, uri, run_id, stream).await?
        }
        ResourceUri::NoRunResource => return Err(run_artifacts::not_found(uri)),
        ResourceUri::App => {
            let page = apps::read(uri).ok_or_else(|| {
                ErrorData::resource_not_found("no app at this URI", Some(json!({ "uri": uri })))
            })?;
            return Ok((page, None));
        }
        ResourceUri::Unknown => return Err(project_files::not_found(uri)),
    };
    Ok((result, Some(share)))
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

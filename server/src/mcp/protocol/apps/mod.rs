//! The MCP Apps of the server (shared by the run tools and the handler): the MCP App that shows a run (`ui://pyrun/run.html`, SEP-1865), one
//! self-contained HTML file embedded in the binary — the `_meta` the run tools carry to name it,
//! its `resources/list` entry and its `resources/read`.
//!
//! What is app-only: the listing entry, offered only to a client whose capabilities declare the
//! `io.modelcontextprotocol/ui` extension (a plain client has nothing to do with an HTML page).
//! The tools' `_meta` stays on for everyone (clients ignore keys they do not know), and the page
//! is readable by URI for anyone, as a host that renders apps without declaring them reads it.
//! The app itself speaks the host's postMessage JSON-RPC by hand (no SDK bundled, no network: its
//! CSP declares no domains); it reads runs through the host with `get_run`, `cancel_run` and
//! `resources/read`, the same tools and reads a model has.

use rmcp::model::{ClientCapabilities, MetaObject, ReadResourceResult, Resource, ResourceContents};
use serde_json::{json, Value};

/// The run viewer's URI.
pub const RUN_VIEWER_URI: &str = "ui://pyrun/run.html";
/// The mime type hosts render as an MCP App.
pub const APP_MIME: &str = "text/html;profile=mcp-app";
/// The capability key under `extensions` that says a client renders MCP Apps.
const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The scheme of app resources: reads of it are this room's.
pub const UI_SCHEME: &str = "ui://";

/// The page, built into the binary: no npm at build time, no file at run time.
const RUN_VIEWER_HTML: &str = include_str!("run.html");

/// The `_meta` of a tool whose results the run viewer shows: `ui.resourceUri`, and the flat
/// `ui/resourceUri` that hosts written before the extension was final read (the SDK's own
/// `registerAppTool` sets both).
pub fn run_viewer_tool_meta() -> MetaObject {
    let mut meta = MetaObject::new();
    meta.insert("ui".into(), json!({ "resourceUri": RUN_VIEWER_URI }));
    meta.insert("ui/resourceUri".into(), json!(RUN_VIEWER_URI));
    meta
}

/// The resource's `_meta.ui`: a CSP that allows no domain at all (the page needs none: output,
/// pictures and tables arrive through the host), and a border, since the page has no frame of
/// its own.
fn resource_meta() -> MetaObject {
    let mut meta = MetaObject::new();
    meta.insert(
        "ui".into(),
        json!({
            "csp": { "connectDomains": [], "resourceDomains": [], "frameDomains": [] },
            "prefersBorder": true,
        }),
    );
    meta
}

/// Whether the client said it renders MCP Apps (the HTML profile among its mime types, or the
/// extension declared with no settings).
pub fn shows_apps(capabilities: Option<&ClientCapabilities>) -> bool {
    let Some(ui) = capabilities
        .and_then(|caps| caps.extensions.as_ref())
        .and_then(|extensions| extensions.get(UI_EXTENSION))
    else {
        return false;
    };
    match ui.get("mimeTypes") {
        Some(Value::Array(types)) => types.iter().any(|t| t.as_str() == Some(APP_MIME)),
        Some(_) => false,
        None => true,
    }
}

/// The app's entry in `resources/list`.
pub fn listed() -> Resource {
    Resource::new(RUN_VIEWER_URI, "run-viewer")
        .with_title("Run viewer")
        .with_description(
            "An MCP App that shows a run of run_python, run_python_code or start_python: \
             status, output, pictures, tables; follows and cancels background runs.",
        )
        .with_mime_type(APP_MIME)
        .with_size(RUN_VIEWER_HTML.len() as u64)
        .with_meta(resource_meta())
}

/// `resources/read` of a `ui://` URI: the page, or `None` when no app has that URI.
pub fn read(uri: &str) -> Option<ReadResourceResult> {
    (uri == RUN_VIEWER_URI).then(|| {
        let page = ResourceContents::text(RUN_VIEWER_HTML, uri)
            .with_mime_type(APP_MIME)
            .with_meta(resource_meta());
        ReadResourceResult::new(vec![page])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(ui: Value) -> ClientCapabilities {
        serde_json::from_value(json!({ "extensions": { UI_EXTENSION: ui } })).unwrap()
    }

    #[test]
    fn only_a_client_declaring_the_html_profile_shows_apps() {
        assert!(shows_apps(Some(&caps(json!({ "mimeTypes": [APP_MIME] })))));
        assert!(shows_apps(Some(&caps(json!({})))));
        assert!(!shows_apps(Some(&caps(
            json!({ "mimeTypes": ["text/uri-list"] })
        ))));
        assert!(!shows_apps(Some(&ClientCapabilities::default())));
        assert!(!shows_apps(None));
    }

    #[test]
    fn the_page_is_self_contained_and_small() {
        assert!(RUN_VIEWER_HTML.len() <= 1024 * 1024);
        for outside in [
            "<script src",
            "<link ",
            "http://",
            "https://",
            "fetch(",
            "XMLHttpRequest",
        ] {
            assert!(
                !RUN_VIEWER_HTML.contains(outside),
                "the page holds {outside:?}"
            );
        }
    }
}

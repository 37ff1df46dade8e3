//! The run viewer MCP App as the protocol shows it, over stdio with the real binary: which tools
//! name it in their `_meta` (the run tools, in both spellings hosts read; not `get_run`, which the
//! model polls), who sees it in `resources/list` (only a client that declares the
//! `io.modelcontextprotocol/ui` extension), and what `resources/read` gives (one self-contained
//! HTML page with its CSP in `_meta.ui`). What it shows is proven in a real browser
//! (`tests/tests/app_browser.rs`).

use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

const VIEWER: &str = "ui://pyrun/run.html";
const APP_MIME: &str = "text/html;profile=mcp-app";

fn server() -> (TempProjects, StdioServer) {
    let projects = TempProjects::named("projects").file("hello.py", "print('hi')\n");
    let server = StdioServer::start(projects.path(), &["--allow-inline-code"]);
    (projects, server)
}

/// `_meta` for a request from a client that renders MCP Apps (capabilities per request, as the
/// 2026-07-28 protocol sends them; rmcp reads them before the session's).
fn renders_apps() -> Value {
    json!({ "io.modelcontextprotocol/clientCapabilities": {
        "extensions": { "io.modelcontextprotocol/ui": { "mimeTypes": [APP_MIME] } }
    }})
}

#[test]
fn the_run_tools_name_the_run_viewer_in_their_meta_and_get_run_does_not() {
    let (_projects, mut server) = server();
    let reply = server.request("tools/list", json!({}));
    let tools = reply["result"]["tools"].as_array().expect("tools");
    let meta_of = |name: &str| {
        let tool = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name}: {reply}"));
        tool["_meta"].clone()
    };
    for name in ["run_python", "run_python_code", "start_python"] {
        let meta = meta_of(name);
        assert_eq!(meta["ui"]["resourceUri"], VIEWER, "{name}: {meta}");
        assert_eq!(meta["ui/resourceUri"], VIEWER, "{name}: {meta}");
    }
    for name in ["get_run", "cancel_run", "list_runs", "list_python_files"] {
        let meta = meta_of(name);
        assert!(
            meta.get("ui").is_none() && meta.get("ui/resourceUri").is_none(),
            "{name} names an app: {meta}"
        );
    }
    server.close();
}

#[test]
fn the_run_viewer_is_listed_only_for_a_client_that_renders_apps() {
    let (_projects, mut server) = server();
    let plain = server.request("resources/list", json!({}));
    let uris: Vec<&str> = plain["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(uris.contains(&"pyrun://projects/hello.py"), "{plain}");
    assert!(!uris.iter().any(|u| u.starts_with("ui://")), "{plain}");

    let apps = server.request("resources/list", json!({ "_meta": renders_apps() }));
    let resources = apps["result"]["resources"].as_array().expect("resources");
    let viewer = resources
        .iter()
        .find(|r| r["uri"] == VIEWER)
        .unwrap_or_else(|| panic!("not listed for an apps client: {apps}"));
    assert_eq!(viewer["mimeType"], APP_MIME);
    let csp = &viewer["_meta"]["ui"]["csp"];
    assert_eq!(csp["connectDomains"], json!([]), "{viewer}");
    assert_eq!(csp["resourceDomains"], json!([]), "{viewer}");
    // The project files are still there, once.
    let hello = resources
        .iter()
        .filter(|r| r["uri"] == "pyrun://projects/hello.py");
    assert_eq!(hello.count(), 1, "{apps}");
    server.close();
}

#[test]
fn the_run_viewer_reads_as_one_self_contained_page_and_an_unknown_app_is_not_found() {
    let (_projects, mut server) = server();
    // Readable by URI for any client: hosts read it from the tool's `_meta`.
    let read = server.request("resources/read", json!({ "uri": VIEWER }));
    let page = &read["result"]["contents"][0];
    assert_eq!(page["uri"], VIEWER, "{read}");
    assert_eq!(page["mimeType"], APP_MIME);
    assert!(page["_meta"]["ui"]["csp"].is_object(), "{page}");
    let html = page["text"].as_str().expect("the page as text");
    assert!(html.starts_with("<!doctype html>"), "{}", &html[..80]);
    assert!(html.len() <= 1024 * 1024, "{} bytes", html.len());
    assert!(html.contains("ui/initialize") && html.contains("get_run"));
    for outside in ["<script src", "<link ", "https://", "fetch("] {
        assert!(!html.contains(outside), "the page loads {outside:?}");
    }

    let missing = server.request("resources/read", json!({ "uri": "ui://pyrun/other.html" }));
    assert!(missing["error"].is_object(), "{missing}");
    assert_eq!(missing["error"]["data"]["uri"], "ui://pyrun/other.html");
    server.close();
}

//! Resources over both HTTP transports against the real binary: `resources/list` and `read` work in
//! a session, and `notifications/resources/list_changed` reaches every open session (the `/mcp`
//! session's GET stream, the `/sse` stream) after a file appears.

use std::time::Duration;

use crate::util::http::*;
use reqwest::header::HeaderValue;
use reqwest::StatusCode;
use serde_json::{json, Value};

const CHANGED: &str = "notifications/resources/list_changed";

/// Reads messages until `list_changed`; false when the stream ends or its deadline passes first.
async fn saw_list_changed(events: &mut SseReader) -> bool {
    while let Some(message) = events.next_message().await {
        if message["method"] == CHANGED {
            return true;
        }
    }
    false
}

fn names(list: &Value) -> Vec<&str> {
    list["result"]["resources"]
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["name"].as_str()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_mcp_session_reads_resources_and_hears_list_changed_on_its_get_stream() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let session = McpSession::open(&server, Some(TOKEN)).await;
    let listed = session.call(&request(1, "resources/list", json!({}))).await;
    assert!(names(&listed).contains(&"hello_world.py"), "{listed}");
    let read = session
        .call(&request(
            2,
            "resources/read",
            json!({"uri": "pyrun://projects/../outside.py"}),
        ))
        .await;
    assert_eq!(read["error"]["code"], -32602, "{read}");
    assert!(!read.to_string().contains("ESCAPED"), "{read}");

    let mut headers = bearer(TOKEN);
    let id = session.session_id().expect("a session id");
    headers.insert("mcp-session-id", HeaderValue::from_str(id).unwrap());
    headers.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2025-06-18"),
    );
    let stream = http()
        .get(server.url("/mcp"))
        .headers(headers)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /mcp");
    assert_eq!(stream.status(), StatusCode::OK);
    let mut events = SseReader::with_deadline(stream, Duration::from_secs(15));
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::write(projects.path().join("new_script.py"), "print(1)\n").unwrap();
    assert!(
        saw_list_changed(&mut events).await,
        "no list_changed on /mcp"
    );
    let listed = session.call(&request(3, "resources/list", json!({}))).await;
    assert!(names(&listed).contains(&"new_script.py"), "{listed}");
}

#[tokio::test]
async fn every_open_sse_session_hears_list_changed() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let mut first = SseSession::open(&server, Some(TOKEN)).await;
    let mut second = SseSession::open(&server, Some(TOKEN)).await;
    let (listed, _) = first.call(&request(1, "resources/list", json!({}))).await;
    assert!(names(&listed).contains(&"hello_world.py"), "{listed}");
    // A third session that leaves: the others still hear, the server serves on.
    drop(SseSession::open(&server, Some(TOKEN)).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::create_dir(projects.path().join("fresh")).unwrap();
    std::fs::write(projects.path().join("fresh/data.csv"), "a\n").unwrap();
    assert!(saw_list_changed(&mut first.events).await, "first session");
    assert!(saw_list_changed(&mut second.events).await, "second session");
}

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

/// Just under the 8 MiB a resource may have, of bytes that do not compress (a blob).
fn noise() -> Vec<u8> {
    let mut noise = vec![0u8; 8 * 1024 * 1024 - 4096];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for byte in &mut noise {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = state as u8;
    }
    noise
}

/// One answer to a read of `big.bin`: served (its blob has the file's length) or refused as
/// busy; true when served.
fn served(answer: &Value, size: usize) -> bool {
    match answer["result"]["contents"][0]["blob"].as_str() {
        Some(blob) => {
            assert_eq!(blob.len(), size.div_ceil(3) * 4);
            true
        }
        None => {
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("busy"), "{answer}");
            false
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_reads_of_an_eight_mib_file_at_once_over_sse_keep_the_server_under_400_mib() {
    let noise = noise();
    let projects = projects().file("big.bin", &noise);
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let mut session = SseSession::open(&server, Some(TOKEN)).await;
    let before = crate::util::peak_rss_mib(server.pid());
    let read = json!({"uri": "pyrun://projects/big.bin"});
    for id in 100..140 {
        let status = session
            .post(&request(id, "resources/read", read.clone()))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    let mut answers = 0;
    let mut count = 0;
    while answers < 40 {
        let message = session
            .events
            .next_message()
            .await
            .expect("the stream ended");
        if message.get("id").is_some() {
            answers += 1;
            count += usize::from(served(&message, noise.len()));
        }
    }
    let peak = crate::util::peak_rss_mib(server.pid());
    eprintln!("40 reads over sse: {count} served, peak RSS {before} -> {peak} MiB");
    assert!(count > 0, "no read was served");
    assert!(
        peak < 400,
        "the server's peak RSS went {before} -> {peak} MiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_concurrent_reads_of_an_eight_mib_file_keep_the_server_under_400_mib() {
    let noise = noise();
    let projects = projects().file("big.bin", &noise);
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let session = std::sync::Arc::new(McpSession::open(&server, Some(TOKEN)).await);
    let before = crate::util::peak_rss_mib(server.pid());
    let reads: Vec<_> = (0..40)
        .map(|i| {
            let session = session.clone();
            tokio::spawn(async move {
                let read = json!({"uri": "pyrun://projects/big.bin"});
                let response = session
                    .send(&request(100 + i, "resources/read", read))
                    .await;
                // A debug build encodes 8 MiB slowly: allow for forty in a row.
                let mut events = SseReader::with_deadline(response, Duration::from_secs(180));
                events.response_to(100 + i).await.0
            })
        })
        .collect();
    let mut count = 0;
    for read in reads {
        count += usize::from(served(&read.await.unwrap(), noise.len()));
    }
    let peak = crate::util::peak_rss_mib(server.pid());
    eprintln!("40 reads: {count} served, peak RSS {before} -> {peak} MiB");
    assert!(count > 0, "no read was served");
    assert!(
        peak < 400,
        "the server's peak RSS went {before} -> {peak} MiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_sse_client_that_does_not_read_its_stream_cannot_queue_eighty_large_reads_in_the_server()
{
    let projects = projects().file("big.txt", vec![b'x'; 8 * 1024 * 1024 - 4096]);
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let session = SseSession::open(&server, Some(TOKEN)).await;
    let before = crate::util::peak_rss_mib(server.pid());
    // Each answer waits for the stream nobody reads: without a hold per read, every one was
    // built and queued (120 of them: 1 GiB, for as long as the client stalled).
    for i in 0..80 {
        let read = json!({"uri": "pyrun://projects/big.txt"});
        let posted = session
            .post(&request(100 + i, "resources/read", read))
            .await;
        assert_eq!(posted, StatusCode::ACCEPTED);
    }
    // A debug build encodes 8 MiB slowly: time enough for the old code to build most of them.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let peak = crate::util::peak_rss_mib(server.pid());
    eprintln!("80 unread SSE reads: peak RSS {before} -> {peak} MiB");
    assert!(
        peak < 400,
        "the server's peak RSS went {before} -> {peak} MiB"
    );
    // Read at last, the stream gives the answers.
    let mut session = session;
    let (answer, _) = session.events.response_to(100).await;
    assert!(
        answer["result"]["contents"][0]["text"].is_string(),
        "{answer}"
    );
}

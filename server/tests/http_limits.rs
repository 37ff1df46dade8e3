//! The HTTP transport's bounds, tried for real against the binary: a body that never finishes, a
//! flood of idle connections, and a stateless (2026-07-28) request whose client goes away.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::util::http::*;
use futures::StreamExt as _;
use reqwest::StatusCode;
use serde_json::json;

/// `127.0.0.1:PORT` of a server's base URL.
fn addr(server: &HttpServer) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

/// Reads until the server closes the connection (or `limit` passes); the bytes, and whether it
/// closed. A reset counts as closed.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, bool) {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0; 4096];
    let started = Instant::now();
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&seen).into_owned(), true),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&seen).into_owned(), true)
            }
            Err(_) => return (String::from_utf8_lossy(&seen).into_owned(), false),
        }
        if started.elapsed() > limit {
            return (String::from_utf8_lossy(&seen).into_owned(), false);
        }
    }
}

#[test]
fn a_body_that_stalls_gets_408_within_the_body_timeout_even_with_the_token() {
    let projects = projects();
    let server = HttpServer::start(
        projects.path(),
        &["--auth-token", TOKEN, "--body-timeout", "1"],
    );
    let mut client = TcpStream::connect(addr(&server)).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 200\r\n\r\n",
        addr(&server)
    );
    client.write_all(head.as_bytes()).unwrap();
    client
        .write_all(br#"{"jsonrpc":"2.0","id":1,"method":"initia"#)
        .unwrap();
    let started = Instant::now();
    let (seen, closed) = read_until_closed(&mut client, Duration::from_secs(10));
    assert!(closed, "the connection was still open after 10 s: {seen:?}");
    assert!(seen.starts_with("HTTP/1.1 408"), "{seen:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn connections_past_the_cap_are_refused_at_once_and_health_answers_below_it() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--max-connections", "4"]);
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(addr(&server)).unwrap())
        .collect();
    for _ in 0..3 {
        let started = Instant::now();
        let mut extra = TcpStream::connect(addr(&server)).unwrap();
        // The request may or may not be written before the server closes: both are fine.
        let _ = extra.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let (seen, closed) = read_until_closed(&mut extra, Duration::from_secs(5));
        assert!(closed && seen.is_empty(), "served past the cap: {seen:?}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "refused slowly: {:?}",
            started.elapsed()
        );
    }
    idle.truncate(2);
    let started = Instant::now();
    loop {
        let mut client = TcpStream::connect(addr(&server)).unwrap();
        let _ = client
            .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        let (seen, _) = read_until_closed(&mut client, Duration::from_secs(5));
        if seen.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "/health never answered again below the cap: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(idle);
}

/// A blocking connection to `server` from `source` (any address of 127/8 is this machine's
/// loopback).
async fn connect_from(source: [u8; 4], server: &HttpServer) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from((source, 0)))
        .unwrap();
    let stream = socket.connect(addr(server).parse().unwrap()).await.unwrap();
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// `GET /health` on a fresh connection from `source`: the status line.
async fn health_from(source: [u8; 4], server: &HttpServer) -> String {
    let mut client = connect_from(source, server).await;
    let _ =
        client.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let (seen, _) = read_until_closed(&mut client, Duration::from_secs(5));
    seen.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn half_sent_requests_are_closed_within_ten_seconds_by_default() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let started = Instant::now();
    let mut head = TcpStream::connect(addr(&server)).unwrap();
    head.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/ev")
        .unwrap();
    let mut body = TcpStream::connect(addr(&server)).unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 200\r\n\r\n{{\"jsonrpc\":\"2.0\""
    );
    body.write_all(request.as_bytes()).unwrap();
    for (what, stream) in [
        ("a half-sent head", &mut head),
        ("a half-sent body", &mut body),
    ] {
        let (seen, closed) = read_until_closed(stream, Duration::from_secs(15));
        let took = started.elapsed();
        assert!(closed, "{what} was still open after {took:?}: {seen:?}");
        assert!(
            took < Duration::from_millis(10_500),
            "{what} was closed after {took:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holding_520_half_sent_requests_leaves_health_and_mcp_to_the_others() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let flood: Vec<TcpStream> = (0..520)
        .map(|_| {
            let server = &server;
            async move {
                let mut stream = connect_from([127, 0, 0, 1], server).await;
                let _ = stream.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n");
                stream
            }
        })
        .collect::<futures::stream::FuturesOrdered<_>>()
        .collect()
        .await;
    // Every socket of the flood is connected (the kernel accepts for the server); give the
    // server a moment to take them all from its backlog.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        health_from([127, 0, 0, 2], &server).await,
        "HTTP/1.1 200 OK"
    );
    let client = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let initialize = mcp_post(
        &client,
        &server.mcp_url(),
        &bearer(TOKEN),
        &initialize_request(0),
    )
    .await;
    assert_eq!(
        initialize.status(),
        StatusCode::OK,
        "MCP from another address"
    );
    // The flooding address's own new connections are refused at once, not left waiting.
    let mut more = connect_from([127, 0, 0, 1], &server).await;
    let _ = more.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let (seen, closed) = read_until_closed(&mut more, Duration::from_secs(5));
    assert!(
        closed && seen.is_empty(),
        "the flooding address was served more: {seen:?}"
    );
    drop(flood);
}

/// Appends a byte to `marker.txt` beside itself every 100 ms, for at most a minute.
const MARKER: &str = r#"import os, time
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "marker.txt")
for _ in range(600):
    with open(path, "a") as f:
        f.write("x")
    time.sleep(0.1)
"#;

fn marker_len(projects: &Path) -> u64 {
    std::fs::metadata(projects.join("marker.txt")).map_or(0, |m| m.len())
}

/// Waits until the marker grows (the run is going), or fails.
fn wait_for_growth(projects: &Path) {
    let started = Instant::now();
    while marker_len(projects) < 3 {
        assert!(started.elapsed() < DEADLINE, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the marker stops growing within `limit` (two samples 500 ms apart agree).
fn stops_growing_within(projects: &Path, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        let before = marker_len(projects);
        std::thread::sleep(Duration::from_millis(500));
        if marker_len(projects) == before {
            return true;
        }
    }
    false
}

/// A `tools/call` of `marker.py` as a 2026-07-28 client sends it: no session, the protocol in
/// `_meta` and in the headers. With a progress token the response stream starts at the first
/// progress notification (after a second); without, nothing is sent until the run ends.
fn stateless_call(host: &str, progress: bool) -> Vec<u8> {
    let mut body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "run_python",
            "arguments": {"file_name": "marker.py"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "http-limits", "version": "0"}
            }
        }
    });
    if progress {
        body["params"]["_meta"]["progressToken"] = json!("p1");
    }
    let body = body.to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: run_python\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends the stateless call, waits until the run is going (and, with progress, until the
/// response stream has begun), then closes the connection.
fn call_then_hang_up(progress: bool) {
    let projects = projects();
    std::fs::write(projects.path().join("marker.py"), MARKER).unwrap();
    // Runs may last longer than any wait here: only the hang-up can end this one early.
    let server = HttpServer::start(projects.path(), &["--timeout", "600"]);
    let mut client = TcpStream::connect(addr(&server)).unwrap();
    client
        .write_all(&stateless_call(&addr(&server), progress))
        .unwrap();
    wait_for_growth(projects.path());
    if progress {
        client.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0; 4096];
        while !String::from_utf8_lossy(&seen).contains("notifications/progress") {
            let n = client.read(&mut buf).expect("a progress notification");
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
    }
    client.shutdown(std::net::Shutdown::Both).unwrap();
    drop(client);
    assert!(
        stops_growing_within(projects.path(), Duration::from_secs(5)),
        "the run kept going after its stateless request's connection closed; server log:\n{}",
        server.logs()
    );
}

#[test]
fn a_stateless_request_whose_connection_drops_before_any_answer_has_its_run_killed() {
    call_then_hang_up(false);
}

#[test]
fn a_stateless_request_whose_connection_drops_mid_stream_has_its_run_killed() {
    call_then_hang_up(true);
}

#[tokio::test]
async fn a_session_request_whose_stream_drops_keeps_running() {
    let projects = projects();
    std::fs::write(projects.path().join("marker.py"), MARKER).unwrap();
    let server = HttpServer::start(projects.path(), &[]);
    let session = McpSession::open(&server, None).await;
    let response = session.send(&run_python(7, "marker.py", None)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let projects_dir = projects.path().to_path_buf();
    tokio::task::spawn_blocking(move || wait_for_growth(&projects_dir))
        .await
        .unwrap();
    drop(response);
    drop(session);
    // In session mode a dropped stream is not a cancellation: the client may come back for it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = marker_len(projects.path());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        marker_len(projects.path()) > before,
        "the run stopped when its session stream dropped"
    );
}

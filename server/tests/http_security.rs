//! The HTTP transport's guards, tried for real against the binary: bearer auth on every route but
//! /health, Host/Origin checks (DNS rebinding), the message endpoint's answers, the session limit,
//! and the refusal to serve a public address without a token.

use crate::util::http::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

const EVIL: &str = "evil.example";

#[tokio::test]
async fn health_answers_without_a_token_and_tells_no_secrets() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let response = http().get(server.url("/health")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.text().await.unwrap();
    assert!(!body.contains(TOKEN));
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["transports"], json!(["streamable-http", "sse"]));
    assert_eq!(health["running"], 0);
    assert!(health["version"].is_string());
    assert!(health["sandbox"].is_array());
}

/// The three authenticated doors: open a Streamable HTTP session, open an SSE stream, post a message.
async fn knock(
    server: &HttpServer,
    session_url: &str,
    token: Option<&str>,
) -> [reqwest::Response; 3] {
    let client = http();
    let headers = token.map(bearer).unwrap_or_default();
    let mcp = mcp_post(
        &client,
        &server.url("/mcp"),
        &headers,
        &initialize_request(0),
    )
    .await;
    let sse = client
        .get(server.url("/sse"))
        .headers(headers.clone())
        .send()
        .await
        .unwrap();
    let messages = client
        .post(session_url)
        .headers(headers)
        .header("content-type", "application/json")
        .body(initialize_request(0).to_string())
        .send()
        .await
        .unwrap();
    [mcp, sse, messages]
}

#[tokio::test]
async fn every_mcp_route_demands_the_bearer_token() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    // A real session id, so only the token decides the message endpoint's answer.
    let session = SseSession::connect(&server, Some(TOKEN)).await;

    for token in [None, Some("wrong-token"), Some("test-token-012345678")] {
        for (route, response) in ["/mcp", "/sse", "/messages"]
            .iter()
            .zip(knock(&server, &session.message_url, token).await)
        {
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{route} with {token:?}"
            );
            let challenge = response.headers().get("www-authenticate").unwrap();
            assert!(challenge.to_str().unwrap().starts_with("Bearer"), "{route}");
        }
    }

    let [mcp, sse, messages] = knock(&server, &session.message_url, Some(TOKEN)).await;
    assert_eq!(mcp.status(), StatusCode::OK);
    assert!(mcp.headers().contains_key("mcp-session-id"));
    assert_eq!(sse.status(), StatusCode::OK);
    assert_eq!(messages.status(), StatusCode::ACCEPTED);
}

#[tokio::test]
async fn wrong_token_never_reaches_the_session() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let mut session = SseSession::connect(&server, Some(TOKEN)).await;
    // An attacker who learned the session id but not the token cannot drive the session.
    let status = http()
        .post(&session.message_url)
        .headers(bearer("guess"))
        .body(initialize_request(7).to_string())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The rightful client's own initialize gets the first (and only) answer.
    assert_eq!(
        session.post(&initialize_request(8)).await,
        StatusCode::ACCEPTED
    );
    let first = session.events.next_message().await.unwrap();
    assert_eq!(first["id"], 8);
}

#[tokio::test]
async fn the_token_never_reaches_the_logs() {
    let projects = projects();
    let server = HttpServer::start_logging(projects.path(), &["--auth-token", TOKEN], "trace");
    let mcp = McpSession::open(&server, Some(TOKEN)).await;
    mcp.call(&request(1, "tools/list", json!({}))).await;
    let mut sse = SseSession::open(&server, Some(TOKEN)).await;
    sse.call(&request(1, "tools/list", json!({}))).await;
    let _ = knock(&server, &sse.message_url, Some("wrong-token")).await;
    // Let the log lines of the last requests arrive.
    let mut log = String::new();
    for _ in 0..20 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        log.push_str(&server.logs());
    }
    assert!(
        log.contains("path=/messages"),
        "no access log lines:\n{log}"
    );
    assert!(!log.contains(TOKEN), "the token leaked into the log");
    assert!(
        !log.contains("wrong-token"),
        "a presented token leaked into the log"
    );
}

async fn with_header(server: &HttpServer, path: &str, name: &str, value: &str) -> StatusCode {
    let client = http();
    let url = server.url(path);
    let request = match path {
        "/mcp" => client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(initialize_request(0).to_string()),
        "/messages?sessionId=0" => client.post(url).body("{}"),
        _ => client.get(url),
    };
    request
        .headers(bearer(TOKEN))
        .header(name, value)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn foreign_host_or_origin_is_forbidden_on_every_route() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    for path in ["/mcp", "/sse", "/messages?sessionId=0", "/health"] {
        let host = with_header(&server, path, "host", EVIL).await;
        assert_eq!(host, StatusCode::FORBIDDEN, "Host on {path}");
        let host_port = with_header(&server, path, "host", "evil.example:8000").await;
        assert_eq!(host_port, StatusCode::FORBIDDEN, "Host:port on {path}");
        let origin = with_header(&server, path, "origin", "http://evil.example").await;
        assert_eq!(origin, StatusCode::FORBIDDEN, "Origin on {path}");
        let null = with_header(&server, path, "origin", "null").await;
        assert_eq!(null, StatusCode::FORBIDDEN, "Origin null on {path}");
    }
    // A local browser tool (e.g. the Inspector on localhost:6274) is a loopback origin.
    let local = with_header(&server, "/health", "origin", "http://localhost:6274").await;
    assert_eq!(local, StatusCode::OK);
}

#[tokio::test]
async fn allowed_tunnel_host_is_accepted() {
    let projects = projects();
    let server = HttpServer::start(
        projects.path(),
        &[
            "--auth-token",
            TOKEN,
            "--allowed-host",
            "abc.tunnel.example",
        ],
    );
    for path in ["/mcp", "/sse", "/health"] {
        let host = with_header(&server, path, "host", "abc.tunnel.example").await;
        assert_eq!(host, StatusCode::OK, "Host on {path}");
        let origin = with_header(&server, path, "origin", "https://abc.tunnel.example").await;
        assert_eq!(origin, StatusCode::OK, "Origin on {path}");
    }
    // Allowing the tunnel does not allow everyone.
    assert_eq!(
        with_header(&server, "/mcp", "host", EVIL).await,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn message_endpoint_answers_404_400_202() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &[]);
    let session = SseSession::connect(&server, None).await;
    let message = initialize_request(0).to_string();
    let unknown = server.url("/messages?sessionId=00000000000000000000000000000000");
    assert_eq!(
        session.post_raw(&unknown, message.clone()).await,
        StatusCode::NOT_FOUND
    );
    let missing = server.url("/messages");
    assert_eq!(
        session.post_raw(&missing, message.clone()).await,
        StatusCode::BAD_REQUEST
    );
    let url = session.message_url.clone();
    assert_eq!(
        session.post_raw(&url, "{not json".into()).await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        session.post_raw(&url, r#"{"hello":"world"}"#.into()).await,
        StatusCode::BAD_REQUEST
    );
    // Both spellings of the query parameter reach the session.
    let snake = url.replace("sessionId=", "session_id=");
    assert_eq!(
        session.post_raw(&snake, message).await,
        StatusCode::ACCEPTED
    );
}

/// `DELETE /mcp` with a token and a session id (and the protocol version the session speaks).
async fn delete_mcp_session(server: &HttpServer, session_id: &str) -> reqwest::Response {
    http()
        .delete(server.url("/mcp"))
        .headers(bearer(TOKEN))
        .header("mcp-session-id", session_id)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .expect("DELETE /mcp")
}

/// The Python SDK takes anything but 200 or 204 for a failed close and warns on every one.
#[tokio::test]
async fn deleting_a_session_answers_204_and_the_session_is_gone() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let session = McpSession::open(&server, Some(TOKEN)).await;
    let id = session.session_id().expect("session id").to_owned();

    let closed = delete_mcp_session(&server, &id).await;
    assert_eq!(closed.status(), StatusCode::NO_CONTENT);
    assert_eq!(closed.bytes().await.unwrap().len(), 0, "a 204 has no body");

    let after = session.send(&request(1, "tools/list", json!({}))).await;
    assert_eq!(
        after.status(),
        StatusCode::NOT_FOUND,
        "the session lives on"
    );
    assert_eq!(
        delete_mcp_session(&server, &id).await.status(),
        StatusCode::NOT_FOUND,
        "a second close"
    );
    assert_eq!(
        delete_mcp_session(&server, "no-such-session")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    // Without a session id, rmcp's own answer; without the token, no hint whether it exists.
    let anonymous = http()
        .delete(server.url("/mcp"))
        .headers(bearer(TOKEN))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::BAD_REQUEST);
    let other = McpSession::open(&server, Some(TOKEN)).await;
    let unauthenticated = http()
        .delete(server.url("/mcp"))
        .header("mcp-session-id", other.session_id().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn sse_stream_is_unbuffered_and_uncached() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &[]);
    let response = http().get(server.url("/sse")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    assert!(header("content-type").starts_with("text/event-stream"));
    assert_eq!(header("cache-control"), "no-cache");
    assert_eq!(header("x-accel-buffering"), "no");
    let mut events = SseReader::new(response);
    let endpoint = events.next_event().await.unwrap();
    assert_eq!(endpoint.event, "endpoint");
    assert!(endpoint.data.starts_with("/messages?sessionId="));
}

#[tokio::test]
async fn sessions_past_the_limit_get_503() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--max-sessions", "1"]);
    let held = SseSession::connect(&server, None).await;

    let sse = http().get(server.url("/sse")).send().await.unwrap();
    assert_eq!(sse.status(), StatusCode::SERVICE_UNAVAILABLE);
    let client = http();
    let mcp = mcp_post(
        &client,
        &server.url("/mcp"),
        &Default::default(),
        &initialize_request(0),
    )
    .await;
    assert_eq!(mcp.status(), StatusCode::SERVICE_UNAVAILABLE);

    // Closing the held session frees its place.
    drop(held);
    let freed = eventually_async(|| async {
        let client = http();
        mcp_post(
            &client,
            &server.url("/mcp"),
            &Default::default(),
            &initialize_request(0),
        )
        .await
        .status()
            == StatusCode::OK
    })
    .await;
    assert!(
        freed,
        "the session slot was not freed after the SSE client left"
    );
}

async fn eventually_async<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < DEADLINE {
        if check().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

#[test]
fn public_bind_without_token_refuses_to_start_and_says_how_to_fix_it() {
    let projects = projects();
    let output = spawn(projects.path(), "0.0.0.0:0", &[])
        .wait_with_output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--auth-token"), "{stderr}");
    assert!(stderr.contains("MCP_AUTH_TOKEN"), "{stderr}");
    assert!(!stderr.contains("listening on"), "{stderr}");
}

#[test]
fn public_bind_starts_with_a_token_or_explicit_opt_out() {
    let projects = projects();
    for extra in [
        &["--auth-token", TOKEN][..],
        &["--allow-unauthenticated"][..],
    ] {
        let mut child = spawn(projects.path(), "0.0.0.0:0", extra);
        let stderr = child.stderr.take().unwrap();
        let started = std::io::BufRead::lines(std::io::BufReader::new(stderr))
            .map_while(Result::ok)
            .any(|line| line.starts_with("pyrun-mcp listening on "));
        let _ = child.kill();
        let _ = child.wait();
        assert!(started, "did not start with {extra:?}");
    }
}

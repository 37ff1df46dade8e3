//! Tool calls end to end over both HTTP transports against the real binary: list, run, a path
//! escape refused, progress that arrives while the run is still going, and runs that die when the
//! client cancels, disconnects, or the server shuts down.

use crate::util::http::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

fn tool_names(response: &Value) -> Vec<String> {
    response["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn assert_hello(response: &Value) {
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    assert!(
        result_text(response).contains("Hello, World!"),
        "{response}"
    );
}

fn assert_escape_refused(response: &Value) {
    assert_eq!(response["result"]["isError"], json!(true), "{response}");
    assert!(!result_text(response).contains("ESCAPED"), "{response}");
}

#[tokio::test]
async fn streamable_http_lists_runs_and_refuses_escapes() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let session = McpSession::open(&server, Some(TOKEN)).await;

    let tools = session.call(&request(1, "tools/list", json!({}))).await;
    assert!(
        tool_names(&tools).contains(&"run_python".to_owned()),
        "{tools}"
    );

    assert_hello(&session.call(&run_python(2, "hello_world.py", None)).await);
    assert_escape_refused(&session.call(&run_python(3, "../outside.py", None)).await);
}

#[tokio::test]
async fn legacy_sse_lists_runs_and_refuses_escapes() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let mut session = SseSession::open(&server, Some(TOKEN)).await;

    let (tools, _) = session.call(&request(1, "tools/list", json!({}))).await;
    assert!(
        tool_names(&tools).contains(&"run_python".to_owned()),
        "{tools}"
    );

    assert_hello(&session.call(&run_python(2, "hello_world.py", None)).await.0);
    assert_escape_refused(&session.call(&run_python(3, "../outside.py", None)).await.0);
}

fn is_progress(message: &Value) -> bool {
    message["method"] == "notifications/progress" && message["params"]["progressToken"] == "p1"
}

/// The script waits for a `go` file that the test writes only after it has seen a progress
/// notification: if progress were held back until the run ends, this would never finish.
#[tokio::test]
async fn progress_arrives_while_the_run_is_going_over_mcp() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &[]);
    let session = McpSession::open(&server, None).await;
    let mut stream = session
        .stream(&run_python(1, "wait_for_go.py", Some("p1")))
        .await;
    let first = stream.next_message().await.expect("a message");
    assert!(is_progress(&first), "expected progress first, got {first}");
    std::fs::write(projects.path().join("go"), "").unwrap();
    let (done, _) = stream.response_to(1).await;
    assert!(result_text(&done).contains("went"), "{done}");
}

#[tokio::test]
async fn progress_arrives_while_the_run_is_going_over_sse() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &[]);
    let mut session = SseSession::open(&server, None).await;
    assert_eq!(
        session
            .post(&run_python(1, "wait_for_go.py", Some("p1")))
            .await,
        StatusCode::ACCEPTED
    );
    let first = session.events.next_message().await.expect("a message");
    assert!(is_progress(&first), "expected progress first, got {first}");
    std::fs::write(projects.path().join("go"), "").unwrap();
    let (done, _) = session.events.response_to(1).await;
    assert!(result_text(&done).contains("went"), "{done}");
}

#[cfg(target_os = "linux")]
mod kills {
    use super::*;

    use pyrun_mcp_tests::procs::{processes_carrying, unique_token};

    /// Server flags: runs may last far longer than any wait here, so that only what a test
    /// does (not the default 30 s limit) can end the sleeper.
    const LONG_RUNS: &[&str] = &["--timeout", "600"];

    /// A run of sleeper.py that only this test can find on the host. Every run's command line
    /// reads `python /projects/sleeper.py` and its pids are its own namespace's, so the run gets
    /// a fresh token as its argument and is found by that.
    struct Sleeper {
        token: String,
    }

    impl Sleeper {
        fn new() -> Self {
            Self {
                token: unique_token("sleeper"),
            }
        }

        fn call(&self, id: u64) -> Value {
            let mut call = run_python(id, "sleeper.py", None);
            call["params"]["arguments"]["args"] = json!([self.token]);
            call
        }

        /// Waits until the run's process is visible, or fails the test.
        async fn is_running(&self) {
            assert!(
                eventually(|| !processes_carrying(&self.token).is_empty()).await,
                "sleeper.py never started"
            );
        }

        async fn is_gone(&self) -> bool {
            eventually(|| processes_carrying(&self.token).is_empty()).await
        }
    }

    fn cancel(id: u64) -> Value {
        notification(
            "notifications/cancelled",
            json!({"requestId": id, "reason": "test"}),
        )
    }

    #[tokio::test]
    async fn cancelling_over_mcp_kills_the_run() {
        let projects = projects();
        let server = HttpServer::start(projects.path(), LONG_RUNS);
        let session = McpSession::open(&server, None).await;
        let sleeper = Sleeper::new();
        let _stream = session.stream(&sleeper.call(1)).await;
        sleeper.is_running().await;
        assert_eq!(
            session.send(&cancel(1)).await.status(),
            StatusCode::ACCEPTED
        );
        assert!(
            sleeper.is_gone().await,
            "run survived cancellation; server log:\n{}",
            server.logs()
        );
    }

    #[tokio::test]
    async fn cancelling_over_sse_kills_the_run() {
        let projects = projects();
        let server = HttpServer::start(projects.path(), LONG_RUNS);
        let session = SseSession::open(&server, None).await;
        let sleeper = Sleeper::new();
        assert_eq!(session.post(&sleeper.call(1)).await, StatusCode::ACCEPTED);
        sleeper.is_running().await;
        assert_eq!(session.post(&cancel(1)).await, StatusCode::ACCEPTED);
        assert!(
            sleeper.is_gone().await,
            "run survived cancellation; server log:\n{}",
            server.logs()
        );
    }

    #[tokio::test]
    async fn sse_client_that_disconnects_loses_its_session_and_runs() {
        let projects = projects();
        let server = HttpServer::start(projects.path(), LONG_RUNS);
        let session = SseSession::open(&server, None).await;
        let message_url = session.message_url.clone();
        let sleeper = Sleeper::new();
        assert_eq!(session.post(&sleeper.call(1)).await, StatusCode::ACCEPTED);
        sleeper.is_running().await;
        drop(session);
        assert!(
            sleeper.is_gone().await,
            "run survived the disconnect; server log:\n{}",
            server.logs()
        );
        let status = http()
            .post(&message_url)
            .body(request(2, "tools/list", json!({})).to_string())
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, StatusCode::NOT_FOUND, "session outlived its stream");
    }

    #[tokio::test]
    async fn sigterm_kills_runs_closes_streams_and_exits() {
        let projects = projects();
        let mut server = HttpServer::start(projects.path(), LONG_RUNS);
        let mut sse = SseSession::open(&server, None).await;
        let sleeper = Sleeper::new();
        assert_eq!(sse.post(&sleeper.call(1)).await, StatusCode::ACCEPTED);
        sleeper.is_running().await;
        let status = std::process::Command::new("kill")
            .args(["-TERM", &server.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        assert!(sleeper.is_gone().await, "run survived shutdown");
        // The stream ends (perhaps after the cancelled call's answer) instead of hanging.
        while sse.events.next_message().await.is_some() {}
        assert!(
            server.wait_exit(DEADLINE),
            "server did not exit after SIGTERM"
        );
    }
}

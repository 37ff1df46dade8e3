//! The caller of each request travels from the transport to the tools: each run's log line names
//! it (`caller=token` for a bearer-token holder over `/mcp` and over `/sse` + `/messages`,
//! `caller=anonymous` on a server without a token).

use crate::util::http::*;
use serde_json::json;

/// The `run ended` log lines the server wrote so far.
fn run_lines(server: &HttpServer) -> Vec<String> {
    server
        .logs()
        .lines()
        .filter(|line| line.contains("run ended"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_token_holder_is_the_token_caller_on_both_http_transports() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);

    let mcp = McpSession::open(&server, Some(TOKEN)).await;
    let response = mcp.call(&run_python(1, "hello_world.py", None)).await;
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    let mut sse = SseSession::open(&server, Some(TOKEN)).await;
    let (response, _) = sse.call(&run_python(2, "hello_world.py", None)).await;
    assert_eq!(response["result"]["isError"], json!(false), "{response}");

    assert!(
        eventually(|| run_lines(&server).len() == 2).await,
        "{}",
        server.logs()
    );
    for line in run_lines(&server) {
        assert!(line.contains("caller=token"), "{line}");
        assert!(line.contains("hello_world.py"), "{line}");
        assert!(
            !line.contains(TOKEN),
            "the token itself is never logged: {line}"
        );
    }
}

#[tokio::test]
async fn a_server_without_a_token_serves_anonymous_callers() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &[]);
    let mcp = McpSession::open(&server, None).await;
    let response = mcp.call(&run_python(1, "hello_world.py", None)).await;
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    assert!(
        eventually(|| run_lines(&server).len() == 1).await,
        "{}",
        server.logs()
    );
    assert!(
        run_lines(&server)[0].contains("caller=anonymous"),
        "{:?}",
        run_lines(&server)
    );
}

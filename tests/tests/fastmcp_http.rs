//! The `fastmcp` Client over Streamable HTTP (`StreamableHttpTransport`, `/mcp`) and legacy SSE
//! (`SSETransport`, `/sse`), with a bearer token — and turned away with 401 without it.

use pyrun_mcp_tests::{
    args, assert_standard_session, assert_unauthorized, python_client, HttpServer,
};

const TOKEN: &str = "fastmcp-test-token";

#[test]
fn streamable_http_transport() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    let url = server.mcp_url();
    for mode in ["legacy", "auto"] {
        let report = python_client(
            "fastmcp_client.py",
            &args(&["--mode", mode, "--http", &url, "--token", TOKEN]),
        );
        assert_standard_session(&report);
    }
}

#[test]
fn sse_transport() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    let url = server.sse_url();
    let report = python_client(
        "fastmcp_client.py",
        &args(&["--sse", &url, "--token", TOKEN]),
    );
    assert_standard_session(&report);
}

#[test]
fn without_token_gets_401() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    for target in [["--http", &server.mcp_url()], ["--sse", &server.sse_url()]] {
        let report = python_client(
            "fastmcp_client.py",
            &args(&[target[0], target[1], "--expect-failure"]),
        );
        assert_unauthorized(&report);
    }
}

//! The official Python MCP SDK (`mcp`) over HTTP: Streamable HTTP (`/mcp`) in its `legacy` and
//! `auto` modes and the legacy SSE transport (`/sse`), all behind a bearer token — and turned
//! away with 401 without it or with a wrong one.

use pyrun_mcp_tests::{
    args, assert_standard_session, assert_unauthorized, python_client, HttpServer,
};

const TOKEN: &str = "python-sdk-test-token";

fn server() -> HttpServer {
    HttpServer::samples(&["--auth-token", TOKEN])
}

#[test]
fn streamable_http_legacy_mode() {
    let server = server();
    let url = server.mcp_url();
    let report = python_client(
        "python_sdk.py",
        &args(&["--mode", "legacy", "--http", &url, "--token", TOKEN]),
    );
    assert_standard_session(&report);
    assert_ne!(
        report["protocol_version"], "2026-07-28",
        "legacy mode must handshake"
    );
    // The session's close (`DELETE /mcp`, the last request): any status but 200 or 204 makes the
    // SDK log "Session termination failed".
    assert_eq!(
        report["http_statuses"].as_array().and_then(|s| s.last()),
        Some(&serde_json::json!(204)),
        "DELETE /mcp: {report}"
    );
}

#[test]
fn streamable_http_auto_mode() {
    let server = server();
    let url = server.mcp_url();
    let report = python_client(
        "python_sdk.py",
        &args(&["--mode", "auto", "--http", &url, "--token", TOKEN]),
    );
    assert_standard_session(&report);
    assert_eq!(
        report["protocol_version"], "2026-07-28",
        "auto mode must go modern"
    );
}

#[test]
fn sse_client_both_modes() {
    let server = server();
    let url = server.sse_url();
    for mode in ["legacy", "auto"] {
        let report = python_client(
            "python_sdk.py",
            &args(&["--mode", mode, "--sse", &url, "--token", TOKEN]),
        );
        assert_standard_session(&report);
    }
}

#[test]
fn missing_or_wrong_token_gets_401() {
    let server = server();
    let (mcp, sse) = (server.mcp_url(), server.sse_url());
    for mode in ["legacy", "auto"] {
        for target in [["--http", mcp.as_str()], ["--sse", sse.as_str()]] {
            for token in [None, Some("wrong-token")] {
                let mut argv = args(&["--mode", mode, target[0], target[1], "--expect-failure"]);
                if let Some(token) = token {
                    argv.extend(args(&["--token", token]));
                }
                assert_unauthorized(&python_client("python_sdk.py", &argv));
            }
        }
    }
}

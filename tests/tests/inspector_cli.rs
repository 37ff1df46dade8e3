//! The MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, run with Node 22) against
//! `/mcp` (`--transport http`) and `/sse` (`--transport sse`): tools/list and a run_python call,
//! with the bearer token in a header — and refused without it.

use pyrun_mcp_tests::{inspector_cli, HttpServer, Output};
use serde_json::Value;

const TOKEN: &str = "inspector-test-token";
const AUTH: &str = "Authorization: Bearer inspector-test-token";

/// The JSON document the Inspector printed on stdout.
fn json(out: &Output) -> Value {
    assert!(out.success(), "inspector failed:\n{}", out.describe());
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("inspector printed no JSON ({e}):\n{}", out.describe()))
}

fn check_transport(url: &str, transport: &str) {
    let base = ["--transport", transport, "--header", AUTH];

    let listed = json(&inspector_cli(
        &[&[url][..], &base, &["--method", "tools/list"]].concat(),
    ));
    let mut names: Vec<&str> = listed["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    names.sort_unstable();
    assert_eq!(names, pyrun_mcp_tests::OUR_TOOLS, "{listed:#}");

    let called = json(&inspector_cli(
        &[
            &[url][..],
            &base,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "run_python",
                "--tool-arg",
                "file_name=hello_world.py",
            ],
        ]
        .concat(),
    ));
    assert_eq!(called["isError"], false, "{called:#}");
    assert_eq!(
        called["content"][0]["text"], "Hello, World!\n",
        "{called:#}"
    );
    assert_eq!(called["structuredContent"]["exit_code"], 0, "{called:#}");
}

#[test]
fn streamable_http_tools_list_and_call() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    check_transport(&server.mcp_url(), "http");
}

#[test]
fn sse_tools_list_and_call() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    check_transport(&server.sse_url(), "sse");
}

#[test]
fn without_token_it_cannot_list_tools() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    for (url, transport) in [(server.mcp_url(), "http"), (server.sse_url(), "sse")] {
        let out = inspector_cli(&[&url, "--transport", transport, "--method", "tools/list"]);
        assert!(
            !out.success(),
            "listed tools without a token:\n{}",
            out.describe()
        );
        assert!(
            !out.stdout.contains("run_python"),
            "tools leaked without a token:\n{}",
            out.describe()
        );
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(
            said.contains("401") || said.contains("auth"),
            "no sign of the 401:\n{}",
            out.describe()
        );
    }
}

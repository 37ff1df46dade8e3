//! The MCP Inspector's CLI lists pyrun-mcp's resources, templates and prompts, reads a project file
//! and gets a prompt, over `/mcp` and `/sse`.

use pyrun_mcp_tests::{inspector_cli, HttpServer, Output};
use serde_json::Value;

const TOKEN: &str = "inspector-resources-token";
const AUTH: &str = "Authorization: Bearer inspector-resources-token";

fn json(out: &Output) -> Value {
    assert!(out.success(), "inspector failed:\n{}", out.describe());
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("inspector printed no JSON ({e}):\n{}", out.describe()))
}

fn names<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    list[key]
        .as_array()
        .map(|items| items.iter().filter_map(|i| i["name"].as_str()).collect())
        .unwrap_or_default()
}

fn check_transport(url: &str, transport: &str) {
    let base = [url, "--transport", transport, "--header", AUTH];
    let with = |more: &[&str]| json(&inspector_cli(&[&base[..], more].concat()));

    let resources = with(&["--method", "resources/list"]);
    let listed = names(&resources, "resources");
    assert!(listed.contains(&"hello_world.py"), "{resources:#}");
    assert!(listed.contains(&"mathpkg/main.py"), "{resources:#}");

    let templates = with(&["--method", "resources/templates/list"]);
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"], "pyrun://projects/{+path}",
        "{templates:#}"
    );

    let read = with(&[
        "--method",
        "resources/read",
        "--uri",
        "pyrun://projects/hello_world.py",
    ]);
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Hello"),
        "{read:#}"
    );

    let prompts = with(&["--method", "prompts/list"]);
    assert_eq!(
        names(&prompts, "prompts"),
        ["run-and-explain", "debug-script", "write-tests"],
        "{prompts:#}"
    );
    let prompt = with(&[
        "--method",
        "prompts/get",
        "--prompt-name",
        "write-tests",
        "--prompt-args",
        "file=calculator.py",
    ]);
    assert_eq!(
        prompt["messages"][0]["content"]["resource"]["uri"], "pyrun://projects/calculator.py",
        "{prompt:#}"
    );
}

#[test]
fn streamable_http_lists_resources_and_prompts() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    check_transport(&server.mcp_url(), "http");
}

#[test]
fn sse_lists_resources_and_prompts() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    check_transport(&server.sse_url(), "sse");
}

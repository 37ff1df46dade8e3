//! The official Python MCP SDK (`mcp`) reads pyrun-mcp's resources and prompts, over stdio in
//! `legacy` and `auto` (2026-07-28) modes and over `/mcp`: lists the project files, reads one, gets
//! a prompt with the script embedded, and is refused an escape and a `.env`.

use pyrun_mcp_tests::{python_client, HttpServer, StdioCommand};
use serde_json::Value;

const TOKEN: &str = "sdk-resources-token";

fn check(report: &Value) {
    let ctx = || serde_json::to_string_pretty(report).unwrap_or_default();
    let listed = &report["resources"]["ok"]["resources"];
    let names: Vec<&str> = listed
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["name"].as_str()).collect())
        .unwrap_or_default();
    for sample in ["hello_world.py", "calculator.py", "mathpkg/main.py"] {
        assert!(names.contains(&sample), "{sample} not listed: {}", ctx());
    }
    assert!(!names.iter().any(|n| n.contains(".env")), "{}", ctx());
    assert_eq!(
        report["templates"]["ok"]["resourceTemplates"][0]["uriTemplate"],
        "pyrun://projects/{+path}",
        "{}",
        ctx()
    );
    let read = &report["read"]["ok"]["contents"][0];
    assert_eq!(read["uri"], "pyrun://projects/hello_world.py", "{}", ctx());
    assert!(
        read["text"].as_str().unwrap_or_default().contains("Hello"),
        "{}",
        ctx()
    );
    for refused in ["read_escape", "read_env", "prompt_escape"] {
        let error = report[refused]["error"].as_str().unwrap_or_default();
        assert!(
            report[refused].get("ok").is_none() && !error.is_empty(),
            "{refused} was served: {}",
            ctx()
        );
        assert!(!error.contains("SECRET"), "{}", ctx());
    }
    assert!(
        report["read_escape"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("outside the projects folder"),
        "{}",
        ctx()
    );
    let prompts: Vec<&str> = report["prompts"]["ok"]["prompts"]
        .as_array()
        .map(|p| p.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        prompts,
        ["run-and-explain", "debug-script", "write-tests"],
        "{}",
        ctx()
    );
    let messages = &report["prompt"]["ok"]["messages"];
    assert_eq!(messages[0]["content"]["type"], "resource", "{}", ctx());
    assert_eq!(
        messages[0]["content"]["resource"]["uri"],
        "pyrun://projects/hello_world.py",
        "{}",
        ctx()
    );
    assert!(
        messages[1]["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("run_python"),
        "{}",
        ctx()
    );
}

fn stdio_session(mode: &str) -> Value {
    let server = StdioCommand::new(&[]);
    std::fs::write(server.projects.path().join(".env"), "SECRET=1").unwrap();
    let mut args = vec!["--mode".to_owned(), mode.to_owned(), "--stdio".to_owned()];
    args.push(server.program.display().to_string());
    args.extend(server.args.iter().cloned());
    python_client("python_sdk_resources.py", &args)
}

#[test]
fn legacy_mode_reads_resources_and_gets_prompts() {
    check(&stdio_session("legacy"));
}

#[test]
fn auto_mode_reads_resources_and_gets_prompts() {
    let report = stdio_session("auto");
    check(&report);
    assert_eq!(report["protocol_version"], "2026-07-28");
}

#[test]
fn streamable_http_reads_resources_and_gets_prompts() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    std::fs::write(server.projects().join(".env"), "SECRET=1").unwrap();
    let args: Vec<String> = [
        "--mode",
        "legacy",
        "--http",
        &server.mcp_url(),
        "--token",
        TOKEN,
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    check(&python_client("python_sdk_resources.py", &args));
}

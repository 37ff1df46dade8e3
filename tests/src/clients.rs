//! Running the client scripts in `tests/clients/` and checking the report they print: what every
//! real client must see from pyrun-mcp.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::deps::{node_env, python_env};
use crate::env::scrub_env;
use crate::paths::workspace_root;
use crate::process::{run_bounded, Output};

/// Upper bound for one client script (it starts the interpreter, connects and makes five calls).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

/// `tests/clients/NAME`.
pub fn client_script(name: &str) -> PathBuf {
    workspace_root().join("tests").join("clients").join(name)
}

/// Runs `tests/clients/SCRIPT ARGS…` with the test venv's Python and returns the JSON report it
/// printed last. Panics with the script's output when it fails. The client's environment is
/// scrubbed of every server setting ([`scrub_env`]): a stdio server it starts inherits it.
pub fn python_client(script: &str, args: &[String]) -> Value {
    let mut cmd = Command::new(python_env());
    scrub_env(&mut cmd)
        .arg(client_script(script))
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = run_bounded(&mut cmd, CLIENT_TIMEOUT);
    assert!(
        out.success(),
        "{script} {args:?} failed:\n{}",
        out.describe()
    );
    last_json_line(&out)
}

/// The last line of stdout that parses as JSON.
pub fn last_json_line(out: &Output) -> Value {
    out.stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line.trim()).ok())
        .unwrap_or_else(|| panic!("no JSON report on stdout:\n{}", out.describe()))
}

/// The arguments of a client script, as owned strings.
pub fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

/// Asserts that a client run with `--expect-failure` could not connect because the server answered
/// 401 (see `http_statuses` in `tests/clients/common.py`).
pub fn assert_unauthorized(report: &Value) {
    let ctx = serde_json::to_string_pretty(report).unwrap_or_default();
    assert!(
        report["tools"].is_null(),
        "connected without a valid token: {ctx}"
    );
    assert!(report["error"].is_string(), "no error reported: {ctx}");
    let statuses = report["http_statuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!statuses.is_empty(), "no HTTP response seen: {ctx}");
    assert!(
        statuses.iter().all(|s| s == 401),
        "every request must get 401: {ctx}"
    );
}

/// The tools a server with default settings lists, sorted: exactly these (the conformance
/// fixtures must never reach the normal binary).
pub const OUR_TOOLS: [&str; 8] = [
    "cancel_run",
    "get_run",
    "list_packages",
    "list_python_files",
    "list_runs",
    "run_python",
    "start_python",
    "upload_stdin",
];

/// Asserts what a user of any client must see in a session report (see `tests/clients/common.py`):
/// our eight tools listed (and nothing else), the three samples ran with their output and exit codes, the package sample is
/// listed, and a path escape came back as a tool error.
pub fn assert_standard_session(report: &Value) {
    let ctx = || serde_json::to_string_pretty(report).unwrap_or_default();
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Exactly ours: the conformance fixtures must never reach the normal binary.
    assert_eq!(tools, OUR_TOOLS, "tools/list: {}", ctx());
    let call = |key: &str| &report["calls"][key];

    let hello = call("hello");
    assert_eq!(hello["is_error"], false, "hello_world.py: {}", ctx());
    assert!(
        text(hello).contains("Hello, World!"),
        "hello_world.py output: {}",
        ctx()
    );
    assert_eq!(hello["structured"]["exit_code"], 0, "{}", ctx());
    assert_eq!(hello["structured"]["timed_out"], false, "{}", ctx());

    let calc = call("calculator");
    assert_eq!(calc["is_error"], false, "calculator.py: {}", ctx());
    assert!(
        text(calc).trim_end().ends_with("All tests passed!"),
        "calculator.py output: {}",
        ctx()
    );
    assert_eq!(calc["structured"]["exit_code"], 0, "{}", ctx());

    // A script that fails is a normal result carrying its exit code, not a tool error.
    let err = call("error");
    assert_eq!(err["is_error"], false, "error_test.py: {}", ctx());
    assert_eq!(err["structured"]["exit_code"], 1, "{}", ctx());
    let err_text = text(err);
    assert!(
        err_text.contains("--- stderr ---")
            && err_text.contains("NameError")
            && err_text.contains("[Process exited with code 1]"),
        "error_test.py text: {}",
        ctx()
    );
    let err_stdout = err["structured"]["stdout"].as_str().unwrap_or_default();
    assert_eq!(
        err_stdout.lines().count(),
        2,
        "two lines before the error: {}",
        ctx()
    );

    let escape = call("escape");
    assert_eq!(
        escape["is_error"],
        true,
        "../outside.py must be refused: {}",
        ctx()
    );
    assert!(
        escape["structured"].is_null() || escape["structured"]["exit_code"].is_null(),
        "a refused path must not run: {}",
        ctx()
    );

    let files: Vec<&str> = call("list")["structured"]["files"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for expected in ["hello_world.py", "calculator.py", "error_test.py"] {
        assert!(
            files.contains(&expected),
            "list_python_files lacks {expected}: {}",
            ctx()
        );
    }
    assert!(
        files.iter().any(|f| f.contains('/')),
        "list_python_files lacks the package subfolder: {}",
        ctx()
    );
}

fn text(call: &Value) -> &str {
    call["text"].as_str().unwrap_or_default()
}

/// Runs the MCP Inspector's CLI (`inspector --cli ARGS…`) with Node 22, in a throw-away HOME so it
/// neither reads nor writes the developer's `~/.mcp-inspector`.
pub fn inspector_cli(cli_args: &[&str]) -> Output {
    let node = node_env();
    let home = tempfile::tempdir().expect("temporary HOME");
    let mut cmd = node.command(&node.inspector);
    scrub_env(&mut cmd)
        .arg("--cli")
        .args(cli_args)
        .env("HOME", home.path())
        .env("USERPROFILE", home.path())
        .env("MCP_CATALOG_PATH", home.path().join("mcp.json"))
        .env("CI", "1");
    run_bounded(&mut cmd, CLIENT_TIMEOUT)
}

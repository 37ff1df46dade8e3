//! The audit log (`--audit-log`, default `audit.jsonl` in the state folder): the real binary
//! writes one line per tool call over stdio, Streamable HTTP and SSE, naming the principal, the
//! transport and its session, the tool, the file and the outcome — and never a script's output,
//! its arguments' values, its stdin, its environment or the server's token.

use std::path::Path;

use crate::util::http::*;
use pyrun_mcp_tests::{ServerLaunch, StdioServer};
use serde_json::{json, Value};

const ARG_SECRET: &str = "sk-live-ARGUMENT-0123456789abcdef";
const STDIN_SECRET: &str = "sk-live-STDIN-0123456789abcdef";
const ENV_SECRET: &str = "sk-live-ENVIRONMENT-0123456789abcdef";
/// Prints everything secret it was given.
const ECHO: &str =
    "import os, sys\nprint(sys.argv[1:], sys.stdin.read(), os.environ.get('PLANTED_SECRET'))\n";

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn run_echo(id: u64) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": "run_python", "arguments": {
            "file_name": "echo.py", "args": [ARG_SECRET, "two"], "stdin": STDIN_SECRET
        }}),
    )
}

/// What no line may hold: the secrets given to the script, its output, the server's token.
fn assert_holds_no_secret(text: &str) {
    for secret in [ARG_SECRET, STDIN_SECRET, ENV_SECRET, TOKEN, "Hello, World!"] {
        assert!(
            !text.contains(secret),
            "the audit log holds {secret:?}:\n{text}"
        );
    }
}

#[tokio::test]
async fn each_http_call_is_one_line_naming_the_token_the_transport_and_the_session() {
    let projects = projects();
    std::fs::write(projects.path().join("echo.py"), ECHO).unwrap();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().join("state");
    let server = ServerLaunch::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"), projects.path())
        .args(["--auth-token", TOKEN, "--pass-env", "PLANTED_SECRET"])
        .args([std::ffi::OsStr::new("--state-dir"), state_dir.as_os_str()])
        .env("PLANTED_SECRET", ENV_SECRET)
        .log("info")
        .http();
    let log = state_dir.join("audit.jsonl");

    let mcp = McpSession::open(&server, Some(TOKEN)).await;
    let ran = mcp.call(&run_echo(1)).await;
    assert!(result_text(&ran).contains(ARG_SECRET), "{ran}");
    mcp.call(&request(
        2,
        "tools/call",
        json!({"name": "list_python_files", "arguments": {}}),
    ))
    .await;
    let refused = mcp.call(&run_python(3, "../outside.py", None)).await;
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    let mut sse = SseSession::open(&server, Some(TOKEN)).await;
    let (ran, _) = sse.call(&run_python(4, "hello_world.py", None)).await;
    assert_eq!(ran["result"]["isError"], json!(false), "{ran}");

    assert!(
        eventually(|| lines(&log).len() == 4).await,
        "{}",
        server.logs()
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert_holds_no_secret(&text);
    let lines = lines(&log);
    let mcp_session = mcp.session_id().expect("an mcp session id");
    for line in &lines[..3] {
        assert_eq!(line["principal"], json!({"kind": "token"}), "{line}");
        assert_eq!(line["transport"], "streamable-http", "{line}");
        assert_eq!(line["session_id"], mcp_session, "{line}");
    }
    let (run, list, outside, over_sse) = (&lines[0], &lines[1], &lines[2], &lines[3]);
    assert_eq!(run["tool"], "run_python");
    assert_eq!(run["file_name"], "echo.py");
    assert_eq!(run["arg_count"], 2);
    assert_eq!(run["exit_code"], 0);
    assert_eq!(run["timed_out"], false);
    assert_eq!(run["refused"], false);
    assert!(run["duration_ms"].is_u64(), "{run}");
    assert!(run["sandbox"].is_array(), "{run}");
    assert!(run["time"].as_str().unwrap().ends_with('Z'), "{run}");
    assert_eq!(list["tool"], "list_python_files");
    assert_eq!(list["file_name"], Value::Null);
    assert_eq!(outside["file_name"], "../outside.py");
    assert_eq!(outside["refused"], true);
    assert_eq!(outside["exit_code"], Value::Null);
    let sse_session = sse.message_url.split("sessionId=").nth(1).unwrap();
    assert_eq!(over_sse["transport"], "sse");
    assert_eq!(over_sse["session_id"], sse_session);
    assert_eq!(over_sse["principal"], json!({"kind": "token"}));
    assert_eq!(over_sse["file_name"], "hello_world.py");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&log), 0o600);
        assert_eq!(mode(&state_dir), 0o700);
    }
}

#[test]
fn a_stdio_call_is_the_local_user_and_off_means_no_file() {
    let projects = projects();
    std::fs::write(projects.path().join("echo.py"), ECHO).unwrap();
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("calls/audit.jsonl");
    let mut server = ServerLaunch::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"), projects.path())
        .args([std::ffi::OsStr::new("--audit-log"), log.as_os_str()])
        .args(["--pass-env", "PLANTED_SECRET"])
        .env("PLANTED_SECRET", ENV_SECRET)
        .stdio();
    let result = server.call(
        "run_python",
        json!({"file_name": "echo.py", "args": [ARG_SECRET], "stdin": STDIN_SECRET}),
    );
    assert!(
        pyrun_mcp_tests::stdio::text(&result).contains(ENV_SECRET),
        "{result}"
    );
    server.close();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_holds_no_secret(&text);
    let lines = lines(&log);
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["principal"], json!({"kind": "local"}));
    assert_eq!(lines[0]["transport"], "stdio");
    assert_eq!(lines[0]["session_id"], Value::Null);
    assert_eq!(lines[0]["file_name"], "echo.py");
    assert_eq!(lines[0]["arg_count"], 1);

    // `--audit-log off`: a call leaves no file in the state folder.
    let state_dir = state.path().join("state");
    let mut server = StdioServer::start(
        projects.path(),
        &[
            "--audit-log",
            "off",
            "--state-dir",
            state_dir.to_str().unwrap(),
        ],
    );
    server.call("list_python_files", json!({}));
    server.close();
    assert!(!state_dir.join("audit.jsonl").exists());
}

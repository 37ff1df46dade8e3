//! End to end over stdio with the real binary: the samples, refusals, progress, cancellation and
//! a clean exit, as Claude Desktop and other stdio clients drive it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::run_status;
use assert_cmd::Command;
use pyrun_api::RunStatus;
#[cfg(target_os = "linux")]
use pyrun_mcp_tests::procs;
use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../python_projects")
}

#[test]
fn lists_both_tools_with_schemas() {
    let mut server = StdioServer::start(&samples(), &[]);
    let reply = server.request("tools/list", json!({}));
    let tools = reply["result"]["tools"].as_array().unwrap();
    let names: Vec<_> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"run_python") && names.contains(&"list_python_files"));
    let run = tools.iter().find(|t| t["name"] == "run_python").unwrap();
    assert_eq!(run["inputSchema"]["required"], json!(["file_name"]));
    let out = &run["outputSchema"]["properties"];
    for field in ["stdout", "stderr", "exit_code", "timed_out", "duration_ms"] {
        assert!(out.get(field).is_some(), "outputSchema lacks {field}");
    }
}

/// The server does not offer completions, so it does not pretend to (rmcp answered an empty
/// completion before 3.11): a client learns it from the error, not from silence.
#[test]
fn completion_requests_get_method_not_found() {
    let mut server = StdioServer::start(&samples(), &[]);
    let reply = server.request(
        "completion/complete",
        json!({
            "ref": {"type": "ref/prompt", "name": "run_a_script"},
            "argument": {"name": "file_name", "value": "he"}
        }),
    );
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
}

#[test]
fn runs_the_three_samples() {
    let mut server = StdioServer::start(&samples(), &[]);
    let hello = server.call("run_python", json!({"file_name": "hello_world.py"}));
    assert_eq!(text(&hello), "Hello, World!\n");
    assert_eq!(hello["structuredContent"]["exit_code"], 0);
    assert_eq!(hello["isError"], false);

    let calc = server.call("run_python", json!({"file_name": "calculator.py"}));
    assert!(text(&calc).trim_end().ends_with("All tests passed!"));

    let err = server.call("run_python", json!({"file_name": "error_test.py"}));
    let shown = text(&err);
    assert!(shown.starts_with("This line prints fine.\nSo does this one.\n--- stderr ---\n"));
    assert!(shown.contains("NameError"));
    assert!(shown.ends_with("[Process exited with code 1]"));
    assert_eq!(err["structuredContent"]["exit_code"], 1);
    // The traceback names the file relative to the projects folder, not by host path.
    let host = std::fs::canonicalize(samples()).unwrap();
    assert!(!shown.contains(host.to_str().unwrap()), "{shown}");

    let pkg = server.call(
        "run_python",
        json!({"file_name": "mathpkg/main.py", "args": ["1"]}),
    );
    assert_eq!(text(&pkg), "Area of a circle of radius 1.0: 3.14\n");
}

#[test]
fn refusals_are_tool_errors_that_name_no_host_path() {
    let mut server = StdioServer::start(&samples(), &[]);
    let host = std::fs::canonicalize(samples()).unwrap();
    for (file, expect) in [
        ("../Cargo.toml", "outside the projects folder"),
        ("/etc/passwd", "outside the projects folder"),
        ("nope.py", "not found"),
        ("mathpkg", "directory"),
        ("x\u{0}.py", "NUL"),
    ] {
        let result = server.call("run_python", json!({"file_name": file}));
        assert_eq!(result["isError"], true, "{file}: {result}");
        assert!(text(&result).contains(expect), "{file}: {}", text(&result));
        assert!(!text(&result).contains(host.to_str().unwrap()));
    }
    let bad_timeout = server.call(
        "run_python",
        json!({"file_name": "hello_world.py", "timeout_seconds": -1}),
    );
    assert_eq!(bad_timeout["isError"], true);
    // Wrong argument types get a clear tool error, not a crash.
    let reply = server.call("run_python", json!({"file_name": 42}));
    assert_eq!(reply["isError"], true, "{reply}");
    assert!(text(&reply).contains("expected a string"), "{reply}");
    // An unknown tool is an error too.
    let reply = server.request("tools/call", json!({"name": "rm_rf", "arguments": {}}));
    assert!(
        reply.get("error").is_some() || reply["result"]["isError"] == true,
        "{reply}"
    );
    // The server is still serving afterwards.
    let hello = server.call("run_python", json!({"file_name": "hello_world.py"}));
    assert_eq!(text(&hello), "Hello, World!\n");
}

#[test]
fn lists_files_and_subfolders() {
    let mut server = StdioServer::start(&samples(), &[]);
    let all = server.call("list_python_files", json!({}));
    let files = all["structuredContent"]["files"].as_array().unwrap();
    for expected in [
        "hello_world.py",
        "calculator.py",
        "error_test.py",
        "mathpkg/main.py",
    ] {
        assert!(
            files.contains(&json!(expected)),
            "{expected} missing: {files:?}"
        );
    }
    let sub = server.call("list_python_files", json!({"directory": "mathpkg"}));
    assert!(sub["structuredContent"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f.as_str().unwrap().starts_with("mathpkg/")));
    let out = server.call("list_python_files", json!({"directory": ".."}));
    assert_eq!(out["isError"], true);
}

fn slow_project() -> TempProjects {
    TempProjects::named("p")
        .file(
            "slow.py",
            "import time\nprint('working', flush=True)\ntime.sleep(3)\nprint('finished')\n",
        )
        .file("forever.py", "import time\ntime.sleep(600)\n")
}

#[test]
fn progress_notifications_arrive_while_a_run_lasts() {
    let dir = slow_project();
    let mut server = StdioServer::start(dir.path(), &[]);
    let id = server.start_request(
        "tools/call",
        json!({"name": "run_python", "arguments": {"file_name": "slow.py"},
               "_meta": {"progressToken": "p1"}}),
    );
    let reply = server.response(id);
    assert_eq!(text(&reply["result"]), "working\nfinished\n");
    let progress: Vec<&Value> = server
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "progress: {progress:?}");
    assert!(progress
        .iter()
        .all(|n| n["params"]["progressToken"] == "p1"));
}

/// The run is found on the host by a token in its arguments (see `procs`): its own pids are
/// its pid namespace's.
#[cfg(target_os = "linux")]
#[test]
fn notifications_cancelled_kills_the_run() {
    let dir = slow_project();
    // Runs may last far longer than the waits below: only the cancellation can end this one.
    let mut server = StdioServer::start(dir.path(), &["--timeout", "600"]);
    let token = procs::unique_token("forever");
    let id = server.start_request(
        "tools/call",
        json!({"name": "run_python", "arguments": {"file_name": "forever.py", "args": [token]}}),
    );
    assert!(
        procs::holds_within(Duration::from_secs(30), || {
            !procs::processes_carrying(&token).is_empty()
        }),
        "forever.py never started"
    );
    server.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
    assert!(
        procs::holds_within(Duration::from_secs(10), || {
            procs::processes_carrying(&token).is_empty()
        }),
        "the cancelled run is still alive"
    );
    // The server keeps serving.
    let list = server.request("tools/list", json!({}));
    assert!(list.get("result").is_some());
}

#[test]
fn timeout_seconds_lowers_the_limit() {
    let dir = slow_project();
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call(
        "run_python",
        json!({"file_name": "forever.py", "timeout_seconds": 1}),
    );
    assert_eq!(result["structuredContent"]["timed_out"], true);
    assert_eq!(result["structuredContent"]["exit_code"], Value::Null);
    assert!(text(&result).contains("[Timed out after 1 s]"));
}

#[test]
fn batch_over_stdin_with_assert_cmd_and_clean_exit() {
    let input = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"batch","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"file_name":"hello_world.py"}}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let state = tempfile::tempdir().unwrap();
    let output = Command::cargo_bin("pyrun-mcp-server")
        .unwrap()
        .args(["--transport", "stdio", "--projects-dir"])
        .arg(samples())
        .arg("--state-dir")
        .arg(state.path())
        .write_stdin(input)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    // Only JSON-RPC on stdout.
    let messages: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("stdout line is JSON"))
        .collect();
    let call = messages
        .iter()
        .find(|m| m["id"] == 2)
        .expect("reply to the call");
    assert_eq!(call["result"]["content"][0]["text"], "Hello, World!\n");
}

#[test]
fn bad_settings_fail_fast_with_a_hint() {
    let out = Command::cargo_bin("pyrun-mcp-server")
        .unwrap()
        .args(["--transport", "stdio", "--projects-dir", "/no/such/folder"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PYTHON_PROJECTS_DIR"), "{err}");
    let out = Command::cargo_bin("pyrun-mcp-server")
        .unwrap()
        .args(["--transport", "stdio", "--python", "/no/python"])
        .arg("--projects-dir")
        .arg(samples())
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("PYTHON_BIN"));
}

/// Claude Desktop starts servers with a bare `PATH`: without `--python`, the server finds the
/// interpreter in the usual places and runs scripts.
#[cfg(unix)]
#[test]
fn with_a_bare_path_the_interpreter_is_found_in_the_usual_places() {
    let bare = tempfile::tempdir().unwrap();
    let path = bare.path().to_str().unwrap();
    let mut server = StdioServer::start_with_env(&samples(), &[], None, &[("PATH", path)]);
    let result = server.call("run_python", json!({"file_name": "hello_world.py"}));
    assert_eq!(result["isError"], json!(false), "{result}");
    assert!(text(&result).contains("Hello, World!"), "{result}");
}

#[test]
fn the_local_user_follows_a_background_run_over_stdio() {
    let mut server = StdioServer::start(&samples(), &[]);
    let started = server.request(
        "tools/call",
        json!({"name": "start_python", "arguments": {"file_name": "hello_world.py"}}),
    );
    let run_id = started["result"]["structuredContent"]["run_id"]
        .as_str()
        .expect("a run id")
        .to_owned();
    // Followed as a client does: each long poll from the offsets the last answer gave, so that
    // it waits for news instead of answering at once with the output already read.
    let mut state = Value::Null;
    let mut stdout = String::new();
    let (mut out, mut err) = (0, 0);
    for _ in 0..20 {
        state = server.request(
            "tools/call",
            json!({"name": "get_run", "arguments": {"run_id": run_id, "wait_seconds": 10,
                   "stdout_offset": out, "stderr_offset": err}}),
        );
        let s = &state["result"]["structuredContent"];
        stdout.push_str(s["stdout"].as_str().unwrap_or(""));
        out = s["next_stdout_offset"].as_u64().unwrap_or(out);
        err = s["next_stderr_offset"].as_u64().unwrap_or(err);
        if run_status(s) == RunStatus::Exited {
            break;
        }
    }
    let s = &state["result"]["structuredContent"];
    assert_eq!(run_status(s), RunStatus::Exited, "{state}");
    assert_eq!(s["exit_code"], 0, "{state}");
    assert!(stdout.contains("Hello"), "{stdout} {state}");
    let listed = server.request("tools/call", json!({"name": "list_runs", "arguments": {}}));
    assert_eq!(
        listed["result"]["structuredContent"]["runs"][0]["run_id"],
        run_id.as_str()
    );
}

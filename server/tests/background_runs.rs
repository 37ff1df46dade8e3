//! Background runs end to end against the real binary: `start_python` → `get_run` (long poll,
//! offsets) → the end; `cancel_run` killing the tree; `list_runs`; runs that outlive their
//! session and stay invisible to other callers; the limits (their own pool, a queue, a cap on
//! runs kept, retention); `--detach-after` handing a `run_python` over; progress carrying the
//! last line of output; and every bad input the issue names.

use std::time::Duration;

use crate::util::http::*;
use crate::util::run_status;
use pyrun_api::RunStatus;
use serde_json::{json, Value};

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

fn structured(response: &Value) -> &Value {
    &response["result"]["structuredContent"]
}

fn is_error(response: &Value) -> bool {
    response["result"]["isError"] == json!(true)
}

/// A projects folder with the scripts below, beside the shared ones.
fn projects_with(scripts: &[(&str, &str)]) -> TempProjects {
    let projects = projects();
    for (name, text) in scripts {
        std::fs::write(projects.path().join(name), text).expect("write script");
    }
    projects
}

/// Prints three numbered lines, one per `go-N` file the test writes, then exits 3.
const STEPS: &str = r#"
import os, sys, time
here = os.path.dirname(__file__)
for n in range(1, 4):
    while not os.path.exists(os.path.join(here, f"go-{n}")):
        time.sleep(0.02)
    print(f"line {n}", flush=True)
    print(f"err {n}", file=sys.stderr, flush=True)
sys.exit(3)
"#;

const LOUD: &str = "import sys\nsys.stdout.write('x' * 700000)\nprint('END')\n";

async fn start(session: &McpSession, id: u64, file: &str) -> String {
    let started = session
        .call(&call(id, "start_python", json!({"file_name": file})))
        .await;
    assert!(!is_error(&started), "{started}");
    let run = structured(&started);
    assert!(
        matches!(run_status(run), RunStatus::Running | RunStatus::Queued),
        "{started}"
    );
    let run_id = run["run_id"].as_str().expect("run_id").to_owned();
    assert!(result_text(&started).contains(&run_id), "{started}");
    run_id
}

async fn get_run(session: &McpSession, id: u64, args: Value) -> Value {
    session.call(&call(id, "get_run", args)).await
}

/// Polls `get_run` with long waits until the run has ended; its last state.
async fn until_ended(session: &McpSession, run_id: &str) -> Value {
    for id in 1000..1100 {
        let state = get_run(
            session,
            id,
            json!({"run_id": run_id, "wait_seconds": 10, "stdout_offset": u64::MAX, "stderr_offset": u64::MAX}),
        )
        .await;
        if run_status(structured(&state)).has_ended() {
            return state;
        }
    }
    panic!("run {run_id} never ended");
}

#[tokio::test]
async fn a_background_run_is_followed_by_offsets_to_its_end() {
    let projects = projects_with(&[("steps.py", STEPS)]);
    let dir = projects.path().to_path_buf();
    let server = HttpServer::start(projects.path(), &[]);
    let session = McpSession::open(&server, None).await;
    let run_id = start(&session, 1, "steps.py").await;

    let (mut out, mut err, mut stdout, mut stderr) = (0u64, 0u64, String::new(), String::new());
    for n in 1..=3 {
        std::fs::write(dir.join(format!("go-{n}")), "").unwrap();
        // Each long poll returns with the news (a line) long before its 30 s are over.
        let mut state = Value::Null;
        for id in 0..20 {
            state = get_run(
                &session,
                10 * n + id,
                json!({"run_id": run_id, "wait_seconds": 30, "stdout_offset": out, "stderr_offset": err}),
            )
            .await;
            let s = structured(&state);
            stdout.push_str(s["stdout"].as_str().unwrap());
            stderr.push_str(s["stderr"].as_str().unwrap());
            out = s["next_stdout_offset"].as_u64().unwrap();
            err = s["next_stderr_offset"].as_u64().unwrap();
            if stdout.contains(&format!("line {n}")) && stderr.contains(&format!("err {n}")) {
                break;
            }
        }
        assert!(stdout.contains(&format!("line {n}")), "{state}");
    }
    let end = until_ended(&session, &run_id).await;
    let s = structured(&end);
    assert_eq!(run_status(s), RunStatus::Exited, "{end}");
    assert_eq!(s["exit_code"], 3, "{end}");
    // What arrived after the last page read (a line's newline is a write of its own): read on
    // from the offsets the last answer gave.
    let rest = get_run(
        &session,
        89,
        json!({"run_id": run_id, "stdout_offset": out, "stderr_offset": err}),
    )
    .await;
    stdout.push_str(structured(&rest)["stdout"].as_str().unwrap());
    stderr.push_str(structured(&rest)["stderr"].as_str().unwrap());
    assert_eq!(stdout, "line 1\nline 2\nline 3\n");
    assert_eq!(stderr, "err 1\nerr 2\nerr 3\n");
    assert_eq!(s["file_name"], "steps.py");

    // Reading from 0 again gives the whole output; an offset past the end gives nothing.
    let again = get_run(&session, 90, json!({"run_id": run_id})).await;
    assert_eq!(structured(&again)["stdout"], "line 1\nline 2\nline 3\n");
    let past = get_run(
        &session,
        91,
        json!({"run_id": run_id, "stdout_offset": 1_000_000_000_000u64}),
    )
    .await;
    assert!(!is_error(&past), "{past}");
    assert_eq!(structured(&past)["stdout"], "");
    assert_eq!(structured(&past)["next_stdout_offset"], 21);

    let list = session.call(&call(92, "list_runs", json!({}))).await;
    let runs = structured(&list)["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 1, "{list}");
    assert_eq!(runs[0]["run_id"], run_id.as_str());
    assert_eq!(runs[0]["kind"], "background");
    assert_eq!(runs[0]["exit_code"], 3);
}

#[tokio::test]
async fn output_beyond_a_page_is_read_page_by_page() {
    let projects = projects_with(&[("loud.py", LOUD)]);
    let server = HttpServer::start(projects.path(), &[]);
    let session = McpSession::open(&server, None).await;
    let run_id = start(&session, 1, "loud.py").await;
    until_ended(&session, &run_id).await;
    let (mut offset, mut total) = (0u64, String::new());
    for id in 10..20 {
        let page = get_run(
            &session,
            id,
            json!({"run_id": run_id, "stdout_offset": offset}),
        )
        .await;
        let s = structured(&page);
        let text = s["stdout"].as_str().unwrap();
        assert!(text.len() <= 256 * 1024, "a page of {} bytes", text.len());
        if text.is_empty() {
            break;
        }
        total.push_str(text);
        offset = s["next_stdout_offset"].as_u64().unwrap();
    }
    assert_eq!(total.len(), 700_004);
    assert!(total.ends_with("END\n"));
}

#[tokio::test]
async fn bad_ids_and_waits_get_clear_errors_and_the_server_serves_on() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &[]);
    let session = McpSession::open(&server, None).await;
    let unknown = get_run(
        &session,
        1,
        json!({"run_id": "run_0123456789abcdef0123456789abcdef"}),
    )
    .await;
    assert!(is_error(&unknown), "{unknown}");
    let text = result_text(&unknown);
    assert!(
        text.contains("no run with id") && text.contains("server restart"),
        "{text}"
    );
    for bad in ["../../etc/passwd", "", "run_\n", "RUN_X"] {
        let reply = session
            .call(&call(2, "cancel_run", json!({"run_id": bad})))
            .await;
        assert!(is_error(&reply), "{reply}");
        assert!(result_text(&reply).contains("no run with id"), "{reply}");
        assert!(!result_text(&reply).contains('\n') || !bad.contains('\n'));
    }
    for wait in [json!(-1), json!(31), json!(1e300)] {
        let reply = get_run(
            &session,
            3,
            json!({"run_id": "run_0123456789abcdef0123456789abcdef", "wait_seconds": wait}),
        )
        .await;
        assert!(is_error(&reply), "{reply}");
        assert!(result_text(&reply).contains("wait_seconds"), "{reply}");
    }
    let escape = session
        .call(&call(
            4,
            "start_python",
            json!({"file_name": "../outside.py"}),
        ))
        .await;
    assert!(is_error(&escape), "{escape}");
    let list = session.call(&call(5, "list_runs", json!({}))).await;
    assert_eq!(structured(&list)["runs"], json!([]), "{list}");
    let hello = session.call(&run_python(6, "hello_world.py", None)).await;
    assert!(result_text(&hello).contains("Hello, World!"), "{hello}");
}

#[tokio::test]
async fn an_expired_run_is_gone_with_the_same_words_as_an_unknown_one() {
    let projects = projects();
    let server = HttpServer::start(projects.path(), &["--run-retention", "1"]);
    let session = McpSession::open(&server, None).await;
    let run_id = start(&session, 1, "hello_world.py").await;
    let end = until_ended(&session, &run_id).await;
    assert_eq!(run_status(structured(&end)), RunStatus::Exited, "{end}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let gone = get_run(&session, 2, json!({"run_id": run_id})).await;
    assert!(is_error(&gone), "{gone}");
    let unknown_id = "run_0123456789abcdef0123456789abcdef";
    let unknown = get_run(&session, 3, json!({"run_id": unknown_id})).await;
    assert_eq!(
        result_text(&gone).replace(&run_id, "ID"),
        result_text(&unknown).replace(unknown_id, "ID")
    );
    assert!(result_text(&gone).contains("kept for 1 s"), "{gone}");
}

#[tokio::test]
async fn a_run_outlives_its_session_and_is_read_from_the_next_one() {
    let projects = projects_with(&[("steps.py", STEPS)]);
    let server = HttpServer::start(projects.path(), &["--auth-token", TOKEN]);
    let first = McpSession::open(&server, Some(TOKEN)).await;
    let run_id = start(&first, 1, "steps.py").await;
    drop(first);
    for n in 1..=3 {
        std::fs::write(projects.path().join(format!("go-{n}")), "").unwrap();
    }
    let second = McpSession::open(&server, Some(TOKEN)).await;
    let end = until_ended(&second, &run_id).await;
    assert_eq!(structured(&end)["exit_code"], 3, "{end}");
    let whole = get_run(&second, 2, json!({"run_id": run_id})).await;
    assert_eq!(structured(&whole)["stdout"], "line 1\nline 2\nline 3\n");

    // Over the legacy SSE transport, the same caller sees it too.
    let mut sse = SseSession::open(&server, Some(TOKEN)).await;
    let (listed, _) = sse.call(&call(3, "list_runs", json!({}))).await;
    assert_eq!(structured(&listed)["runs"][0]["run_id"], run_id.as_str());
}

#[tokio::test]
async fn the_background_cap_refuses_clearly_and_a_read_end_makes_room() {
    let projects = projects_with(&[("steps.py", STEPS)]);
    let server = HttpServer::start(
        projects.path(),
        &["--max-background-runs", "2", "--timeout", "600"],
    );
    let session = McpSession::open(&server, None).await;
    let a = start(&session, 1, "steps.py").await;
    let _b = start(&session, 2, "steps.py").await;
    let refused = session
        .call(&call(
            3,
            "start_python",
            json!({"file_name": "hello_world.py"}),
        ))
        .await;
    assert!(is_error(&refused), "{refused}");
    let text = result_text(&refused);
    assert!(
        text.contains("2 background runs are kept at once") && text.contains("hint:"),
        "{text}"
    );
    // A cancelled run still holds its place until its owner has seen how it ended.
    let cancelled = session
        .call(&call(4, "cancel_run", json!({"run_id": a})))
        .await;
    assert_eq!(
        run_status(structured(&cancelled)),
        RunStatus::Cancelled,
        "{cancelled}"
    );
    let seen = get_run(&session, 5, json!({"run_id": a})).await;
    assert_eq!(run_status(structured(&seen)), RunStatus::Cancelled);
    let _c = start(&session, 6, "hello_world.py").await;
    let gone = get_run(&session, 7, json!({"run_id": a})).await;
    assert!(is_error(&gone), "the seen run made room: {gone}");
}

#[tokio::test]
async fn queued_background_runs_never_hold_up_run_python() {
    let projects = projects_with(&[("steps.py", STEPS)]);
    let server = HttpServer::start(
        projects.path(),
        &["--max-background-concurrent", "1", "--max-concurrent", "1"],
    );
    let session = McpSession::open(&server, None).await;
    let first = start(&session, 1, "steps.py").await;
    let second = start(&session, 2, "hello_world.py").await;
    let waiting = get_run(&session, 3, json!({"run_id": second})).await;
    assert_eq!(
        run_status(structured(&waiting)),
        RunStatus::Queued,
        "{waiting}"
    );
    // The one foreground turn is free: run_python does not wait behind the background pool.
    let hello = session.call(&run_python(4, "hello_world.py", None)).await;
    assert!(result_text(&hello).contains("Hello, World!"), "{hello}");
    let cancelled = session
        .call(&call(5, "cancel_run", json!({"run_id": first})))
        .await;
    assert_eq!(run_status(structured(&cancelled)), RunStatus::Cancelled);
    let end = until_ended(&session, &second).await;
    assert_eq!(run_status(structured(&end)), RunStatus::Exited, "{end}");
    let whole = get_run(&session, 6, json!({"run_id": second})).await;
    assert_eq!(structured(&whole)["stdout"], "Hello, World!\n");
}

#[tokio::test]
async fn a_run_python_still_going_after_detach_after_is_handed_over() {
    let projects = projects_with(&[("steps.py", STEPS)]);
    let server = HttpServer::start(projects.path(), &["--detach-after", "1"]);
    let session = McpSession::open(&server, None).await;
    std::fs::write(projects.path().join("go-1"), "").unwrap();
    let handed = session
        .call(&call(1, "run_python", json!({"file_name": "steps.py"})))
        .await;
    assert!(!is_error(&handed), "{handed}");
    let report = structured(&handed);
    assert_eq!(run_status(report), RunStatus::Running, "{handed}");
    let run_id = report["run_id"].as_str().expect("a run id").to_owned();
    assert!(result_text(&handed).contains("get_run"), "{handed}");
    assert_eq!(report["stdout"], "line 1\n", "{handed}");
    std::fs::write(projects.path().join("go-2"), "").unwrap();
    std::fs::write(projects.path().join("go-3"), "").unwrap();
    let end = until_ended(&session, &run_id).await;
    assert_eq!(structured(&end)["exit_code"], 3, "{end}");

    // A run that ends in time is an ordinary result, and no background run is left listed.
    let hello = session.call(&run_python(2, "hello_world.py", None)).await;
    assert!(result_text(&hello).contains("Hello, World!"), "{hello}");
    assert!(structured(&hello).get("run_id").is_none(), "{hello}");
    let list = session.call(&call(3, "list_runs", json!({}))).await;
    let runs = structured(&list)["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 1, "only the handed-over run: {list}");
}

#[tokio::test]
async fn progress_messages_carry_the_last_line_of_output() {
    let projects = projects_with(&[("steps.py", STEPS)]);
    let server = HttpServer::start(projects.path(), &[]);
    let session = McpSession::open(&server, None).await;
    std::fs::write(projects.path().join("go-1"), "").unwrap();
    let mut stream = session
        .stream(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "run_python", "arguments": {"file_name": "steps.py"},
            "_meta": {"progressToken": "p"}}}),
        )
        .await;
    let mut seen = None;
    // One a second; a loaded machine may take a while to start the interpreter.
    for _ in 0..60 {
        let message = stream.next_message().await.expect("a message");
        let text = message["params"]["message"].as_str().unwrap_or("");
        // Both lines come at once on two pipes, read concurrently: either may be the last.
        if text.ends_with(": err 1") || text.ends_with(": line 1") {
            seen = Some(text.to_owned());
            break;
        }
    }
    let seen = seen.expect("a progress message with the last line");
    assert!(seen.starts_with("running steps.py ("), "{seen}");
    std::fs::write(projects.path().join("go-2"), "").unwrap();
    std::fs::write(projects.path().join("go-3"), "").unwrap();
    let (done, _) = stream.response_to(1).await;
    assert!(result_text(&done).contains("line 3"), "{done}");
}

/// A 1×1 PNG, written by the script into its output folder.
const WRITES_A_PNG: &str = r#"
import base64, os
png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
with open(os.path.join(os.environ["PYRUN_OUTPUT_DIR"], "dot.png"), "wb") as f:
    f.write(png)
print("drew")
"#;

#[tokio::test]
async fn an_ended_background_run_returns_its_files_as_an_image_and_a_link() {
    let projects = projects_with(&[("draw.py", WRITES_A_PNG)]);
    let server = HttpServer::start(projects.path(), &[]);
    let session = McpSession::open(&server, None).await;
    let run_id = start(&session, 1, "draw.py").await;
    let end = until_ended(&session, &run_id).await;
    let s = structured(&end);
    assert_eq!(run_status(s), RunStatus::Exited, "{end}");
    assert_eq!(s["artifacts"][0]["name"], "dot.png", "{end}");
    assert_eq!(s["artifacts"][0]["mime_type"], "image/png", "{end}");
    let uri = format!("pyrun://runs/{run_id}/files/dot.png");
    assert_eq!(s["artifacts"][0]["uri"], uri.as_str(), "{end}");
    let blocks = end["result"]["content"].as_array().unwrap();
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "image" && b["mimeType"] == "image/png"),
        "{end}"
    );
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "resource_link" && b["uri"] == uri.as_str()),
        "{end}"
    );
}

#[cfg(target_os = "linux")]
mod kills {
    use super::*;
    use pyrun_mcp_tests::procs::{processes_carrying, unique_token};

    #[tokio::test]
    async fn cancel_run_kills_the_whole_process_tree() {
        let projects = projects();
        let server = HttpServer::start(projects.path(), &[]);
        let session = McpSession::open(&server, None).await;
        let token = unique_token("bg-sleeper");
        let started = session
            .call(&call(
                1,
                "start_python",
                json!({"file_name": "sleeper.py", "args": [token]}),
            ))
            .await;
        let run_id = structured(&started)["run_id"].as_str().unwrap().to_owned();
        assert!(eventually(|| !processes_carrying(&token).is_empty()).await);
        let cancelled = session
            .call(&call(2, "cancel_run", json!({"run_id": run_id})))
            .await;
        assert_eq!(
            run_status(structured(&cancelled)),
            RunStatus::Cancelled,
            "{cancelled}"
        );
        assert!(
            eventually(|| processes_carrying(&token).is_empty()).await,
            "the run survived cancel_run"
        );
    }

    #[tokio::test]
    async fn a_client_gone_during_a_long_poll_leaves_the_run_and_the_server_going() {
        let projects = projects();
        let server = HttpServer::start(projects.path(), &[]);
        let session = McpSession::open(&server, None).await;
        let token = unique_token("bg-poll");
        let started = session
            .call(&call(
                1,
                "start_python",
                json!({"file_name": "sleeper.py", "args": [token]}),
            ))
            .await;
        let run_id = structured(&started)["run_id"].as_str().unwrap().to_owned();
        assert!(eventually(|| !processes_carrying(&token).is_empty()).await);
        let poll = session
            .stream(&call(
                2,
                "get_run",
                json!({"run_id": run_id, "wait_seconds": 30, "stdout_offset": 9}),
            ))
            .await;
        drop(poll);
        // The run is not the poll's: it goes on, and the server answers at once.
        let state = get_run(&session, 3, json!({"run_id": run_id})).await;
        assert_eq!(
            run_status(structured(&state)),
            RunStatus::Running,
            "{state}"
        );
        assert!(!processes_carrying(&token).is_empty());
        let hello = session.call(&run_python(4, "hello_world.py", None)).await;
        assert!(result_text(&hello).contains("Hello, World!"), "{hello}");
        session
            .call(&call(5, "cancel_run", json!({"run_id": run_id})))
            .await;
    }
}

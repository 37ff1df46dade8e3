//! MCP Tasks (SEP-2663) with a client we did not write: rmcp's own client declares the Tasks
//! extension, so `run_python` comes back as a task. `tasks/get` reports the run's last line as
//! its status message and, in the end, the ordinary `run_python` result; `tasks/cancel` kills the
//! process tree; the run is listed by `list_runs` as a task; another caller cannot see the task;
//! a client without the extension sees no change.

use std::time::Duration;

use pyrun_mcp_tests::procs::{processes_carrying, unique_token};
use pyrun_mcp_tests::{bin_path, HttpServer, ServerLaunch};
use rmcp::model::ProtocolVersion;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelTaskParams, CancelTaskRequest,
    ClientCapabilities, ClientConfig, ClientRequest, GetTaskParams, GetTaskRequest, Implementation,
    ServerResult,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::RoleClient;
use serde_json::{json, Value};

const TOKEN: &str = "tasks-test-token-0123456789";

/// Prints a line, then waits for the `go` file the test writes; then prints the end.
const WAITS: &str = r#"
import os, sys, time
print("warming up", flush=True)
print("epoch 1 loss 0.5", flush=True)
here = os.path.dirname(__file__)
while not os.path.exists(os.path.join(here, "go")):
    time.sleep(0.02)
print("done", flush=True)
"#;

const SLEEPER: &str = "import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n";

struct Fixture {
    _dir: tempfile::TempDir,
    projects: std::path::PathBuf,
    server: HttpServer,
}

fn server(extra: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let projects = dir.path().join("projects");
    std::fs::create_dir(&projects).unwrap();
    std::fs::write(projects.join("waits.py"), WAITS).unwrap();
    std::fs::write(projects.join("sleeper.py"), SLEEPER).unwrap();
    let server = ServerLaunch::new(bin_path("pyrun-mcp-server"), &projects)
        .args(["--auth-token", TOKEN])
        .args(extra)
        .http();
    Fixture {
        _dir: dir,
        projects,
        server,
    }
}

async fn client(server: &HttpServer, tasks: bool) -> RunningService<RoleClient, ClientConfig> {
    client_with(server, tasks, TOKEN).await
}

async fn client_with(
    server: &HttpServer,
    tasks: bool,
    token: &str,
) -> RunningService<RoleClient, ClientConfig> {
    let capabilities = if tasks {
        // (rmcp's capability builder is behind its server features; the wire form is the same)
        serde_json::from_value(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}))
            .expect("capabilities")
    } else {
        ClientCapabilities::default()
    };
    let info = ClientConfig::new(capabilities, Implementation::new("rmcp-tasks-test", "0"));
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            server.mcp_url(),
        )
        .auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    if tasks {
        // A Tasks client speaks 2026-07-28: its capabilities travel in every request's `_meta`,
        // which is where the server looks before it answers with a task.
        let modern = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        info.serve_with_lifecycle(transport, modern)
            .await
            .expect("server/discover")
    } else {
        info.serve(transport).await.expect("initialize")
    }
}

/// A 2025-11-25 client that declares the extension at `initialize` only, as the MCP Inspector
/// does (and then expects plain results).
async fn legacy_client_declaring_tasks(
    server: &HttpServer,
) -> RunningService<RoleClient, ClientConfig> {
    let capabilities: ClientCapabilities =
        serde_json::from_value(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}))
            .expect("capabilities");
    let info = ClientConfig::new(capabilities, Implementation::new("legacy-tasks", "0"));
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            server.mcp_url(),
        )
        .auth_header(TOKEN);
    let transport = StreamableHttpClientTransport::from_config(config);
    info.serve(transport).await.expect("initialize")
}

fn as_json(result: &ServerResult) -> Value {
    serde_json::to_value(result).expect("a result serializes")
}

async fn call(client: &RunningService<RoleClient, ClientConfig>, tool: &str, args: Value) -> Value {
    let Value::Object(arguments) = args else {
        panic!("arguments are an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    let result = client
        .send_request(ClientRequest::CallToolRequest(CallToolRequest::new(params)))
        .await
        .expect("tools/call");
    as_json(&result)
}

async fn get_task(client: &RunningService<RoleClient, ClientConfig>, id: &str) -> Value {
    let result = client
        .send_request(ClientRequest::GetTaskRequest(GetTaskRequest::new(
            GetTaskParams::new(id),
        )))
        .await
        .expect("tasks/get");
    as_json(&result)
}

/// Polls `tasks/get` until `done` says so; the last answer.
async fn task_until(
    client: &RunningService<RoleClient, ClientConfig>,
    id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..300 {
        let task = get_task(client, id).await;
        if done(&task) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "task {id} never reached the state; last: {}",
        get_task(client, id).await
    );
}

#[tokio::test]
async fn run_python_runs_as_a_task_for_a_client_that_declares_the_extension() {
    let fixture = server(&[]);
    let client = client(&fixture.server, true).await;
    let created = call(&client, "run_python", json!({"file_name": "waits.py"})).await;
    assert_eq!(created["resultType"], "task", "{created}");
    let task_id = created["taskId"].as_str().expect("a task id").to_owned();
    assert_eq!(created["status"], "working", "{created}");
    assert!(created["ttlMs"].as_u64().unwrap() > 3_600_000, "{created}");

    // The status message follows the script's output while it runs.
    let working = task_until(&client, &task_id, |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("epoch 1 loss 0.5"))
    })
    .await;
    assert_eq!(working["status"], "working", "{working}");
    assert!(
        working["statusMessage"]
            .as_str()
            .unwrap()
            .starts_with("running waits.py ("),
        "{working}"
    );

    // The run is a background run of kind task, readable with the run tools.
    let listed = call(&client, "list_runs", json!({})).await;
    let runs = &listed["structuredContent"]["runs"];
    assert_eq!(runs[0]["kind"], "task", "{listed}");
    assert_eq!(runs[0]["status"], "running", "{listed}");

    std::fs::write(fixture.projects.join("go"), "").unwrap();
    let done = task_until(&client, &task_id, |t| t["status"] != "working").await;
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{done}");
    assert_eq!(
        result["structuredContent"]["stdout"], "warming up\nepoch 1 loss 0.5\ndone\n",
        "{done}"
    );
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{done}");
    client.cancel().await.ok();
}

#[tokio::test]
async fn tasks_cancel_kills_the_process_tree_and_a_client_without_the_extension_sees_no_change() {
    let fixture = server(&[]);
    let client = client(&fixture.server, true).await;
    let token = unique_token("task-sleeper");
    let created = call(
        &client,
        "run_python",
        json!({"file_name": "sleeper.py", "args": [token]}),
    )
    .await;
    let task_id = created["taskId"].as_str().expect("a task id").to_owned();
    for _ in 0..100 {
        if !processes_carrying(&token).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !processes_carrying(&token).is_empty(),
        "the task's run never started"
    );

    client
        .send_request(ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
            CancelTaskParams::new(task_id.clone()),
        )))
        .await
        .expect("tasks/cancel");
    let cancelled = task_until(&client, &task_id, |t| t["status"] != "working").await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    for _ in 0..100 {
        if processes_carrying(&token).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        processes_carrying(&token).is_empty(),
        "the run survived tasks/cancel"
    );

    // A client without the extension gets an ordinary result from run_python.
    let plain = client_plain(&fixture.server).await;
    let result = call(
        &plain,
        "run_python",
        json!({"file_name": "waits.py", "timeout_seconds": 1}),
    )
    .await;
    assert!(result.get("taskId").is_none(), "{result}");
    assert_eq!(result["structuredContent"]["timed_out"], true, "{result}");
    plain.cancel().await.ok();

    // Nor does a 2025-11-25 client that declared the extension only at `initialize`.
    let legacy = legacy_client_declaring_tasks(&fixture.server).await;
    let result = call(
        &legacy,
        "run_python",
        json!({"file_name": "waits.py", "timeout_seconds": 1}),
    )
    .await;
    assert!(result.get("taskId").is_none(), "{result}");
    assert_eq!(result["structuredContent"]["timed_out"], true, "{result}");
    legacy.cancel().await.ok();
    client.cancel().await.ok();
}

async fn client_plain(server: &HttpServer) -> RunningService<RoleClient, ClientConfig> {
    client(server, false).await
}

/// A token for an OAuth client of `server` (started with `--oauth`), obtained the way a
/// browser and a client would: registration, the consent page, the code exchange.
async fn oauth_token(server: &HttpServer) -> String {
    use pyrun_mcp_tests::oauth::{approve, exchange_code, register_client};
    let redirect = "http://127.0.0.1:9/callback";
    let client_id = register_client(server, "other caller", redirect).await;
    let code = approve(server, &client_id, redirect, OWNER).await;
    let tokens = exchange_code(server, &client_id, redirect, &code).await;
    tokens["access_token"]
        .as_str()
        .expect("an access token")
        .to_owned()
}

const OWNER: &str = "owner password for tasks";

#[tokio::test]
async fn a_task_and_a_run_of_another_caller_are_unknown_to_it() {
    let fixture = server(&["--oauth", "--oauth-owner-password", OWNER]);
    let owner = client(&fixture.server, true).await;
    let created = call(&owner, "run_python", json!({"file_name": "waits.py"})).await;
    let task_id = created["taskId"].as_str().expect("a task id").to_owned();
    let listed = call(&owner, "list_runs", json!({})).await;
    let run_id = listed["structuredContent"]["runs"][0]["run_id"]
        .as_str()
        .expect("the task's run")
        .to_owned();

    let other_token = oauth_token(&fixture.server).await;
    let other = client_with(&fixture.server, true, &other_token).await;
    let foreign = other
        .send_request(ClientRequest::GetTaskRequest(GetTaskRequest::new(
            GetTaskParams::new(task_id.clone()),
        )))
        .await;
    let foreign = format!("{:?}", foreign.expect_err("a foreign task is an error"));
    let unknown = other
        .send_request(ClientRequest::GetTaskRequest(GetTaskRequest::new(
            GetTaskParams::new("00000000-0000-0000-0000-000000000000"),
        )))
        .await;
    let unknown = format!("{:?}", unknown.expect_err("an unknown task is an error"));
    assert_eq!(
        foreign.replace(&task_id, "ID"),
        unknown.replace("00000000-0000-0000-0000-000000000000", "ID")
    );
    let cancel = other
        .send_request(ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
            CancelTaskParams::new(task_id.clone()),
        )))
        .await;
    assert!(cancel.is_err(), "another caller cancelled the task");

    // The run tools say the same: no such run, nothing listed, nothing cancelled.
    let read = call(&other, "get_run", json!({"run_id": run_id})).await;
    assert_eq!(read["isError"], true, "{read}");
    assert!(read["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("no run with id"));
    let cancelled = call(&other, "cancel_run", json!({"run_id": run_id})).await;
    assert_eq!(cancelled["isError"], true, "{cancelled}");
    let theirs = call(&other, "list_runs", json!({})).await;
    assert_eq!(theirs["structuredContent"]["runs"], json!([]), "{theirs}");

    // The owner's task went on untouched.
    let still = get_task(&owner, &task_id).await;
    assert_eq!(still["status"], "working", "{still}");
    std::fs::write(fixture.projects.join("go"), "").unwrap();
    let done = task_until(&owner, &task_id, |t| t["status"] != "working").await;
    assert_eq!(done["status"], "completed", "{done}");
    other.cancel().await.ok();
    owner.cancel().await.ok();
}

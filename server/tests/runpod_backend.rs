//! The RunPod backend's settings, through the real binary: without `--runpod-endpoint` the
//! server offers exactly what it did; with it, only the `backend` argument of the file-run tools
//! and `backend_status` are added; an endpoint without its key stops the server at start. (Runs
//! on RunPod's SDK worker are the real-client tests' `runpod_backend`.)

use std::process::Command;
use std::time::Duration;

use pyrun_mcp_tests::{StdioServer, TempProjects};
use serde_json::{json, Value};

const KEY_VAR: &str = "RUNPOD_API_KEY";
const KEY: &str = "rpa_settings_test_key";

fn tools(server: &mut StdioServer) -> Vec<Value> {
    let listed = server.request("tools/list", json!({}));
    let mut tools = listed["result"]["tools"].as_array().cloned().unwrap();
    tools.sort_by_key(|t| t["name"].as_str().unwrap_or_default().to_owned());
    tools
}

fn with_runpod(projects: &TempProjects) -> StdioServer {
    // Nothing listens on port 1: listing tools sends nothing.
    StdioServer::start_with_env(
        projects.path(),
        &[
            "--runpod-endpoint",
            "ep-1",
            "--runpod-api-url",
            "http://127.0.0.1:1",
        ],
        None,
        &[(KEY_VAR, KEY)],
    )
}

#[test]
fn without_a_runpod_endpoint_tools_list_is_unchanged_and_with_one_only_backend_and_backend_status_are_added(
) {
    let projects = TempProjects::named("runpod-tools").file("hello.py", "print('hi')");
    let plain = tools(&mut StdioServer::start(projects.path(), &[]));
    let text = serde_json::to_string(&plain).unwrap();
    assert!(
        !text.contains("backend"),
        "no backend without an endpoint: {text}"
    );

    let mut remote = tools(&mut with_runpod(&projects));
    assert!(remote.iter().any(|t| t["name"] == "backend_status"));
    remote.retain(|t| t["name"] != "backend_status");
    for tool in &mut remote {
        let name = tool["name"].as_str().unwrap().to_owned();
        // `get_mut`, not indexing: indexing would add a `properties: null` to schemas without.
        let backend = tool
            .get_mut("inputSchema")
            .and_then(|schema| schema.get_mut("properties"))
            .and_then(Value::as_object_mut)
            .and_then(|properties| properties.remove("backend"));
        if name == "run_python" || name == "start_python" {
            let backend = backend.unwrap_or_else(|| panic!("{name} takes a backend"));
            assert_eq!(backend["enum"], json!(["local", "runpod"]), "{backend}");
        } else {
            assert!(backend.is_none(), "{name} takes no backend");
        }
    }
    // Compared as text: a mismatch shows as the two JSON documents, not a debug dump.
    assert_eq!(
        serde_json::to_string_pretty(&remote).unwrap(),
        serde_json::to_string_pretty(&plain).unwrap(),
        "the RunPod backend changes nothing else in tools/list"
    );
}

#[test]
fn a_backend_the_server_does_not_have_is_a_clear_tool_error_and_local_runs_as_before() {
    let projects = TempProjects::named("runpod-none").file("hello.py", "print('hi')");
    let mut server = StdioServer::start(projects.path(), &[]);
    let refused = server.call(
        "run_python",
        json!({"file_name": "hello.py", "backend": "runpod"}),
    );
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("'runpod' is not one of this server's: local"),
        "{text}"
    );
    let local = server.call(
        "run_python",
        json!({"file_name": "hello.py", "backend": "local"}),
    );
    assert_eq!(local["structuredContent"]["exit_code"], 0, "{local}");
    assert_eq!(local["structuredContent"]["stdout"], "hi\n", "{local}");
}

#[test]
fn a_runpod_endpoint_without_its_key_stops_the_server_with_a_hint() {
    let projects = TempProjects::named("runpod-nokey");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"));
    pyrun_mcp_tests::scrub_env(&mut cmd)
        .env("NO_COLOR", "1")
        .arg("--projects-dir")
        .arg(projects.path())
        .args(["--transport", "stdio", "--runpod-endpoint", "ep-1"]);
    let out = pyrun_mcp_tests::run_bounded(&mut cmd, Duration::from_secs(30));
    assert!(!out.success(), "{}", out.describe());
    let stderr = &out.stderr;
    assert!(
        stderr.contains("--runpod-endpoint needs RUNPOD_API_KEY"),
        "{stderr}"
    );
    assert!(stderr.contains("docs/runpod.md"), "{stderr}");
}

/// A local run on a server holding the key hunts for it in every process's environment and
/// command line it can see (the server's own, its parent's): the sandbox shows it none.
#[test]
fn a_local_run_finds_the_key_in_no_process_it_can_see() {
    let hunt = r#"
import os, sys
found = []
try:
    pids = os.listdir("/proc")
except OSError:
    pids = []
for pid in pids:
    if not pid.isdigit():
        continue
    for what in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{what}", "rb").read()
        except Exception:
            continue
        if KEY.encode() in data:
            found.append(f"{pid}/{what}")
for name in (f"/proc/{os.getppid()}/environ", "/proc/1/environ", "/proc/self/environ"):
    try:
        if KEY.encode() in open(name, "rb").read():
            found.append(name)
    except Exception:
        pass
print("FOUND" if found else "CLEAN", found)
"#
    .replace("KEY", &format!("{KEY:?}"));
    let projects = TempProjects::named("runpod-hunt").file("hunt.py", &hunt);
    let mut server = with_runpod(&projects);
    let ran = server.call("run_python", json!({"file_name": "hunt.py"}));
    let text = ran.to_string();
    assert!(!text.contains(KEY), "{text}");
    assert_eq!(ran["structuredContent"]["exit_code"], 0, "{ran}");
    let stdout = ran["structuredContent"]["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("CLEAN"), "{stdout}");

    for backend in [
        "RunPod",
        "runpod ",
        "runpod\u{0}",
        "local,runpod",
        "../runpod",
    ] {
        let refused = server.call(
            "run_python",
            json!({"file_name": "hunt.py", "backend": backend}),
        );
        assert_eq!(refused["isError"], true, "{backend:?}: {refused}");
        assert!(!refused.to_string().contains(KEY), "{refused}");
    }
}

/// A run that tries to plant a hard link to a host file in its project (which a later snapshot
/// would pack as a plain file and send to RunPod): the sandbox refuses every one.
#[test]
fn a_run_cannot_hard_link_a_host_file_into_its_project() {
    let plant = r#"
import os
made = []
for target in ("/etc/passwd", "/etc/shadow", "/etc/hostname", "/usr/bin/env"):
    name = "planted_" + os.path.basename(target)
    try:
        os.link(target, name)
        made.append(target)
    except OSError as e:
        pass
print("MADE" if made else "NONE", made)
"#;
    let projects = TempProjects::named("runpod-hardlink").file("proj/plant.py", plant);
    let mut server = with_runpod(&projects);
    let ran = server.call("run_python", json!({"file_name": "proj/plant.py"}));
    assert_eq!(ran["structuredContent"]["exit_code"], 0, "{ran}");
    let stdout = ran["structuredContent"]["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("NONE"), "{stdout}");
    let left: Vec<_> = std::fs::read_dir(projects.path().join("proj"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("planted_"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A caller at its background-run quota asks for a remote run of a big project: refused for
/// its quota before anything of the project is read and packed (else each refused call still
/// costs the server a snapshot).
#[test]
fn a_caller_at_its_quota_is_refused_before_its_project_is_packed() {
    // Random bytes hardly compress: 3 files under the per-file cap, over RunPod's 10 MB.
    let noise = |seed: u64| {
        let mut x = seed | 1;
        (0..4_500_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect::<Vec<u8>>()
    };
    let projects = TempProjects::named("runpod-quota")
        .file("slow.py", "import time\ntime.sleep(60)")
        .file("big/main.py", "print(1)")
        .file("big/a.bin", noise(1))
        .file("big/b.bin", noise(2))
        .file("big/c.bin", noise(3));
    let mut server = StdioServer::start_with_env(
        projects.path(),
        &[
            "--runpod-endpoint",
            "ep-1",
            "--runpod-api-url",
            "http://127.0.0.1:1",
            "--max-background-runs-per-caller",
            "1",
        ],
        None,
        &[(KEY_VAR, KEY)],
    );
    let slow = server.call("start_python", json!({"file_name": "slow.py"}));
    assert!(slow["structuredContent"]["run_id"].is_string(), "{slow}");
    let refused = server.call(
        "start_python",
        json!({"file_name": "big/main.py", "backend": "runpod"}),
    );
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("--max-background-runs-per-caller"), "{text}");
    assert!(
        !text.contains("too large"),
        "the project was packed first: {text}"
    );
}

/// A stand-in for RunPod's API that answers every request with a healthy endpoint's `/health`
/// and counts the requests. Returns its base URL and the count.
fn counting_health_api() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let body = r#"{"workers":{"idle":1,"running":0},"jobs":{"inQueue":0}}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, count)
}

/// A client calling `backend_status` in a loop cannot spend the operator's RunPod rate limit:
/// answers come from a short cache, and the endpoint is asked again once it has aged.
#[test]
fn backend_status_answers_from_a_short_cache() {
    let (url, asked) = counting_health_api();
    let projects = TempProjects::named("runpod-cache");
    let mut server = StdioServer::start_with_env(
        projects.path(),
        &["--runpod-endpoint", "ep-1", "--runpod-api-url", &url],
        None,
        &[(KEY_VAR, KEY)],
    );
    for _ in 0..5 {
        let status = server.call("backend_status", json!({}));
        assert_eq!(status["structuredContent"]["key_works"], true, "{status}");
        assert_eq!(
            status["structuredContent"]["workers"]["idle"], 1,
            "{status}"
        );
    }
    let count = || asked.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        count(),
        1,
        "five backend_status calls asked RunPod {} times",
        count()
    );
    std::thread::sleep(Duration::from_secs(6));
    server.call("backend_status", json!({}));
    assert_eq!(count(), 2, "an aged answer is asked again");
}

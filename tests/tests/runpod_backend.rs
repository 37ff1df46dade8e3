//! The RunPod backend end to end, without the cloud: the real server binary sends runs to the
//! worker handler this repository ships (`runpod/handler.py`), served by RunPod's own SDK
//! (`runpod` from PyPI, its local test API `--rp_serve_api` on a loopback port), driven from the
//! official Python MCP SDK and from our client CLI.
//!
//! The SDK's local server serves `/run`, `/stream/{id}` and `/status/{id}` at its root (stream
//! and status by POST) and has no `/cancel` or `/health`; its stream answers once the job has
//! run. So cancel, health and output that arrives while a job runs are tested against a small
//! loopback stand-in that answers as RunPod documents its cloud API
//! (`tests/clients/runpod_standin.py`, routes under `/v2/{endpoint}/`, GET polling). Between the
//! two, the server's settings differ only in the base URL and the polling method. Nothing here
//! reaches beyond 127.0.0.1.

use std::path::Path;

use pyrun_mcp_tests::projects::TempProjects;
use pyrun_mcp_tests::runpod::{cloud_standin, sdk_worker, LoopbackServer};
use pyrun_mcp_tests::server::HttpServer;
use pyrun_mcp_tests::{args, bin_path, python_client, ServerLaunch};
use serde_json::{json, Value};

const TOKEN: &str = "runpod-backend-token";
/// The API key the server holds: it must appear nowhere but in the Authorization header.
const KEY: &str = "rpa_TESTKEY_never_shown_4242";
const KEY_VAR: &str = "RUNPOD_API_KEY";

/// A script that shows what it got (argv, stdin, a data file of its project, whether `.env`
/// travelled), its environment, leaves an artifact and exits 3.
const MAIN: &str = r#"
import json, os, sys
print("argv", sys.argv[1:])
print("stdin", sys.stdin.read())
print("data", open("data/info.txt").read().strip())
print("dotenv travelled", os.path.exists(".env"))
print("env", json.dumps(dict(os.environ)))
open(os.path.join(os.environ["PYRUN_OUTPUT_DIR"], "result.txt"), "w").write("made on the worker")
print("to stderr", file=sys.stderr)
sys.exit(3)
"#;

/// Prints, starts a child that would outlive it, and sleeps past any limit.
const SLOW: &str = r#"
import subprocess, sys, time
print("started", flush=True)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
time.sleep(120)
"#;

/// Kills the worker process it runs under: a worker that crashes mid-job.
const CRASH: &str = r#"
import os, signal
print("about to take the worker down", flush=True)
os.kill(os.getppid(), signal.SIGKILL)
"#;

fn projects() -> TempProjects {
    TempProjects::named("runpod")
        .file("gpu/main.py", MAIN)
        .file("gpu/slow.py", SLOW)
        .file("gpu/crash.py", CRASH)
        .file("gpu/lost.py", "print('never runs')")
        .file("gpu/data/info.txt", "from the snapshot")
        .file("gpu/.env", format!("SECRET={KEY}"))
}

/// The server with the RunPod backend at `api_url`, polling by `poll`.
fn server(projects: &Path, api_url: &str, poll: &str, audit: &Path) -> HttpServer {
    server_with(projects, api_url, poll, audit, &[])
}

fn server_with(
    projects: &Path,
    api_url: &str,
    poll: &str,
    audit: &Path,
    extra: &[&str],
) -> HttpServer {
    ServerLaunch::new(bin_path("pyrun-mcp-server"), projects)
        .args(extra)
        .args(["--auth-token", TOKEN, "--runpod-endpoint", "ep-test"])
        .args(["--runpod-api-url", api_url, "--runpod-poll", poll])
        .args([std::ffi::OsStr::new("--audit-log"), audit.as_os_str()])
        .env(KEY_VAR, KEY)
        .log("debug")
        .http()
}

/// The SDK worker, holding the key as RunPod's workers hold theirs: the handler keeps it from runs.
fn worker() -> LoopbackServer {
    sdk_worker(&[(KEY_VAR, KEY), ("RUNPOD_AI_API_KEY", KEY)])
}

fn steps(server: &HttpServer, steps: Value) -> Value {
    python_client(
        "python_sdk_runpod.py",
        &args(&[
            "--http",
            &server.mcp_url(),
            "--token",
            TOKEN,
            "--steps",
            &steps.to_string(),
        ]),
    )
}

fn assert_key_nowhere(server: &HttpServer, report: &Value, audit: &Path) {
    let audit_text = std::fs::read_to_string(audit).unwrap_or_default();
    assert!(!audit_text.is_empty(), "the audit log recorded the calls");
    for (what, text) in [
        ("the server's log", server.logs()),
        ("the results", report.to_string()),
        ("the audit log", audit_text),
    ] {
        assert!(
            !text.contains(KEY),
            "the API key appears in {what}:\n{text}"
        );
    }
}

#[test]
fn a_project_file_runs_on_the_sdk_worker_with_output_exit_code_artifact_and_a_followed_run() {
    let worker = worker();
    let projects = projects();
    let audit_dir = tempfile::tempdir().unwrap();
    let audit = audit_dir.path().join("audit.jsonl");
    let server = server(projects.path(), &worker.url(), "post", &audit);
    let main = json!({"file_name": "gpu/main.py", "backend": "runpod", "args": ["a b", "c"], "stdin": "fed"});
    let report = steps(
        &server,
        json!([
            {"call": "run_python", "args": main},
            {"follow": {"file_name": "gpu/main.py", "backend": "runpod"}},
            {"call": "list_runs"},
            {"call": "run_python", "args": {"file_name": "gpu/slow.py", "backend": "runpod", "timeout_seconds": 2}},
            {"call": "run_python", "args": {"file_name": "gpu/main.py", "backend": "elsewhere"}},
            {"call": "run_python", "args": {"file_name": "gpu/main.py", "stdin": "here"}},
        ]),
    );
    let steps = report["steps"].as_array().unwrap();

    // A finished run: output, stderr, exit code, the artifact, through the store's checks.
    let ran = &steps[0];
    let text = ran["text"].as_str().unwrap();
    assert_eq!(ran["is_error"], false, "{ran}");
    assert_eq!(ran["structured"]["exit_code"], 3, "{ran}");
    assert!(text.contains("argv ['a b', 'c']"), "{text}");
    assert!(text.contains("stdin fed"), "{text}");
    assert!(text.contains("data from the snapshot"), "{text}");
    assert!(text.contains("dotenv travelled False"), "{text}");
    assert!(
        ran["structured"]["stderr"]
            .as_str()
            .unwrap()
            .contains("to stderr"),
        "{ran}"
    );
    assert_eq!(
        ran["structured"]["artifacts"][0]["name"], "result.txt",
        "{ran}"
    );
    // None of this machine's sandbox layers is claimed for a run on the worker.
    assert_eq!(ran["structured"]["sandbox"], json!([]), "{ran}");
    // The run's environment is the handler's allowlist: none of the worker's RunPod names.
    let env_line = text.lines().find(|l| l.starts_with("env ")).unwrap();
    assert!(!env_line.contains("RUNPOD"), "{env_line}");

    // A background run followed by offsets with get_run to its end, then listed with its backend.
    let followed = &steps[1];
    assert_eq!(
        followed["last"]["structured"]["status"], "exited",
        "{followed}"
    );
    assert_eq!(followed["last"]["structured"]["exit_code"], 3, "{followed}");
    assert!(
        followed["stdout"]
            .as_str()
            .unwrap()
            .contains("data from the snapshot"),
        "{followed}"
    );
    let listed = &steps[2]["structured"]["runs"];
    let entry = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == followed["run_id"])
        .unwrap_or_else(|| panic!("the run is listed: {listed}"));
    assert_eq!(entry["backend"], "runpod", "{entry}");
    assert!(
        steps[2]["text"].as_str().unwrap().contains("on runpod"),
        "{}",
        steps[2]
    );

    // The time limit travels: the worker kills the script (and its child) at 2 s.
    let slow = &steps[3];
    assert_eq!(slow["structured"]["timed_out"], true, "{slow}");
    assert!(slow["text"].as_str().unwrap().contains("started"), "{slow}");
    assert!(slow["seconds"].as_f64().unwrap() < 30.0, "{slow}");

    // An unknown backend is a clear tool error; no backend is a local run, as before.
    assert_eq!(steps[4]["is_error"], true, "{}", steps[4]);
    assert!(
        steps[4]["text"]
            .as_str()
            .unwrap()
            .contains("'elsewhere' is not one of this server's: local runpod"),
        "{}",
        steps[4]
    );
    assert_eq!(steps[5]["structured"]["exit_code"], 3, "{}", steps[5]);
    assert!(
        steps[5]["text"]
            .as_str()
            .unwrap()
            .contains("dotenv travelled True"),
        "{}",
        steps[5]
    );

    // The tools take `backend`, naming the configured backends.
    let schema = &report["tools"]["run_python"]["properties"]["backend"];
    assert_eq!(schema["enum"], json!(["local", "runpod"]), "{schema}");
    assert!(report["tools"]["start_python"]["properties"]["backend"].is_object());
    assert_key_nowhere(&server, &report, &audit);
    eprintln!(
        "RunPod round trip through the SDK's local server: {:.0} ms for run_python (local: {:.0} ms); \
         followed run: first output after {:.0} ms, result after {:.0} ms",
        steps[0]["seconds"].as_f64().unwrap() * 1000.0,
        steps[5]["seconds"].as_f64().unwrap() * 1000.0,
        followed["first_output_s"].as_f64().unwrap_or(f64::NAN) * 1000.0,
        followed["total_s"].as_f64().unwrap() * 1000.0,
    );
}

#[test]
fn a_project_over_runpods_request_limit_is_refused_naming_the_limit_and_the_largest_files() {
    // Random bytes do not compress: three files of 4 MiB make a request over 10 MB.
    let noise = |seed: u64| -> Vec<u8> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (0..4 * 1024 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    };
    let projects = TempProjects::named("runpod-big")
        .file("big/main.py", "print('never sent')")
        .file("big/weights-a.bin", noise(1))
        .file("big/weights-b.bin", noise(2))
        .file("big/weights-c.bin", noise(3));
    let audit_dir = tempfile::tempdir().unwrap();
    let audit = audit_dir.path().join("audit.jsonl");
    // Nothing listens there: a refusal must come before anything is sent.
    let nowhere = format!("http://127.0.0.1:{}", pyrun_mcp_tests::free_port());
    let server = server(projects.path(), &nowhere, "post", &audit);
    let report = steps(
        &server,
        json!([
            {"call": "run_python", "args": {"file_name": "big/main.py", "backend": "runpod"}},
            {"call": "start_python", "args": {"file_name": "big/main.py", "backend": "runpod"}},
        ]),
    );
    for step in report["steps"].as_array().unwrap() {
        let text = step["text"].as_str().unwrap();
        assert_eq!(step["is_error"], true, "{step}");
        assert!(
            text.contains("over RunPod's limit of 10000000 bytes"),
            "{text}"
        );
        assert!(text.contains("'weights-a.bin' (4194304 bytes)"), "{text}");
        assert!(!text.contains(projects.path().to_str().unwrap()), "{text}");
    }
}

#[test]
fn a_worker_that_crashes_mid_job_ends_the_run_failed_saying_runpod_lost_it() {
    let mut worker = worker();
    let projects = projects();
    let audit_dir = tempfile::tempdir().unwrap();
    let audit = audit_dir.path().join("audit.jsonl");
    let server = server(projects.path(), &worker.url(), "post", &audit);
    let report = steps(
        &server,
        json!([{"call": "run_python", "args": {"file_name": "gpu/crash.py", "backend": "runpod"}}]),
    );
    let crashed = &report["steps"][0];
    assert_eq!(crashed["is_error"], true, "{crashed}");
    assert!(
        crashed["text"]
            .as_str()
            .unwrap()
            .contains("RunPod lost the job"),
        "{crashed}"
    );
    assert!(crashed["seconds"].as_f64().unwrap() < 60.0, "{crashed}");
    assert!(!worker.is_running(), "the script took its worker down");
    assert_key_nowhere(&server, &report, &audit);
}

#[test]
fn against_runpods_cloud_api_a_job_streams_live_is_retried_cancelled_handed_over_fails_in_runpods_words_and_health_is_read(
) {
    // RunPod's cloud API as documented, on loopback: the only difference from the SDK worker's
    // settings is the base URL (with the endpoint id) and polling by GET (the default).
    let standin = cloud_standin(KEY);
    let projects = projects();
    let audit_dir = tempfile::tempdir().unwrap();
    let audit = audit_dir.path().join("audit.jsonl");
    let api_url = format!("{}/v2/{{endpoint}}", standin.url());
    let server = server_with(
        projects.path(),
        &api_url,
        "get",
        &audit,
        &["--detach-after", "1"],
    );
    let report = steps(
        &server,
        json!([
            {"cancel": {"file_name": "gpu/slow.py", "backend": "runpod"}},
            {"call": "backend_status"},
            {"detach": {"file_name": "gpu/slow.py", "backend": "runpod"}},
            {"call": "run_python", "args": {"file_name": "gpu/lost.py", "backend": "runpod"}},
        ]),
    );
    let cancelled = &report["steps"][0];
    // Live output: get_run saw the job running and printing before it ended.
    assert!(
        cancelled["stdout"].as_str().unwrap().contains("tick 1"),
        "{cancelled}"
    );
    assert!(
        cancelled["statuses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "running"),
        "{cancelled}"
    );
    assert_eq!(
        cancelled["cancelled"]["structured"]["status"], "cancelled",
        "{cancelled}"
    );
    let health = &report["steps"][1]["structured"];
    assert_eq!(health["key_works"], true, "{health}");
    assert_eq!(health["workers"]["idle"], 1, "{health}");
    assert!(health["jobs"]["inQueue"].is_number(), "{health}");

    // --detach-after hands a remote run over like a local one; cancel_run stops its job.
    let detached = &report["steps"][2];
    assert_eq!(
        detached["handed"]["structured"]["status"], "running",
        "{detached}"
    );
    assert!(
        detached["handed"]["text"]
            .as_str()
            .unwrap()
            .contains("goes on in the background"),
        "{detached}"
    );
    assert_eq!(
        detached["cancelled"]["structured"]["status"], "cancelled",
        "{detached}"
    );
    // A job RunPod reports failed ends the run failed, in RunPod's words.
    let lost = &report["steps"][3];
    assert_eq!(lost["is_error"], true, "{lost}");
    assert!(
        lost["text"]
            .as_str()
            .unwrap()
            .contains("the RunPod job failed: worker exited unexpectedly (job lost)"),
        "{lost}"
    );

    let requests = standin.requests();
    // The stand-in refused the first submit (503): the client retried it.
    let submits = requests
        .iter()
        .filter(|r| r["method"] == "POST" && r["path"] == "/v2/ep-test/run")
        .count();
    assert_eq!(submits, 4, "three runs, one submit retried: {requests:?}");
    assert_eq!(
        requests
            .iter()
            .filter(|r| r["path"]
                .as_str()
                .unwrap()
                .starts_with("/v2/ep-test/cancel/"))
            .count(),
        2,
        "{requests:?}"
    );
    let seen = |method: &str, prefix: &str| {
        requests
            .iter()
            .any(|r| r["method"] == method && r["path"].as_str().unwrap().starts_with(prefix))
    };
    assert!(seen("POST", "/v2/ep-test/run"), "{requests:?}");
    assert!(seen("GET", "/v2/ep-test/stream/standin-"), "{requests:?}");
    assert!(seen("POST", "/v2/ep-test/cancel/standin-"), "{requests:?}");
    assert!(seen("GET", "/v2/ep-test/health"), "{requests:?}");
    // The key travels only as the bearer header, on every request.
    assert!(
        requests
            .iter()
            .all(|r| r["authorization"] == format!("Bearer {KEY}")),
        "{requests:?}"
    );
    assert_key_nowhere(&server, &report, &audit);
}

#[test]
fn our_client_cli_runs_a_file_on_runpod_and_saves_its_artifact() {
    let worker = worker();
    let projects = projects();
    let audit_dir = tempfile::tempdir().unwrap();
    let audit = audit_dir.path().join("audit.jsonl");
    let server = server(projects.path(), &worker.url(), "post", &audit);
    let saved = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin_path("pyrun-mcp-client"))
        .args([
            "--server",
            &server.mcp_url(),
            "--token",
            TOKEN,
            "call",
            "run_python",
        ])
        .args(["--arg", "file_name=gpu/main.py", "--arg", "backend=runpod"])
        .arg("--save-artifacts")
        .arg(saved.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("data from the snapshot"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(saved.path().join("result.txt")).unwrap(),
        "made on the worker"
    );
}

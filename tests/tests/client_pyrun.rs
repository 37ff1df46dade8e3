//! `pyrun-mcp-client` against our server over stdio, Streamable HTTP (/mcp) and legacy SSE (/sse):
//! what a person or a CI script sees — output, exit codes, errors — including Ctrl-C cancelling a run.

use std::path::Path;
#[cfg(target_os = "linux")]
use std::time::Duration;

use crate::util::*;
use predicates::prelude::*;
use pyrun_mcp_tests::{free_port, HttpServer, StdioCommand};
use serde_json::Value;

const TOKEN: &str = "client-test-token";

/// One way to reach our server: the `--server` value plus the folder the server runs scripts from.
enum Server {
    Stdio(StdioCommand),
    Http(HttpServer),
    Sse(HttpServer),
}

impl Server {
    fn stdio() -> Self {
        Self::Stdio(StdioCommand::new(&[]))
    }
    fn http() -> Self {
        Self::Http(HttpServer::samples(&["--auth-token", TOKEN]))
    }
    fn sse() -> Self {
        Self::Sse(HttpServer::samples(&["--auth-token", TOKEN]))
    }

    fn target(&self) -> String {
        match self {
            Self::Stdio(cmd) => command_line(&cmd.program, &cmd.args),
            Self::Http(server) => server.mcp_url(),
            Self::Sse(server) => server.sse_url(),
        }
    }

    fn projects(&self) -> &Path {
        match self {
            Self::Stdio(cmd) => cmd.projects.path(),
            Self::Http(server) | Self::Sse(server) => server.projects(),
        }
    }

    /// The client with `--server` and, for HTTP, the token (from the environment, as CI would).
    fn client(&self) -> assert_cmd::Command {
        let mut cmd = client();
        cmd.arg("--server").arg(self.target());
        if !matches!(self, Self::Stdio(_)) {
            cmd.env("MCP_AUTH_TOKEN", TOKEN);
        }
        cmd
    }
}

/// Everything a smoke test of a server does, over one transport.
fn smoke(server: &Server) {
    server.client().arg("tools").assert().success().stdout(
        predicate::str::contains("run_python").and(predicate::str::contains("list_python_files")),
    );

    server
        .client()
        .args(["run", "hello_world.py"])
        .assert()
        .code(0)
        .stdout("Hello, World!\n");

    // The script's exit code becomes ours; its stdout and stderr stay apart.
    server
        .client()
        .args(["run", "error_test.py"])
        .assert()
        .code(1)
        .stdout("This line prints fine.\nSo does this one.\n")
        .stderr(predicate::str::contains("NameError"));

    server
        .client()
        .args(["run", "calculator.py"])
        .assert()
        .code(0)
        .stdout(predicate::str::ends_with("All tests passed!\n"));

    let files = server.client().arg("files").assert().success();
    let files = String::from_utf8_lossy(&files.get_output().stdout).into_owned();
    for expected in [
        "hello_world.py",
        "error_test.py",
        "calculator.py",
        "mathpkg/main.py",
    ] {
        assert!(
            files.lines().any(|l| l == expected),
            "`files` lacks {expected}:\n{files}"
        );
    }

    let call = server
        .client()
        .args([
            "--json",
            "call",
            "run_python",
            "--arg",
            "file_name=hello_world.py",
        ])
        .assert()
        .success();
    let result: Value =
        serde_json::from_slice(&call.get_output().stdout).expect("--json prints JSON");
    assert_eq!(
        result["structuredContent"]["stdout"], "Hello, World!\n",
        "{result}"
    );
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    assert_eq!(result["isError"], false, "{result}");

    let ping = server
        .client()
        .args(["--json", "ping", "-n", "3"])
        .assert()
        .success();
    let ping: Value =
        serde_json::from_slice(&ping.get_output().stdout).expect("--json prints JSON");
    assert_eq!(ping["rtt_ms"].as_array().map(Vec::len), Some(3), "{ping}");

    // A tool the server lacks, and arguments its schema rejects, have their own exit codes.
    server
        .client()
        .args(["call", "no_such_tool"])
        .assert()
        .code(16)
        .stderr(
            predicate::str::contains("no_such_tool").and(predicate::str::contains("run_python")),
        );
    server
        .client()
        .args([
            "call",
            "run_python",
            "--arg",
            "timeout_seconds=soon",
            "--arg",
            "file_name=x.py",
        ])
        .assert()
        .code(17)
        .stderr(predicate::str::contains("timeout_seconds"));

    // A refused run (no such file) is the tool's error, not a script exit code.
    server
        .client()
        .args(["run", "missing.py"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("missing.py"));
}

#[test]
fn smoke_test_over_stdio() {
    smoke(&Server::stdio());
}

#[test]
fn smoke_test_over_streamable_http() {
    smoke(&Server::http());
}

#[test]
fn smoke_test_over_sse() {
    smoke(&Server::sse());
}

/// Ctrl-C during a run: the client exits 130 and the script's process is gone afterwards (checked
/// through /proc, hence Linux only).
#[cfg(target_os = "linux")]
fn ctrl_c_cancels_the_run(server: &Server) {
    add_sleeper(server.projects());
    let target = server.target();
    let mut args = vec!["--server", &target];
    if !matches!(server, Server::Stdio(_)) {
        args.extend(["--token", TOKEN]);
    }
    args.extend(["run", "sleeper.py"]);
    let mut child = spawn_client(&args);
    let beat = wait_for_sleeper(server.projects(), &mut child);
    assert!(
        sleeper_alive(&beat),
        "the script should be running before Ctrl-C"
    );

    interrupt(child.id());
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "Ctrl-C must exit 130");
    assert!(
        sleeper_gone_within(&beat, Duration::from_secs(10)),
        "the script still runs after the client was interrupted"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_cancels_the_run_over_stdio() {
    ctrl_c_cancels_the_run(&Server::stdio());
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_cancels_the_run_over_streamable_http() {
    ctrl_c_cancels_the_run(&Server::http());
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_cancels_the_run_over_sse() {
    ctrl_c_cancels_the_run(&Server::sse());
}

#[test]
fn timeouts_exit_124() {
    let server = Server::http();
    add_sleeper(server.projects());
    // The script's own limit, enforced by the server.
    server
        .client()
        .args(["run", "--script-timeout", "1", "sleeper.py"])
        .assert()
        .code(124)
        .stdout("sleeping\n");
    // The client's --timeout: the call is cancelled and the script does not outlive it.
    std::fs::remove_file(sleeper_beat(server.projects())).expect("remove the heartbeat file");
    server
        .client()
        .args(["--timeout", "2", "run", "sleeper.py"])
        .assert()
        .code(124)
        .stderr(predicate::str::contains("timed out"));
    #[cfg(target_os = "linux")]
    {
        let beat = sleeper_beat(server.projects());
        assert!(beat.exists(), "the script never ran");
        assert!(
            sleeper_gone_within(&beat, Duration::from_secs(10)),
            "the script outlived --timeout"
        );
    }
}

#[test]
fn http_auth_errors_say_what_to_do() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    for url in [server.mcp_url(), server.sse_url()] {
        client()
            .args(["--server", &url, "tools"])
            .assert()
            .code(11)
            .stderr(
                predicate::str::contains("401").and(predicate::str::contains("MCP_AUTH_TOKEN")),
            );
        client()
            .args(["--server", &url, "--token", "wrong", "tools"])
            .assert()
            .code(11)
            .stderr(predicate::str::contains("rejected the token"));
        // A Host the server does not serve (as through an unconfigured tunnel).
        client()
            .args([
                "--server",
                &url,
                "--token",
                TOKEN,
                "--header",
                "Host: tunnel.example",
                "ping",
            ])
            .assert()
            .code(12)
            .stderr(predicate::str::contains("--allowed-host"));
        client()
            .args(["--server", &url, "--token", TOKEN, "ping"])
            .assert()
            .success();
    }
}

#[test]
fn connection_errors_have_their_own_exit_codes() {
    let port = free_port();
    for path in ["mcp", "sse"] {
        client()
            .args([
                "--server",
                &format!("http://127.0.0.1:{port}/{path}"),
                "tools",
            ])
            .assert()
            .code(10)
            .stderr(
                predicate::str::contains("connection refused")
                    .and(predicate::str::contains("is the server running")),
            );
    }
    client()
        .args(["--server", "definitely-not-a-command-pyrun --x", "tools"])
        .assert()
        .code(10)
        .stderr(predicate::str::contains("cannot start"));

    // https:// to a plain-HTTP server fails the TLS handshake.
    let server = HttpServer::samples(&[]);
    let https = server.mcp_url().replacen("http://", "https://", 1);
    client()
        .args(["--server", &https, "tools"])
        .assert()
        .code(13)
        .stderr(predicate::str::contains("TLS"));

    // A wrong path on a live server.
    client()
        .args(["--server", &format!("{}/nothing", server.base), "tools"])
        .assert()
        .code(14);

    // An HTML page where JSON was expected (a tunnel's browser warning), over both transports.
    let html = html_page_server();
    for path in ["mcp", "sse"] {
        client()
            .args(["--server", &format!("{html}/{path}"), "tools"])
            .assert()
            .code(14)
            .stderr(
                predicate::str::contains("HTML")
                    .and(predicate::str::contains("ngrok-skip-browser-warning")),
            );
    }
}

#[test]
fn usage_errors_exit_2() {
    client()
        .arg("tools")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("MCP_SERVER_URL"));
    client()
        .args([
            "--server",
            "http://127.0.0.1:1/mcp",
            "--header",
            "no colon",
            "tools",
        ])
        .assert()
        .code(2);
    // No subcommand and stdin is not a terminal: no menu, a usage error.
    client()
        .args(["--server", "x", "--json"])
        .write_stdin("")
        .assert()
        .code(2);
}

#[test]
fn interactive_menu_runs_a_file() {
    let server = Server::stdio();
    server
        .client()
        .arg("interactive")
        // List files; run a file (picked by path, no arguments, no stdin); list tools; quit.
        .write_stdin("2\n1\nerror_test.py\n\n\n3\nq\n")
        .assert()
        .success()
        .stdout(
            predicate::str::contains("mathpkg/main.py")
                .and(predicate::str::contains("This line prints fine."))
                .and(predicate::str::contains("run_python")),
        )
        .stderr(
            predicate::str::contains("[exit code 1]").and(predicate::str::contains("NameError")),
        );
}

// ---- Issue 15: background runs, artifacts, resources and prompts -------------------------------

/// A run id no server ever gave out (well formed, so the client asks the server).
const UNKNOWN_RUN: &str = "run_00000000000000000000000000000000";

/// The client's stdout as text.
fn stdout_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

#[test]
fn run_commands_refuse_a_stdio_server_and_bad_run_ids_before_connecting() {
    // The command would fail to start if it were ever run: nothing connects.
    let stdio = "pyrun-mcp-server-that-does-not-exist --transport stdio";
    for args in [
        vec!["runs"],
        vec!["logs", UNKNOWN_RUN, "--follow"],
        vec!["cancel", UNKNOWN_RUN],
        vec!["run", "--detach", "hello_world.py"],
    ] {
        client()
            .args(["--server", stdio])
            .args(&args)
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("needs an HTTP server")
                    .and(predicate::str::contains("--transport http")),
            );
    }
    for bad in ["12", "run_XYZ", "run_../../etc"] {
        for command in ["logs", "cancel"] {
            client()
                .args(["--server", "http://127.0.0.1:1/mcp", command, bad])
                .assert()
                .code(2)
                .stderr(predicate::str::contains("not a run id"));
        }
    }
    // Detaching and saving artifacts exclude each other (the artifacts come after the end).
    client()
        .args(["--server", "http://127.0.0.1:1/mcp", "run", "--detach"])
        .args(["--save-artifacts", "out", "hello_world.py"])
        .assert()
        .code(2);
}

/// A stdio MCP server whose one tool links to artifacts with hostile names, as no real pyrun-mcp
/// server sends them; every `resources/read` it gets is appended to `reads.log` next to it. Its
/// resource list comes in two pages.
const HOSTILE_LINKS_SERVER: &str = r#"
import base64, json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
LINKS = [
    ("good.txt", "fake://good"),
    ("sub/nested.bin", "fake://nested"),
    ("../escape.txt", "fake://escape"),
    (os.path.join(HERE, "absolute.txt"), "fake://absolute"),
    ("..\\backslash.txt", "fake://backslash"),
    ("new\nline.txt", "fake://newline"),
]
BLOBS = {"fake://nested": b"\x89PNG\r\n\x1a\n\x00\xff"}

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue
    params = message.get("params") or {}
    result = None
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "hostile-links", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "make_files", "description": "links to files",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        content = [{"type": "text", "text": "made files"}]
        content += [{"type": "resource_link", "name": n, "uri": u} for n, u in LINKS]
        result = {"content": content, "isError": False}
    elif method == "resources/list":
        if params.get("cursor") is None:
            result = {"resources": [{"uri": "fake://good", "name": "good"}], "nextCursor": "p2"}
        else:
            result = {"resources": [{"uri": "fake://nested", "name": "nested",
                                     "mimeType": "image/png", "size": 10}]}
    elif method == "resources/read":
        uri = params["uri"]
        with open(os.path.join(HERE, "reads.log"), "a") as log:
            log.write(uri + "\n")
        if uri in BLOBS:
            data = base64.b64encode(BLOBS[uri]).decode()
            contents = {"uri": uri, "mimeType": "image/png", "blob": data}
        else:
            contents = {"uri": uri, "mimeType": "text/plain", "text": "written by " + uri}
        result = {"contents": [contents]}
    if result is None:
        send({"jsonrpc": "2.0", "id": request_id,
              "error": {"code": -32601, "message": "no " + method}})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
"#;

/// Writes the hostile-links server into `dir`; returns its `--server` command line.
fn hostile_links_server(dir: &Path) -> String {
    let script = dir.join("hostile_links.py");
    std::fs::write(&script, HOSTILE_LINKS_SERVER).expect("write the fake server");
    command_line(&pyrun_mcp_tests::python(), &[script.display().to_string()])
}

#[test]
fn save_artifacts_writes_safe_names_and_refuses_names_that_would_leave_the_folder() {
    let root = tempfile::tempdir().expect("a temporary folder");
    let server_dir = root.path().join("server");
    std::fs::create_dir(&server_dir).expect("create the server folder");
    let target = hostile_links_server(&server_dir);
    let out = root.path().join("out");

    let assert = client()
        .args([
            "--server",
            &target,
            "call",
            "make_files",
            "--save-artifacts",
        ])
        .arg(&out)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("made files"))
        .stderr(
            predicate::str::contains("4 artifact(s) not saved")
                .and(predicate::str::contains(r#""../escape.txt": refused"#))
                .and(predicate::str::contains("absolute path"))
                .and(predicate::str::contains("backslash"))
                .and(predicate::str::contains("control character")),
        );
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("saved "), "{stderr}");

    // The safe ones are there, byte for byte, subfolder included.
    assert_eq!(
        std::fs::read_to_string(out.join("good.txt"))
            .ok()
            .as_deref(),
        Some("written by fake://good")
    );
    assert_eq!(
        std::fs::read(out.join("sub").join("nested.bin")).ok(),
        Some(b"\x89PNG\r\n\x1a\n\x00\xff".to_vec())
    );
    // Nothing landed outside the folder, and the hostile links were never even read.
    assert!(!root.path().join("escape.txt").exists());
    assert!(!server_dir.join("absolute.txt").exists());
    let mut entries: Vec<String> = std::fs::read_dir(&out)
        .expect("list the save folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["good.txt", "sub"]);
    let reads = std::fs::read_to_string(server_dir.join("reads.log")).unwrap_or_default();
    assert_eq!(reads, "fake://good\nfake://nested\n");
}

/// Writes `gated.py` into `projects`: prints `first`, waits (up to a minute) until `go` appears
/// next to it, prints `second` to stdout and `warned` to stderr, and exits with code 3.
fn add_gated_script(projects: &Path) {
    let script = r#"
import os, sys, time
print("first", flush=True)
for _ in range(1200):
    if os.path.exists("go"):
        break
    time.sleep(0.05)
print("second", flush=True)
print("warned", file=sys.stderr, flush=True)
sys.exit(3)
"#;
    std::fs::write(projects.join("gated.py"), script).expect("write gated.py");
}

/// `run --detach FILE` on `server`: the run id it prints.
fn detach(server: &Server, file: &str) -> String {
    let assert = server
        .client()
        .args(["run", "--detach", file])
        .assert()
        .success()
        .stderr(predicate::str::contains("logs").and(predicate::str::contains("--follow")));
    let id = stdout_of(&assert).trim().to_owned();
    assert!(
        id.len() == 36 && id.starts_with("run_"),
        "`run --detach` printed {id:?}, not a run id"
    );
    id
}

#[test]
fn a_detached_run_is_followed_as_it_prints_and_exits_with_its_code() {
    let server = Server::http();
    add_gated_script(server.projects());
    let id = detach(&server, "gated.py");

    // `logs --follow` shows `first` while the script still waits for `go`.
    let mut follow = std::process::Command::new(pyrun_mcp_tests::bin_path("pyrun-mcp-client"))
        .args([
            "--server",
            &server.target(),
            "--token",
            TOKEN,
            "logs",
            &id,
            "--follow",
        ])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start logs --follow");
    let stdout = follow.stdout.take().expect("piped stdout");
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            if lines_tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let first = lines.recv_timeout(Duration::from_secs(60));
    assert_eq!(first.as_deref().ok(), Some("first"));
    assert!(
        follow.try_wait().expect("poll the client").is_none(),
        "logs --follow ended while the run was still going"
    );
    std::fs::write(server.projects().join("go"), "").expect("let the script go on");
    let second = lines.recv_timeout(Duration::from_secs(60));
    assert_eq!(second.as_deref().ok(), Some("second"));
    let status = wait_with_limit(&mut follow, Duration::from_secs(60));
    assert_eq!(
        status.code(),
        Some(3),
        "logs --follow must exit with the run's code"
    );

    // Read again after the end: the whole output, both streams, the same exit code.
    server
        .client()
        .args(["logs", &id])
        .assert()
        .code(3)
        .stdout("first\nsecond\n")
        .stderr(predicate::str::contains("warned"));
    let json = server
        .client()
        .args(["--json", "logs", &id])
        .assert()
        .code(3);
    let log: Value = serde_json::from_slice(&json.get_output().stdout).expect("--json prints JSON");
    assert_eq!(log["stdout"], "first\nsecond\n", "{log}");
    assert_eq!(log["status"], "exited", "{log}");

    // Another session over the other transport, same token: the run is still there.
    if let Server::Http(http) = &server {
        client()
            .args(["--server", &http.sse_url(), "--token", TOKEN, "logs", &id])
            .assert()
            .code(3)
            .stdout("first\nsecond\n");
    }

    // `runs` lists it with its state.
    let runs = server.client().arg("runs").assert().success();
    let listed = stdout_of(&runs);
    let row = listed.lines().find(|l| l.starts_with(&id));
    assert!(
        row.is_some_and(|r| r.contains("exited") && r.contains("gated.py")),
        "`runs` does not show the run:\n{listed}"
    );
    let runs = server.client().args(["--json", "runs"]).assert().success();
    let runs: Value = serde_json::from_slice(&runs.get_output().stdout).expect("JSON");
    assert_eq!(runs["runs"][0]["run_id"], id.as_str(), "{runs}");
}

#[cfg(target_os = "linux")]
#[test]
fn cancel_stops_a_background_run_while_ctrl_c_and_timeout_on_logs_do_not() {
    let server = Server::http();
    add_sleeper(server.projects());
    let id = detach(&server, "sleeper.py");
    let beat = wait_for_beat(server.projects());
    assert!(
        sleeper_alive(&beat),
        "the run should be going before cancel"
    );

    // --timeout on `logs --follow` stops following, not the run.
    server
        .client()
        .args(["--timeout", "1", "logs", &id, "--follow"])
        .assert()
        .code(124)
        .stdout(predicate::str::starts_with("sleeping\n"))
        .stderr(predicate::str::contains("the run goes on in the server"));
    assert!(
        sleeper_alive(&beat),
        "--timeout on logs --follow stopped the run itself"
    );

    // Ctrl-C on `logs --follow` stops following, not the run.
    let target = server.target();
    let mut follow = spawn_client(&[
        "--server", &target, "--token", TOKEN, "logs", &id, "--follow",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        follow.try_wait().expect("poll the client").is_none(),
        "logs --follow ended while the run was still going"
    );
    interrupt(follow.id());
    let status = wait_with_limit(&mut follow, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "Ctrl-C must exit 130");
    assert!(
        sleeper_alive(&beat),
        "Ctrl-C on logs --follow stopped the run itself"
    );

    server
        .client()
        .args(["cancel", &id])
        .assert()
        .success()
        .stdout(format!("{id} cancelled\n"));
    assert!(
        sleeper_gone_within(&beat, Duration::from_secs(10)),
        "the script still runs after cancel"
    );
    server
        .client()
        .args(["logs", &id, "--follow"])
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with("sleeping\n"))
        .stderr(predicate::str::contains("cancelled"));
}

/// Waits until the sleeper's heartbeat file exists (a detached run has no client to watch).
#[cfg(target_os = "linux")]
fn wait_for_beat(projects: &Path) -> std::path::PathBuf {
    let beat = sleeper_beat(projects);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !beat.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the detached script did not start within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    beat
}

#[test]
fn unknown_run_ids_are_the_servers_clear_error() {
    let server = Server::http();
    for command in ["logs", "cancel"] {
        server
            .client()
            .args([command, UNKNOWN_RUN])
            .assert()
            .code(1)
            .stderr(
                predicate::str::contains("no run with id")
                    .and(predicate::str::contains(UNKNOWN_RUN))
                    .and(predicate::str::contains("`pyrun-mcp-client runs`")),
            );
    }
}

/// Writes `artifacts.py` into `projects`: prints `made`, writes `data.csv` and a small PNG into
/// `PYRUN_OUTPUT_DIR`, and a symbolic link to /etc/passwd (which the server does not keep).
fn add_artifact_script(projects: &Path) {
    let script = r#"
import base64, os
out = os.environ["PYRUN_OUTPUT_DIR"]
with open(os.path.join(out, "data.csv"), "w") as f:
    f.write("x,y\n1,2\n")
png = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
with open(os.path.join(out, "dot.png"), "wb") as f:
    f.write(png)
os.symlink("/etc/passwd", os.path.join(out, "pw"))
print("made")
"#;
    std::fs::write(projects.join("artifacts.py"), script).expect("write artifacts.py");
}

#[test]
fn run_and_logs_name_the_artifacts_and_what_the_server_skipped() {
    let server = Server::http();
    add_artifact_script(server.projects());
    let notes = || {
        predicate::str::contains("the run left 2 file(s): data.csv (8 B), dot.png (70 B)")
            .and(predicate::str::contains("--save-artifacts DIR"))
            .and(predicate::str::contains(
                "not kept: pw: not a regular file (symbolic link)",
            ))
    };
    server
        .client()
        .args(["run", "artifacts.py"])
        .assert()
        .code(0)
        .stdout("made\n")
        .stderr(notes());
    let id = detach(&server, "artifacts.py");
    server
        .client()
        .args(["logs", &id, "--follow"])
        .assert()
        .code(0)
        .stdout("made\n")
        .stderr(notes());
}

#[test]
fn run_saves_its_artifacts_and_read_fetches_one() {
    let server = Server::http();
    add_artifact_script(server.projects());
    let out = tempfile::tempdir().expect("a temporary folder");
    server
        .client()
        .args(["run", "artifacts.py", "--save-artifacts"])
        .arg(out.path())
        .assert()
        .code(0)
        .stdout("made\n")
        .stderr(predicate::str::contains("saved ").and(predicate::str::contains("dot.png")));
    assert_eq!(
        std::fs::read_to_string(out.path().join("data.csv"))
            .ok()
            .as_deref(),
        Some("x,y\n1,2\n")
    );
    let png = std::fs::read(out.path().join("dot.png")).unwrap_or_default();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "dot.png is not a PNG"
    );

    // A detached run's artifacts, saved once `logs --follow` has seen it end.
    let id = detach(&server, "artifacts.py");
    let later = out.path().join("later");
    server
        .client()
        .args(["logs", &id, "--follow", "--save-artifacts"])
        .arg(&later)
        .assert()
        .code(0)
        .stdout("made\n");
    assert_eq!(std::fs::read(later.join("dot.png")).ok(), Some(png.clone()));

    // Without the flag the run names what it left; `read -o` fetches one by its URI.
    let run = server
        .client()
        .args(["--json", "run", "artifacts.py"])
        .assert()
        .code(0);
    let result: Value = serde_json::from_slice(&run.get_output().stdout).expect("JSON");
    let artifacts = result["structuredContent"]["artifacts"].as_array().cloned();
    let png_uri = artifacts
        .unwrap_or_default()
        .iter()
        .find(|a| a["name"] == "dot.png")
        .and_then(|a| a["uri"].as_str().map(str::to_owned))
        .expect("dot.png among the artifacts");
    let copy = out.path().join("copy.png");
    server
        .client()
        .args(["read", &png_uri, "-o"])
        .arg(&copy)
        .assert()
        .success();
    assert_eq!(std::fs::read(&copy).ok(), Some(png));
    server
        .client()
        .args(["run", "artifacts.py"])
        .assert()
        .code(0)
        .stderr(
            predicate::str::contains("--save-artifacts").and(predicate::str::contains("data.csv")),
        );
}

#[test]
fn resources_and_prompts_show_the_project() {
    let server = Server::http();
    let listed = server.client().arg("resources").assert().success();
    assert!(
        stdout_of(&listed).contains("pyrun://projects/hello_world.py"),
        "{}",
        stdout_of(&listed)
    );
    let source =
        std::fs::read_to_string(server.projects().join("hello_world.py")).expect("read the sample");
    server
        .client()
        .args(["read", "pyrun://projects/hello_world.py"])
        .assert()
        .success()
        .stdout(source.clone());
    // The same containment as run_python: refused, with the server's reason.
    server
        .client()
        .args(["read", "pyrun://projects/../../etc/passwd"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("refused"));

    let prompts = server.client().arg("prompts").assert().success();
    for name in ["run-and-explain", "debug-script", "write-tests"] {
        assert!(
            stdout_of(&prompts).contains(name),
            "{}",
            stdout_of(&prompts)
        );
    }
    server
        .client()
        .args(["prompt", "run-and-explain", "--arg", "file=hello_world.py"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("--- pyrun://projects/hello_world.py ---")
                .and(predicate::str::contains(source.trim())),
        );
    server
        .client()
        .args(["prompt", "no-such-prompt"])
        .assert()
        .code(16)
        .stderr(predicate::str::contains("run-and-explain"));
    server
        .client()
        .args(["prompt", "debug-script"])
        .assert()
        .code(17)
        .stderr(predicate::str::contains("file"));
}

#[test]
fn resources_are_listed_across_pages_and_binary_reads_go_to_a_file() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let target = hostile_links_server(dir.path());
    let listed = client()
        .args(["--server", &target, "resources"])
        .assert()
        .success();
    let listed = stdout_of(&listed);
    assert!(
        listed.contains("fake://good") && listed.contains("fake://nested"),
        "both pages should be listed:\n{listed}"
    );
    let file = dir.path().join("nested.png");
    client()
        .args(["--server", &target, "read", "fake://nested", "-o"])
        .arg(&file)
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains("wrote 10 B"));
    assert_eq!(
        std::fs::read(&file).ok(),
        Some(b"\x89PNG\r\n\x1a\n\x00\xff".to_vec())
    );
    // Piped, the bytes go to stdout as they are.
    client()
        .args(["--server", &target, "read", "fake://nested"])
        .assert()
        .success()
        .stdout(predicate::eq(&b"\x89PNG\r\n\x1a\n\x00\xff"[..]));
    // A server without prompts says so.
    client()
        .args(["--server", &target, "prompts"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("does not offer prompts"));
}

/// Writes `slow_exit.py` into `projects`: prints `before`, sleeps 2.5 s, prints `after` (and
/// `warned` to stderr), exits 3.
fn add_slow_exit(projects: &Path) {
    let script = r#"
import sys, time
print("before", flush=True)
time.sleep(2.5)
print("after", flush=True)
print("warned", file=sys.stderr, flush=True)
sys.exit(3)
"#;
    std::fs::write(projects.join("slow_exit.py"), script).expect("write slow_exit.py");
}

#[test]
fn run_follows_a_run_the_server_hands_over_to_the_background() {
    let detach_after = ["--detach-after", "1"];
    for server in [
        Server::Stdio(StdioCommand::new(&detach_after)),
        Server::Http(HttpServer::samples(&[
            "--auth-token",
            TOKEN,
            "--detach-after",
            "1",
        ])),
    ] {
        add_slow_exit(server.projects());
        server
            .client()
            .args(["run", "slow_exit.py"])
            .assert()
            .code(3)
            .stdout("before\nafter\n")
            .stderr(
                predicate::str::contains("moved the run to the background")
                    .and(predicate::str::contains("warned")),
            );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_stops_a_run_the_server_handed_over() {
    let server = Server::Http(HttpServer::samples(&[
        "--auth-token",
        TOKEN,
        "--detach-after",
        "1",
    ]));
    add_sleeper(server.projects());
    let target = server.target();
    let mut child = spawn_client(&["--server", &target, "--token", TOKEN, "run", "sleeper.py"]);
    let beat = wait_for_sleeper(server.projects(), &mut child);
    // Past the hand-over: the client now follows the run with get_run.
    std::thread::sleep(Duration::from_secs(2));
    assert!(sleeper_alive(&beat), "the script should still be running");
    interrupt(child.id());
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "Ctrl-C must exit 130");
    assert!(
        sleeper_gone_within(&beat, Duration::from_secs(10)),
        "the handed-over script still runs after Ctrl-C"
    );
}

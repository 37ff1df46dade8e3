//! `pyrun-mcp-client` against our server over stdio, Streamable HTTP (/mcp) and legacy SSE (/sse):
//! what a person or a CI script sees — output, exit codes, errors — including Ctrl-C cancelling a run.

mod client_support;

use std::path::Path;
#[cfg(target_os = "linux")]
use std::time::Duration;

use client_support::*;
use predicates::prelude::*;
use pyrun_mcp_tests::{HttpServer, StdioCommand};
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
    let port = closed_port();
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
        .write_stdin("2\n1\nerror_test.py\n\n3\nq\n")
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

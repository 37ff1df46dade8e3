//! `pyrun-mcp-client` commands for the tools beyond `run`: `code` (run_python_code), `session
//! start|exec|stop|list` (across invocations against an HTTP server; within one `interactive`
//! over stdio), `install` and `packages`, each with `--json` and its documented exit codes.

use crate::util::*;
use pyrun_mcp_tests::{HttpServer, StdioCommand};

const TOKEN: &str = "client-tools-token";

/// `client --server TARGET ARGS…` with `input` on its stdin: exit code, stdout, stderr.
fn client_run(target: &str, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    let out = client()
        .env("MCP_AUTH_TOKEN", TOKEN)
        .arg("--server")
        .arg(target)
        .args(args)
        .write_stdin(input.as_bytes().to_vec())
        .output()
        .expect("run the client");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `code`: the code's output and exit code as ours, its arguments and stdin passed; `--json`
/// the whole result.
fn code_runs_like_run(target: &str) {
    let source = "import sys\nprint(sys.argv[1:])\nprint(input())\nsys.exit(4)";
    let (code, out, err) = client_run(target, &["code", "-i", source, "--", "a", "-b"], "hello\n");
    assert_eq!(code, Some(4), "{err}");
    assert_eq!(out, "['a', '-b']\nhello\n", "{err}");
    let (code, out, err) = client_run(target, &["--json", "code", "print(6 * 7)"], "");
    assert_eq!(code, Some(0), "{err}");
    let result: serde_json::Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert_eq!(result["structuredContent"]["stdout"], "42\n", "{out}");
    let file = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(file.path(), "raise SystemExit(3)\n").expect("write the code");
    let path = file.path().display().to_string();
    let (code, _, err) = client_run(target, &["code", "--file", &path], "");
    assert_eq!(code, Some(3), "{err}");
}

/// `packages` lists the environment's packages; `install` into a folder that is not there is
/// the tool's error (exit 1, its message on stderr).
fn packages_and_install(target: &str) {
    let (code, out, err) = client_run(target, &["--json", "packages"], "");
    assert_eq!(code, Some(0), "{err}");
    let result: serde_json::Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert!(result["structuredContent"]["packages"].is_array(), "{out}");
    let (code, _, err) = client_run(target, &["packages"], "");
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = client_run(target, &["install", "no_such_project", "requests"], "");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("install_packages"), "{err}");
    assert!(err.contains("no_such_project"), "{err}");
}

#[test]
fn code_packages_and_install_over_stdio() {
    let cmd = StdioCommand::new(&["--allow-inline-code", "--allow-install"]);
    let target = command_line(&cmd.program, &cmd.args);
    code_runs_like_run(&target);
    packages_and_install(&target);
}

#[test]
fn code_packages_and_install_over_http() {
    let server = HttpServer::samples(&[
        "--auth-token",
        TOKEN,
        "--allow-inline-code",
        "--allow-install",
    ]);
    code_runs_like_run(&server.mcp_url());
    packages_and_install(&server.mcp_url());
}

/// Without `--allow-inline-code` the server has no such tools: exit 16.
#[test]
fn code_and_sessions_on_a_server_without_inline_code_are_unknown_tools() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    let (code, _, err) = client_run(&server.mcp_url(), &["code", "print(1)"], "");
    assert_eq!(code, Some(16), "{err}");
    let (code, _, err) = client_run(&server.mcp_url(), &["session", "start"], "");
    assert_eq!(code, Some(16), "{err}");
}

/// A session lives across invocations against an HTTP server: variables kept, a raised
/// exception exit 1 with its traceback on stderr, listed, stopped.
#[test]
fn a_session_lasts_across_invocations_over_http() {
    let server = HttpServer::samples(&["--auth-token", TOKEN, "--allow-inline-code"]);
    let url = server.mcp_url();
    let (code, out, err) = client_run(&url, &["session", "start"], "");
    assert_eq!(code, Some(0), "{err}");
    let id = out.trim().to_owned();
    assert!(id.starts_with("ses_"), "{out}");
    let (code, _, err) = client_run(&url, &["session", "exec", &id, "x = 41"], "");
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = client_run(&url, &["session", "exec", &id, "print('p'); x + 1"], "");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "p\n42\n", "{err}");
    let (code, _, err) = client_run(&url, &["session", "exec", &id, "1 / 0"], "");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("ZeroDivisionError"), "{err}");
    let (code, out, err) = client_run(&url, &["session", "exec", &id, "--file", "-"], "x * 2\n");
    assert_eq!((code, out.as_str()), (Some(0), "82\n"), "{err}");
    let (code, out, err) = client_run(&url, &["session", "list"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&id), "{out}");
    let (code, out, _) = client_run(&url, &["--json", "session", "list"], "");
    assert_eq!(code, Some(0));
    let listed: serde_json::Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert_eq!(
        listed["structuredContent"]["sessions"][0]["session_id"],
        id.as_str()
    );
    let (code, _, err) = client_run(&url, &["session", "stop", &id], "");
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = client_run(&url, &["session", "exec", &id, "x"], "");
    assert_eq!(code, Some(1), "a stopped session is gone: {err}");
}

/// Over stdio a session cannot outlive the command (exit 2, saying why); within one
/// `interactive` it lives as long as the menu item.
#[test]
fn over_stdio_a_session_lives_within_interactive() {
    let cmd = StdioCommand::new(&["--allow-inline-code"]);
    let target = command_line(&cmd.program, &cmd.args);
    let (code, _, err) = client_run(&target, &["session", "start"], "");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("needs an HTTP server"), "{err}");
    let typed = "4\nx = 20\nfor i in range(2):\n    x += 1\n\nprint(x * 2)\n\nq\n";
    let (code, out, err) = client_run(&target, &["interactive"], typed);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("44\n"), "{out}\n{err}");
}

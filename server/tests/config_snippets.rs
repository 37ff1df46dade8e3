//! `pyrun-mcp-server config ASSISTANT`: the real binary prints a snippet that parses and points at
//! itself and at the projects folder; `--url` carries the token from the environment or `.env`.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn config(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"));
    for name in pyrun_mcp_server::config::ENV_VARS {
        cmd.env_remove(name);
    }
    cmd.args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    cmd.output().unwrap()
}

fn entry(out: &Output) -> Value {
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["mcpServers"]["pyrun"].clone()
}

#[test]
fn stdio_snippet_points_at_this_binary_and_the_projects_folder() {
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().join("my projects");
    std::fs::create_dir(&projects).unwrap();
    let out = config(
        dir.path(),
        &["--projects-dir", "my projects", "config", "claude-desktop"],
        &[],
    );
    let entry = entry(&out);
    let command = Path::new(entry["command"].as_str().unwrap());
    let this = dunce::canonicalize(env!("CARGO_BIN_EXE_pyrun-mcp-server")).unwrap();
    assert_eq!(command, this);
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = args.iter().position(|a| *a == "--projects-dir").unwrap();
    assert!(Path::new(args[at + 1]).is_absolute());
    assert_eq!(
        dunce::canonicalize(args[at + 1]).unwrap(),
        dunce::canonicalize(&projects).unwrap()
    );
    if let Some(at) = args.iter().position(|a| *a == "--python") {
        assert!(Path::new(args[at + 1]).is_file(), "{args:?}");
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("claude_desktop_config.json"));
}

#[test]
fn url_snippet_carries_the_token_from_dotenv() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "MCP_AUTH_TOKEN=from-dotenv-77\n").unwrap();
    let out = config(
        dir.path(),
        &["config", "cursor", "--url", "https://abc.ngrok-free.app"],
        &[],
    );
    let entry = entry(&out);
    assert_eq!(entry["url"], "https://abc.ngrok-free.app/mcp");
    assert_eq!(entry["headers"]["Authorization"], "Bearer from-dotenv-77");
}

#[test]
fn a_bad_url_or_folder_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = config(
        dir.path(),
        &["config", "cline", "--url", "abc.example"],
        &[],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'abc.example'"));
    assert!(out.stdout.is_empty());
    let out = config(
        dir.path(),
        &["--projects-dir", "missing", "config", "cursor"],
        &[],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--projects-dir"));
}

#[test]
fn a_claude_connector_needs_the_url_and_prints_only_it_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let out = config(dir.path(), &["config", "claude-ai"], &[]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--url"), "{err}");

    let out = config(
        dir.path(),
        &[
            "config",
            "claude-ai",
            "--url",
            "https://pyrun.ngrok-free.app",
        ],
        &[("MCP_AUTH_TOKEN", "never-shown-42")],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "https://pyrun.ngrok-free.app/mcp\n"
    );
    let steps = String::from_utf8_lossy(&out.stderr);
    assert!(
        steps.contains("Add custom connector") && steps.contains("--oauth"),
        "{steps}"
    );
    assert!(!steps.contains("never-shown-42"), "{steps}");
}

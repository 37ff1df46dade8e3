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

/// The command and arguments a snippet starts the server with (Claude Code's as a POSIX shell
/// splits it).
#[cfg(unix)]
fn started_by(assistant: &str, out: &Output) -> (String, Vec<String>) {
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    if assistant != "claude-code" {
        let entry = entry(out);
        let args = entry["args"].as_array().unwrap().iter();
        let args = args.map(|a| a.as_str().unwrap().to_owned()).collect();
        return (entry["command"].as_str().unwrap().to_owned(), args);
    }
    let script = format!("claude() {{ printf '%s\\0' \"$@\"; }}\n{text}");
    let words = Command::new("sh").args(["-c", &script]).output().unwrap();
    let words: Vec<String> = String::from_utf8(words.stdout)
        .unwrap()
        .split('\0')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    assert_eq!(words[..4], ["mcp", "add", "pyrun", "--"], "{text}");
    (words[4].clone(), words[5..].to_vec())
}

/// The settings given to `config` — flags before and after it, the environment, `.env` — are in
/// every assistant's snippet, and the server it starts runs with them; secrets and HTTP-only
/// settings are left out, saying so.
#[cfg(unix)]
#[test]
fn every_snippet_keeps_the_settings_given_and_starts_a_server_with_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("projects")).unwrap();
    std::fs::write(
        dir.path().join(".env"),
        "PYRUN_MAX_MEMORY_MB=1G\nMCP_AUTH_TOKEN=never-in-a-snippet-1\n\
         MCP_OAUTH_OWNER_PASSWORD=never-in-a-snippet-2\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let elsewhere = tempfile::tempdir().unwrap();
    for assistant in ["claude-desktop", "cursor", "cline", "claude-code"] {
        let out = config(
            dir.path(),
            &[
                "--projects-dir",
                "projects",
                "--allow-inline-code",
                "config",
                assistant,
                "--timeout",
                "120",
                "--bind",
                "0.0.0.0:9",
            ],
            &[
                ("PYRUN_ALLOW_NETWORK", "1"),
                ("PYRUN_STATE_DIR", state.to_str().unwrap()),
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stdout.contains("never-in-a-snippet") && !stderr.contains("never-in-a-snippet"),
            "{assistant}: a secret was printed:\n{stdout}\n{stderr}"
        );
        // The token and the owner password are for HTTP only: left out with the address.
        let left_out = stderr
            .lines()
            .find(|l| l.starts_with("note: left out"))
            .unwrap_or_else(|| panic!("{assistant}: no note of what was left out:\n{stderr}"));
        for flag in ["--bind", "--auth-token", "--oauth-owner-password"] {
            assert!(left_out.contains(flag), "{assistant}: {left_out}");
        }
        let (command, args) = started_by(assistant, &out);
        for given in [
            "--allow-inline-code",
            "--allow-network",
            "--timeout",
            "--max-memory-mb",
        ] {
            assert!(
                args.iter().any(|a| a == given),
                "{assistant}: {given} not in {args:?}"
            );
        }
        assert!(!args.iter().any(|a| a == "--bind"), "{args:?}");
        // Started as the assistant would: from another folder, without this environment.
        let mut cmd = Command::new(&command);
        for name in pyrun_mcp_server::config::ENV_VARS {
            cmd.env_remove(name);
        }
        cmd.args(&args).current_dir(elsewhere.path());
        let started = crate::settings_grammar::initialize(cmd);
        let said = started.instructions();
        assert!(said.contains("120 s per run"), "{assistant}: {said}");
        assert!(said.contains("memory 1024 MB"), "{assistant}: {said}");
        assert!(
            !crate::settings_grammar::inline_off(said),
            "{assistant}: {said}"
        );
        if cfg!(target_os = "linux") {
            assert!(
                !crate::settings_grammar::network_off(said),
                "{assistant}: {said}"
            );
        }
    }
}

/// A secret a stdio server needs (the RunPod key, read apart from the flags) is never written,
/// and the note says where to set it.
#[test]
fn a_secret_stays_out_of_the_snippet_with_a_line_saying_where_to_set_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("projects")).unwrap();
    std::fs::write(
        dir.path().join(".env"),
        "PYRUN_RUNPOD_ENDPOINT=abc123\nRUNPOD_API_KEY=never-in-a-snippet-3\n",
    )
    .unwrap();
    for assistant in ["claude-code", "cursor"] {
        let out = config(
            dir.path(),
            &["--projects-dir", "projects", "config", assistant],
            &[],
        );
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stdout.contains("--runpod-endpoint") && stdout.contains("abc123"),
            "{stdout}"
        );
        assert!(!stdout.contains("never-in-a-snippet") && !stderr.contains("never-in-a-snippet"));
        assert!(
            stderr.contains("RUNPOD_API_KEY is set here but not written into the snippet")
                && stderr.contains("claude mcp add -e RUNPOD_API_KEY="),
            "{stderr}"
        );
    }
}

//! The MCP Bundle for Claude Desktop: `scripts/bundle.sh` builds it, the official mcpb CLI
//! validates, packs and unpacks it, and the server starts exactly as its manifest's `mcp_config`
//! says, with the substitutions Claude Desktop applies (`${__dirname}`, `${user_config.*}`, an
//! optional setting left blank as an empty string) and a bare environment; then `tools/list` and
//! `run_python` over stdio.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::{bin_path, projects_copy, run_bounded, workspace_root};
use serde_json::{json, Value};

const LIMIT: Duration = Duration::from_secs(300);

/// Builds the bundle from this build's debug binaries into `out`; returns its path.
fn build_bundle(out: &Path) -> PathBuf {
    let root = workspace_root();
    let built = run_bounded(
        Command::new("bash")
            .arg(root.join("scripts/bundle.sh"))
            .arg("--out")
            .arg(out)
            .env("PYRUN_SERVER_BIN", bin_path("pyrun-mcp-server"))
            .env("PYRUN_CLIENT_BIN", bin_path("pyrun-mcp-client")),
        LIMIT,
    );
    assert!(built.success(), "scripts/bundle.sh failed: {built:?}");
    assert!(
        built.stdout.contains("Manifest schema validation passes"),
        "mcpb validate did not pass: {built:?}"
    );
    let bundle = PathBuf::from(built.stdout.lines().last().unwrap_or_default().trim());
    assert!(
        bundle.is_file(),
        "no bundle at {}: {built:?}",
        bundle.display()
    );
    bundle
}

/// `${...}` replaced as Claude Desktop does: `__dirname` and the user's settings; a setting left
/// blank becomes an empty string.
fn substitute(text: &str, dirname: &Path, user: &[(&str, &str)]) -> String {
    let mut text = text.replace("${__dirname}", dirname.to_str().unwrap());
    for key in ["projects_dir", "timeout", "python"] {
        let value = user.iter().find(|(k, _)| *k == key).map_or("", |(_, v)| v);
        text = text.replace(&format!("${{user_config.{key}}}"), value);
    }
    text
}

#[test]
fn the_bundle_validates_unpacks_and_serves_as_its_manifest_says() {
    let out = tempfile::tempdir().unwrap();
    let bundle = build_bundle(out.path());
    let name = bundle.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("pyrun-mcp-")
            && name.ends_with(&format!("-{}.mcpb", std::env::consts::ARCH)),
        "{name}"
    );

    let mcpb = workspace_root().join("target/mcpb-cli/node_modules/.bin/mcpb");
    let unpacked = out.path().join("unpacked");
    let unpack = run_bounded(
        Command::new(&mcpb)
            .arg("unpack")
            .arg(&bundle)
            .arg(&unpacked),
        LIMIT,
    );
    assert!(unpack.success(), "mcpb unpack: {unpack:?}");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(unpacked.join("manifest.json")).unwrap())
            .unwrap();
    let listed: Vec<&str> = manifest["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        listed.contains(&"run_python") && listed.contains(&"list_python_files"),
        "{listed:?}"
    );
    assert_eq!(manifest["user_config"]["projects_dir"]["type"], "directory");
    assert_eq!(manifest["user_config"]["projects_dir"]["required"], true);

    // As Claude Desktop starts it: the manifest's command, args and env, substituted; no
    // interpreter chosen (blank), and the bare environment (PATH without python3) it gives.
    let projects = projects_copy();
    let config = &manifest["server"]["mcp_config"];
    let user = [
        ("projects_dir", projects.path().to_str().unwrap()),
        ("timeout", "20"),
    ];
    let dirname = unpacked.canonicalize().unwrap();
    let command = substitute(config["command"].as_str().unwrap(), &dirname, &user);
    let mut cmd = Command::new(&command);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Claude Desktop unpacks with the modes the archive keeps; make sure the entry point runs.
        let mode = std::fs::metadata(&command).unwrap().permissions().mode();
        assert_ne!(
            mode & 0o111,
            0,
            "the bundled server is not executable: {mode:o}"
        );
    }
    // A bare environment, but a HOME of the test's: the server's state folder (the audit log)
    // goes under it, not into the developer's data folder.
    cmd.env_clear()
        .env("PATH", "/nonexistent-bin")
        .env("HOME", out.path());
    for arg in config["args"].as_array().unwrap() {
        cmd.arg(substitute(arg.as_str().unwrap(), &dirname, &user));
    }
    for (key, value) in config["env"].as_object().unwrap() {
        cmd.env(key, substitute(value.as_str().unwrap(), &dirname, &user));
    }
    cmd.current_dir(out.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut server = StdioServer::attach(cmd.spawn().unwrap()).unwrap();
    let tools = server.request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names.len(),
        listed.len(),
        "{names:?} vs the manifest's {listed:?}"
    );
    let result = server.call("run_python", json!({"file_name": "hello_world.py"}));
    assert_eq!(result["isError"], json!(false), "{result}");
    assert!(text(&result).contains("Hello, World!"), "{result}");
}

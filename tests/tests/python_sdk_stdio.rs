//! The official Python MCP SDK (`mcp`) drives `pyrun-mcp-server --transport stdio`, the way Claude
//! Desktop and friends launch it: in its `legacy` (initialize handshake) and `auto` (probes
//! `server/discover`, 2026-07-28 when the server speaks it) modes.

use pyrun_mcp_tests::{assert_standard_session, python_client, StdioCommand};

fn session(mode: &str) -> serde_json::Value {
    let server = StdioCommand::new(&[]);
    let mut args = vec!["--mode".to_owned(), mode.to_owned(), "--stdio".to_owned()];
    args.push(server.program.display().to_string());
    args.extend(server.args.iter().cloned());
    python_client("python_sdk.py", &args)
}

#[test]
fn legacy_mode_runs_the_samples() {
    let report = session("legacy");
    assert_standard_session(&report);
    assert_ne!(
        report["protocol_version"], "2026-07-28",
        "legacy mode must handshake"
    );
}

#[test]
fn auto_mode_runs_the_samples() {
    let report = session("auto");
    assert_standard_session(&report);
    // rmcp speaks the stateless era, so `auto` must have negotiated it rather than fallen back.
    assert_eq!(
        report["protocol_version"], "2026-07-28",
        "auto mode must go modern"
    );
}

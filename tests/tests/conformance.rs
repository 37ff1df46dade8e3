//! The official MCP conformance suite (`@modelcontextprotocol/conformance`) against `/mcp` of a
//! server built with the test-only `conformance` feature (its fixture tools, prompts and resources).
//! Every server scenario runs, pending ones included; a failure not listed in
//! `tests/conformance-baseline.txt` fails the test, and baseline entries that now pass are printed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pyrun_mcp_tests::{node_env, run_bounded, target_dir, workspace_root, ServerLaunch};
use serde_json::Value;

const SUITE_TIMEOUT: Duration = Duration::from_secs(600);

/// `pyrun-mcp-conformance-server`: the server built with the `conformance` feature under a name of
/// its own (so the normal binary never carries the fixtures), by `scripts/test.sh`; nothing is
/// built here.
fn conformance_binary() -> PathBuf {
    let binary = target_dir().join("debug").join(format!(
        "pyrun-mcp-conformance-server{}",
        std::env::consts::EXE_SUFFIX
    ));
    assert!(
        binary.is_file(),
        "{} is not built.\nhint: cargo build -p pyrun-mcp-server --features conformance \
         --bin pyrun-mcp-conformance-server (scripts/test.sh does)",
        binary.display(),
    );
    binary
}

/// `tests/conformance-baseline.txt`: scenario name → reason.
fn baseline() -> BTreeMap<String, String> {
    let path = workspace_root()
        .join("tests")
        .join("conformance-baseline.txt");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, reason) = l.split_once('#').unwrap_or((l, ""));
            (name.trim().to_owned(), reason.trim().to_owned())
        })
        .collect()
}

/// The server scenarios the installed suite knows (`conformance list --server`).
fn all_scenarios() -> BTreeSet<String> {
    let node = node_env();
    let mut cmd = node.command(&node.conformance);
    cmd.args(["list", "--server"]);
    let out = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(
        out.success(),
        "conformance list failed:\n{}",
        out.describe()
    );
    let names: BTreeSet<String> = out
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        names.len() >= 20,
        "too few scenarios listed:\n{}",
        out.describe()
    );
    names
}

/// Scenario name → failed checks (empty when it passed), from the suite's `-o DIR` results:
/// one folder `server-<scenario>-<timestamp>` per scenario, holding `checks.json`.
fn results(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut results = BTreeMap::new();
    for entry in std::fs::read_dir(dir)
        .expect("read results folder")
        .flatten()
    {
        let folder = entry.file_name().to_string_lossy().into_owned();
        // `2026-11-22T04-18-51-521Z` is 24 characters, preceded by a dash.
        let Some(name) = folder
            .strip_prefix("server-")
            .and_then(|rest| rest.len().checked_sub(25).map(|end| &rest[..end]))
        else {
            continue;
        };
        let checks = std::fs::read_to_string(entry.path().join("checks.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Vec<Value>>(&t).ok())
            .unwrap_or_default();
        let failed = checks
            .iter()
            .filter(|c| c["status"] == "FAILURE")
            .map(|c| format!("{}: {}", c["id"], c["errorMessage"]))
            .collect();
        results.insert(name.to_owned(), failed);
    }
    results
}

#[test]
fn official_conformance_suite_passes_all_but_the_baseline() {
    let binary = conformance_binary();
    let server = ServerLaunch::samples_of(binary).http();
    let node = node_env();
    let out_dir = tempfile::tempdir().expect("results folder");
    let mut cmd = node.command(&node.conformance);
    cmd.args(["server", "--suite", "all", "--url", &server.mcp_url(), "-o"])
        .arg(out_dir.path());
    let run = run_bounded(&mut cmd, SUITE_TIMEOUT);
    assert!(!run.timed_out, "the suite hung:\n{}", run.describe());

    let results = results(out_dir.path());
    let baseline = baseline();
    let mut regressions = Vec::new();
    for scenario in all_scenarios() {
        let failures = match results.get(&scenario) {
            Some(failures) => failures.clone(),
            None => vec!["no result (the scenario did not run or crashed)".to_owned()],
        };
        match (failures.is_empty(), baseline.get(&scenario)) {
            (true, Some(_)) => {
                println!(
                    "newly passing: {scenario} (remove it from tests/conformance-baseline.txt)"
                )
            }
            (true, None) => println!("pass: {scenario}"),
            (false, Some(reason)) => println!("known failure: {scenario} ({reason})"),
            (false, None) => {
                regressions.push(format!("{scenario}:\n    {}", failures.join("\n    ")))
            }
        }
    }
    assert!(
        regressions.is_empty(),
        "conformance scenarios failing that are not in tests/conformance-baseline.txt:\n{}\n\n\
         suite output:\n{}\n\nserver log:\n{}",
        regressions.join("\n"),
        run.describe(),
        server.logs()
    );
}

/// The suite's authorization scenarios (`auth/…`, `conformance list --client`) all test an OAuth
/// *client* against the suite's own authorization server; the pinned version has none for a
/// server, so `--oauth` is proven by the Python SDK and browser tests instead. When a new pin
/// brings server-side ones, this fails so that they are run against a `--oauth` server.
#[test]
fn the_pinned_suite_has_no_server_side_authorization_scenarios() {
    let auth: Vec<String> = all_scenarios()
        .into_iter()
        .filter(|s| s.contains("auth"))
        .collect();
    assert!(
        auth.is_empty(),
        "the conformance suite now tests servers' authorization ({auth:?}): run these scenarios \
         against a `--oauth` server (issue 14) and drop this test"
    );
}

//! The crate rules of the house: arrows point down only (server → remote → run → sandbox, api on
//! the ground, the client beside them knowing only api), no layer depends on the crates of the
//! layers above it (async runtime, CLI, MCP, HTTP, JSON where it has no business), and the
//! workspace keeps few integration test binaries so the suite links few times.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The house's layers, ground first: each may depend on the crates before it, never after.
pub const LAYERS: [&str; 5] = [
    "pyrun-api",
    "pyrun-sandbox",
    "pyrun-run",
    "pyrun-remote",
    "pyrun-mcp-server",
];

/// The crates beside the layers, and the only workspace crates each may depend on.
pub const BESIDE: [(&str, &[&str]); 3] = [
    ("pyrun-mcp-client", &["pyrun-api"]),
    ("pyrun-mcp-tests", &["pyrun-api"]),
    ("pyrun-mcp-bench", &["pyrun-api", "pyrun-mcp-tests"]),
];

/// The crates a layer must not reach, even through another crate (normal dependencies, every
/// platform): what would drag a layer above it, or its weight, into it.
pub const FORBIDDEN: [(&str, &[&str]); 5] = [
    (
        "pyrun-sandbox",
        &[
            "tokio",
            "clap",
            "rmcp",
            "axum",
            "hyper",
            "http",
            "serde_json",
            "reqwest",
        ],
    ),
    (
        "pyrun-run",
        &[
            "rmcp",
            "rmcp-macros",
            "axum",
            "hyper",
            "http",
            "clap",
            "reqwest",
            "schemars",
        ],
    ),
    (
        "pyrun-remote",
        &[
            "rmcp",
            "rmcp-macros",
            "axum",
            "clap",
            "schemars",
            "pyrun-mcp-server",
        ],
    ),
    (
        "pyrun-api",
        &["libc", "tokio", "pyrun-sandbox", "landlock", "rustix"],
    ),
    (
        "pyrun-mcp-client",
        &["pyrun-sandbox", "pyrun-run", "pyrun-mcp-server", "landlock"],
    ),
];

/// At most this many integration test binaries in the workspace: each links the whole crate
/// graph again.
pub const MAX_TEST_BINARIES: usize = 8;

/// The elements of a JSON array, or none when the value is not one.
pub fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Whether a cargo target is of this kind (`lib`, `bin`, `test`, …).
pub fn has_kind(target: &Value, kind: &str) -> bool {
    items(&target["kind"]).iter().any(|k| k == kind)
}

/// The normal dependencies (not dev, not build) each workspace package declares on another
/// workspace package, from `cargo metadata --no-deps`.
pub fn workspace_edges(metadata: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let packages = items(&metadata["packages"]);
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .filter_map(|p| {
            let name = p["name"].as_str()?;
            let deps = items(&p["dependencies"])
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| members.contains(d))
                .map(str::to_owned)
                .collect();
            Some((name.to_owned(), deps))
        })
        .collect()
}

/// Every arrow that does not point down, as messages. Checking each crate's direct arrows is
/// enough: if every arrow points to a lower layer, so does every path.
pub fn arrows_up(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut problems = Vec::new();
    for (krate, deps) in edges {
        let allowed: Vec<&str> = if let Some(rank) = LAYERS.iter().position(|l| l == krate) {
            LAYERS[..rank].to_vec()
        } else if let Some((_, allowed)) = BESIDE.iter().find(|(b, _)| b == krate) {
            allowed.to_vec()
        } else {
            problems.push(format!(
                "{krate} is a workspace crate the house's rules do not place: add it to LAYERS or BESIDE in tests/src/tidy/crates.rs (and to ARCHITECTURE.md)"
            ));
            continue;
        };
        for dep in deps.iter().filter(|d| !allowed.contains(&d.as_str())) {
            problems.push(format!(
                "{krate} depends on {dep}, which is not below it (it may depend on: {})",
                if allowed.is_empty() {
                    "no workspace crate".to_owned()
                } else {
                    allowed.join(", ")
                }
            ));
        }
    }
    problems
}

/// The package names in `cargo tree --prefix none --format {p}` output.
pub fn tree_names(tree: &str) -> BTreeSet<String> {
    tree.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The forbidden crates a crate reaches, as messages, given everything it depends on.
pub fn forbidden_reached(krate: &str, reached: &BTreeSet<String>) -> Vec<String> {
    FORBIDDEN
        .iter()
        .filter(|(k, _)| *k == krate)
        .flat_map(|(_, forbidden)| forbidden.iter())
        .filter(|f| reached.contains(**f))
        .map(|f| format!("{krate} depends on {f} (see `cargo tree -p {krate} -e normal --target all -i {f}`): it must not, it is a crate of the layers above"))
        .collect()
}

/// The workspace's integration test binaries (targets of kind `test`), as `package/target`.
pub fn test_binaries(metadata: &Value) -> Vec<String> {
    let packages = items(&metadata["packages"]);
    packages
        .iter()
        .flat_map(|p| {
            let package = p["name"].as_str().unwrap_or("?");
            items(&p["targets"])
                .iter()
                .filter(|t| has_kind(t, "test"))
                .map(move |t| format!("{package}/{}", t["name"].as_str().unwrap_or("?")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn package(name: &str, deps: &[(&str, Option<&str>)], tests: &[&str]) -> Value {
        let mut targets = vec![json!({"name": name.replace('-', "_"), "kind": ["lib"]})];
        targets.extend(tests.iter().map(|t| json!({"name": t, "kind": ["test"]})));
        json!({
            "name": name,
            "dependencies": deps.iter().map(|(d, kind)| json!({"name": d, "kind": kind})).collect::<Vec<_>>(),
            "targets": targets,
        })
    }

    #[test]
    fn an_arrow_up_or_sideways_is_named() {
        let metadata = json!({"packages": [
            package("pyrun-api", &[("serde", None)], &[]),
            package("pyrun-sandbox", &[("pyrun-api", None), ("libc", None)], &[]),
            package("pyrun-run", &[("pyrun-sandbox", None), ("pyrun-mcp-server", None)], &[]),
            package("pyrun-mcp-server", &[("pyrun-run", None), ("pyrun-mcp-client", Some("dev"))], &[]),
            package("pyrun-mcp-client", &[("pyrun-api", None), ("pyrun-run", None)], &[]),
            package("pyrun-extra", &[], &[]),
        ]});
        let problems = arrows_up(&workspace_edges(&metadata));
        assert_eq!(
            problems,
            [
                "pyrun-extra is a workspace crate the house's rules do not place: add it to LAYERS or BESIDE in tests/src/tidy/crates.rs (and to ARCHITECTURE.md)",
                "pyrun-mcp-client depends on pyrun-run, which is not below it (it may depend on: pyrun-api)",
                "pyrun-run depends on pyrun-mcp-server, which is not below it (it may depend on: pyrun-api, pyrun-sandbox)",
            ]
        );
    }

    #[test]
    fn a_forbidden_crate_reached_through_another_is_named() {
        let tree = "pyrun-sandbox v0.1.0 (/repo/sandbox)\nlandlock v0.4.0\nmio v1.0.0\ntokio v1.40.0\nlibc v0.2.0 (*)\n";
        let reached = tree_names(tree);
        assert_eq!(
            forbidden_reached("pyrun-sandbox", &reached),
            ["pyrun-sandbox depends on tokio (see `cargo tree -p pyrun-sandbox -e normal --target all -i tokio`): it must not, it is a crate of the layers above"]
        );
        assert!(forbidden_reached("pyrun-run", &reached).is_empty());
        assert_eq!(
            forbidden_reached("pyrun-api", &reached).len(),
            4,
            "the sandbox, landlock, tokio and libc"
        );
    }

    #[test]
    fn test_binaries_are_counted_from_metadata() {
        let metadata = json!({"packages": [
            package("pyrun-mcp-server", &[], &["integration", "tunnel_cli"]),
            package("pyrun-sandbox", &[], &["escape_suite"]),
        ]});
        assert_eq!(
            test_binaries(&metadata),
            [
                "pyrun-mcp-server/integration",
                "pyrun-mcp-server/tunnel_cli",
                "pyrun-sandbox/escape_suite"
            ]
        );
    }
}

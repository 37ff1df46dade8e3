//! Warm runs with the scientific stack preloaded (`--preload numpy`, the venv of
//! `deps::workload_env`): numpy's global generator, seeded when a spare imported `numpy.random`,
//! draws fresh values in every warm run, as it does in every cold one; a seeded draw is the same.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::ffi::OsStr;

use pyrun_mcp_tests::{run_warm, workload_env, ServerLaunch, TempProjects};
use serde_json::json;

/// Prints numpy's draws: `VARY: name value` for those that must differ between runs.
const DRAWS: &str = r#"
import hashlib
import numpy as np
print("VARY: rand", np.random.rand())
print("VARY: randint", np.random.randint(0, 2**62))
print("VARY: normal", np.random.normal())
print("VARY: default_rng", np.random.default_rng().random())
print("VARY: state", hashlib.sha256(np.random.get_state()[1].tobytes()).hexdigest())
np.random.seed(0)
print("seeded", np.random.rand())
"#;

fn draws(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("VARY: "))
        .filter_map(|rest| rest.split_once(' '))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

#[test]
fn numpy_draws_different_values_in_two_warm_runs() {
    let python = workload_env();
    let projects = TempProjects::named("projects").file("draws/draws.py", DRAWS);
    let mut server = ServerLaunch::new(
        pyrun_mcp_tests::bin_path("pyrun-mcp-server"),
        projects.path(),
    )
    .args([
        OsStr::new("--python"),
        python.as_os_str(),
        OsStr::new("--warm"),
        OsStr::new("on"),
        OsStr::new("--preload"),
        OsStr::new("numpy"),
    ])
    .stdio();
    let arguments = json!({"file_name": "draws/draws.py"});
    let runs: Vec<String> = (0..2)
        .map(|_| {
            let result = run_warm(&mut server, &arguments).unwrap_or_else(|e| panic!("{e}"));
            result["structuredContent"]["stdout"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let (first, second) = (draws(&runs[0]), draws(&runs[1]));
    assert_eq!(first.len(), 5, "{runs:?}");
    let same: Vec<&String> = first
        .iter()
        .filter(|(name, value)| second.get(*name) == Some(value))
        .map(|(name, _)| name)
        .collect();
    assert!(
        same.is_empty(),
        "two warm runs drew the same {same:?}: {runs:?}"
    );
    for run in &runs {
        assert!(run.contains("seeded 0.5488135039273248\n"), "{run}");
    }
    server.close();
}

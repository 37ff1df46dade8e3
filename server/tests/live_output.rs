//! Live output in progress notifications (`pyrun_api::live_output`): a caller that asks with
//! `_meta` `pyrun/live_output` gets the run's new whole lines in the `_meta` of its progress
//! notifications, numbered, the start of what the result holds; a caller that does not ask gets
//! progress messages only.

use pyrun_api::live_output::{OutputChunk, ASK, CHUNK};
use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

fn project() -> TempProjects {
    TempProjects::named("p").file(
        "slow.py",
        "import sys, time\nprint('working', flush=True)\nprint('warned', file=sys.stderr, \
         flush=True)\ntime.sleep(2.5)\nprint('finished')\n",
    )
}

/// The run's result and the output chunks its progress notifications carried.
fn run(meta: Value) -> (Value, Vec<OutputChunk>) {
    let dir = project();
    let mut server = StdioServer::start(dir.path(), &[]);
    let id = server.start_request(
        "tools/call",
        json!({"name": "run_python", "arguments": {"file_name": "slow.py"}, "_meta": meta}),
    );
    let reply = server.response(id);
    let progress: Vec<&Value> = server
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "no progress at all");
    let chunks = progress
        .iter()
        .filter_map(|n| n["params"]["_meta"].get(CHUNK))
        .map(|c| serde_json::from_value(c.clone()).expect("a chunk reads as OutputChunk"))
        .collect();
    (reply["result"]["structuredContent"].clone(), chunks)
}

#[test]
fn a_caller_that_asks_gets_the_runs_lines_as_they_come_in_its_progress() {
    let (result, chunks) = run(json!({"progressToken": "p1", ASK: true}));
    let seqs: Vec<u64> = chunks.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, (0..chunks.len() as u64).collect::<Vec<_>>());
    let stdout: String = chunks.iter().map(|c| c.stdout.as_str()).collect();
    let stderr: String = chunks.iter().map(|c| c.stderr.as_str()).collect();
    // The script slept 2.5 s after its first lines: they came while it ran.
    assert!(stdout.starts_with("working\n"), "{chunks:?}");
    assert_eq!(stderr, "warned\n", "{chunks:?}");
    let whole = result["stdout"].as_str().unwrap_or_default();
    assert!(whole.starts_with(&stdout), "{whole:?} vs {stdout:?}");
    assert_eq!(whole, "working\nfinished\n");
}

#[test]
fn a_caller_that_does_not_ask_gets_no_output_in_its_progress() {
    let (_, chunks) = run(json!({"progressToken": "p1"}));
    assert!(chunks.is_empty(), "{chunks:?}");
}

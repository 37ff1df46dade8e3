//! Warm runs from a test's side: a script's first run in a folder starts that folder's spare
//! interpreter in the background, so a test that needs a warm run calls again (bounded) until a
//! result says `"warm": true`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::stdio::StdioServer;

/// Runs of one script before it must have been warm, and the pause between them.
pub const WARM_TRIES: usize = 10;
pub const WARM_PAUSE: Duration = Duration::from_millis(500);

/// Whether a tool result says its run started in a pre-started spare.
pub fn was_warm(result: &Value) -> bool {
    result["structuredContent"]["warm"] == json!(true)
}

/// Calls `run_python` with `arguments` until a run was warm (at most [`WARM_TRIES`] runs,
/// [`WARM_PAUSE`] apart): that run's result, or the `warm` and exit code of every run when none
/// was.
pub fn run_warm(server: &mut StdioServer, arguments: &Value) -> Result<Value, String> {
    let mut seen = Vec::new();
    for _ in 0..WARM_TRIES {
        let result = server.call("run_python", arguments.clone());
        if was_warm(&result) {
            return Ok(result);
        }
        let run = &result["structuredContent"];
        seen.push(format!("warm={} exit={}", run["warm"], run["exit_code"]));
        std::thread::sleep(WARM_PAUSE);
    }
    Err(format!("never warm in {WARM_TRIES} runs: {seen:?}"))
}

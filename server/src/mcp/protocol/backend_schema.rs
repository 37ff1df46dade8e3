//! The `backend` argument of the run tools, added to their schema only when the server has a
//! backend besides `local` (so `tools/list` is unchanged without one).

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use serde_json::{json, Value};

use pyrun_run::background::LOCAL_BACKEND;

/// The tools that take a `backend`.
const TOOLS_WITH_BACKEND: [&str; 2] = ["run_python", "start_python"];

/// Adds the `backend` argument, naming the configured backends, to the tools that take it.
pub(in crate::mcp) fn with_backend_argument<S>(router: &mut ToolRouter<S>, backends: &[&str]) {
    for name in TOOLS_WITH_BACKEND {
        let Some(route) = router.map.get_mut(name) else {
            continue;
        };
        let mut schema = (*route.attr.input_schema).clone();
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            properties.insert(
                "backend".to_owned(),
                json!({
                    "type": "string",
                    "enum": backends,
                    "default": LOCAL_BACKEND,
                    "description": "Where the run goes: `local` (this machine, the default) or \
                        `runpod` (a RunPod serverless GPU worker: the script's project folder is \
                        sent there as a snapshot, without .env, venvs or files over 5 MiB).",
                }),
            );
        }
        route.attr.input_schema = Arc::new(schema);
    }
}

//! The MCP protocol around the tools: the handler, tasks, resources (project files, run
//! artifacts, the folder's watcher, the read budget), prompts, the MCP App and the conformance
//! fixtures' hook.

pub(super) mod apps;
pub(super) mod backend_schema;
pub(super) mod handler;
pub(super) mod prompts;
pub(crate) mod resources;
pub(crate) mod tasks;

// The conformance suite's fixtures join the server here, and only here (a test-only feature).
#[cfg_attr(feature = "conformance", path = "conformance.rs")]
#[cfg_attr(not(feature = "conformance"), path = "no_fixtures.rs")]
pub(super) mod fixtures;

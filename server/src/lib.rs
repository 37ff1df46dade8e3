//! pyrun-mcp server: runs the Python files of one projects folder for MCP clients, safely.
//!
//! Two layers, arrows pointing down: the serve layer (`config`, `app`, `tools`, `run_tools`,
//! `sessions`, `audit`, `transport`, `tunnel`, `integrations`, `state_dir`) speaks MCP and HTTP;
//! the run layer ([`run`]: paths, runner, slots, sessions, the sandbox probe) knows nothing of
//! either; below both, the `pyrun_sandbox` crate holds the kernel rules. A request walks `transport` → `tools` →
//! `run::paths` (a proven [`run::paths::ProjectPath`]) → `run::runner` → `pyrun_sandbox` → python.

// stdout is the stdio transport's protocol stream and stderr its log: nothing prints there except
// through `tracing`, or in the few functions that say why (`#[allow(clippy::print_…)]`).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod app;
pub mod audit;
mod client_message;
pub mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
mod inline_code;
mod install;
pub mod integrations;
pub mod oauth;
mod packages;
mod prompts;
mod resources;
pub mod run;
pub mod run_files;
mod run_tools;
mod sessions;
pub mod state_dir;
mod tasks;
mod tools;
pub mod transport;
pub mod tunnel;

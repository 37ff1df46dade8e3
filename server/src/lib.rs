//! pyrun-mcp server: runs the Python files of one projects folder for MCP clients, safely.
//!
//! Layers inside the crate, arrows pointing down:
//! - the edges: `transport` (stdio, `/mcp`, `/sse` and their HTTP layers), `tunnel` (a public
//!   URL), `integrations` (registering with assistants);
//! - the MCP layer, [`mcp`]: the handler, its state shared by every session, and one room per
//!   tool family (run, background, inline, sessions, packages, tasks, resources, prompts,
//!   artifacts) that never import each other;
//! - what every layer above uses: `app` (the shared state built from the config, and
//!   `app::state_dir`), `oauth` (the authorization server), `audit` (the tool-call log),
//!   `client_message` (the text a client reads), `config` (one `Args` group per concern,
//!   validated without I/O);
//! - the run layer, the `pyrun_run` crate: paths, runner, slots, sessions, installs, the sandbox
//!   probe — it knows nothing of MCP or HTTP; below it, the `pyrun_sandbox` crate holds the
//!   kernel rules. The words client and server share (run status, reports, artifact entries)
//!   are the `pyrun_api` crate's.
//!
//! A request walks `transport` → `mcp` (one tool room) → `pyrun_run::paths` (a proven
//! `ProjectPath`) → `pyrun_run::runner` → `pyrun_sandbox` → python.

// stdout is the stdio transport's protocol stream and stderr its log: nothing prints there except
// through `tracing`, or in the few functions that say why (`#[allow(clippy::print_…)]`).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod app;
pub mod audit;
pub mod client_message;
pub mod config;
pub mod integrations;
pub mod mcp;
pub mod oauth;
pub mod transport;
pub mod tunnel;

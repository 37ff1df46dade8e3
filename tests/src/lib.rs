//! The one test harness of pyrun-mcp, used by the server's integration tests, the real-client
//! tests in `tests/tests/` and the bench: start the server over stdio or HTTP (port 0, the address
//! read from its `listening on` line) with the developer's settings scrubbed ([`ServerLaunch`]),
//! drive it with raw JSON-RPC over stdio ([`StdioServer`]) or HTTP ([`http`]: Streamable HTTP,
//! legacy SSE, an [`SseReader`] on the `sse-stream` crate), set up OAuth flows and check their
//! tokens ([`oauth`]), find the interpreter once ([`python()`]), look at processes from the host
//! ([`procs`]), build a projects folder ([`TempProjects`]), serve packages ([`PackageIndex`]) and
//! call a script until a run of it was warm ([`run_warm`]).
//!
//! Nothing here installs or builds: with the `real-clients` feature, [`deps`] installs the clients
//! we did not write (Python SDKs, Node tools) once under `target/test-deps/`, [`clients`] runs
//! them, and [`browser`] drives the system's headless chromium through WebDriver.

#[cfg(feature = "real-clients")]
pub mod browser;
#[cfg(feature = "real-clients")]
pub mod clients;
#[cfg(feature = "real-clients")]
pub mod deps;
pub mod env;
pub mod http;
pub mod net;
pub mod oauth;
pub mod package_index;
pub mod paths;
pub mod process;
pub mod procs;
pub mod projects;
pub mod python;
#[cfg(feature = "real-clients")]
pub mod runpod;
pub mod server;
pub mod stdio;
#[cfg(test)]
mod tidy;
pub mod warm;

#[cfg(feature = "real-clients")]
pub use browser::Browser;
#[cfg(feature = "real-clients")]
pub use clients::{
    args, assert_standard_session, assert_unauthorized, client_script, inspector_cli,
    python_client, OUR_TOOLS,
};
#[cfg(feature = "real-clients")]
pub use deps::{app_host, node_env, python_env, runpod_env, workload_env, NodeEnv};
pub use env::{scrub_env, ENV_VARS};
pub use http::{SseEvent, SseReader};
pub use net::free_port;
pub use package_index::PackageIndex;
pub use paths::{bin_path, projects_copy, sample_projects, target_dir, workspace_root};
pub use process::{run_bounded, Output, RunningChild};
pub use projects::TempProjects;
pub use python::{python, resolve_python};
pub use server::{wait_for_listening, HttpServer, Outputs, ServerLaunch, StartError, StdioCommand};
pub use stdio::StdioServer;
pub use warm::{run_warm, was_warm};

//! The real-client tests, one binary that links once (`--features real-clients`): the clients we
//! did not write (the official SDKs, FastMCP, Inspector, the conformance suite, nginx, chromium)
//! and our own (`pyrun-mcp-client`, the scripts) against the built server. Each module is one
//! client or concern; [`util`] holds what several share, and the harness (`pyrun_mcp_tests`)
//! starts servers and installs the clients.
//!
//! The modules share one process: no test changes what is process-wide (environment, working
//! directory, umask).

mod util;

mod app_browser;
mod behind_proxy;
mod bundle;
mod client_fastmcp;
// Signals, /proc and tmux: Linux only, like the Ctrl-C tests of `client_pyrun`.
#[cfg(target_os = "linux")]
mod client_first_day;
mod client_output;
mod client_pyrun;
mod client_stdin;
mod client_tools;
mod conformance;
mod consent_browser;
mod fastmcp_http;
mod inspector_cli;
mod inspector_resources;
mod python_sdk_http;
mod python_sdk_inline;
mod python_sdk_oauth;
mod python_sdk_resources;
mod python_sdk_results;
mod python_sdk_runs;
mod python_sdk_stdio;
mod rmcp_tasks;
mod runpod_backend;
mod sandbox_workloads;
mod scripts;
mod warm_numpy;

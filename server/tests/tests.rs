//! The server's integration tests, one binary that links once (the tunnel's CLI tests,
//! `tunnel_cli.rs`, are apart: they build with `--features tunnel`). Each module drives the real
//! binary, or the run layer, for one concern; [`util`] holds what several modules share, and the
//! workspace's harness (`pyrun_mcp_tests`) starts servers and drives them.
//!
//! The modules share one process: no test changes what is process-wide (environment, working
//! directory, umask); a test that measures or sweeps the whole process runs alone in a child
//! ([`util::run_alone`]).

mod util;

mod app_viewer;
mod artifacts;
mod audit_log;
mod background_runs;
mod bytecode_cache;
mod caller;
mod client_messages;
mod config_snippets;
mod escapes;
mod every_process;
mod http_limits;
mod http_security;
mod http_tools;
mod inline_code;
mod install_failures;
mod install_packages;
mod interpreter_places;
mod left_behind;
mod live_output;
mod no_process_left;
mod oauth;
mod output_memory;
mod python_env;
mod readme;
mod resources;
mod resources_http;
mod results;
mod run_hints;
mod run_uid;
mod runner;
mod runpod_backend;
mod sandbox_e2e;
mod scratch;
mod server_death;
mod sessions;
mod settings_checks;
mod settings_grammar;
mod signals;
mod standin_python;
mod startup;
mod stdin_uploads;
mod stdio;
mod stdio_paths;
mod swapped_parents;
mod unix_sockets;
mod venv_bytecode;
mod warm_escapes;
mod warm_runs;
mod warm_start;
mod write_scope;

//! Support for the cross-crate and real-client tests: find the built binaries, start the server over
//! HTTP on a free port, and install the clients we did not write (Python SDKs, Node tools) once.
//!
//! Everything installed lives under `target/test-deps/`, created on first use behind a cross-process
//! file lock (test binaries run in parallel) and reused afterwards.

pub mod clients;
pub mod deps;
pub mod paths;
pub mod process;
pub mod server;

pub use clients::{
    args, assert_standard_session, assert_unauthorized, client_script, inspector_cli, python_client,
};
pub use deps::{node_env, python_env, NodeEnv};
pub use paths::{bin_path, cargo, projects_copy, sample_projects, target_dir, workspace_root};
pub use process::{run_bounded, Output};
pub use server::{HttpServer, StdioCommand};

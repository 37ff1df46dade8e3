//! The MCP layer: [`PyRunServer`] and its `ServerHandler` (`handler`), and one room per tool
//! family, each adapting a part of the run layer to MCP — arguments in, a result out:
//!
//! - `run`: `run_python`, `list_python_files`
//! - `background`: `start_python`, `get_run`, `cancel_run`, `list_runs`
//! - `inline`: `run_python_code` (`--allow-inline-code`)
//! - `sessions`: `session_start`, `session_exec`, `session_stop`, `list_sessions`
//!   (`--allow-inline-code`)
//! - `packages`: `list_packages`, and `install_packages` (`--allow-install`)
//! - `tasks`: a `run_python` as an MCP task, `tasks/get`, `tasks/cancel`, `tasks/update`
//! - `resources`: the projects folder as resources, and the watcher behind `list_changed`
//! - `prompts`: `run-and-explain`, `debug-script`, `write-tests`
//! - `artifacts`: the files runs leave, as `pyrun://runs/…` resources
//! - `backends`: `backend_status` (only with a remote backend, `--runpod-endpoint`)
//!
//! Rooms never import each other. What they share, each module with one job: `reply` (refusals,
//! structured results, timeouts, page sizes, listings), `call` (audit notes, progress, the
//! prologue of a file run, the Python environment of a folder), `run_call` (a run the call waits
//! for and its report), `run_hint` (the `hint:` naming the setting behind a failed or cut run),
//! `artifact_blocks` (what a result shows of the files a run left), `output_cut` (a long output
//! as its head and tail), `image_fit` (pictures scaled for a model), `table_preview` (the first
//! rows of a CSV/TSV or JSON artifact), `apps` (the MCP App `ui://pyrun/run.html` that shows a
//! run: the run tools' `_meta` naming it, its listing and its read),
//! `project_files` (a project file as a resource: its URI, its read, its contents),
//! `read_budget` (the bytes resource reads hold at once), `backend_arg` (the run tools'
//! `backend` argument, in their schema only when a remote backend is configured), `remote` (a
//! run sent to a remote backend: the backend named, the run prepared and registered) and
//! `task_store` (the MCP tasks and their owners). What every session of one server shares (the
//! task store, the projects folder's watcher) is `McpState`, made once by the transport.

mod apps;
mod artifact_blocks;
mod artifacts;
mod backend_arg;
mod backends;
mod background;
mod call;
mod handler;
mod image_fit;
mod inline;
mod live_chunks;
mod output_cut;
mod packages;
mod project_files;
mod prompts;
mod read_budget;
mod remote;
mod reply;
pub(crate) mod resources;
mod run;
mod run_call;
mod run_hint;
mod sessions;
mod table_preview;
mod task_store;
pub(crate) mod tasks;

// The conformance suite's fixtures join the server here, and only here (a test-only feature).
#[cfg_attr(feature = "conformance", path = "conformance.rs")]
#[cfg_attr(not(feature = "conformance"), path = "no_fixtures.rs")]
mod fixtures;

pub use handler::{McpState, PyRunServer};
pub use read_budget::ShareHold;

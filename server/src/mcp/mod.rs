//! The MCP layer: [`PyRunServer`] and its `ServerHandler`, in four folders, arrows pointing down:
//!
//! - `tools/`: one room per tool family, each adapting the run engine's use cases to MCP —
//!   arguments in, a result out. `file_runs` (`run_python`, `list_python_files`),
//!   `background_runs` (`start_python`, `get_run`, `cancel_run`, `list_runs`), `inline_code`
//!   (`run_python_code`), `python_sessions` (`session_start`, `session_exec`, `session_stop`,
//!   `list_sessions`), `packages` (`list_packages`, `install_packages`), `backend_status`. Rooms
//!   never import each other.
//! - `call/`: what a tool call shares, whatever its room — its `CallContext` (the `App`, the
//!   caller, the audit notes), progress, the prologue of a file run, the Python environment of a
//!   folder (`mod.rs`), the checks of its arguments (time limit, code: `arguments`), a run the
//!   call waits for and its report (`waited_run`), a file run as the run engine takes it and its
//!   refusals in words (`start_run`).
//! - `protocol/`: the `handler` composing the rooms' routers (and `backend_schema`, the run
//!   tools' `backend` argument), `tasks` (a `run_python` as an MCP task, and the task store),
//!   `resources` (project files, run artifacts, the read budget, the folder's watcher), `prompts`,
//!   `apps` (the MCP App `ui://pyrun/run.html`) and the conformance fixtures' hook.
//! - `present/`: what a result looks like — `reply` (refusals, structured results, listings),
//!   `output_cut`, `image_fit`, `table_preview`, `run_hint`, `artifact_blocks`, `live_chunks`.
//!
//! A request goes one way down: the transport, `protocol::handler`, then one room (a tool) or one
//! protocol module (a resource by its URI's kind, a prompt, a task), which use `call/` and
//! `present/` and the run layer. Nothing below the rooms names one.
//!
//! The rooms' `#[tool]` methods are methods of [`PyRunServer`] because rmcp's `#[tool_router]`
//! builds a `ToolRouter<Self>` whose routes call `Self::tool`: only routers of one type add up
//! in the handler. Everything else is a free function; what a helper needs of a call it takes as
//! a `CallContext`, made once by the handler.
//!
//! What every session of one server shares (the task store, the projects folder's watcher, the
//! read budget) is `McpState`, made once by the transport.

mod call;
mod present;
mod protocol;
mod tools;

pub use protocol::handler::{McpState, PyRunServer};
pub use protocol::resources::read_budget::ShareHold;

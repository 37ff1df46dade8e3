//! pyrun-run, the run layer of pyrun-mcp: everything between "run this file" and a finished
//! process, and nothing of HTTP or MCP. `engine` is its one front door: built from one settings
//! struct, it owns the parts below and decides where a run goes; `state_dir` makes the
//! owner-only folders they keep files in. `paths` proves a caller's path inside the projects folder
//! ([`paths::ProjectPath`]); `runner` starts, limits, times out, cancels and kills runs (the only
//! place that does); `live_output` holds a run's output as it arrives; `background` keeps the
//! runs that go on while their caller does other things; `caller` names who asks (the identity
//! runs and sessions are keyed on); `slots` keeps reusable scratch folders with their sandbox
//! rules; `sandbox_probe` probes the sandbox in the background; `bytecode_cache` fills the
//! server-owned bytecode cache runs read, and `venv_bytecode` adds the venvs runs use to it;
//! `artifacts` keeps the files runs leave in their output folder; `ids` makes and checks run
//! and session ids; `mime` names file types; `requirement` checks what `install_packages` may ask for; `package_index` is the operator's index installs
//! fetch from; `install` makes a project's `.venv` and installs into it under its own sandbox
//! profile; `python_support` writes the modules the server ships for runs (the matplotlib
//! backend, the session driver); `python_env` finds the interpreter at start-up and picks and checks the
//! interpreter and virtual environment of a folder; `helpers` starts the server's own short
//! helper processes and kills them when it closes; `packages` reads what an environment has installed; `session` keeps
//! persistent Python sessions; `launch` starts an interpreter (where, what, with which
//! environment); `supervise` waits on every child the layer starts and kills its tree; `warm` keeps interpreters started ahead of their runs (Linux). The kernel side is the `pyrun_sandbox` crate, below this layer;
//! the words shared with clients (run status and kind) are `pyrun_api`'s.

pub mod artifacts;
pub mod background;
pub mod bytecode_cache;
pub mod caller;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // tokio's fd registration; see the module header
mod child;
pub mod engine;
pub mod helpers;
pub mod ids;
pub mod install;
mod launch;
pub mod live_output;
pub mod mime;
pub mod package_index;
pub mod packages;
pub mod paths;
pub mod python_env;
pub mod python_support;
pub mod quarantine;
pub mod requirement;
pub mod runner;
pub mod sandbox_probe;
pub mod session;
pub mod slots;
pub mod state_dir;
mod supervise;
mod turns;
pub mod uv_lock;
#[cfg(target_os = "linux")]
pub mod venv_bytecode;
pub mod warm;

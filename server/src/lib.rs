//! pyrun-mcp server: runs the Python files of one projects folder for MCP clients, safely.
//!
//! Data walks one way: `transport` → `tools` → `paths` (a proven [`paths::ProjectPath`]) →
//! `runner` (spawn, limits, kill, caps; a reused `slots` scratch dir) → `sandbox` (kernel policy) →
//! python.

pub mod app;
pub mod bytecode_cache;
pub mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod integrations;
pub mod paths;
pub mod runner;
pub mod sandbox;
pub mod sandbox_cell;
pub mod slots;
#[cfg(target_os = "linux")]
pub mod spawn;
pub mod tools;
pub mod transport;
pub mod tunnel;

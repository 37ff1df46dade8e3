//! pyrun-mcp server library.
pub mod sandbox;

//! pyrun-mcp server library.

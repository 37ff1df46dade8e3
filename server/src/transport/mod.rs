//! Transports: adapters between a wire and the MCP handler (`mcp`). They hold no logic.

pub mod http;
pub mod sse;
pub mod stdio;

//! OAuth 2.1 for Claude's connectors (issue 14): this server as its own authorization server.

pub mod cimd;

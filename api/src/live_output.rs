//! Live output of a run the caller waits for: a client that puts [`ASK`] (`true`) in the
//! `_meta` of its `tools/call` gets the script's new output in the `_meta` of each progress
//! notification, under [`CHUNK`], as one [`OutputChunk`]. Chunks hold whole lines (a long
//! line without an end is sent in parts) and are numbered, so a client can tell a lost chunk
//! and print the rest from the result instead.

use serde::{Deserialize, Serialize};

/// The request `_meta` key that asks for output chunks.
pub const ASK: &str = "pyrun/live_output";

/// The progress notification `_meta` key that carries an [`OutputChunk`].
pub const CHUNK: &str = "pyrun/output";

/// The output a run printed since the previous chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    /// 0 for the run's first chunk, one more for each next one.
    #[serde(default)]
    pub seq: u64,
}

//! The stdin room: `upload_stdin`, text for a run's standard input sent in pieces, for input
//! larger than one request may carry (`--max-body-bytes` over HTTP). The run calls
//! (`run_python`, `start_python`, `run_python_code`) name the upload with `stdin_upload`; the
//! store is `call::stdin_upload`, shared by every session.

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::client_message::ClientMessage;
use crate::mcp::present::reply::{refusal, structured};
use crate::mcp::protocol::handler::PyRunServer;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UploadStdinArgs {
    /// The next piece of text (pieces are joined as they are, in the order sent); not empty.
    #[serde(default)]
    pub text: String,
    /// The id the first piece's call returned; omitted for the first piece.
    #[serde(default)]
    pub upload_id: Option<String>,
    /// Drop the upload `upload_id` now (a run that will not happen), instead of adding `text`.
    #[serde(default)]
    pub abandon: bool,
}

/// An upload after this piece.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StdinUpload {
    /// Pass it as `stdin_upload` to the run (or as `upload_id` with the next piece).
    pub upload_id: String,
    /// The upload's size so far, in bytes.
    pub bytes: usize,
    /// The largest stdin this server gives a run (`--max-stdin-bytes`).
    pub max_bytes: usize,
}

#[tool_router(router = stdin_router, vis = "pub(in crate::mcp)")]
impl PyRunServer {
    /// Send a run's standard input in pieces, for text too large for one call: the first call
    /// returns an upload id, later calls add to it, and run_python, start_python or
    /// run_python_code take it as `stdin_upload`. Kept 10 minutes after its first piece; one run
    /// uses it. A caller's uploads hold at most max_bytes in all; a refused piece drops its
    /// upload; `abandon: true` with `upload_id` drops one at once.
    #[tool(
        title = "Upload stdin for a run",
        annotations(title = "Upload stdin for a run", open_world_hint = false),
        output_schema = schema_for_output::<StdinUpload>()
    )]
    async fn upload_stdin(
        &self,
        Parameters(args): Parameters<UploadStdinArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let caller = self.caller(&ctx);
        let uploads = &self.state.stdin;
        if args.abandon {
            let Some(id) = args.upload_id.as_deref() else {
                return Ok(refusal(ClientMessage::new(
                    "abandon needs the upload_id of the upload to drop",
                )));
            };
            return Ok(match uploads.abandon(&caller, id) {
                Ok(()) => {
                    let value = StdinUpload {
                        upload_id: id.to_owned(),
                        bytes: 0,
                        max_bytes: uploads.max_bytes(),
                    };
                    structured(format!("stdin upload {id} abandoned"), &value)
                }
                Err(message) => refusal(message),
            });
        }
        match uploads.append(&caller, args.upload_id.as_deref(), &args.text) {
            Ok(staged) => {
                let text = format!(
                    "stdin upload {} holds {} bytes; pass \"stdin_upload\": \"{}\" to the run",
                    staged.upload_id, staged.bytes, staged.upload_id
                );
                let value = StdinUpload {
                    upload_id: staged.upload_id,
                    bytes: staged.bytes,
                    max_bytes: uploads.max_bytes(),
                };
                Ok(structured(text, &value))
            }
            Err(message) => Ok(refusal(message)),
        }
    }
}

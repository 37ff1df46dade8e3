//! `tools`: the server's tool list.

use rmcp::model::Tool;

use crate::error::ClientError;
use crate::session::Session;

pub async fn execute(session: &Session) -> Result<Vec<Tool>, ClientError> {
    session.list_tools().await
}

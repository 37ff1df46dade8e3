//! `install PROJECT [PACKAGES…] [-r FILE]` (install_packages) and `packages [PROJECT]`
//! (list_packages): the tool's result, an error when it failed.

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::json;

use crate::cli::InstallArgs;
use crate::commands::sessions::checked;
use crate::error::ClientError;
use crate::session::Session;

pub async fn install(session: &Session, args: &InstallArgs) -> Result<CallToolResult, ClientError> {
    let mut arguments = JsonObject::new();
    arguments.insert("project".into(), json!(args.project));
    if !args.packages.is_empty() {
        arguments.insert("packages".into(), json!(args.packages));
    }
    if let Some(file) = &args.requirements {
        arguments.insert("requirements".into(), json!(file));
    }
    checked(session, "install_packages", arguments).await
}

pub async fn list(session: &Session, project: Option<&str>) -> Result<CallToolResult, ClientError> {
    let mut arguments = JsonObject::new();
    if let Some(project) = project {
        arguments.insert("project".into(), json!(project));
    }
    checked(session, "list_packages", arguments).await
}

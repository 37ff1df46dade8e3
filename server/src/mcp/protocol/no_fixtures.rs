//! The conformance fixtures' place in a normal build: the functions of `conformance.rs` with
//! nothing to add, so the handler calls them the same way with or without the test-only feature.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ReadResourceRequestParams, ReadResourceResult, ServerConfig,
};
use rmcp::ErrorData;

pub fn extend_info(info: ServerConfig) -> ServerConfig {
    info
}

pub fn tool_router<S: Send + Sync + 'static>() -> ToolRouter<S> {
    ToolRouter::new()
}

pub fn get_prompt(_: &GetPromptRequestParams) -> Option<Result<GetPromptResult, ErrorData>> {
    None
}

pub fn read_resource(
    _: &ReadResourceRequestParams,
) -> Option<Result<ReadResourceResult, ErrorData>> {
    None
}

pub fn with_prompts(own: ListPromptsResult) -> ListPromptsResult {
    own
}

pub fn with_resources(own: ListResourcesResult, _first_page: bool) -> ListResourcesResult {
    own
}

pub fn with_resource_templates(own: ListResourceTemplatesResult) -> ListResourceTemplatesResult {
    own
}

/// No handler methods of its own.
#[macro_export]
macro_rules! fixture_handlers {
    () => {};
}

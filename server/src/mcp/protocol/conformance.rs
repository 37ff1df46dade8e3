//! Test-only fixtures for the official MCP conformance suite (`@modelcontextprotocol/conformance`):
//! the tools, prompts and resources its server scenarios call by name (`test_simple_text`,
//! `test://static-text`, …). Compiled only with the cargo feature `conformance`, which no release
//! build enables; `mcp/mod.rs` wires it in as `mcp::fixtures` (in its place, without the
//! feature: `no_fixtures.rs`, the same functions adding nothing), and the handler calls it.
//!
//! The expected payloads are the suite's own (see each scenario's description in its package);
//! `tests/tests/conformance.rs` runs the suite and `tests/conformance-baseline.txt` lists what does
//! not pass yet.
#![allow(deprecated)] // logging, sampling, subscribe: deprecated in 2026-07-28, still scenarios here

use std::time::Duration;

use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    AudioContent, CallToolResult, CompleteRequestParams, CompleteResult, CompletionInfo,
    ContentBlock, CreateMessageRequestParams, ElicitRequestParams, ElicitationAction,
    ElicitationSchema, GetPromptRequestParams, GetPromptResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, Prompt, PromptArgument,
    PromptMessage, PromptsCapability, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ResourcesCapability, Role, SamplingMessage, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Value};

/// A 1×1 red PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/// Eight samples of 16-bit mono silence as a WAV file.
const WAV: &str =
    "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YRAAAAAAAAAAAAAAAAAAAAAAAAAA";
/// The pause the scenarios ask for between notifications.
const STEP: Duration = Duration::from_millis(50);

/// Adds the capabilities the fixtures need to the server's own.
pub fn extend_info(mut info: ServerConfig) -> ServerConfig {
    let caps = &mut info.capabilities;
    caps.prompts.get_or_insert_with(PromptsCapability::default);
    caps.resources
        .get_or_insert_with(ResourcesCapability::default)
        .subscribe = Some(true);
    caps.logging = Some(JsonObject::new());
    caps.completions = Some(JsonObject::new());
    info
}

/// The fixture tools, for any handler type `S` (added to `PyRunServer`'s own router).
pub fn tool_router<S: Send + Sync + 'static>() -> ToolRouter<S> {
    let mut router = ToolRouter::new();
    for tool in tools() {
        router.add_route(ToolRoute::new_dyn(tool, |ctx: ToolCallContext<'_, S>| {
            let name = ctx.name.to_string();
            let args = ctx.arguments.unwrap_or_default();
            let request = ctx.request_context;
            Box::pin(async move { call_tool(&name, &args, request).await.map(Into::into) })
        }));
    }
    router
}

fn tools() -> Vec<Tool> {
    let none = || object(json!({"type": "object", "properties": {}}));
    let one_string = |name: &str, what: &str| {
        object(json!({
            "type": "object",
            "properties": {name: {"type": "string", "description": what}},
            "required": [name],
        }))
    };
    let plain = [
        ("test_simple_text", "Returns simple text"),
        ("test_image_content", "Returns an image"),
        ("test_audio_content", "Returns audio"),
        ("test_embedded_resource", "Returns an embedded resource"),
        (
            "test_multiple_content_types",
            "Returns text, an image and a resource",
        ),
        (
            "test_tool_with_logging",
            "Sends three log messages while it runs",
        ),
        ("test_error_handling", "Always fails"),
        (
            "test_tool_with_progress",
            "Reports progress 0, 50, 100 of 100",
        ),
        (
            "test_elicitation_sep1034_defaults",
            "Elicits values that all have defaults",
        ),
        (
            "test_elicitation_sep1330_enums",
            "Elicits the five enum shapes",
        ),
        ("test_reconnection", "Answers after a short pause"),
    ];
    let mut tools: Vec<Tool> = plain
        .into_iter()
        .map(|(name, what)| Tool::new(name, what, none()))
        .collect();
    tools.push(Tool::new(
        "test_sampling",
        "Asks the client's LLM",
        one_string("prompt", "The prompt to send"),
    ));
    tools.push(Tool::new(
        "test_elicitation",
        "Asks the user",
        one_string("message", "The message to show"),
    ));
    tools.push(Tool::new(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        object(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                },
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
            },
            "additionalProperties": false,
        })),
    ));
    tools
}

async fn call_tool(
    name: &str,
    args: &JsonObject,
    ctx: RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let text = |t: &str| Ok(CallToolResult::success(vec![ContentBlock::text(t)]));
    match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => Ok(CallToolResult::success(vec![ContentBlock::image(
            PNG,
            "image/png",
        )])),
        "test_audio_content" => Ok(CallToolResult::success(vec![ContentBlock::Audio(
            AudioContent::new(WAV, "audio/wav"),
        )])),
        "test_embedded_resource" => Ok(CallToolResult::success(vec![ContentBlock::resource(
            text_contents(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            ),
        )])),
        "test_multiple_content_types" => Ok(CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG, "image/png"),
            ContentBlock::resource(text_contents(
                "test://mixed-content-resource",
                "application/json",
                r#"{"test":"data","value":123}"#,
            )),
        ])),
        "test_tool_with_logging" => {
            for (i, message) in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ]
            .into_iter()
            .enumerate()
            {
                if i > 0 {
                    tokio::time::sleep(STEP).await;
                }
                let param =
                    LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message));
                let _ = ctx.peer.notify_logging_message(param).await;
            }
            text("Logging test completed")
        }
        "test_error_handling" => Ok(CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )])),
        "test_tool_with_progress" => {
            let token = ctx.meta.get_progress_token();
            for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(STEP).await;
                }
                if let Some(token) = &token {
                    let param =
                        ProgressNotificationParam::new(token.clone(), progress).with_total(100.0);
                    let _ = ctx.peer.notify_progress(param).await;
                }
            }
            text("Progress test completed")
        }
        "test_sampling" => {
            let prompt = str_arg(args, "prompt");
            let request =
                CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 100);
            match ctx.peer.create_message(request).await {
                Ok(result) => {
                    let answer = result
                        .message
                        .content
                        .first()
                        .and_then(|c| c.as_text())
                        .map(|t| t.text.clone())
                        .unwrap_or_default();
                    text(&format!("LLM response: {answer}"))
                }
                Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "sampling failed: {e}"
                ))])),
            }
        }
        "test_elicitation" => {
            let schema = json!({
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                },
                "required": ["username", "email"],
            });
            elicit(&ctx, str_arg(args, "message"), schema, "User response").await
        }
        "test_elicitation_sep1034_defaults" => {
            let schema = json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {
                        "type": "string",
                        "description": "User status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active",
                    },
                    "verified": {"type": "boolean", "description": "Verified", "default": true},
                },
            });
            let message = "Please accept with the defaults";
            elicit(&ctx, message, schema, "Elicitation completed").await
        }
        "test_elicitation_sep1330_enums" => {
            let titled = |title: &str| {
                json!([
                    {"const": "value1", "title": format!("First {title}")},
                    {"const": "value2", "title": format!("Second {title}")},
                    {"const": "value3", "title": format!("Third {title}")},
                ])
            };
            let schema = json!({
                "type": "object",
                "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": titled("Option")},
                    "legacyEnum": {
                        "type": "string",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"],
                    },
                    "untitledMulti": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    },
                    "titledMulti": {"type": "array", "items": {"anyOf": titled("Choice")}},
                },
            });
            let message = "Please pick from each list";
            elicit(&ctx, message, schema, "Elicitation completed").await
        }
        "json_schema_2020_12_tool" => text(&format!("Hello, {}!", str_arg(args, "name"))),
        "test_reconnection" => {
            tokio::time::sleep(STEP * 2).await;
            text("Reconnection test completed")
        }
        other => Err(ErrorData::invalid_params(
            format!("unknown tool: {other}"),
            None,
        )),
    }
}

/// Asks the client for input with `schema` and reports what came back as `"{label}: action=…"`.
async fn elicit(
    ctx: &RequestContext<RoleServer>,
    message: &str,
    schema: Value,
    label: &str,
) -> Result<CallToolResult, ErrorData> {
    let schema: ElicitationSchema = serde_json::from_value(schema)
        .map_err(|e| ErrorData::internal_error(format!("fixture schema: {e}"), None))?;
    let request = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema: schema,
    };
    match ctx.peer.create_elicitation(request).await {
        Ok(result) => {
            let action = match result.action {
                ElicitationAction::Accept => "accept",
                ElicitationAction::Decline => "decline",
                _ => "cancel",
            };
            let content = result.content.unwrap_or(Value::Null);
            Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "{label}: action={action}, content={content}"
            ))]))
        }
        Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "elicitation failed: {e}"
        ))])),
    }
}

pub fn list_prompts() -> ListPromptsResult {
    let arg = |name: &str, what: &str| {
        PromptArgument::new(name)
            .with_description(what)
            .with_required(true)
    };
    let prompts = vec![
        Prompt::new(
            "test_simple_prompt",
            Some("A prompt without arguments"),
            None,
        ),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("A prompt with two arguments"),
            Some(vec![
                arg("arg1", "First test argument"),
                arg("arg2", "Second test argument"),
            ]),
        ),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("A prompt embedding a resource"),
            Some(vec![arg("resourceUri", "URI of the resource to embed")]),
        ),
        Prompt::new(
            "test_prompt_with_image",
            Some("A prompt with an image"),
            None,
        ),
    ];
    ListPromptsResult::with_all_items(prompts)
}

/// `prompts/get` of a fixture prompt (`test_…`); `None` for the server's own.
pub fn get_prompt(request: &GetPromptRequestParams) -> Option<Result<GetPromptResult, ErrorData>> {
    request
        .name
        .starts_with("test_")
        .then(|| fixture_prompt(request))
}

fn fixture_prompt(request: &GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
    let args = request.arguments.clone().unwrap_or_default();
    let user = |text: String| PromptMessage::new_text(Role::User, text);
    let messages = match request.name.as_str() {
        "test_simple_prompt" => vec![user("This is a simple prompt for testing.".into())],
        "test_prompt_with_arguments" => vec![user(format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            str_arg(&args, "arg1"),
            str_arg(&args, "arg2")
        ))],
        "test_prompt_with_embedded_resource" => vec![
            PromptMessage::new(
                Role::User,
                ContentBlock::resource(text_contents(
                    str_arg(&args, "resourceUri"),
                    "text/plain",
                    "Embedded resource content for testing.",
                )),
            ),
            user("Please process the embedded resource above.".into()),
        ],
        "test_prompt_with_image" => vec![
            PromptMessage::new(Role::User, ContentBlock::image(PNG, "image/png")),
            user("Please analyze the image above.".into()),
        ],
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt: {other}"),
                None,
            ))
        }
    };
    Ok(GetPromptResult::new(messages))
}

pub fn list_resources() -> ListResourcesResult {
    let resource = |uri: &str, name: &str, what: &str, mime: &str| {
        Resource::new(uri, name)
            .with_description(what)
            .with_mime_type(mime)
    };
    ListResourcesResult::with_all_items(vec![
        resource(
            "test://static-text",
            "static-text",
            "A static text resource",
            "text/plain",
        ),
        resource(
            "test://static-binary",
            "static-binary",
            "A static PNG image",
            "image/png",
        ),
        resource(
            "test://watched-resource",
            "watched-resource",
            "A resource clients may subscribe to",
            "text/plain",
        ),
    ])
}

pub fn list_resource_templates() -> ListResourceTemplatesResult {
    let template = ResourceTemplate::new("test://template/{id}/data", "template-data")
        .with_description("Data for one id")
        .with_mime_type("application/json");
    ListResourceTemplatesResult::with_all_items(vec![template])
}

/// `resources/read` of a fixture resource (`test://…`); `None` for the server's own.
pub fn read_resource(
    request: &ReadResourceRequestParams,
) -> Option<Result<ReadResourceResult, ErrorData>> {
    request
        .uri
        .starts_with("test://")
        .then(|| fixture_resource(request))
}

fn fixture_resource(request: &ReadResourceRequestParams) -> Result<ReadResourceResult, ErrorData> {
    let uri = request.uri.as_str();
    let contents = match uri {
        "test://static-text" => text_contents(
            uri,
            "text/plain",
            "This is the content of the static text resource.",
        ),
        "test://watched-resource" => text_contents(uri, "text/plain", "Watched resource content."),
        "test://static-binary" => ResourceContents::BlobResourceContents {
            uri: uri.to_owned(),
            mime_type: Some("image/png".to_owned()),
            blob: PNG.to_owned(),
            meta: None,
        },
        _ => match uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
        {
            Some(id) => text_contents(
                uri,
                "application/json",
                &json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string(),
            ),
            None => {
                return Err(ErrorData::resource_not_found(
                    format!("no such resource: {uri}"),
                    None,
                ))
            }
        },
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// Completion: the suite only needs the capability and a well-formed answer.
pub fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
    let typed = request.argument.value.as_str();
    let values = ["paris", "park", "party"]
        .into_iter()
        .filter(|v| v.starts_with(typed))
        .map(str::to_owned)
        .collect();
    let info = CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None))?;
    Ok(CompleteResult::new(info))
}

/// The server's own prompts, then the fixtures'.
pub fn with_prompts(mut own: ListPromptsResult) -> ListPromptsResult {
    own.prompts.extend(list_prompts().prompts);
    own
}

/// The fixture resources ahead of the first page of the server's own.
pub fn with_resources(mut own: ListResourcesResult, first_page: bool) -> ListResourcesResult {
    if first_page {
        let mut all = list_resources().resources;
        all.append(&mut own.resources);
        own.resources = all;
    }
    own
}

/// The server's own templates, then the fixtures'.
pub fn with_resource_templates(
    mut own: ListResourceTemplatesResult,
) -> ListResourceTemplatesResult {
    own.resource_templates
        .extend(list_resource_templates().resource_templates);
    own
}

fn text_contents(uri: &str, mime: &str, text: &str) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(mime.to_owned()),
        text: text.to_owned(),
        meta: None,
    }
}

fn str_arg<'a>(args: &'a JsonObject, name: &str) -> &'a str {
    args.get(name).and_then(Value::as_str).unwrap_or_default()
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The `ServerHandler` methods behind the fixture subscriptions, completion and logging; expanded
/// inside `impl ServerHandler for PyRunServer` (its prompts and resources join the server's own
/// in `handler.rs` through `with_prompts`, `with_resources`, …).
#[macro_export]
macro_rules! fixture_handlers {
    () => {
        #[allow(deprecated)]
        async fn subscribe(
            &self,
            _request: rmcp::model::SubscribeRequestParams,
            _ctx: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> Result<(), rmcp::ErrorData> {
            Ok(())
        }
        #[allow(deprecated)]
        async fn unsubscribe(
            &self,
            _request: rmcp::model::UnsubscribeRequestParams,
            _ctx: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> Result<(), rmcp::ErrorData> {
            Ok(())
        }
        async fn complete(
            &self,
            request: rmcp::model::CompleteRequestParams,
            _ctx: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> Result<rmcp::model::CompleteResult, rmcp::ErrorData> {
            $crate::mcp::protocol::fixtures::complete(&request)
        }
        #[allow(deprecated)]
        async fn set_level(
            &self,
            _request: rmcp::model::SetLevelRequestParams,
            _ctx: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> Result<(), rmcp::ErrorData> {
            Ok(())
        }
    };
}

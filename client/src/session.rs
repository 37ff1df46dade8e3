//! A connected session plus the two ways a call ends early: Ctrl-C and `--timeout`. Either one
//! sends `notifications/cancelled` for the request in flight before returning.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, GetPromptRequest,
    GetPromptRequestParams, GetPromptResult, JsonObject, ListPromptsRequest, ListResourcesRequest,
    PaginatedRequestParams, PingRequest, Prompt, ReadResourceRequest, ReadResourceRequestParams,
    ReadResourceResult, RequestMetaObject, Resource, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::connect::McpSession;
use crate::error::ClientError;
use crate::live::{LiveSink, Printed};
use crate::reporter::Reporter;

/// When to stop waiting: Ctrl-C (`interrupt`) or the `--timeout` deadline.
#[derive(Debug, Clone)]
pub struct Limits {
    pub interrupt: Interrupt,
    pub deadline: Option<(Instant, Duration)>,
}

/// Ctrl-C as the waits see it. Once: a press stops every wait from then on. Rearmed (the
/// interactive menu): a press stops the waits of that moment, and later ones start afresh.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    current: Arc<Mutex<CancellationToken>>,
    rearm: bool,
}

impl Interrupt {
    pub fn new(rearm: bool) -> Self {
        Self {
            current: Arc::default(),
            rearm,
        }
    }

    pub fn rearms(&self) -> bool {
        self.rearm
    }

    /// What a wait starting now watches.
    pub fn token(&self) -> CancellationToken {
        lock(&self.current).clone()
    }

    /// A Ctrl-C.
    pub fn press(&self) {
        let mut current = lock(&self.current);
        current.cancel();
        if self.rearm {
            *current = CancellationToken::new();
        }
    }
}

fn lock(token: &Mutex<CancellationToken>) -> std::sync::MutexGuard<'_, CancellationToken> {
    token
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Limits {
    /// Runs `fut` unless Ctrl-C or the deadline comes first (dropping `fut` then).
    pub async fn guard<T>(
        &self,
        fut: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        let interrupt = self.interrupt.token();
        tokio::select! {
            result = fut => result,
            () = interrupt.cancelled() => Err(ClientError::Interrupted),
            limit = self.expired() => Err(ClientError::Timeout(limit)),
        }
    }

    async fn expired(&self) -> Duration {
        match self.deadline {
            Some((at, limit)) => {
                tokio::time::sleep_until(at).await;
                limit
            }
            None => std::future::pending().await,
        }
    }
}

pub struct Session {
    service: McpSession,
    limits: Limits,
    reporter: Reporter,
    /// Fed by the handler with the live output of the call [`Self::call_tool_live`] makes.
    live: LiveSink,
}

impl Session {
    pub fn new(service: McpSession, limits: Limits, reporter: Reporter, live: LiveSink) -> Self {
        Self {
            service,
            limits,
            reporter,
            live,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The server's name and version from `initialize`, if it sent them.
    pub fn server_name(&self) -> Option<String> {
        self.service
            .peer_info()
            .and_then(|info| info.server_info.clone())
            .map(|server| format!("{} {}", server.name, server.version))
    }

    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        self.limits
            .guard(async {
                self.service
                    .list_all_tools()
                    .await
                    .map_err(|e| service_error(e, "tools/list"))
            })
            .await
    }

    /// One `ping` round trip.
    pub async fn ping(&self) -> Result<(), ClientError> {
        let request = ClientRequest::PingRequest(PingRequest::default());
        match self.request(request, "ping").await? {
            ServerResult::EmptyResult(_) => Ok(()),
            other => Err(unexpected("ping", &other)),
        }
    }

    /// `tools/call`; errors the server returns come back as `ClientError`, a result with
    /// `isError` comes back as `Ok`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: JsonObject,
    ) -> Result<rmcp::model::CallToolResult, ClientError> {
        self.call_tool_with(name, arguments, None).await
    }

    /// [`Self::call_tool`] that asks a pyrun-mcp server for the run's output as it comes and
    /// prints it at once; also returns what it printed. Whatever ends the call, nothing is
    /// printed live after it returns.
    pub async fn call_tool_live(
        &self,
        name: &str,
        arguments: JsonObject,
    ) -> (Result<rmcp::model::CallToolResult, ClientError>, Printed) {
        let mut meta = RequestMetaObject::new();
        meta.insert(pyrun_api::live_output::ASK.into(), true.into());
        self.live.open();
        let result = self.call_tool_with(name, arguments, Some(meta)).await;
        (result, self.live.close())
    }

    async fn call_tool_with(
        &self,
        name: &str,
        arguments: JsonObject,
        meta: Option<RequestMetaObject>,
    ) -> Result<rmcp::model::CallToolResult, ClientError> {
        let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        params.meta = meta;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let result = self.request(request, name).await;
        match result {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(ServerResult::InputRequiredResult(_)) => Err(ClientError::Protocol(format!(
                "the tool `{name}` asked for more input, which this client does not support"
            ))),
            Ok(other) => Err(unexpected(name, &other)),
            Err(ClientError::BadArguments { reason, .. }) => {
                Err(self.classify_rejected_call(name, reason).await)
            }
            Err(e) => Err(e),
        }
    }

    /// Every resource, following `nextCursor` page by page.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, ClientError> {
        self.require_capability(Capability::Resources)?;
        self.all_pages(
            "resources/list",
            |params| ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(params)),
            |result| match result {
                ServerResult::ListResourcesResult(page) => Ok((page.resources, page.next_cursor)),
                other => Err(unexpected("resources/list", &other)),
            },
        )
        .await
    }

    /// `resources/read`; an error the server answers becomes [`ClientError::Refused`].
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, ClientError> {
        self.require_capability(Capability::Resources)?;
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        let label = "resources/read";
        let on_error = refused(format!("read {uri}"), label);
        match self.request_with(request, label, on_error).await? {
            ServerResult::ReadResourceResult(result) => Ok(result),
            other => Err(unexpected(label, &other)),
        }
    }

    /// Every prompt, following `nextCursor` page by page.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, ClientError> {
        self.require_capability(Capability::Prompts)?;
        self.all_pages(
            "prompts/list",
            |params| ClientRequest::ListPromptsRequest(ListPromptsRequest::with_param(params)),
            |result| match result {
                ServerResult::ListPromptsResult(page) => Ok((page.prompts, page.next_cursor)),
                other => Err(unexpected("prompts/list", &other)),
            },
        )
        .await
    }

    /// The items of a paged list: `request` builds the request for a cursor, `page` takes a
    /// page's items and next cursor out of the answer.
    async fn all_pages<T>(
        &self,
        label: &str,
        request: impl Fn(PaginatedRequestParams) -> ClientRequest,
        page: impl Fn(ServerResult) -> Result<(Vec<T>, Option<String>), ClientError>,
    ) -> Result<Vec<T>, ClientError> {
        let mut items = Vec::new();
        let mut pages = Pages::default();
        while let Some(cursor) = pages.next() {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let (more, next) = page(self.request(request(params), label).await?)?;
            items.extend(more);
            pages.advance(next, label)?;
        }
        Ok(items)
    }

    /// `prompts/get`; an error the server answers becomes [`ClientError::Refused`].
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: JsonObject,
    ) -> Result<GetPromptResult, ClientError> {
        self.require_capability(Capability::Prompts)?;
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(
            GetPromptRequestParams::new(name).with_arguments(arguments),
        ));
        let label = "prompts/get";
        let on_error = refused(format!("get the prompt `{name}`"), label);
        match self.request_with(request, label, on_error).await? {
            ServerResult::GetPromptResult(result) => Ok(result),
            other => Err(unexpected(label, &other)),
        }
    }

    /// A server that did not declare resources (or prompts) in `initialize` has none to list.
    fn require_capability(&self, capability: Capability) -> Result<(), ClientError> {
        let declared = self
            .service
            .peer_info()
            .is_some_and(|info| match capability {
                Capability::Resources => info.capabilities.resources.is_some(),
                Capability::Prompts => info.capabilities.prompts.is_some(),
            });
        if declared {
            Ok(())
        } else {
            Err(ClientError::NotOffered {
                what: capability.name(),
                server: self.server_name().unwrap_or_else(|| "the server".into()),
            })
        }
    }

    /// `tools/call` bounded by `limit` alone: for the clean-up after Ctrl-C or `--timeout` fired,
    /// which would stop a guarded call at once.
    pub async fn call_tool_unguarded(
        &self,
        name: &str,
        arguments: JsonObject,
        limit: Duration,
    ) -> Result<rmcp::model::CallToolResult, ClientError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(limit, self.service.peer().call_tool(params)).await {
            Ok(result) => result.map_err(|e| service_error(e, name)),
            Err(_) => Err(ClientError::Timeout(limit)),
        }
    }

    /// Sends a request with a spinner running; on Ctrl-C or timeout, cancels it on the server.
    async fn request(
        &self,
        request: ClientRequest,
        label: &str,
    ) -> Result<ServerResult, ClientError> {
        self.request_with(request, label, |e| service_error(e, label))
            .await
    }

    /// [`Self::request`] with its own reading of the errors the server answers.
    async fn request_with(
        &self,
        request: ClientRequest,
        label: &str,
        on_error: impl Fn(ServiceError) -> ClientError,
    ) -> Result<ServerResult, ClientError> {
        let peer = self.service.peer();
        let mut handle = self
            .limits
            .guard(async {
                peer.send_cancellable_request(request, PeerRequestOptions::no_options())
                    .await
                    .map_err(&on_error)
            })
            .await?;
        self.reporter.begin(label);
        let outcome = self
            .limits
            .guard(async { Ok((&mut handle.rx).await) })
            .await;
        self.reporter.end();
        match outcome {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(e))) => Err(on_error(e)),
            Ok(Err(_closed)) => Err(ClientError::ConnectionLost {
                during: label.into(),
                reason: None,
            }),
            Err(stop) => {
                let reason = match &stop {
                    ClientError::Interrupted => "interrupted by the user (Ctrl-C)",
                    _ => "client timeout",
                };
                // Bounded: a dead transport must not keep a Ctrl-C from exiting.
                let _ = tokio::time::timeout(
                    Duration::from_secs(3),
                    handle.cancel(Some(reason.into())),
                )
                .await;
                Err(stop)
            }
        }
    }

    /// The server rejected the call's parameters: was it the tool name or the arguments?
    async fn classify_rejected_call(&self, name: &str, reason: String) -> ClientError {
        match self.list_tools().await {
            Ok(tools) if !tools.iter().any(|t| t.name == name) => ClientError::UnknownTool {
                name: name.into(),
                available: tools.iter().map(|t| t.name.to_string()).collect(),
            },
            _ => ClientError::BadArguments {
                tool: name.into(),
                reason,
            },
        }
    }

    /// Closes the connection (for stdio: closes the server's stdin and waits for it to exit).
    pub async fn close(mut self) {
        let _ = self
            .service
            .close_with_timeout(Duration::from_secs(5))
            .await;
    }
}

#[derive(Debug, Clone, Copy)]
enum Capability {
    Resources,
    Prompts,
}

impl Capability {
    fn name(self) -> &'static str {
        match self {
            Self::Resources => "resources",
            Self::Prompts => "prompts",
        }
    }
}

/// The cursors of a paged list: the first page has none, the last page returns none. A server that
/// hands back a cursor it already gave would page forever; that is a protocol error.
#[derive(Debug, Default)]
struct Pages {
    next: Option<Option<String>>,
    seen: std::collections::HashSet<String>,
    started: bool,
}

impl Pages {
    /// The cursor to ask for next (`Some(None)`: the first page), or `None` when done.
    fn next(&mut self) -> Option<Option<String>> {
        if !self.started {
            self.started = true;
            return Some(None);
        }
        self.next.take()
    }

    fn advance(&mut self, cursor: Option<String>, what: &str) -> Result<(), ClientError> {
        if let Some(cursor) = &cursor {
            if !self.seen.insert(cursor.clone()) {
                return Err(ClientError::Protocol(format!(
                    "`{what}` returned the cursor `{cursor}` twice; the list would never end"
                )));
            }
        }
        self.next = cursor.map(Some);
        Ok(())
    }
}

/// A JSON-RPC error for a read or a prompt is the server's answer about that thing (not found,
/// outside the folder, too large), not bad tool arguments.
fn refused(what: String, label: &str) -> impl Fn(ServiceError) -> ClientError + '_ {
    move |err| match err {
        ServiceError::McpError(e) => ClientError::Refused {
            what: what.clone(),
            reason: e.message.into_owned(),
        },
        other => service_error(other, label),
    }
}

/// `label` names the request (the tool, for `tools/call`) in a rejection.
fn service_error(err: ServiceError, label: &str) -> ClientError {
    match err {
        ServiceError::McpError(e) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS => {
            ClientError::BadArguments {
                tool: label.into(),
                reason: e.message.into_owned(),
            }
        }
        ServiceError::McpError(e) => ClientError::Protocol(format!(
            "the server answered error {}: {}",
            e.code.0, e.message
        )),
        ServiceError::TransportClosed => ClientError::ConnectionLost {
            during: label.into(),
            reason: None,
        },
        ServiceError::TransportSend(_) if !err.is_authorization_required() => {
            let reason = crate::connect::root_cause(&err);
            match too_large(&reason) {
                Some(said) => ClientError::TooLarge {
                    during: label.into(),
                    reason: said,
                },
                None => ClientError::ConnectionLost {
                    during: label.into(),
                    reason: Some(reason),
                },
            }
        }
        other => ClientError::Protocol(crate::connect::error_chain(&other)),
    }
}

/// A send that the server answered with `413`: what the server said of its limit (its own
/// hint lines left to ours), or the status alone.
fn too_large(reason: &str) -> Option<String> {
    const STATUS: &str = "HTTP 413 Payload Too Large";
    let start = reason.find(STATUS)?;
    let said = reason[start + STATUS.len()..]
        .trim_start_matches(':')
        .trim()
        .trim_start_matches("Payload Too Large:")
        .trim();
    let said = said.split("\nhint:").next().unwrap_or(said);
    let said = said.lines().next().unwrap_or(said).trim();
    Some(if said.is_empty() {
        "larger than it accepts".to_owned()
    } else {
        said.to_owned()
    })
}

fn unexpected(what: &str, result: &ServerResult) -> ClientError {
    let kind = serde_json::to_value(result)
        .ok()
        .map(|v| v.to_string().chars().take(200).collect::<String>())
        .unwrap_or_default();
    ClientError::Protocol(format!("unexpected answer to `{what}`: {kind}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_413_keeps_the_servers_first_line() {
        let reason = "unexpected server response: HTTP 413 Payload Too Large: Payload Too Large: \
                      the request body is more than the 65536 bytes this server accepts \
                      (--max-body-bytes, MCP_MAX_BODY_BYTES)\nhint: send it in pieces";
        let said = too_large(reason).unwrap_or_default();
        assert!(
            said.starts_with("the request body is more than the 65536"),
            "{said}"
        );
        assert!(said.ends_with("MCP_MAX_BODY_BYTES)"), "{said}");
        assert_eq!(
            too_large("HTTP 413 Payload Too Large").as_deref(),
            Some("larger than it accepts")
        );
        assert_eq!(too_large("connection reset"), None);
    }

    #[test]
    fn a_rearmed_interrupt_stops_only_the_waits_of_its_moment() {
        let once = Interrupt::new(false);
        let before = once.token();
        once.press();
        assert!(before.is_cancelled() && once.token().is_cancelled());

        let menu = Interrupt::new(true);
        let running = menu.token();
        menu.press();
        assert!(running.is_cancelled());
        assert!(!menu.token().is_cancelled(), "the next wait starts afresh");
    }

    #[test]
    fn pages_follow_cursors_and_stop_at_the_last_page() {
        let mut pages = Pages::default();
        assert_eq!(pages.next(), Some(None));
        assert!(pages.advance(Some("2".into()), "x").is_ok());
        assert_eq!(pages.next(), Some(Some("2".into())));
        assert!(pages.advance(None, "x").is_ok());
        assert_eq!(pages.next(), None);
    }

    #[test]
    fn a_cursor_seen_twice_is_a_protocol_error() {
        let mut pages = Pages::default();
        pages.next();
        assert!(pages.advance(Some("a".into()), "resources/list").is_ok());
        pages.next();
        assert!(matches!(
            pages.advance(Some("a".into()), "resources/list"),
            Err(ClientError::Protocol(m)) if m.contains("twice")
        ));
    }
}

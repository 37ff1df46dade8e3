//! The MCP handler: [`PyRunServer`], one per session, composing the tool rooms' routers, and its
//! `ServerHandler` impl — every tool call routed (a `run_python` task to the tasks room), recorded
//! in the audit log, and resources, prompts and tasks handed to their rooms. Who called and over
//! what is known here only.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::{tool_handler, ErrorData, RoleServer, ServerHandler};

use super::{fixtures, prompts, resources};
use crate::app::{protection, App};
use crate::audit::{CallNotes, Channel, FinishedCall, TransportKind};
use crate::mcp::call::stdin_upload::StdinUploads;
use crate::mcp::call::{call_notes, CallContext};
use crate::mcp::present::reply::NOTIFY_TIMEOUT;
use crate::mcp::protocol::resources::read_budget::{ReadBudget, ShareHold};
use crate::mcp::protocol::resources::watch::ProjectWatch;
use crate::mcp::protocol::tasks::run_python_as_task;
use crate::mcp::protocol::tasks::store::Tasks;
use pyrun_run::caller::Caller;
use pyrun_run::engine::Engine;

/// What every session of one server shares: the MCP tasks and the projects folder's watcher.
/// Made once per server by the transport (the MCP layer's own state, so `App` holds nothing of
/// MCP), then handed to each session's [`PyRunServer`].
#[derive(Debug)]
pub struct McpState {
    pub(in crate::mcp) tasks: Tasks,
    pub(in crate::mcp) watch: ProjectWatch,
    /// The bytes `resources/read` and prompts may hold at once.
    pub(in crate::mcp) reads: ReadBudget,
    /// Stdin sent in pieces (`upload_stdin`), until a run takes it.
    pub(in crate::mcp) stdin: StdinUploads,
    /// The tools, built once (from the server's settings, which never change) and shared: built
    /// per session they were ~130 allocations, ~6 KiB, for every open session.
    tools: OnceLock<Arc<ToolRouter<PyRunServer>>>,
}

impl McpState {
    pub fn new(app: &App) -> Arc<Self> {
        let tasks = Tasks::default();
        let forget = tasks.clone();
        app.engine
            .runs()
            .on_forget(move |run_id| forget.forget_run(run_id));
        Arc::new(Self {
            tasks,
            watch: ProjectWatch::new(app.engine.root().clone()),
            reads: ReadBudget::default(),
            stdin: StdinUploads::new(app.config.max_stdin_bytes),
            tools: OnceLock::new(),
        })
    }
}

/// The MCP server: one per session, cheap to clone.
#[derive(Debug, Clone)]
pub struct PyRunServer {
    pub(crate) app: Arc<App>,
    /// What this server's sessions share.
    pub(in crate::mcp) state: Arc<McpState>,
    /// Over stdio: the local user. Over HTTP: `None`, each request carries its own caller.
    local: Option<Caller>,
    tool_router: Arc<ToolRouter<Self>>,
}

impl PyRunServer {
    /// What is off here, the limits and the platform's protection, so that a model can explain
    /// a refusal; the sandbox's layers once probed.
    fn instructions(&self) -> String {
        let config = &self.app.config;
        let probed = self.engine().runner().sandbox().now();
        protection::instructions(config, &protection::summary_of(config, probed.as_ref()))
    }

    /// A handler for HTTP sessions: each request's caller comes from the auth layer.
    pub fn new(app: Arc<App>, state: Arc<McpState>) -> Self {
        Self::with_caller(app, state, None)
    }

    /// A handler for the stdio client, the local user.
    pub fn for_stdio(app: Arc<App>, state: Arc<McpState>) -> Self {
        Self::with_caller(app, state, Some(Caller::Local))
    }

    fn with_caller(app: Arc<App>, state: Arc<McpState>, local: Option<Caller>) -> Self {
        Self {
            tool_router: state
                .tools
                .get_or_init(|| Arc::new(Self::routers(&app)))
                .clone(),
            app,
            state,
            local,
        }
    }

    /// The tools this server offers (`list_packages` always): `run_python_code` and the session
    /// tools only with `--allow-inline-code`, `install_packages` only with `--allow-install` (not
    /// listed, and unknown when called, without them).
    fn routers(app: &App) -> ToolRouter<Self> {
        let router = Self::run_router()
            + Self::background_router()
            + Self::packages_router()
            + Self::stdin_router();
        let router = router + fixtures::tool_router();
        let router = if app.config.inline.allowed {
            router + Self::inline_router() + Self::sessions_router()
        } else {
            router
        };
        let mut router = if app.config.install.allowed {
            router + Self::install_router()
        } else {
            router
        };
        let backends = app.engine.backends();
        if backends.any_remote() {
            router += Self::backends_router();
            crate::mcp::protocol::backend_schema::with_backend_argument(
                &mut router,
                &backends.names(),
            );
        }
        router
    }

    /// The run layer's front door.
    pub(in crate::mcp) fn engine(&self) -> &Engine {
        &self.app.engine
    }

    /// What the rooms' helpers need of one call: the `App`, its caller, its audit notes.
    pub(in crate::mcp) fn call_context(&self, ctx: &RequestContext<RoleServer>) -> CallContext<'_> {
        CallContext {
            app: &self.app,
            caller: self.caller(ctx),
            notes: call_notes(ctx),
        }
    }

    /// Who sent this request: the stdio client, or what the HTTP auth layer admitted (an HTTP
    /// request without one counts as anonymous: the least it could be).
    pub(in crate::mcp) fn caller(&self, ctx: &RequestContext<RoleServer>) -> Caller {
        if let Some(local) = &self.local {
            return local.clone();
        }
        // `/sse` + `/messages` put the caller in the request; rmcp's `/mcp` passes the whole
        // request parts, whose extensions hold it.
        let extensions = &ctx.extensions;
        extensions
            .get::<Caller>()
            .or_else(|| {
                extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<Caller>())
            })
            .cloned()
            .unwrap_or(Caller::Anonymous)
    }

    /// The transport a request came over and its MCP session: stdio has one client and no
    /// session id; `/sse` + `/messages` put a [`Channel`] in the request; rmcp's `/mcp` passes
    /// the request's parts, whose `mcp-session-id` header names the session (none when stateless).
    fn channel(&self, ctx: &RequestContext<RoleServer>) -> Channel {
        if self.local.is_some() {
            return Channel {
                transport: TransportKind::Stdio,
                session_id: None,
            };
        }
        if let Some(channel) = ctx.extensions.get::<Channel>() {
            return channel.clone();
        }
        let session_id = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get(HEADER_SESSION_ID))
            .and_then(|id| id.to_str().ok())
            .map(Arc::from);
        Channel {
            transport: TransportKind::StreamableHttp,
            session_id,
        }
    }

    /// Runs a tool call: `run_python` as a task when the client declared the Tasks extension,
    /// everything else through the router.
    async fn route(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Only a request that declares the extension in its own `_meta` (the 2026-07-28
        // envelope) gets a task: clients such as the MCP Inspector declare it at `initialize` on
        // the 2025-11-25 protocol too but expect a plain result there.
        let wants_task = context
            .meta
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if wants_task && request.name == "run_python" {
            return run_python_as_task(
                self.call_context(&context),
                &self.state.tasks,
                &self.state.stdin,
                request,
            )
            .await;
        }
        self.tool_router
            .call(ToolCallContext::new(self, request, context))
            .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PyRunServer {
    /// Every tool call: the router runs the tool, the audit log records who called it, over what,
    /// and how it ended (also when the call is dropped before it ends).
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.app.audit.is_on() {
            return self.route(request, context).await;
        }
        let notes = CallNotes::default();
        let mut audited = AuditedCall {
            app: &self.app,
            caller: self.caller(&context),
            channel: self.channel(&context),
            tool: request.name.clone(),
            notes: notes.clone(),
            started: Instant::now(),
            refused: None,
        };
        context.extensions.insert(notes);
        let response = self.route(request, context).await;
        audited.refused = Some(match &response {
            Ok(CallToolResponse::Complete(result)) => result.is_error == Some(true),
            Ok(_) => false,
            Err(_) => true,
        });
        response
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let owner = self.caller(&context);
        let task = self.state.tasks.get(&owner.key(), &request.task_id)?;
        Ok(GetTaskResult::new(task))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.caller(&context);
        self.state.tasks.cancel(&owner.key(), &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.caller(&context);
        self.state.tasks.update(&owner.key(), &request.task_id)
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tasks()
            .build();
        let info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("pyrun-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions());
        fixtures::extend_info(info)
    }

    crate::fixture_handlers!();

    // Resources and prompts: their rooms; the conformance fixtures join them.
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let first_page = request.as_ref().is_none_or(|r| r.cursor.is_none());
        let client = ctx.client_capabilities();
        let own = resources::list(&self.state, request, client.as_ref()).await?;
        Ok(fixtures::with_resources(own, first_page))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(fixtures::with_resource_templates(resources::templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if let Some(fixture) = fixtures::read_resource(&request) {
            return fixture.map(Into::into);
        }
        let caller = self.caller(&ctx);
        let (result, share) =
            resources::read(&self.app, &self.state.reads, &caller, &request.uri).await?;
        // Over HTTP the share stays taken until the answer is written (`/sse` puts the hold in
        // the request, rmcp's `/mcp` in its parts); over stdio it comes back here.
        let extensions = &ctx.extensions;
        let hold = extensions.get::<ShareHold>().or_else(|| {
            extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<ShareHold>())
        });
        if let (Some(hold), Some(share)) = (hold, share) {
            hold.keep(share);
        }
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(fixtures::with_prompts(prompts::list()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if let Some(fixture) = fixtures::get_prompt(&request) {
            return fixture.map(Into::into);
        }
        prompts::get(&self.app, &self.state.reads, &self.caller(&ctx), request)
            .await
            .map(Into::into)
    }

    /// A session that initialized hears `resources/list_changed` until it closes.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.state.watch.add_peer(context.peer);
    }

    /// 2026-07-28 sessions opt in to `resources/list_changed` with `subscriptions/listen`.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.resources_list_changed = requested.resources_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.state.watch.subscribe();
        let wants = context.accepted().resources_list_changed == Some(true);
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed(), if wants => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let send = context.sink().notify_resource_list_changed();
                    let _ = tokio::time::timeout(NOTIFY_TIMEOUT, send).await;
                }
            }
        }
    }
}

/// A tool call on its way to the audit log: recorded when dropped, so a call whose future is
/// dropped before it ends (its client went away) is recorded too, as cancelled.
struct AuditedCall<'a> {
    app: &'a App,
    caller: Caller,
    channel: Channel,
    tool: std::borrow::Cow<'static, str>,
    notes: CallNotes,
    started: Instant,
    /// Set when the call ended; `None` when it was dropped first.
    refused: Option<bool>,
}

impl Drop for AuditedCall<'_> {
    fn drop(&mut self) {
        if self.refused.is_none() {
            self.notes.note(|n| n.cancelled = true);
        }
        self.app.audit.record(&FinishedCall {
            caller: &self.caller,
            channel: &self.channel,
            tool: &self.tool,
            notes: &self.notes,
            refused: self.refused.unwrap_or(false),
            duration: self.started.elapsed(),
        });
    }
}

//! HTTP transport: one axum router with Streamable HTTP on `/mcp`, legacy HTTP+SSE on `/sse` and
//! `/messages`, and `/health`; auth, Host/Origin checks, session limits, the status of a session's
//! close, the read shares an answer holds until written, the body deadline, the body limit's
//! `413` (naming the setting) and the access log are layers. A stateless (2026-07-28) request's run
//! ends with its connection; a session's does not (see [`router`]).

mod accept;
mod access_log;
mod auth;
mod body_limit;
mod body_timeout;
mod host_check;
mod read_hold;
mod session_close;
mod session_limit;
mod session_owner;
mod unauthenticated;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::{DefaultBodyLimit, State};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::get;
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Serialize;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;

use crate::app::App;
use crate::client_message::ClientMessage;
use crate::mcp::{McpState, PyRunServer};
use crate::transport::sse::{self, SseSessions, SseState, SseTimings};

use accept::ConnectionLimits;
pub use auth::{Authenticator, RequiredToken};
use body_timeout::BodyTimeout;
pub use host_check::HostPolicy;
use session_limit::SessionLimit;
use session_owner::{CallerSessions, SessionBook};

/// Time a connection gets to send a request head, idle keep-alive included (it needs hyper's
/// timer to take effect; see `accept`): a half-sent request is cut off within it.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Keep-alive comments on every SSE stream: tunnels and proxies drop streams idle for longer.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);
/// After shutdown fires, how long open connections get to finish before the server stops anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Binds the configured address (port 0 picks a free port).
///
/// The listening socket gets TCP_NODELAY, which accepted connections inherit: without it, a
/// response's second small write (the JSON-RPC answer after the SSE priming event) waits for the
/// client's delayed ACK, ~40 ms on every /mcp call.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    let listen = || -> std::io::Result<TcpListener> {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // As `TcpListener::bind` does: a restarted server may reuse a port in TIME_WAIT.
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        socket.set_nodelay(true)?;
        socket.bind(addr)?;
        socket.listen(1024)
    };
    listen().with_context(|| {
        format!(
            "cannot listen on {addr}\nhint: pick another address with --bind HOST:PORT or MCP_BIND"
        )
    })
}

/// Serves until `shutdown` fires, then closes every stream and session (their runs are killed).
/// `listener` is the bound TCP listener, or one that also yields a tunnel's connections.
pub async fn serve(
    app: Arc<App>,
    listener: impl axum::serve::Listener<Addr = SocketAddr>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let addr = listener.local_addr().context("reading the bound address")?;
    if app.config.http.unauthenticated_public {
        tracing::warn!(
            %addr,
            "SERVING WITHOUT AUTHENTICATION on a non-loopback address (--allow-unauthenticated): \
             anyone who can reach it can run the scripts in the projects folder"
        );
    }
    crate::app::banner::listening(&app, addr);
    let limits = ConnectionLimits {
        header_timeout: HEADER_TIMEOUT,
        max_open: app.config.http.max_connections,
        max_unauthenticated_per_address: app.config.http.max_unauthenticated_per_address,
    };
    let server = accept::serve_connections(
        listener,
        router(app, shutdown.clone()),
        limits,
        shutdown.clone(),
    );
    tokio::select! {
        () = server => {}
        () = async { shutdown.cancelled().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            tracing::warn!("connections still open after the shutdown grace period; stopping anyway");
        }
    }
    Ok(())
}

/// The whole HTTP surface. `shutdown` ends every session and stream when it fires.
pub fn router(app: Arc<App>, shutdown: CancellationToken) -> Router {
    let settings = app.config.http.clone();
    let hosts = HostPolicy::new(&settings.allowed_hosts);
    let auth = Authenticator::new(settings.auth_token.as_deref(), app.oauth.clone());

    let mut mcp_sessions = LocalSessionManager::default();
    mcp_sessions.session_config.keep_alive = Some(settings.session_idle_timeout);
    // rmcp keeps each finished request's answers for a late resume for this long (60 s by
    // default), and a `resources/read` answer is up to 11 MiB: a burst of reads held them all.
    // A stream still open resumes as before; a finished one is dropped at the session's next
    // message.
    mcp_sessions.session_config.completed_cache_ttl = Duration::ZERO;
    // Each session recorded with the caller that made it (see `session_owner`).
    let book = Arc::new(SessionBook::default());
    let mcp_sessions = Arc::new(CallerSessions::new(mcp_sessions, book.clone()));
    let sse_sessions = Arc::new(SseSessions::default());
    let limit = SessionLimit::new(
        (settings.max_sessions, settings.max_sessions_per_caller),
        settings.max_body_bytes,
        book.clone(),
        sse_sessions.clone(),
    );

    // rmcp ties a stateless (2026-07-28) request to its connection, as that protocol wants: the
    // request gets its own cancellation token, fired when hyper drops the pending answer or the
    // SSE body of a client that went away; the tool's token is its child, so the runner kills
    // the run. Only without an event store: a persisted stream keeps its request running for a
    // resume. A dropped session stream is not a cancellation (the client may come back).
    // One MCP state for the server: every session of `/mcp` and `/sse` shares its tasks and
    // watcher.
    let mcp_state = McpState::new(&app);
    let (mcp_app, mcp_shared) = (app.clone(), mcp_state.clone());
    let mcp = StreamableHttpService::new(
        move || Ok(PyRunServer::new(mcp_app.clone(), mcp_shared.clone())),
        mcp_sessions.clone(),
        StreamableHttpServerConfig::default()
            .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
            .with_cancellation_token(shutdown.child_token())
            .with_allowed_hosts(hosts.rmcp_allowed_hosts())
            .with_allowed_origins(hosts.rmcp_allowed_origins())
            .with_max_request_body_bytes(settings.max_body_bytes),
    );
    // The owner layer comes before the close layer and rmcp: both must see a foreign
    // session's id already replaced (see `session_owner`).
    let mcp = ServiceBuilder::new()
        .layer(from_fn(read_hold::hold_read_shares))
        .layer(from_fn_with_state(
            book,
            session_owner::keep_sessions_to_their_callers,
        ))
        .layer(from_fn_with_state(
            mcp_sessions,
            session_close::close_with_no_content,
        ))
        .layer(from_fn_with_state(
            limit.clone(),
            session_limit::limit_mcp_sessions,
        ))
        .service(mcp);

    let sse_app = app.clone();
    let sse_routes = sse::routes(SseState::new(
        sse_sessions,
        Arc::new(move || PyRunServer::new(sse_app.clone(), mcp_state.clone())),
        SseTimings {
            keep_alive: SSE_KEEP_ALIVE,
            idle_timeout: settings.session_idle_timeout,
        },
        shutdown,
    ))
    .route_layer(from_fn_with_state(limit, session_limit::limit_sse_sessions));

    let oauth = app.oauth.clone();
    let mut router = Router::new()
        .nest_service("/mcp", mcp)
        .merge(sse_routes)
        .route_layer(from_fn_with_state(auth, auth::require_token))
        .route("/health", get(health).with_state(app))
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(from_fn_with_state(
            body_limit::BodyLimit(settings.max_body_bytes),
            body_limit::name_the_limit,
        ))
        .layer(from_fn_with_state(
            hosts.clone(),
            host_check::check_host_and_origin,
        ));
    // The OAuth endpoints answer pages of any origin (CORS, see `oauth::routes`): they pass the
    // Host check only.
    if let Some(oauth) = oauth {
        router = router.merge(
            crate::oauth::routes::routes(oauth)
                .layer(from_fn_with_state(hosts, host_check::check_host)),
        );
    }
    router
        .layer(from_fn_with_state(
            BodyTimeout(settings.body_timeout),
            body_timeout::limit_body_time,
        ))
        .layer(from_fn(access_log::log_request))
}

/// What `/health` reports: nothing secret, enough for a load balancer or a curious user. The
/// sandbox's active layers, and those runs do not get with fixed words for why and what would
/// bring them (the operator's log has the details, host paths included; `/health` answers
/// anyone, so it has none).
#[derive(Serialize)]
struct Health {
    status: &'static str,
    version: &'static str,
    transports: [&'static str; 2],
    running: usize,
    sandbox: Vec<&'static str>,
    sandbox_missing: Vec<MissingLayer>,
}

/// A layer runs lack, as `/health` shows it.
#[derive(Serialize)]
struct MissingLayer {
    layer: &'static str,
    why: &'static str,
    hint: &'static str,
}

async fn health(State(app): State<Arc<App>>) -> Json<Health> {
    let sandbox = app.engine.runner().sandbox().get().await.ok();
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        transports: ["streamable-http", "sse"],
        running: app.engine.runner().running(),
        // Waits for the start-up probe (milliseconds); empty when the sandbox failed to set up.
        sandbox: sandbox.as_ref().map(|s| s.layers()).unwrap_or_default(),
        sandbox_missing: sandbox
            .map(|s| {
                s.missing_layers()
                    .into_iter()
                    .map(|m| MissingLayer {
                        layer: m.layer,
                        why: m.why,
                        hint: m.hint,
                    })
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// A plain-text body (`text/plain; charset=utf-8`); paired with a status: `(status, message)`.
impl axum::response::IntoResponse for ClientMessage {
    fn into_response(self) -> axum::response::Response {
        axum::response::IntoResponse::into_response(self.into_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_inherit_nodelay() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        assert!(
            accepted.nodelay().unwrap(),
            "accepted socket lacks TCP_NODELAY"
        );
    }
}

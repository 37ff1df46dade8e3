//! Legacy HTTP+SSE transport (MCP 2024-11-05): `GET /sse` opens a session stream, `POST /messages` feeds it.
//!
//! rmcp dropped its own SSE server, so each session is an rmcp service served over a pair of channels:
//! POSTed messages go into one, the service's messages come out of the other as `message` events.
//! The session lives exactly as long as its stream: a client that disconnects drops the stream, which
//! cancels the session and with it every run the session started. Idle sessions expire the same way.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::Router;
use futures::channel::mpsc;
use futures::{SinkExt, Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, RequestId, ServerJsonRpcMessage};
use rmcp::service::ServerInitializeError;
use rmcp::{ServerHandler, ServiceExt};
use serde::Deserialize;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::audit::{Channel, TransportKind};
use crate::client_message::ClientMessage;
use crate::mcp::ShareHold;
use pyrun_run::caller::Caller;

/// Path of the stream route.
pub const SSE_PATH: &str = "/sse";
/// Path of the message route announced in the `endpoint` event.
pub const MESSAGES_PATH: &str = "/messages";

/// Messages a session buffers in each direction before the sender waits.
const CHANNEL_CAPACITY: usize = 64;
/// Requests of a session whose read shares are tracked before those that hold none are
/// forgotten (a cancelled request gets no answer, so its entry would never go).
const MAX_PENDING_SHARES: usize = 1024;

/// Builds one fresh MCP handler per session.
pub type HandlerFactory<S> = Arc<dyn Fn() -> S + Send + Sync>;

/// Timing of SSE sessions.
#[derive(Clone, Copy, Debug)]
pub struct SseTimings {
    /// Interval of the keep-alive comments that stop tunnels and proxies from dropping idle streams.
    pub keep_alive: Duration,
    /// A session without any message in either direction for this long is closed.
    pub idle_timeout: Duration,
}

/// The live SSE sessions, by id: where to deliver the messages POSTed for each.
#[derive(Default)]
pub struct SseSessions {
    by_id: Mutex<HashMap<String, SessionInbox>>,
}

#[derive(Clone)]
struct SessionInbox {
    /// Who opened the stream: the only caller whose messages the session takes.
    caller: Option<Caller>,
    to_handler: mpsc::Sender<ClientJsonRpcMessage>,
    activity: Arc<Activity>,
    shares: Arc<PendingShares>,
}

/// The read shares of a session's requests (see `mcp::read_budget`), by request id, until
/// their answers are taken from the session's queue onto its stream: a client that reads its
/// stream slowly leaves its answers queued with their shares, not more of the server's memory.
#[derive(Default)]
struct PendingShares(Mutex<HashMap<RequestId, ShareHold>>);

impl PendingShares {
    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, ShareHold>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn track(&self, id: RequestId, hold: ShareHold) {
        let mut pending = self.lock();
        if pending.len() >= MAX_PENDING_SHARES {
            pending.retain(|_, hold| !hold.is_empty());
        }
        pending.insert(id, hold);
    }

    /// The answer to `message`'s request is on the stream: its shares go back.
    fn answered(&self, message: &ServerJsonRpcMessage) {
        let id = match message {
            ServerJsonRpcMessage::Response(response) => Some(&response.id),
            ServerJsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = id {
            self.lock().remove(id);
        }
    }
}

impl SseSessions {
    /// Number of live SSE sessions.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no SSE session is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of live SSE sessions `caller` opened.
    pub fn count(&self, caller: &Caller) -> usize {
        self.lock()
            .values()
            .filter(|inbox| inbox.caller.as_ref() == Some(caller))
            .count()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, SessionInbox>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts/removes).
        self.by_id
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The session `id` if `caller` opened it: another caller's session is as unknown to it
    /// as one that never was.
    fn get(&self, id: &str, caller: Option<&Caller>) -> Option<SessionInbox> {
        let inbox = self.lock().get(id).cloned()?;
        (inbox.caller.as_ref() == caller).then_some(inbox)
    }
}

/// Everything the two SSE routes share.
pub struct SseState<S> {
    sessions: Arc<SseSessions>,
    factory: HandlerFactory<S>,
    timings: SseTimings,
    shutdown: CancellationToken,
}

impl<S> Clone for SseState<S> {
    fn clone(&self) -> Self {
        Self {
            sessions: self.sessions.clone(),
            factory: self.factory.clone(),
            timings: self.timings,
            shutdown: self.shutdown.clone(),
        }
    }
}

impl<S> SseState<S> {
    /// `shutdown` closes every stream and cancels every session when it fires.
    pub fn new(
        sessions: Arc<SseSessions>,
        factory: HandlerFactory<S>,
        timings: SseTimings,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            sessions,
            factory,
            timings,
            shutdown,
        }
    }
}

/// The `/sse` and `/messages` routes.
pub fn routes<S>(state: SseState<S>) -> Router
where
    S: ServerHandler + Send + 'static,
{
    Router::new()
        .route(SSE_PATH, get(open_stream::<S>))
        .route(MESSAGES_PATH, post(post_message::<S>))
        .with_state(state)
}

/// `GET /sse`: start a session and stream its messages; the session is the caller's the auth
/// layer admitted.
async fn open_stream<S>(
    State(state): State<SseState<S>>,
    caller: Option<Extension<Caller>>,
) -> Response
where
    S: ServerHandler + Send + 'static,
{
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (to_handler, from_client) = mpsc::channel::<ClientJsonRpcMessage>(CHANNEL_CAPACITY);
    let (to_client, from_handler) = mpsc::channel::<ServerJsonRpcMessage>(CHANNEL_CAPACITY);
    let activity = Arc::new(Activity::new());
    let shares = Arc::new(PendingShares::default());
    let session_ct = state.shutdown.child_token();

    state.sessions.lock().insert(
        id.clone(),
        SessionInbox {
            caller: caller.map(|Extension(caller)| caller),
            to_handler,
            activity: activity.clone(),
            shares: shares.clone(),
        },
    );
    tracing::info!(session = %id, "sse session opened");
    tokio::spawn(run_session(
        state.clone(),
        id.clone(),
        (to_client, from_client),
        activity.clone(),
        session_ct.clone(),
    ));

    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("{MESSAGES_PATH}?sessionId={id}"));
    let messages = from_handler.map(move |message| {
        activity.touch();
        let event = message_event(&message);
        shares.answered(&message);
        Ok::<_, Infallible>(event)
    });
    let events = futures::stream::once(async { Ok(endpoint) })
        .chain(messages)
        .take_until(session_ct.clone().cancelled_owned());
    let stream = EndsSessionOnDrop {
        inner: Box::pin(events),
        _session: session_ct.drop_guard(),
    };
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(state.timings.keep_alive))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn message_event(message: &ServerJsonRpcMessage) -> Event {
    match serde_json::to_string(message) {
        Ok(json) => Event::default().event("message").data(json),
        Err(error) => {
            tracing::error!(%error, "cannot serialize a server message");
            Event::default().comment("unserializable message dropped")
        }
    }
}

/// Serve one session until the client leaves, it idles out, or the server shuts down.
///
/// The MCP service (a handler, rmcp's channels and tasks: ~22 KiB) starts only with the session's
/// first message. Until then a session that merely opened its stream costs this small task
/// and two empty channels.
async fn run_session<S>(
    state: SseState<S>,
    id: String,
    (to_client, mut from_client): (
        mpsc::Sender<ServerJsonRpcMessage>,
        mpsc::Receiver<ClientJsonRpcMessage>,
    ),
    activity: Arc<Activity>,
    session_ct: CancellationToken,
) where
    S: ServerHandler + Send + 'static,
{
    let serve = async {
        // Boxed: rmcp's futures are KiB large, and inline they would size this task (so every idle
        // session) from the start. Built in a `match` so that nothing of it outlives the arm.
        let serving = match from_client.next().await {
            Some(first) => Box::pin(serve_mcp(
                (state.factory)(),
                (to_client, futures::stream::iter([first]).chain(from_client)),
                session_ct.clone(),
            )),
            None => return,
        };
        if let Err(error) = serving.await {
            tracing::debug!(session = %id, %error, "sse session did not initialize");
        }
    };
    tokio::select! {
        () = serve => {}
        () = session_ct.cancelled() => {}
        () = activity.idle_for(state.timings.idle_timeout) => {
            tracing::info!(session = %id, "sse session idle, closing");
        }
    }
    // Cancelling ends the handler's in-flight requests (and so their runs) and closes the stream.
    session_ct.cancel();
    state.sessions.lock().remove(&id);
    tracing::info!(session = %id, "sse session closed");
}

/// Serves one MCP session over `transport` until it ends or `ct` fires.
async fn serve_mcp<S, St>(
    handler: S,
    transport: (mpsc::Sender<ServerJsonRpcMessage>, St),
    ct: CancellationToken,
) -> Result<(), ServerInitializeError>
where
    S: ServerHandler + Send + 'static,
    St: Stream<Item = ClientJsonRpcMessage> + Send + Unpin + 'static,
{
    // The initialization future is the largest (~8 KiB): in its own box, freed once it is done.
    let running = Box::pin(handler.serve_with_ct(transport, ct)).await?;
    let _ = running.waiting().await;
    Ok(())
}

#[derive(Deserialize)]
struct SessionQuery {
    #[serde(rename = "sessionId")]
    camel: Option<String>,
    session_id: Option<String>,
}

/// `POST /messages?sessionId=…`: hand one JSON-RPC message to its session; a request carries
/// the [`Caller`] the auth layer admitted and its [`Channel`] (for the audit log) in its
/// extensions (only those: the request's parts, which rmcp's Streamable HTTP service passes
/// whole, would stay with a session's `initialize` for its whole life, ~1 KiB each).
async fn post_message<S>(
    State(state): State<SseState<S>>,
    Query(query): Query<SessionQuery>,
    caller: Option<Extension<Caller>>,
    body: Bytes,
) -> Response {
    let Some(id) = query.camel.or(query.session_id) else {
        return (
            StatusCode::BAD_REQUEST,
            ClientMessage::new("missing sessionId"),
        )
            .into_response();
    };
    let caller = caller.map(|Extension(caller)| caller);
    let Some(inbox) = state.sessions.get(&id, caller.as_ref()) else {
        return (StatusCode::NOT_FOUND, ClientMessage::new("unknown session")).into_response();
    };
    let mut message = match serde_json::from_slice::<ClientJsonRpcMessage>(&body) {
        Ok(message) => message,
        Err(error) => return (StatusCode::BAD_REQUEST, not_json_rpc(&error)).into_response(),
    };
    if let ClientJsonRpcMessage::Request(r) = &mut message {
        let extensions = r.request.extensions_mut();
        if let Some(caller) = caller {
            extensions.insert(caller);
        }
        extensions.insert(Channel {
            transport: TransportKind::Sse,
            session_id: Some(Arc::from(id)),
        });
        let hold = ShareHold::default();
        extensions.insert(hold.clone());
        inbox.shares.track(r.id.clone(), hold);
    }
    inbox.activity.touch();
    let mut to_handler = inbox.to_handler;
    if to_handler.send(message).await.is_err() {
        return (StatusCode::NOT_FOUND, ClientMessage::new("session closed")).into_response();
    }
    (StatusCode::ACCEPTED, ClientMessage::new("Accepted")).into_response()
}

/// Where and how a body failed to parse; serde's own text (it quotes the body) stays out.
fn not_json_rpc(error: &serde_json::Error) -> ClientMessage {
    use serde_json::error::Category;
    let what = match error.classify() {
        Category::Syntax => "invalid JSON",
        Category::Eof => "the body ends too early",
        Category::Data | Category::Io => "JSON of another shape",
    };
    let message = ClientMessage::new("not a JSON-RPC message: ").then(what);
    match error.line() {
        0 => message, // no position: the JSON parsed, its shape did not fit
        line => message
            .then(" at line ")
            .number(line)
            .then(", column ")
            .number(error.column()),
    }
}

/// The SSE body; dropping it (the client went away) cancels the session.
struct EndsSessionOnDrop {
    inner: Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>,
    _session: DropGuard,
}

impl Stream for EndsSessionOnDrop {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// When a session last carried a message, in either direction.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// Resolves once no message has passed for `limit`.
    async fn idle_for(&self, limit: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    #[derive(Clone)]
    struct Idle;
    impl ServerHandler for Idle {}

    const DEADLINE: Duration = Duration::from_secs(10);

    fn router(
        sessions: &Arc<SseSessions>,
        shutdown: &CancellationToken,
        keep_alive: Duration,
        idle_timeout: Duration,
    ) -> Router {
        let timings = SseTimings {
            keep_alive,
            idle_timeout,
        };
        routes(SseState::new(
            sessions.clone(),
            Arc::new(|| Idle),
            timings,
            shutdown.clone(),
        ))
    }

    /// Opens a stream; returns the message endpoint it announced, and the rest of the stream.
    async fn open_on(
        router: Router,
    ) -> (
        String,
        impl Stream<Item = Result<Bytes, axum::Error>> + Unpin,
    ) {
        let request = Request::get(SSE_PATH).body(Body::empty()).unwrap();
        let response = router.oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body().into_data_stream();
        let first = tokio::time::timeout(DEADLINE, body.next()).await.unwrap();
        let first = String::from_utf8(first.unwrap().unwrap().to_vec()).unwrap();
        let endpoint = first
            .strip_prefix("event: endpoint\ndata: ")
            .unwrap_or_else(|| panic!("not an endpoint event: {first:?}"));
        (endpoint.trim_end().to_owned(), body)
    }

    async fn open(
        keep_alive: Duration,
        idle_timeout: Duration,
    ) -> (
        Arc<SseSessions>,
        CancellationToken,
        impl Stream<Item = Result<Bytes, axum::Error>>,
    ) {
        let sessions = Arc::new(SseSessions::default());
        let shutdown = CancellationToken::new();
        let router = router(&sessions, &shutdown, keep_alive, idle_timeout);
        let (_endpoint, body) = open_on(router).await;
        assert_eq!(sessions.len(), 1);
        (sessions, shutdown, body)
    }

    async fn ends(mut body: impl Stream<Item = Result<Bytes, axum::Error>> + Unpin) -> bool {
        tokio::time::timeout(DEADLINE, async {
            while let Some(Ok(_)) = body.next().await {}
        })
        .await
        .is_ok()
    }

    async fn forgotten(sessions: &SseSessions) -> bool {
        tokio::time::timeout(DEADLINE, async {
            while !sessions.is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .is_ok()
    }

    #[tokio::test]
    async fn an_idle_stream_carries_keep_alive_comments() {
        let (_sessions, _shutdown, mut body) =
            open(Duration::from_millis(20), Duration::from_secs(60)).await;
        let next = tokio::time::timeout(DEADLINE, body.next()).await.unwrap();
        let next = String::from_utf8(next.unwrap().unwrap().to_vec()).unwrap();
        assert!(next.starts_with(':'), "expected a comment, got {next:?}");
    }

    #[tokio::test]
    async fn an_idle_session_is_closed_and_forgotten() {
        let (sessions, _shutdown, body) =
            open(Duration::from_secs(60), Duration::from_millis(100)).await;
        assert!(ends(Box::pin(body)).await, "idle stream stayed open");
        assert!(forgotten(&sessions).await);
    }

    #[tokio::test]
    async fn shutdown_closes_every_stream() {
        let (sessions, shutdown, body) =
            open(Duration::from_secs(60), Duration::from_secs(60)).await;
        shutdown.cancel();
        assert!(ends(Box::pin(body)).await, "stream outlived shutdown");
        assert!(forgotten(&sessions).await);
    }

    #[tokio::test]
    async fn dropping_the_stream_ends_the_session() {
        let (sessions, _shutdown, body) =
            open(Duration::from_secs(60), Duration::from_secs(60)).await;
        drop(body);
        assert!(forgotten(&sessions).await, "session outlived its client");
    }

    /// Half the sessions initialize (so rmcp serves them), half never send a message; once their
    /// clients leave, no task of any of them is left running.
    #[tokio::test]
    async fn closed_sessions_leave_no_tasks_behind() {
        let metrics = tokio::runtime::Handle::current().metrics();
        let tasks_before = metrics.num_alive_tasks();
        let sessions = Arc::new(SseSessions::default());
        let shutdown = CancellationToken::new();
        let router = router(&sessions, &shutdown, DEADLINE, DEADLINE);
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

        let mut streams = Vec::new();
        for n in 0..20 {
            let (endpoint, mut body) = open_on(router.clone()).await;
            if n % 2 == 0 {
                let post = Request::post(endpoint)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(initialize))
                    .unwrap();
                let response = router.clone().oneshot(post).await.unwrap();
                assert_eq!(response.status(), StatusCode::ACCEPTED);
                let reply = tokio::time::timeout(DEADLINE, body.next()).await.unwrap();
                let reply = String::from_utf8(reply.unwrap().unwrap().to_vec()).unwrap();
                assert!(
                    reply.contains(r#""result""#),
                    "no initialize result: {reply}"
                );
            }
            streams.push(body);
        }
        assert_eq!(sessions.len(), 20);

        drop(streams);
        assert!(
            forgotten(&sessions).await,
            "sessions outlived their clients"
        );
        let settled = tokio::time::timeout(DEADLINE, async {
            while metrics.num_alive_tasks() > tasks_before {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            settled.is_ok(),
            "{} tasks still alive, {tasks_before} before the sessions",
            metrics.num_alive_tasks()
        );
    }
}

//! A Streamable HTTP session belongs to the caller that made it. rmcp's session manager serves
//! every caller and knows nothing of tokens, so this layer records who initialized each session
//! (the [`Caller`] the auth layer stamped on the request) and, on every later request naming a
//! session (`POST`, `GET` with or without `Last-Event-ID`, `DELETE`), lets the request through
//! only when its caller is that one.
//!
//! A request naming another caller's session is not refused here: its `Mcp-Session-Id` is
//! replaced with a name no session can have, so rmcp (and the close layer after it) answer
//! exactly what they answer for an unknown session — the same status, body and headers, in the
//! same order of checks. A caller cannot tell another's live session from one that never was.
//!
//! Records are dropped when their session is gone (checked on each new record), so the map
//! holds at most the live sessions plus those that ended since the last `initialize`. The same
//! records give each caller's count of live sessions for the per-caller share
//! (`session_limit`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use pyrun_run::caller::Caller;

/// What a foreign session's id is replaced with: not a UUID, so no session rmcp makes has it.
const NO_SUCH_SESSION: HeaderValue = HeaderValue::from_static("not-a-session-of-this-caller");

/// Who made each live Streamable HTTP session.
#[derive(Clone)]
pub struct SessionOwners {
    owners: Arc<Mutex<HashMap<Arc<str>, Caller>>>,
    sessions: Arc<LocalSessionManager>,
}

impl SessionOwners {
    pub fn new(sessions: Arc<LocalSessionManager>) -> Self {
        Self {
            owners: Arc::default(),
            sessions,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Caller>> {
        // Single inserts, lookups and retains: a panic elsewhere cannot leave it half-changed.
        self.owners
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// True when `caller` made the session `id`. A session with no record (none can be made
    /// without passing this layer) belongs to nobody.
    fn is_owner(&self, id: &str, caller: Option<&Caller>) -> bool {
        match (self.lock().get(id), caller) {
            (Some(owner), Some(caller)) => owner == caller,
            _ => false,
        }
    }

    /// Records `caller` as the maker of session `id`, first forgetting sessions that are gone.
    async fn record(&self, id: Arc<str>, caller: Caller) {
        let live = self.live_ids().await;
        let mut owners = self.lock();
        owners.retain(|id, _| live.contains(id));
        owners.insert(id, caller);
    }

    /// The number of live sessions `caller` made.
    pub async fn count(&self, caller: &Caller) -> usize {
        let live = self.live_ids().await;
        self.lock()
            .iter()
            .filter(|(id, owner)| *owner == caller && live.contains(*id))
            .count()
    }

    /// The number of live Streamable HTTP sessions, whoever made them.
    pub async fn live(&self) -> usize {
        self.sessions.sessions.read().await.len()
    }

    async fn live_ids(&self) -> HashSet<Arc<str>> {
        self.sessions
            .sessions
            .read()
            .await
            .keys()
            .cloned()
            .collect()
    }
}

/// Middleware for `/mcp` (inside the auth layer, outside rmcp and the close layer): a request
/// that names a session is passed on only as its maker's; an answer that opens a session
/// records its maker.
pub async fn keep_sessions_to_their_callers(
    State(owners): State<SessionOwners>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    if let Some(named) = request.headers().get(HEADER_SESSION_ID) {
        // A header that is not text names no session: rmcp answers it as it always did.
        if let Ok(id) = named.to_str() {
            if !owners.is_owner(id, caller.as_ref()) {
                if caller.is_some() {
                    tracing::warn!(
                        caller = %caller.as_ref().map(Caller::key).unwrap_or_default(),
                        "a request named a session this caller did not make; answered as unknown"
                    );
                }
                request
                    .headers_mut()
                    .insert(HEADER_SESSION_ID, NO_SUCH_SESSION);
            }
        }
        return next.run(request).await;
    }
    let response = next.run(request).await;
    let opened = response
        .headers()
        .get(HEADER_SESSION_ID)
        .and_then(|id| id.to_str().ok());
    if let (Some(id), Some(caller)) = (opened, caller) {
        owners.record(Arc::from(id), caller).await;
    }
    response
}

//! A Streamable HTTP session belongs to the caller that made it. rmcp's session manager serves
//! every caller and knows nothing of tokens, so [`CallerSessions`] wraps it: the session is
//! recorded with its maker (the [`Caller`] the auth layer stamped on the `initialize`, handed
//! down as a task-local) in the same step rmcp creates it, so no session exists unrecorded,
//! even when its client goes away mid-request. Its close (a `DELETE`, or its worker's end)
//! drops the record.
//!
//! On every later request naming a session (`POST`, `GET` with or without `Last-Event-ID`,
//! `DELETE`), [`keep_sessions_to_their_callers`] lets it through only as its maker's. A request
//! naming another caller's session, or naming one in a header that is not text, is not refused
//! here: its `Mcp-Session-Id` is replaced with a name no session can have, so rmcp (and the
//! close layer after it) answer exactly what they answer for an unknown session — the same
//! status, body and headers, in the same order of checks. A caller cannot tell another's live
//! session from one that never was, and a request that names a session never opens one.
//!
//! The same book holds the sessions being opened (a [`Reservation`] each, taken before and
//! dropped after the request that opens one) so that the caps of `session_limit` count them
//! too: concurrent `initialize`s cannot all pass a check that none of them is in yet.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::common::server_side_http::{ServerSseMessage, SessionId};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;

use pyrun_run::caller::Caller;

/// What a foreign session's id is replaced with: not a UUID, so no session rmcp makes has it.
const NO_SUCH_SESSION: HeaderValue = HeaderValue::from_static("not-a-session-of-this-caller");

tokio::task_local! {
    /// The caller of the request being served, while it may open a session.
    static OPENING: Option<Caller>;
}

/// Who made each live Streamable HTTP session, and how many sessions each caller is opening.
#[derive(Default)]
pub struct SessionBook(Mutex<Book>);

#[derive(Default)]
pub struct Book {
    /// Every live session rmcp made, with its maker (`None`: made outside a request of a known
    /// caller, which nobody may use).
    owners: HashMap<SessionId, Option<Caller>>,
    /// Sessions being opened (on either transport), by caller.
    opening: HashMap<Option<Caller>, usize>,
}

impl Book {
    /// Live `/mcp` sessions plus every session being opened.
    pub fn mcp_and_opening(&self) -> usize {
        self.owners.len() + self.opening.values().sum::<usize>()
    }

    /// `caller`'s live `/mcp` sessions plus those it is opening.
    pub fn of_caller(&self, caller: &Option<Caller>) -> usize {
        let live = self
            .owners
            .values()
            .filter(|owner| *owner == caller)
            .count();
        live + self.opening.get(caller).copied().unwrap_or(0)
    }
}

impl SessionBook {
    /// The book, for a check and a reservation under one lock.
    pub fn lock(&self) -> MutexGuard<'_, Book> {
        // Single inserts and removes: a panic elsewhere cannot leave it half-changed.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a session `caller` is opening until the returned value drops. Take it under the
    /// same `lock` as the check it passed.
    pub fn reserve(self: &Arc<Self>, book: &mut Book, caller: Option<Caller>) -> Reservation {
        *book.opening.entry(caller.clone()).or_default() += 1;
        Reservation {
            book: self.clone(),
            caller,
        }
    }

    fn is_owner(&self, id: &str, caller: Option<&Caller>) -> bool {
        match (self.lock().owners.get(id), caller) {
            (Some(Some(owner)), Some(caller)) => owner == caller,
            _ => false,
        }
    }
}

/// A session being opened, counted against its caller's share until it drops (by then the
/// session, if one was made, is in the book).
pub struct Reservation {
    book: Arc<SessionBook>,
    caller: Option<Caller>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut book = self.book.lock();
        if let Some(count) = book.opening.get_mut(&self.caller) {
            *count -= 1;
            if *count == 0 {
                book.opening.remove(&self.caller);
            }
        }
    }
}

/// rmcp's local session manager, with each session recorded with its maker from the moment
/// it exists until it is closed.
pub struct CallerSessions {
    inner: LocalSessionManager,
    book: Arc<SessionBook>,
}

impl CallerSessions {
    pub fn new(inner: LocalSessionManager, book: Arc<SessionBook>) -> Self {
        Self { inner, book }
    }
}

impl SessionManager for CallerSessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let made = self.inner.create_session().await?;
        let caller = OPENING.try_with(Clone::clone).ok().flatten();
        self.book.lock().owners.insert(made.0.clone(), caller);
        Ok(made)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        self.book.lock().owners.remove(id);
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}

/// Middleware for `/mcp` (inside the auth layer, outside rmcp and the close layer): a request
/// that names a session is passed on only as its maker's; one that names none is served with
/// its caller at hand, for the session it may open.
pub async fn keep_sessions_to_their_callers(
    State(book): State<Arc<SessionBook>>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    let Some(named) = request.headers().get(HEADER_SESSION_ID) else {
        return OPENING.scope(caller, next.run(request)).await;
    };
    let mine = named
        .to_str()
        .is_ok_and(|id| book.is_owner(id, caller.as_ref()));
    if !mine {
        tracing::debug!(
            caller = %caller.as_ref().map(Caller::key).unwrap_or_default(),
            "a request named a session this caller did not make; answered as unknown"
        );
        request
            .headers_mut()
            .insert(HEADER_SESSION_ID, NO_SUCH_SESSION);
    }
    next.run(request).await
}

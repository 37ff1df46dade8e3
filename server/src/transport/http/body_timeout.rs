//! A request gets a bounded time to send its whole body, counted from its head: past it, `408` and
//! the connection closed. `accept` bounds the head; without this, a client (with a valid token,
//! since the token is checked first) could hold a connection and the handler reading its body
//! forever by sending one byte at a time.
//!
//! The handler runs as usual while the body is watched: its response wins if it comes first (a
//! handler that refuses early, or a long run whose body arrived long ago), and the deadline only
//! matters while someone still waits for the client's bytes.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, SizeHint};

use crate::client_message::ClientMessage;

/// The time a request gets to send its whole body.
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub Duration);

/// Middleware: `408 Request Timeout` (and `Connection: close`) when the body is still arriving at
/// the deadline.
pub async fn limit_body_time(
    State(BodyTimeout(limit)): State<BodyTimeout>,
    request: Request,
    next: Next,
) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let waiting = Arc::new(AtomicBool::new(true));
    let request = request.map(|body| {
        Body::new(Watched {
            inner: body,
            waiting: Waiting(waiting.clone()),
        })
    });
    let response = next.run(request);
    tokio::pin!(response);
    tokio::select! {
        response = &mut response => return response,
        () = tokio::time::sleep(limit) => {}
    }
    if !waiting.load(Ordering::Acquire) {
        return response.await;
    }
    tracing::info!(
        secs = limit.as_secs(),
        "request body still incomplete at the deadline (--body-timeout); closing the connection"
    );
    let mut refused = (
        StatusCode::REQUEST_TIMEOUT,
        ClientMessage::new("Request Timeout: the body did not arrive in time"),
    )
        .into_response();
    refused
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    refused
}

/// Cleared when the body is complete, failed, or dropped: nobody waits for the client any more.
struct Waiting(Arc<AtomicBool>);

impl Waiting {
    fn done(&self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.done();
    }
}

/// The request body, reporting when it is over.
struct Watched {
    inner: Body,
    waiting: Waiting,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) || self.inner.is_end_stream() {
            self.waiting.done();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use axum::routing::post;
    use axum::Router;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::transport::http::accept::{serve_connections, ConnectionLimits};

    const LIMIT: Duration = Duration::from_millis(500);

    async fn serve(router: Router) -> (std::net::SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let router = router.layer(axum::middleware::from_fn_with_state(
            BodyTimeout(LIMIT),
            limit_body_time,
        ));
        let limits = ConnectionLimits {
            header_timeout: Duration::from_secs(30),
            max_open: 16,
            max_unauthenticated_per_address: 16,
        };
        tokio::spawn(serve_connections(
            listener,
            router,
            limits,
            shutdown.clone(),
        ));
        (addr, shutdown)
    }

    /// Everything the server sends until it closes, or what came within 10 s.
    async fn read_until_closed(client: &mut TcpStream) -> (String, bool) {
        let mut seen = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut seen)).await;
        (String::from_utf8_lossy(&seen).into_owned(), read.is_ok())
    }

    #[tokio::test]
    async fn a_body_that_stalls_gets_408_and_a_closed_connection_in_time() {
        let echo = post(|body: Bytes| async move { format!("got {}", body.len()) });
        let (addr, shutdown) = serve(Router::new().route("/", echo)).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n")
            .await
            .unwrap();
        client.write_all(&[b'x'; 50]).await.unwrap();
        let started = Instant::now();
        let (seen, closed) = read_until_closed(&mut client).await;
        assert!(closed, "connection still open after 10 s: {seen:?}");
        assert!(seen.starts_with("HTTP/1.1 408"), "{seen:?}");
        assert!(started.elapsed() < LIMIT * 4, "{:?}", started.elapsed());

        // A whole body, even a slow one, is answered normally.
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\n\r\nab")
            .await
            .unwrap();
        tokio::time::sleep(LIMIT / 4).await;
        client.write_all(b"cd").await.unwrap();
        let mut buf = vec![0; 1024];
        let n = client.read(&mut buf).await.unwrap();
        let seen = String::from_utf8_lossy(&buf[..n]);
        assert!(
            seen.starts_with("HTTP/1.1 200") && seen.ends_with("got 4"),
            "{seen}"
        );
        shutdown.cancel();
    }

    #[tokio::test]
    async fn a_handler_that_outlives_the_deadline_after_reading_the_body_is_not_cut() {
        let slow = post(|body: Bytes| async move {
            tokio::time::sleep(LIMIT * 2).await;
            format!("slow {}", body.len())
        });
        let (addr, shutdown) = serve(Router::new().route("/", slow)).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc")
            .await
            .unwrap();
        let mut buf = vec![0; 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), client.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        let seen = String::from_utf8_lossy(&buf[..n]);
        assert!(
            seen.starts_with("HTTP/1.1 200") && seen.ends_with("slow 3"),
            "{seen}"
        );
        shutdown.cancel();
    }
}

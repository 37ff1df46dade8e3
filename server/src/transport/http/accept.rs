//! The accept loop: each connection is served by hyper's HTTP/1 directly, and drained on shutdown.
//!
//! Not `axum::serve`, for memory: it first sniffs every connection for HTTP/2, and handing the 24
//! sniffed bytes back to hyper makes hyper's read buffer grow from 8 to 16 KiB, for as long as the
//! connection lives (so for every open SSE stream). It also rebuilds the router per connection. This
//! server speaks only HTTP/1.1 (axum is built without `http2`), so nothing is lost.
//!
//! A connection gets `header_timeout` to send each request's head, counted from when the server
//! starts waiting for it: a client that trickles its headers (slowloris) is cut off, and a
//! keep-alive connection left idle that long is closed (~12 KiB each, mostly hyper's buffers).
//! An open SSE stream or a response in progress is not waiting for a head, so it is never cut.
//!
//! At most `max_open` connections are served at once, each holding a permit from the moment it
//! is accepted until it closes. A connection past the cap is closed at once, before anything is
//! read from it: a flood of idle connections costs its own descriptors, not the server's
//! (`/health` and every client within the cap keep being answered), and it cannot stall the loop.
//! Within that cap one address may hold at most `max_unauthenticated_per_address` connections
//! that have not authenticated yet ([`super::unauthenticated`]), so one address's flood cannot
//! take the cap from everyone else: each request carries its connection's place to the auth
//! layer, which gives it back.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::serve::Listener;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::unauthenticated::UnauthenticatedByAddress;
use crate::oauth::PeerKey;

/// How long refusals past the cap are counted before they are logged again.
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(10);

/// What each connection may hold.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Time to send each request head, idle keep-alive included.
    pub header_timeout: Duration,
    /// Connections served at once.
    pub max_open: usize,
    /// Connections from one address that have not authenticated yet.
    pub max_unauthenticated_per_address: usize,
}

/// Serves `router` on every connection `listener` accepts until `shutdown` fires; then stops
/// accepting, lets each connection finish its current response, and returns once all have closed.
pub async fn serve_connections<L: Listener<Addr = SocketAddr>>(
    mut listener: L,
    router: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    // Every route resolved once; each connection then holds only a reference to the router.
    let router = router.with_state::<()>(());
    // One permit per open connection: all permits back means every connection has closed.
    let max_open = limits.max_open.clamp(1, Semaphore::MAX_PERMITS);
    let open = Arc::new(Semaphore::new(max_open));
    let unauthenticated = UnauthenticatedByAddress::new(limits.max_unauthenticated_per_address);
    let mut refusals = RefusalLog::default();
    let mut address_refusals = RefusalLog::default();
    loop {
        let (io, addr) = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let Some(place) = unauthenticated.admit(addr) else {
            address_refusals.note(
                unauthenticated.max(),
                "connections closed at once: one address holds too many that have not \
                 authenticated (--max-unauthenticated-per-address)",
            );
            drop(io);
            continue;
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            refusals.note(
                max_open,
                "connections closed at once: the open-connection limit is reached \
                 (--max-connections)",
            );
            drop(io);
            continue;
        };
        let place = Arc::new(place);
        let peer = PeerKey::of(addr.ip());
        let service = TowerToHyperService::new(router.clone().map_request(
            move |mut request: Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(Arc::clone(&place));
                request.extensions_mut().insert(peer);
                request
            },
        ));
        let shutdown = shutdown.clone();
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let mut connection = pin!(http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades());
            let result = tokio::select! {
                result = connection.as_mut() => result,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = result {
                tracing::trace!(%error, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    let all = u32::try_from(max_open).unwrap_or(u32::MAX);
    let _ = open.acquire_many(all).await;
}

/// Logs connections refused past the cap: the first at once, then a count at most every
/// [`REFUSALS_LOGGED_EVERY`], so a flood does not flood the log too.
#[derive(Default)]
struct RefusalLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    fn note(&mut self, max: usize, what: &'static str) {
        self.unlogged += 1;
        if self
            .last
            .is_some_and(|last| last.elapsed() < REFUSALS_LOGGED_EVERY)
        {
            return;
        }
        tracing::warn!(refused = self.unlogged, max, "{what}");
        self.last = Some(Instant::now());
        self.unlogged = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    const DEADLINE: Duration = Duration::from_secs(10);

    /// Serves `router` on a free loopback port; returns the address, the shutdown token and the
    /// server task.
    async fn serve(
        router: Router,
        header_timeout: Duration,
        max_open: usize,
    ) -> (
        std::net::SocketAddr,
        CancellationToken,
        tokio::task::JoinHandle<()>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let limits = ConnectionLimits {
            header_timeout,
            max_open,
            max_unauthenticated_per_address: max_open,
        };
        let server = tokio::spawn(serve_connections(
            listener,
            router,
            limits,
            shutdown.clone(),
        ));
        (addr, shutdown, server)
    }

    /// A client that keeps its connection open after a response must not keep the server up.
    #[tokio::test]
    async fn shutdown_closes_idle_keep_alive_connections_and_returns() {
        let router = Router::new().route("/", get(|| async { "hello" }));
        let (addr, shutdown, server) = serve(router, DEADLINE, 16).await;

        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut response = vec![0; 1024];
        let n = tokio::time::timeout(DEADLINE, client.read(&mut response))
            .await
            .unwrap()
            .unwrap();
        let response = String::from_utf8_lossy(&response[..n]);
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.ends_with("hello"), "{response}");

        shutdown.cancel();
        tokio::time::timeout(DEADLINE, server)
            .await
            .expect("server still waiting for an idle connection")
            .unwrap();
        let rest = closed_by_server(&mut client).await;
        assert_eq!(rest.as_deref(), Some(""), "connection left open");
    }

    /// Reads what the server sends until it closes the connection; `None` if it stays open.
    async fn closed_by_server(client: &mut TcpStream) -> Option<String> {
        let mut seen = Vec::new();
        let read = tokio::time::timeout(DEADLINE, client.read_to_end(&mut seen)).await;
        matches!(read, Ok(Ok(_))).then(|| String::from_utf8_lossy(&seen).into_owned())
    }

    /// Past the cap a connection is closed before anything is read; below it again, all is served.
    #[tokio::test]
    async fn connections_past_the_cap_are_closed_at_once_and_served_again_below_it() {
        let router = Router::new().route("/", get(|| async { "hello" }));
        let (addr, shutdown, server) = serve(router, DEADLINE * 3, 3).await;
        let mut idle = Vec::new();
        for _ in 0..3 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        for _ in 0..2 {
            let mut extra = TcpStream::connect(addr).await.unwrap();
            let mut buf = [0; 64];
            let read = tokio::time::timeout(Duration::from_secs(2), extra.read(&mut buf)).await;
            assert!(
                matches!(read, Ok(Ok(0)) | Ok(Err(_))),
                "a connection past the cap was kept: {read:?}"
            );
        }
        idle.truncate(1);
        let started = std::time::Instant::now();
        loop {
            let mut client = TcpStream::connect(addr).await.unwrap();
            let _ = client
                .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .await;
            let mut seen = Vec::new();
            let _ = tokio::time::timeout(DEADLINE, client.read_to_end(&mut seen)).await;
            if String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(started.elapsed() < DEADLINE, "never served again");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        shutdown.cancel();
        drop(idle);
        tokio::time::timeout(DEADLINE, server)
            .await
            .expect("server waits for connections that closed")
            .unwrap();
    }

    /// Idle keep-alive connections and clients that never finish their headers are closed after
    /// the header timeout; a streaming response is not.
    #[tokio::test]
    async fn idle_and_trickling_connections_are_closed_but_streams_are_not() {
        let stream = || async {
            let ticks = futures::stream::unfold(0u8, |n| async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Some((
                    Ok::<_, std::convert::Infallible>(format!("tick {n}\n")),
                    n + 1,
                ))
            });
            axum::body::Body::from_stream(ticks)
        };
        let router = Router::new()
            .route("/", get(|| async { "hello" }))
            .route("/stream", get(stream));
        let timeout = Duration::from_millis(300);
        let (addr, shutdown, _server) = serve(router, timeout, 16).await;

        // Idle after one response.
        let mut idle = TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let seen = closed_by_server(&mut idle)
            .await
            .expect("idle connection kept open");
        assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");

        // Half a request head, never finished.
        let mut trickle = TcpStream::connect(addr).await.unwrap();
        trickle.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
        assert!(
            closed_by_server(&mut trickle).await.is_some(),
            "a never-finished head kept its connection"
        );

        // A response that streams for longer than the timeout keeps going.
        let mut streaming = TcpStream::connect(addr).await.unwrap();
        streaming
            .write_all(b"GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut seen = String::new();
        let mut buf = [0; 1024];
        while !seen.contains("tick 6") {
            let n = tokio::time::timeout(DEADLINE, streaming.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "stream cut after {seen:?}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        shutdown.cancel();
    }
}

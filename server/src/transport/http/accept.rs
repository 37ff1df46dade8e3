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

use std::pin::pin;
use std::time::Duration;

use axum::serve::Listener;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Serves `router` on every connection `listener` accepts until `shutdown` fires; then stops
/// accepting, lets each connection finish its current response, and returns once all have closed.
pub async fn serve_connections<L: Listener>(
    mut listener: L,
    router: Router,
    header_timeout: Duration,
    shutdown: CancellationToken,
) {
    // Every route resolved once; each connection then holds only a reference to the router.
    let router = router.with_state::<()>(());
    // Each connection task holds a sender: when all are dropped, every connection has closed.
    let (open_tx, mut all_closed) = mpsc::channel::<()>(1);
    loop {
        let (io, _addr) = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let service = TowerToHyperService::new(router.clone());
        let shutdown = shutdown.clone();
        let open = open_tx.clone();
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
            drop(open);
        });
    }
    drop(listener);
    drop(open_tx);
    let _ = all_closed.recv().await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    const DEADLINE: Duration = Duration::from_secs(10);

    /// A client that keeps its connection open after a response must not keep the server up.
    #[tokio::test]
    async fn shutdown_closes_idle_keep_alive_connections_and_returns() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let router = Router::new().route("/", get(|| async { "hello" }));
        let server = tokio::spawn(serve_connections(
            listener,
            router,
            DEADLINE,
            shutdown.clone(),
        ));

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

    /// Idle keep-alive connections and clients that never finish their headers are closed after
    /// the header timeout; a streaming response is not.
    #[tokio::test]
    async fn idle_and_trickling_connections_are_closed_but_streams_are_not() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
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
        let _server = tokio::spawn(serve_connections(
            listener,
            router,
            timeout,
            shutdown.clone(),
        ));

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

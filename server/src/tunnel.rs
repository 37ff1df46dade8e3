//! `--tunnel ngrok`: a public https URL for the HTTP server, opened in-process with ngrok's Rust
//! agent SDK (cargo feature `tunnel`). The tunnel's connections and the local listener's feed ONE
//! listener, so the same router (auth, Host/Origin checks, limits) serves both.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;

use crate::app::stderr;
use crate::config::TunnelConfig;

/// Longest wait for one step with the ngrok service (connect and authenticate; open the endpoint).
/// ngrok retries a lost session by itself later on; the first connection must not hang start-up.
#[cfg_attr(not(feature = "tunnel"), allow(dead_code))]
const NGROK_STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// What to do without the in-process tunnel: from a clone, its build and scripts; from a release
/// download (which has no scripts), the ngrok agent by hand.
fn not_built_hint() -> &'static str {
    crate::app::source_tree::pick(
        "rebuild with `cargo build --release -p pyrun-mcp-server --features tunnel` \
         (scripts/setup does), or run the ngrok agent next to the server instead: \
         scripts/start-tunnel.sh (Windows: scripts\\start-tunnel.ps1)",
        "run the ngrok agent next to the server instead: `ngrok http 127.0.0.1:PORT \
         --host-header localhost:PORT`, and pass its host to --allowed-host (docs/http-and-oauth.md, \
         Public URL)",
    )
}

#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    #[error(
        "this pyrun-mcp-server was built without tunnel support\nhint: {}",
        not_built_hint()
    )]
    NotBuilt,
    #[error(
        "cannot reach the ngrok service: {0}\nhint: check the network connection, a firewall or \
         proxy; nothing was started"
    )]
    Unreachable(String),
    #[error(
        "ngrok rejected the authtoken: {0}\nhint: copy your authtoken from \
         https://dashboard.ngrok.com/get-started/your-authtoken into NGROK_AUTHTOKEN (environment \
         or .env)"
    )]
    Rejected(String),
    #[error(
        "the ngrok service did not answer within {} s\nhint: check the network connection; ngrok \
         may be blocked on this network",
        .0.as_secs()
    )]
    TimedOut(Duration),
    #[error(
        "ngrok refused to open the endpoint: {0}\nhint: a --tunnel-domain must be reserved for \
         your account (https://dashboard.ngrok.com/domains); a free account has one endpoint at a \
         time"
    )]
    Endpoint(String),
    #[error("cannot write the public URL to '{path}': {source}\nhint: check --url-file")]
    UrlFile { path: String, source: io::Error },
}

/// A connection that arrived through the tunnel.
pub trait TunnelIo: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> TunnelIo for T {}

/// The tunnel's connections, each with the address of the remote client.
type Incoming = Pin<Box<dyn Stream<Item = io::Result<(Box<dyn TunnelIo>, SocketAddr)>> + Send>>;

/// An open tunnel: its public URL and the connections that arrive through it.
pub struct OpenTunnel {
    url: String,
    incoming: Incoming,
}

impl std::fmt::Debug for OpenTunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenTunnel")
            .field("url", &self.url)
            .finish()
    }
}

impl OpenTunnel {
    /// `url` is the public base, e.g. `https://abc.ngrok-free.app`.
    #[cfg_attr(not(any(feature = "tunnel", test)), allow(dead_code))]
    fn new(url: &str, incoming: Incoming) -> Self {
        Self {
            url: url.trim_end_matches('/').to_owned(),
            incoming,
        }
    }

    /// The public host name, as clients put it in their `Host` header.
    pub fn host(&self) -> &str {
        let rest = self.url.split_once("://").map_or(&*self.url, |(_, r)| r);
        rest.split('/').next().unwrap_or(rest)
    }

    /// The Streamable HTTP endpoint, `https://…/mcp`.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.url)
    }

    /// The legacy HTTP+SSE endpoint, `https://…/sse`.
    pub fn sse_url(&self) -> String {
        format!("{}/sse", self.url)
    }

    /// Prints the public URLs on stderr (stable lines for people and scripts) and writes the
    /// `…/mcp` URL to `url_file` when asked.
    pub fn announce(&self, url_file: Option<&Path>) -> Result<(), TunnelError> {
        stderr::line(&format!(
            "pyrun-mcp public URL (Streamable HTTP): {}",
            self.mcp_url()
        ));
        stderr::line(&format!(
            "pyrun-mcp public URL (legacy SSE):      {}",
            self.sse_url()
        ));
        stderr::line(&format!(
            "hint: clients send `Authorization: Bearer <MCP_AUTH_TOKEN>`; \
             `pyrun-mcp-server config cursor --url {}` prints a ready config",
            self.mcp_url()
        ));
        if let Some(path) = url_file {
            std::fs::write(path, format!("{}\n", self.mcp_url())).map_err(|source| {
                TunnelError::UrlFile {
                    path: path.display().to_string(),
                    source,
                }
            })?;
        }
        Ok(())
    }

    /// One listener for the router: connections from `local` and from the tunnel. `lost` fires
    /// when the tunnel ends for good (the local listener keeps serving until shutdown).
    pub fn with_local(self, local: TcpListener, lost: CancellationToken) -> PublicListener {
        PublicListener {
            local,
            incoming: Some(self.incoming),
            lost,
        }
    }
}

/// Accepts from the local TCP listener and from the tunnel, whichever comes first.
pub struct PublicListener {
    local: TcpListener,
    /// `None` once the tunnel has ended.
    incoming: Option<Incoming>,
    lost: CancellationToken,
}

impl axum::serve::Listener for PublicListener {
    type Io = Either<TcpStream, Box<dyn TunnelIo>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let tunnel = async {
                match self.incoming.as_mut() {
                    Some(incoming) => incoming.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                accepted = self.local.accept() => match accepted {
                    Ok((stream, addr)) => return (Either::Left(stream), addr),
                    // Like axum: out of file descriptors and similar are passing conditions.
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a local connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                conn = tunnel => match conn {
                    Some(Ok((io, addr))) => return (Either::Right(io), addr),
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "accepting a tunnel connection failed");
                    }
                    None => {
                        tracing::error!("the ngrok tunnel closed; the public URL no longer works");
                        self.incoming = None;
                        self.lost.cancel();
                    }
                },
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.local.local_addr()
    }
}

/// Opens the tunnel the configuration asks for. Every wait on the network is bounded.
#[cfg(feature = "tunnel")]
pub async fn open(config: &TunnelConfig) -> Result<OpenTunnel, TunnelError> {
    use ngrok::config::TunnelBuilder;
    use ngrok::prelude::{ConnInfo, EndpointInfo};
    use ngrok::Error as _;

    // ngrok builds its TLS config from rustls' process-wide provider. Where the build's
    // features enable both of rustls' providers (a workspace build with the client's reqwest,
    // which brings aws-lc) rustls cannot pick one and panics: name ring, the provider this crate
    // chose. An earlier install (ours, on a second open) is fine as it is.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let mut builder = ngrok::Session::builder();
    builder.authtoken(config.authtoken.clone()).client_info(
        "pyrun-mcp",
        env!("CARGO_PKG_VERSION"),
        None::<String>,
    );
    if let Some(addr) = &config.server_addr {
        builder
            .server_addr(addr.clone())
            .map_err(|e| TunnelError::Unreachable(format!("bad server address '{addr}': {e}")))?;
    }
    let session = tokio::time::timeout(NGROK_STEP_TIMEOUT, builder.connect())
        .await
        .map_err(|_| TunnelError::TimedOut(NGROK_STEP_TIMEOUT))?
        .map_err(|e| match &e {
            ngrok::session::ConnectError::Auth(rpc) if rpc.error_code().is_some() => {
                TunnelError::Rejected(rpc.msg().trim().to_owned())
            }
            _ => TunnelError::Unreachable(error_chain(&e)),
        })?;

    let mut endpoint = session.http_endpoint();
    endpoint.forwards_to(format!("pyrun-mcp-server {}", env!("CARGO_PKG_VERSION")));
    if let Some(domain) = &config.domain {
        endpoint.domain(domain.clone());
    }
    let tunnel = tokio::time::timeout(NGROK_STEP_TIMEOUT, endpoint.listen())
        .await
        .map_err(|_| TunnelError::TimedOut(NGROK_STEP_TIMEOUT))?
        .map_err(|e| TunnelError::Endpoint(e.msg().trim().to_owned()))?;
    let url = tunnel.url().to_owned();
    tracing::info!(%url, "ngrok tunnel open");
    // The session lives as long as the stream: dropping it would close the tunnel.
    let incoming = tunnel.map(move |conn| {
        let _session = &session;
        conn.map(|c| {
            let addr = c.remote_addr();
            (Box::new(c) as Box<dyn TunnelIo>, addr)
        })
        .map_err(io::Error::other)
    });
    Ok(OpenTunnel::new(&url, Box::pin(incoming)))
}

/// Without the `tunnel` feature there is nothing to open: say how to get it.
#[cfg(not(feature = "tunnel"))]
pub async fn open(_config: &TunnelConfig) -> Result<OpenTunnel, TunnelError> {
    Err(TunnelError::NotBuilt)
}

/// `error: cause: cause` — ngrok's errors keep the useful part (DNS, refused, TLS) in the sources.
#[cfg_attr(not(feature = "tunnel"), allow(dead_code))]
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use axum::Router;
    use std::future::IntoFuture;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A tunnel whose connections are in-memory pipes handed over by the test.
    fn fake_tunnel(
        url: &str,
    ) -> (
        OpenTunnel,
        futures::channel::mpsc::UnboundedSender<tokio::io::DuplexStream>,
    ) {
        let (tx, rx) = futures::channel::mpsc::unbounded::<tokio::io::DuplexStream>();
        let remote: SocketAddr = ([203, 0, 113, 9], 40000).into();
        let incoming = rx.map(move |io| Ok((Box::new(io) as Box<dyn TunnelIo>, remote)));
        (OpenTunnel::new(url, Box::pin(incoming)), tx)
    }

    #[test]
    fn urls_and_host_come_from_the_public_url() {
        let (tunnel, _tx) = fake_tunnel("https://abc-1.ngrok-free.app/");
        assert_eq!(tunnel.host(), "abc-1.ngrok-free.app");
        assert_eq!(tunnel.mcp_url(), "https://abc-1.ngrok-free.app/mcp");
        assert_eq!(tunnel.sse_url(), "https://abc-1.ngrok-free.app/sse");
        let file = tempfile::NamedTempFile::new().unwrap();
        tunnel.announce(Some(file.path())).unwrap();
        let written = std::fs::read_to_string(file.path()).unwrap();
        assert_eq!(written, "https://abc-1.ngrok-free.app/mcp\n");
        let err = tunnel
            .announce(Some(Path::new("/no/such/dir/url.txt")))
            .unwrap_err();
        assert!(err.to_string().contains("/no/such/dir/url.txt"), "{err}");
    }

    async fn get_over(io: &mut (impl AsyncRead + AsyncWrite + Unpin), host: &str) -> String {
        let request = format!("GET /who HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        io.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        io.read_to_string(&mut response).await.unwrap();
        response
    }

    /// The router sees tunnel connections exactly like local ones (with the public Host), and
    /// the local listener keeps serving after the tunnel is gone, while `lost` says so.
    #[tokio::test]
    async fn one_router_serves_tunnel_and_local_connections() {
        let (tunnel, tx) = fake_tunnel("https://abc.ngrok-free.app");
        let local = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let local_addr = local.local_addr().unwrap();
        let lost = CancellationToken::new();
        let listener = tunnel.with_local(local, lost.clone());
        let router = Router::new().route(
            "/who",
            get(|headers: axum::http::HeaderMap| async move {
                format!("host={:?}", headers.get("host"))
            }),
        );
        let server = tokio::spawn(axum::serve(listener, router).into_future());

        let (mut client, served) = tokio::io::duplex(64 * 1024);
        tx.unbounded_send(served).unwrap();
        let response = get_over(&mut client, "abc.ngrok-free.app").await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(
            response.contains("host=Some(\"abc.ngrok-free.app\")"),
            "{response}"
        );
        assert!(!lost.is_cancelled());

        drop(tx); // the tunnel ends
        tokio::time::timeout(Duration::from_secs(10), lost.cancelled())
            .await
            .expect("`lost` fires when the tunnel ends");
        let mut local = TcpStream::connect(local_addr).await.unwrap();
        let response = get_over(&mut local, "127.0.0.1").await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        server.abort();
    }
}

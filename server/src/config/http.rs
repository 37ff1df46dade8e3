//! `--transport http`: where to listen, who may connect, and the limits of a connection.

use std::net::SocketAddr;
use std::time::Duration;

use super::{ConfigError, Transport, MAX_TIMEOUT_SECS};

/// Settings of `--transport http`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "HTTP transport")]
pub struct HttpArgs {
    /// Address to listen on; port 0 picks a free port (the actual address is printed on stderr).
    #[arg(
        long,
        env = "MCP_BIND",
        default_value = "127.0.0.1:8000",
        value_name = "ADDR:PORT",
        value_parser = bind_address
    )]
    pub bind: SocketAddr,

    /// Require `Authorization: Bearer TOKEN` on every route but /health.
    #[arg(
        long,
        env = "MCP_AUTH_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub auth_token: Option<String>,

    /// Also accept this Host (and Origin), e.g. a tunnel's hostname; loopback names are always
    /// accepted (repeatable; comma-separated in the variable).
    #[arg(
        long = "allowed-host",
        env = "MCP_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "HOST[:PORT]"
    )]
    pub allowed_hosts: Vec<String>,

    /// Serve a non-loopback address without a token (only behind something else that authenticates).
    #[arg(long, env = "MCP_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,

    /// Live sessions at once (Streamable HTTP and SSE together); more get 503.
    #[arg(long, env = "MCP_MAX_SESSIONS", default_value_t = 64, value_parser = super::grammar::count(1, 100_000))]
    pub max_sessions: u64,

    /// Live sessions one caller may hold at once, within --max-sessions (each OAuth client is a
    /// caller; so is every holder of the static token, and every unauthenticated client), so no
    /// caller takes every slot [default: with --oauth half of --max-sessions, rounded up;
    /// without it all of them, as there is one caller].
    #[arg(long, env = "MCP_MAX_SESSIONS_PER_CALLER", value_parser = super::grammar::count(1, 100_000))]
    pub max_sessions_per_caller: Option<u64>,

    /// Seconds after which a session without any message is closed.
    #[arg(long, env = "MCP_SESSION_IDLE_TIMEOUT", default_value_t = 1800, value_parser = super::grammar::seconds(1, MAX_TIMEOUT_SECS * 7))]
    pub session_idle_timeout: u64,

    /// Largest request body, in bytes.
    #[arg(long, env = "MCP_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024, value_parser = super::grammar::bytes(1024, 1 << 30))]
    pub max_body_bytes: u64,

    /// Seconds a request gets to send its whole body, counted from its head; a slower one gets 408.
    #[arg(long, env = "MCP_BODY_TIMEOUT", default_value_t = 10, value_name = "SECONDS", value_parser = super::grammar::seconds(1, 3600))]
    pub body_timeout: u64,

    /// Open connections at once (idle keep-alive ones and SSE streams count); more are closed at once.
    #[arg(long, env = "MCP_MAX_CONNECTIONS", default_value_t = 512, value_parser = super::grammar::count(1, 1_000_000))]
    pub max_connections: u64,

    /// Open connections from one address (one IPv6 /64) that have not passed authentication
    /// yet; more from it are closed at once, so one address cannot take every connection.
    #[arg(long, env = "MCP_MAX_UNAUTHENTICATED_PER_ADDRESS", default_value_t = 64, value_name = "N", value_parser = super::grammar::count(1, 1_000_000))]
    pub max_unauthenticated_per_address: u64,
}

/// How `--transport http` serves, validated.
#[derive(Clone)]
pub struct HttpConfig {
    pub bind: SocketAddr,
    pub auth_token: Option<String>,
    /// Hosts accepted besides the loopback names, as `host` or `host:port`.
    pub allowed_hosts: Vec<String>,
    /// True when a non-loopback address is served without a token on purpose.
    pub unauthenticated_public: bool,
    pub max_sessions: usize,
    /// A caller's share of `max_sessions` (never more than it).
    pub max_sessions_per_caller: usize,
    pub session_idle_timeout: Duration,
    pub max_body_bytes: usize,
    /// Time a request gets to send its whole body.
    pub body_timeout: Duration,
    pub max_connections: usize,
    /// Connections from one address that have not authenticated yet.
    pub max_unauthenticated_per_address: usize,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("bind", &self.bind)
            .field("auth_token", &self.auth_token.as_ref().map(|_| "<set>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("unauthenticated_public", &self.unauthenticated_public)
            .field("max_sessions", &self.max_sessions)
            .field("max_sessions_per_caller", &self.max_sessions_per_caller)
            .field("session_idle_timeout", &self.session_idle_timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field(
                "max_unauthenticated_per_address",
                &self.max_unauthenticated_per_address,
            )
            .finish()
    }
}

impl HttpArgs {
    /// The token HTTP clients must send, if one is configured.
    pub(super) fn auth_token(&self) -> Option<String> {
        self.auth_token.clone().filter(|t| !t.trim().is_empty())
    }

    /// Validates the HTTP settings; a public address needs a token unless opted out explicitly.
    /// `oauth`: the server authenticates with OAuth (`--oauth`), which counts as authentication.
    pub(super) fn resolve(
        self,
        transport: Transport,
        oauth: bool,
    ) -> Result<HttpConfig, ConfigError> {
        if let Some(token) = &self.auth_token {
            let visible = token.bytes().all(|b| b.is_ascii_graphic());
            if token.is_empty() || token.len() > 1024 || !visible {
                return Err(ConfigError::BadAuthToken);
            }
        }
        let mut allowed_hosts = Vec::with_capacity(self.allowed_hosts.len() + 1);
        for host in self
            .allowed_hosts
            .iter()
            .map(|h| h.trim())
            .filter(|h| !h.is_empty())
        {
            if !is_host_and_port(host) {
                return Err(ConfigError::BadAllowedHost(host.to_owned()));
            }
            allowed_hosts.push(host.to_owned());
        }
        let ip = self.bind.ip();
        let public = !ip.is_loopback();
        if public && !ip.is_unspecified() {
            // Clients that reach a specific address name it in their Host header.
            allowed_hosts.push(ip.to_string());
        }
        if transport == Transport::Http
            && public
            && self.auth_token.is_none()
            && !oauth
            && !self.allow_unauthenticated
        {
            return Err(ConfigError::UnauthenticatedPublicBind(self.bind));
        }
        let max_sessions = usize::try_from(self.max_sessions).unwrap_or(usize::MAX);
        // Only `--oauth` admits more than one caller (each client is one; the static token and
        // no authentication are one caller each): a share of one caller would only shrink the
        // server.
        let share = if oauth {
            max_sessions.div_ceil(2)
        } else {
            max_sessions
        };
        let max_sessions_per_caller = self
            .max_sessions_per_caller
            .map_or(share, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .min(max_sessions);
        Ok(HttpConfig {
            bind: self.bind,
            unauthenticated_public: public && self.auth_token.is_none() && !oauth,
            auth_token: self.auth_token,
            allowed_hosts,
            max_sessions,
            max_sessions_per_caller,
            session_idle_timeout: Duration::from_secs(self.session_idle_timeout),
            max_body_bytes: usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX),
            body_timeout: Duration::from_secs(self.body_timeout),
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            max_unauthenticated_per_address: usize::try_from(self.max_unauthenticated_per_address)
                .unwrap_or(usize::MAX),
        })
    }
}

/// `--bind`: an IP address and port, or `localhost:PORT` (the IPv4 loopback address). No other
/// name is looked up: the address served must not depend on what a resolver answers.
fn bind_address(given: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = given.parse() {
        return Ok(addr);
    }
    match given.rsplit_once(':') {
        Some((host, port)) if host.eq_ignore_ascii_case("localhost") => port
            .parse::<u16>()
            .map(|port| SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)))
            .map_err(|_| format!("'{port}' is not a port number (0 to 65535)")),
        _ => Err(
            "give an IP address and a port, e.g. 127.0.0.1:8000, localhost:8000 or \
                  0.0.0.0:8000"
                .to_owned(),
        ),
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address; no scheme, path or user.
fn is_host_and_port(entry: &str) -> bool {
    if entry.parse::<std::net::Ipv6Addr>().is_ok() {
        return true;
    }
    let (host_ok, port) = match entry.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, after)) => (v6.parse::<std::net::Ipv6Addr>().is_ok(), after),
            None => return false,
        },
        None => {
            let (host, after) = entry.find(':').map_or((entry, ""), |i| entry.split_at(i));
            let name_ok = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            (name_ok, after)
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.parse::<u16>().is_ok());
    host_ok && port_ok
}

//! Who asks for a run: the identity that runs, sessions and grants are keyed on. The transport
//! decides it (stdio: the local user; HTTP: what the request authenticated with) and it travels
//! with every tool call; the run layer only compares and records it.

use std::fmt;

/// The party behind a request. Two requests with equal callers may see each other's runs and
/// sessions; different callers never do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The client on the other end of stdio: the user who started the server.
    Local,
    /// An HTTP client that presented the server's bearer token (`--auth-token`): every holder of
    /// the token is this one caller.
    BearerToken,
    /// An HTTP client of a server without authentication (loopback, or
    /// `--allow-unauthenticated` behind a proxy that authenticates).
    Anonymous,
}

impl Caller {
    /// A stable name for logs and for state kept under `--state-dir`.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::BearerToken => "token",
            Self::Anonymous => "anonymous",
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

//! Who asks for a run: the identity that runs, sessions and grants are keyed on. The transport
//! decides it (stdio: the local user; HTTP: what the request authenticated with) and it travels
//! with every tool call; the run layer only compares and records it.

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

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
    /// An HTTP client that presented an access token the server's OAuth authorization server
    /// issued (`--oauth`): one caller per registered client.
    OAuthClient(OAuthClient),
}

/// An OAuth client as a caller: its `client_id` is the identity; its name is for people
/// (logs, the audit log) and does not take part in equality.
#[derive(Clone, Debug)]
pub struct OAuthClient {
    pub id: Arc<str>,
    pub name: Arc<str>,
}

impl PartialEq for OAuthClient {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for OAuthClient {}

impl Hash for OAuthClient {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl Caller {
    /// A stable name for logs and for state kept under `--state-dir`: `local`, `token`,
    /// `anonymous`, or `oauth:CLIENT_ID`.
    pub fn key(&self) -> Cow<'_, str> {
        match self {
            Self::Local => Cow::Borrowed("local"),
            Self::BearerToken => Cow::Borrowed("token"),
            Self::Anonymous => Cow::Borrowed("anonymous"),
            Self::OAuthClient(client) => Cow::Owned(format!("oauth:{}", client.id)),
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: &str, name: &str) -> Caller {
        Caller::OAuthClient(OAuthClient {
            id: id.into(),
            name: name.into(),
        })
    }

    #[test]
    fn an_oauth_client_is_one_caller_whatever_its_name() {
        assert_eq!(client("c1", "Claude"), client("c1", "Claude (renamed)"));
        assert_ne!(client("c1", "Claude"), client("c2", "Claude"));
        assert_ne!(client("token", "x"), Caller::BearerToken);
        assert_eq!(client("c1", "x").key(), "oauth:c1");
    }
}

//! Loopback ports for the tests' own listeners and for "nothing listens here".

use std::net::TcpListener;

/// A loopback port that was free a moment ago (bound to `127.0.0.1:0`, then released): nothing
/// listens on it, until whoever is given it binds it.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

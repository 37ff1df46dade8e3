//! Connections that have not authenticated yet, counted per address: a connection takes a place
//! of its address when it is accepted and gives it back when a request on it passes the auth
//! layer (see `auth::require_token`) or when it closes. Past the cap a new connection from that
//! address is closed at once, so one address holding hundreds of idle or half-sent sockets
//! cannot take the open-connection limit that every other caller shares (and `/health` keeps
//! answering them). IPv6 addresses count by their /64, which one host usually owns whole.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::oauth::PeerKey;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The places of every address.
#[derive(Debug)]
pub struct UnauthenticatedByAddress {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl UnauthenticatedByAddress {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: Mutex::default(),
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a connection from `addr`, or `None` when its address has none left.
    pub fn admit(self: &Arc<Self>, addr: SocketAddr) -> Option<Unauthenticated> {
        let key = PeerKey::of(addr.ip()).0;
        let mut open = self.lock();
        let count = open.entry(key).or_default();
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(Unauthenticated(Mutex::new(Some(Place {
            table: Arc::clone(self),
            key,
        }))))
    }
}

/// One connection's place, until it authenticates or closes. Each request on the connection
/// carries it (behind an `Arc`) to the auth layer.
#[derive(Debug)]
pub struct Unauthenticated(Mutex<Option<Place>>);

impl Unauthenticated {
    /// A request on this connection passed authentication: the place goes back.
    pub fn authenticated(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

#[derive(Debug)]
struct Place {
    table: Arc<UnauthenticatedByAddress>,
    key: IpAddr,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self.table.lock();
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(addr: &str) -> SocketAddr {
        addr.parse().unwrap()
    }

    #[test]
    fn an_address_gets_its_places_back_when_connections_authenticate_or_close() {
        let table = UnauthenticatedByAddress::new(2);
        let a = table.admit(at("10.0.0.1:1000")).unwrap();
        let b = table.admit(at("10.0.0.1:1001")).unwrap();
        assert!(table.admit(at("10.0.0.1:1002")).is_none());
        // Another address is not affected.
        assert!(table.admit(at("10.0.0.2:1000")).is_some());
        a.authenticated();
        let c = table.admit(at("10.0.0.1:1003")).unwrap();
        drop(b);
        let _d = table.admit(at("10.0.0.1:1004")).unwrap();
        assert!(table.admit(at("10.0.0.1:1005")).is_none());
        // Authenticating twice, then closing, gives one place back, not two.
        c.authenticated();
        c.authenticated();
        drop(c);
        drop(a);
        let _e = table.admit(at("10.0.0.1:1006")).unwrap();
        assert!(table.admit(at("10.0.0.1:1007")).is_none());
    }

    #[test]
    fn ipv6_counts_by_its_slash_64_and_mapped_ipv4_as_ipv4() {
        let table = UnauthenticatedByAddress::new(1);
        let _a = table.admit(at("[2001:db8:1:2::1]:1")).unwrap();
        assert!(table.admit(at("[2001:db8:1:2:ffff::9]:1")).is_none());
        assert!(table.admit(at("[2001:db8:1:3::1]:1")).is_some());
        let _v4 = table.admit(at("192.0.2.7:1")).unwrap();
        assert!(table.admit(at("[::ffff:192.0.2.7]:1")).is_none());
    }
}

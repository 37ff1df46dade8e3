//! The address a connection comes from, as the server's per-address limits count it (the cap on
//! connections that have not authenticated, OAuth registrations): a value every request carries.

use std::net::{IpAddr, Ipv6Addr};

/// The address a connection comes from, as limits count it: an IPv4 address (also when mapped
/// into IPv6), or an IPv6 address's /64. Every request carries its connection's (the OAuth
/// registration limit counts by it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerKey(pub IpAddr);

impl PeerKey {
    pub fn of(ip: IpAddr) -> Self {
        Self(match ip {
            IpAddr::V4(v4) => IpAddr::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let s = v6.segments();
                    IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
                }
            },
        })
    }
}

//! Handler endpoints at connect time: the SSRF check.
//!
//! A [`Target`] is parsed once (`crate::target`); [`resolve_checked`] is the check right before a new
//! connection: a literal address is classified again (the router's own
//! addresses may have changed since registration), a host name is
//! resolved and every address it resolved to is classified; the socket
//! address returned is the one to connect to — nothing re-resolves after
//! the check, so a DNS answer cannot change between check and use.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use agentd::endpoint::{local_addrs, Endpoint, Guard, Host, Refusal};

pub use crate::target::{Target, TargetError};

/// Longest wait for a resolver answer, within the call's own deadline.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why no address could be used for a new connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolveError {
    /// The address (or one a name resolved to) is in a refused class.
    Refused(Refusal),
    /// The resolver failed or timed out (never delivered).
    Lookup(String),
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResolveError::Refused(r) => write!(f, "endpoint {r} ({})", r.code()),
            ResolveError::Lookup(e) => write!(f, "cannot resolve the endpoint host: {e}"),
        }
    }
}

/// Resolves `ep`'s host (names only; a literal address never reaches the
/// resolver) with a bound in time and in lookups at once (`lookup`).
pub async fn resolve(ep: &Endpoint) -> Result<Vec<IpAddr>, ResolveError> {
    crate::forward::lookup::resolve(ep, RESOLVE_TIMEOUT).await
}

/// Checks every address of `ep` with `guard` (and the interface
/// addresses of now); the first address, ready to connect to.
pub async fn resolve_checked(ep: &Endpoint, guard: &Guard) -> Result<SocketAddr, ResolveError> {
    resolve_checked_from(ep, guard, None).await
}

/// A LAN registration's caller and the known peer router addresses: its
/// endpoint must also lie in the LAN (`agentd::endpoint::scope`).
#[derive(Clone, Copy, Debug)]
pub struct LanCaller<'a> {
    pub source: IpAddr,
    pub peers: &'a [IpAddr],
}

/// [`resolve_checked`], plus the LAN scope of every address when `lan`
/// names the registering caller.
pub async fn resolve_checked_from(
    ep: &Endpoint,
    guard: &Guard,
    lan: Option<LanCaller<'_>>,
) -> Result<SocketAddr, ResolveError> {
    let local = local_addrs();
    guard
        .check_literal(ep, &local)
        .map_err(ResolveError::Refused)?;
    let ips = resolve(ep).await?;
    let scoped = ep.zone.is_some();
    if let Host::Ip(ip) = ep.host {
        guard
            .check_ip(ip, scoped, ep.port, &local)
            .map_err(ResolveError::Refused)?;
    } else {
        guard
            .check_resolved(ep, &ips, &local)
            .map_err(ResolveError::Refused)?;
    }
    if let Some(lan) = lan {
        for ip in &ips {
            guard
                .check_lan(ep, *ip, lan.source, &local, lan.peers)
                .map_err(ResolveError::Refused)?;
        }
    }
    let ip = *ips
        .first()
        .ok_or(ResolveError::Refused(Refusal::Unresolvable))?;
    ep.socket_addr(ip)
        .ok_or_else(|| ResolveError::Lookup("the IPv6 zone names no interface".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(allow_loopback: bool) -> Guard {
        Guard {
            allow_loopback,
            own_ports: vec![7446],
            lan: Default::default(),
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_host_name_is_resolved_and_rechecked_at_connect_time() {
        // `localhost` resolves through the system resolver (/etc/hosts).
        let ep = Endpoint::parse("http://localhost:8080/").unwrap();
        assert_eq!(
            resolve_checked(&ep, &guard(false)).await,
            Err(ResolveError::Refused(Refusal::Loopback))
        );
        let addr = resolve_checked(&ep, &guard(true)).await.unwrap();
        assert!(addr.ip().is_loopback() && addr.port() == 8080, "{addr}");
        let ep = Endpoint::parse("http://localhost:7446/").unwrap();
        assert_eq!(
            resolve_checked(&ep, &guard(true)).await,
            Err(ResolveError::Refused(Refusal::OwnListener))
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_literal_is_checked_without_a_resolver() {
        let ep = Endpoint::parse("http://0x7f.1:8080/").unwrap();
        assert_eq!(
            resolve_checked(&ep, &guard(false)).await,
            Err(ResolveError::Refused(Refusal::Loopback))
        );
        let ep = Endpoint::parse("http://192.0.2.10:8080/").unwrap();
        assert_eq!(
            resolve_checked(&ep, &guard(false)).await,
            Ok("192.0.2.10:8080".parse().unwrap())
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_lan_routes_address_is_rechecked_against_the_peers() {
        use agentd::endpoint::scope::NotLan;
        let peers = ["198.51.100.1".parse().unwrap()];
        let lan = LanCaller {
            source: "192.0.2.50".parse().unwrap(),
            peers: &peers,
        };
        for url in [
            "http://198.51.100.1:7444/",
            "http://[::ffff:198.51.100.1]:22/",
        ] {
            let ep = Endpoint::parse(url).unwrap();
            assert_eq!(
                resolve_checked_from(&ep, &guard(false), Some(lan)).await,
                Err(ResolveError::Refused(Refusal::NotLan(NotLan::PeerRouter))),
                "{url}"
            );
            // A static route (no LAN caller) is the operator's.
            assert!(resolve_checked_from(&ep, &guard(false), None).await.is_ok());
        }
        let ep = Endpoint::parse("http://localhost:8080/").unwrap();
        let peers = ["127.0.0.1".parse().unwrap()];
        let lan = LanCaller {
            source: "192.0.2.50".parse().unwrap(),
            peers: &peers,
        };
        // Loopback stays the guard's business (allow_loopback).
        assert!(resolve_checked_from(&ep, &guard(true), Some(lan))
            .await
            .is_ok());
    }
}

//! Host and Origin checks (DNS-rebinding protection) for the protocol
//! endpoints a browser could be made to reach: `/mcp` and `/a2a`.
//!
//! A web page on `evil.example` whose name an attacker re-points at the
//! router's LAN address could otherwise drive the router's MCP/A2A
//! endpoints from a victim's browser. Two rules stop that: the `Host` a
//! request names must be one of the router's own (its listener and
//! interface addresses, `localhost`, `127.0.0.1`, `[::1]`, and the names
//! in `gateway.allowed_hosts`), and a request that carries an `Origin`
//! (every browser request across origins does) must come from an origin
//! whose host is one of those too. Ports are not compared: the router's
//! listeners are on several.
//!
//! Pure: the caller passes the router's addresses in (`agentd::endpoint::
//! local_addrs` at request time, so a new interface address counts at
//! once).

use std::net::IpAddr;

use http::{header, HeaderMap};

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No `Host`, or one that is not the router's (answered 421: the
    /// request was meant for another server).
    Host(String),
    /// An `Origin` whose host is not the router's (answered 403).
    Origin(String),
}

impl Refusal {
    pub fn status(&self) -> http::StatusCode {
        match self {
            Refusal::Host(_) => http::StatusCode::MISDIRECTED_REQUEST,
            Refusal::Origin(_) => http::StatusCode::FORBIDDEN,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Host(h) => write!(
                f,
                "Host {h:?} is not one of this router's names or addresses (add it to gateway.allowed_hosts)"
            ),
            Refusal::Origin(o) => write!(
                f,
                "Origin {o:?} is not one of this router's names or addresses (add its host to gateway.allowed_hosts)"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// What counts as the router's own.
#[derive(Clone, Copy, Debug)]
pub struct Allowed<'a> {
    /// `gateway.allowed_hosts` (names or address literals).
    pub names: &'a [Box<str>],
    /// Interface and listener addresses.
    pub addrs: &'a [IpAddr],
}

/// Longest Host or Origin value looked at.
const MAX_LEN: usize = 512;

/// Checks the `Host` and `Origin` of a request.
pub fn check(headers: &HeaderMap, allowed: Allowed<'_>) -> Result<(), Refusal> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !authority_allowed(host, allowed) {
        return Err(Refusal::Host(clip(host)));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let o = origin.to_str().unwrap_or("");
        let authority = o
            .strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"));
        match authority {
            Some(a) if !a.contains('/') && authority_allowed(a, allowed) => {}
            // `null` (sandboxed frames, file://) and other schemes too.
            _ => return Err(Refusal::Origin(clip(o))),
        }
    }
    Ok(())
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

/// `host[:port]` or `[v6][:port]` names the router.
fn authority_allowed(authority: &str, allowed: Allowed<'_>) -> bool {
    if authority.is_empty() || authority.len() > MAX_LEN || authority.contains('@') {
        return false;
    }
    let Some(host) = host_of(authority) else {
        return false;
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host == "localhost" {
        return true;
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        let ip = ip.to_canonical();
        return ip.is_loopback()
            || allowed.addrs.iter().any(|a| a.to_canonical() == ip)
            || allowed
                .names
                .iter()
                .any(|n| n.parse::<IpAddr>().is_ok_and(|a| a.to_canonical() == ip));
    }
    allowed
        .names
        .iter()
        .any(|n| n.trim_end_matches('.').eq_ignore_ascii_case(&host))
}

/// The host part of an authority, brackets of an IPv6 literal removed;
/// `None` when the port is not a number.
fn host_of(authority: &str) -> Option<&str> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        return match after {
            "" => Some(v6),
            p => p.strip_prefix(':').filter(|p| port_ok(p)).map(|_| v6),
        };
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => port_ok(p).then_some(h),
        Some(_) => None,
        None => Some(authority),
    }
}

fn port_ok(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_routers_own_names_and_addresses_pass() {
        let names: Vec<Box<str>> = vec!["router.lan".into(), "2001:db8::1".into()];
        let addrs: Vec<IpAddr> = vec!["192.0.2.1".parse().unwrap()];
        let a = Allowed {
            names: &names,
            addrs: &addrs,
        };
        for host in [
            "localhost",
            "localhost:7446",
            "127.0.0.1:7446",
            "[::1]:7446",
            "[::1]",
            "192.0.2.1:7446",
            "Router.LAN",
            "router.lan.:80",
            "[2001:db8::1]:7443",
        ] {
            assert_eq!(check(&headers(Some(host), None), a), Ok(()), "{host}");
        }
        assert_eq!(
            check(
                &headers(Some("192.0.2.1"), Some("http://router.lan:8080")),
                a
            ),
            Ok(())
        );
    }

    #[test]
    fn foreign_hosts_and_origins_are_refused() {
        let names: Vec<Box<str>> = vec!["router.lan".into()];
        let addrs: Vec<IpAddr> = vec!["192.0.2.1".parse().unwrap()];
        let a = Allowed {
            names: &names,
            addrs: &addrs,
        };
        for host in [
            "",
            "evil.example",
            "198.51.100.7:7446",
            "router.lan.evil.example",
            "localhost:x",
            "[::1",
            "user@localhost",
        ] {
            let e = check(&headers(Some(host), None), a).unwrap_err();
            assert_eq!(e.status(), http::StatusCode::MISDIRECTED_REQUEST, "{host}");
        }
        assert!(matches!(
            check(&headers(None, None), a),
            Err(Refusal::Host(_))
        ));
        for origin in [
            "http://evil.example",
            "https://evil.example:443",
            "null",
            "file://",
            "http://router.lan/path",
            "ftp://router.lan",
        ] {
            let e = check(&headers(Some("router.lan"), Some(origin)), a).unwrap_err();
            assert_eq!(e.status(), http::StatusCode::FORBIDDEN, "{origin}");
            assert!(e.to_string().contains("allowed_hosts"));
        }
    }
}

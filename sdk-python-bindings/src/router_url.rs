//! Where the router is and where this agent can be reached.
//!
//! The SDK talks plain HTTP/1.1 to the LAN SDK API (DESIGN §9), so a router
//! URL is `http://host[:port][/prefix]` and nothing else: credentials,
//! queries and fragments in a base URL are almost always a paste mistake,
//! and silently dropping them would hide it. Discovery order is an explicit
//! URL, `AGENTD_ROUTER_URL`, a bounded `_agentd._tcp` DNS-SD browse
//! (`browse`), then the IPv4 default gateway on port 7446.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

/// Port of the LAN SDK API on a router.
pub const LAN_SDK_PORT: u16 = 7446;

/// A parsed `http://` base URL of a router (or of any HTTP endpoint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUrl {
    /// Host as written, without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// Path without a trailing `/` (empty for the root).
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlError {
    Empty,
    /// Only `http://` is spoken on the LAN SDK API.
    Scheme(String),
    MissingHost,
    Credentials,
    QueryOrFragment,
    BadPort(String),
    BadHost(String),
    TooLong(usize),
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::Empty => write!(f, "router URL is empty"),
            UrlError::Scheme(s) => {
                write!(f, "router URL scheme {s:?} is not supported (use http://)")
            }
            UrlError::MissingHost => write!(f, "router URL has no host"),
            UrlError::Credentials => write!(f, "router URL must not contain credentials"),
            UrlError::QueryOrFragment => {
                write!(f, "router URL must not contain a query or fragment")
            }
            UrlError::BadPort(p) => write!(f, "router URL port {p:?} is not a number in 1..=65535"),
            UrlError::BadHost(h) => write!(
                f,
                "router URL host {h:?} is not a valid host name or address"
            ),
            UrlError::TooLong(n) => write!(f, "router URL is {n} bytes long (limit 2048)"),
        }
    }
}

impl std::error::Error for UrlError {}

const MAX_URL: usize = 2048;

impl HttpUrl {
    /// Parses `http://host[:port][/path]`; the port defaults to 80.
    pub fn parse(text: &str) -> Result<HttpUrl, UrlError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(UrlError::Empty);
        }
        if text.len() > MAX_URL {
            return Err(UrlError::TooLong(text.len()));
        }
        let rest = match text.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => return Err(UrlError::Scheme(scheme.to_string())),
            None => return Err(UrlError::Scheme(String::new())),
        };
        if rest.contains(['?', '#']) {
            return Err(UrlError::QueryOrFragment);
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(UrlError::Credentials);
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            None => 80,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => return Err(UrlError::BadPort(p.to_string())),
            },
        };
        Ok(HttpUrl {
            host: host.to_string(),
            port,
            path: path.trim_end_matches('/').to_string(),
        })
    }

    /// `host:port` as it goes into a `Host` header or a socket address
    /// lookup (IPv6 literals bracketed).
    pub fn authority(&self) -> String {
        format!("{}:{}", bracket(&self.host), self.port)
    }

    /// The request target for `suffix` (which starts with `/`) under this
    /// URL's path.
    pub fn target(&self, suffix: &str) -> String {
        format!("{}{}", self.path, suffix)
    }
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}{}", self.authority(), self.path)
    }
}

fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), UrlError> {
    if authority.is_empty() {
        return Err(UrlError::MissingHost);
    }
    if let Some(inner) = authority.strip_prefix('[') {
        let Some((host, after)) = inner.split_once(']') else {
            return Err(UrlError::BadHost(authority.to_string()));
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(UrlError::BadHost(host.to_string()));
        }
        return match after {
            "" => Ok((host, None)),
            p => match p.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(UrlError::BadHost(authority.to_string())),
            },
        };
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    if host.is_empty() {
        return Err(UrlError::MissingHost);
    }
    let valid = host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    if !valid {
        return Err(UrlError::BadHost(host.to_string()));
    }
    Ok((host, port))
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// The IPv4 default gateway from the text of `/proc/net/route`: the first
/// line whose destination is `00000000` with the gateway flag (0x2) set.
/// Addresses there are little-endian hex.
pub fn default_gateway(proc_net_route: &str) -> Option<Ipv4Addr> {
    proc_net_route.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 || fields[1] != "00000000" {
            return None;
        }
        let flags = u32::from_str_radix(fields[3], 16).ok()?;
        if flags & 0x2 == 0 {
            return None;
        }
        let raw = u32::from_str_radix(fields[2], 16).ok()?;
        Some(Ipv4Addr::from(raw.to_le_bytes()))
    })
}

/// Where discovery found the router, for error messages and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Explicit,
    Environment,
    DnsSd,
    DefaultGateway,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiscoveryError {
    Url(Source, UrlError),
    /// No `AGENTD_ROUTER_URL`, no router announced `_agentd._tcp`, no
    /// default gateway.
    NotFound,
}

impl fmt::Display for DiscoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiscoveryError::Url(source, e) => write!(f, "{e} (router URL from {source:?})"),
            DiscoveryError::NotFound => write!(
                f,
                "router discovery failed: set AGENTD_ROUTER_URL or pass router='http://<router>:{LAN_SDK_PORT}' \
                 (no router announced _agentd._tcp over mDNS and no IPv4 default gateway was found)"
            ),
        }
    }
}

impl std::error::Error for DiscoveryError {}

/// Resolves `router` (`"auto"` or a URL) with the environment value, the
/// `/proc/net/route` text and the DNS-SD browse passed in (called only
/// when no environment value decides), so the order is testable.
pub fn resolve_router(
    router: &str,
    env_url: Option<&str>,
    proc_net_route: Option<&str>,
    browse: impl FnOnce() -> Option<std::net::SocketAddr>,
) -> Result<(HttpUrl, Source), DiscoveryError> {
    if router != "auto" {
        return HttpUrl::parse(router)
            .map(|u| (u, Source::Explicit))
            .map_err(|e| DiscoveryError::Url(Source::Explicit, e));
    }
    if let Some(env) = env_url.map(str::trim).filter(|s| !s.is_empty()) {
        return HttpUrl::parse(env)
            .map(|u| (u, Source::Environment))
            .map_err(|e| DiscoveryError::Url(Source::Environment, e));
    }
    if let Some(found) = browse() {
        return Ok((
            HttpUrl {
                host: found.ip().to_string(),
                port: found.port(),
                path: String::new(),
            },
            Source::DnsSd,
        ));
    }
    let gw = proc_net_route
        .and_then(default_gateway)
        .ok_or(DiscoveryError::NotFound)?;
    Ok((
        HttpUrl {
            host: gw.to_string(),
            port: LAN_SDK_PORT,
            path: String::new(),
        },
        Source::DefaultGateway,
    ))
}

/// Why an address cannot be put into a registration as the endpoint host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdvertiseError {
    /// Loopback is only reachable from this host; a router elsewhere would
    /// forward calls into its own loopback. Allowed only when asked for.
    Loopback(String),
    Unspecified(String),
    Multicast(String),
    Invalid(String),
}

impl fmt::Display for AdvertiseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdvertiseError::Loopback(a) => write!(
                f,
                "refusing to advertise loopback address {a}: the router cannot reach it \
                 (pass advertise=<LAN address>, or allow_loopback=True for a router on this host)"
            ),
            AdvertiseError::Unspecified(a) => write!(f, "cannot advertise unspecified address {a}"),
            AdvertiseError::Multicast(a) => write!(f, "cannot advertise multicast address {a}"),
            AdvertiseError::Invalid(a) => write!(
                f,
                "advertise address {a:?} is not an IP address or host name"
            ),
        }
    }
}

impl std::error::Error for AdvertiseError {}

/// Checks an advertise host and returns its canonical form.
pub fn check_advertise(host: &str, allow_loopback: bool) -> Result<String, AdvertiseError> {
    let text = host.trim().trim_start_matches('[').trim_end_matches(']');
    match text.parse::<IpAddr>() {
        Ok(ip) => {
            if ip.is_unspecified() {
                Err(AdvertiseError::Unspecified(text.to_string()))
            } else if ip.is_multicast() {
                Err(AdvertiseError::Multicast(text.to_string()))
            } else if ip.is_loopback() && !allow_loopback {
                Err(AdvertiseError::Loopback(text.to_string()))
            } else {
                Ok(ip.to_string())
            }
        }
        Err(_) => {
            let ok = !text.is_empty()
                && text.len() <= 253
                && text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !ok {
                return Err(AdvertiseError::Invalid(text.to_string()));
            }
            let lower = text.to_ascii_lowercase();
            if (lower == "localhost" || lower.ends_with(".localhost")) && !allow_loopback {
                return Err(AdvertiseError::Loopback(lower));
            }
            Ok(lower)
        }
    }
}

/// The endpoint URL registered for the served handler.
pub fn endpoint_url(advertise: &str, port: u16, path: &str) -> String {
    format!("http://{}:{}{}", bracket(advertise), port, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";

    #[test]
    fn parses_host_port_and_path() {
        let u = HttpUrl::parse("http://192.0.2.1:7446/base/").unwrap();
        assert_eq!(
            u,
            HttpUrl {
                host: "192.0.2.1".into(),
                port: 7446,
                path: "/base".into()
            }
        );
        assert_eq!(u.target("/agent/v1/register"), "/base/agent/v1/register");
        assert_eq!(u.to_string(), "http://192.0.2.1:7446/base");
    }

    #[test]
    fn parses_bracketed_ipv6_and_default_port() {
        let u = HttpUrl::parse("HTTP://[2001:db8::1]").unwrap();
        assert_eq!(u.host, "2001:db8::1");
        assert_eq!(u.port, 80);
        assert_eq!(u.authority(), "[2001:db8::1]:80");
    }

    #[test]
    fn rejects_what_a_base_url_must_not_carry() {
        assert_eq!(
            HttpUrl::parse("https://r:1"),
            Err(UrlError::Scheme("https".into()))
        );
        assert_eq!(
            HttpUrl::parse("r:7446"),
            Err(UrlError::Scheme(String::new()))
        );
        assert_eq!(HttpUrl::parse("http://u:p@r:1"), Err(UrlError::Credentials));
        assert_eq!(
            HttpUrl::parse("http://r:1/?x"),
            Err(UrlError::QueryOrFragment)
        );
        assert_eq!(
            HttpUrl::parse("http://r:0"),
            Err(UrlError::BadPort("0".into()))
        );
        assert_eq!(
            HttpUrl::parse("http://r:99999"),
            Err(UrlError::BadPort("99999".into()))
        );
        assert_eq!(HttpUrl::parse("http://:1"), Err(UrlError::MissingHost));
        assert_eq!(
            HttpUrl::parse("http://[::1"),
            Err(UrlError::BadHost("[::1".into()))
        );
        assert_eq!(
            HttpUrl::parse("http://a b:1"),
            Err(UrlError::BadHost("a b".into()))
        );
        assert_eq!(HttpUrl::parse(""), Err(UrlError::Empty));
    }

    #[test]
    fn default_gateway_is_read_from_proc_net_route() {
        assert_eq!(default_gateway(ROUTE), Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(default_gateway("header\n"), None);
        assert_eq!(default_gateway("h\neth0\t00000000\tzz\t0003\n"), None);
    }

    #[test]
    fn discovery_order_is_explicit_then_env_then_dns_sd_then_gateway() {
        let announced = || Some("[2001:db8::7]:17446".parse().unwrap());
        let unreached = || -> Option<std::net::SocketAddr> { panic!("browsed") };
        let (u, s) = resolve_router(
            "http://198.51.100.7:9",
            Some("http://192.0.2.9:1"),
            Some(ROUTE),
            unreached,
        )
        .unwrap();
        assert_eq!((u.host.as_str(), s), ("198.51.100.7", Source::Explicit));
        let (u, s) =
            resolve_router("auto", Some(" http://192.0.2.9:1 "), Some(ROUTE), unreached).unwrap();
        assert_eq!((u.host.as_str(), s), ("192.0.2.9", Source::Environment));
        let (u, s) = resolve_router("auto", Some(""), Some(ROUTE), announced).unwrap();
        assert_eq!(
            (u.to_string(), s),
            ("http://[2001:db8::7]:17446".to_string(), Source::DnsSd)
        );
        let (u, s) = resolve_router("auto", Some(""), Some(ROUTE), || None).unwrap();
        assert_eq!(
            (u.to_string(), s),
            ("http://192.0.2.1:7446".to_string(), Source::DefaultGateway)
        );
        assert_eq!(
            resolve_router("auto", None, None, || None),
            Err(DiscoveryError::NotFound)
        );
        assert!(matches!(
            resolve_router("auto", Some("ftp://x"), Some(ROUTE), unreached),
            Err(DiscoveryError::Url(
                Source::Environment,
                UrlError::Scheme(_)
            ))
        ));
    }

    #[test]
    fn loopback_is_refused_unless_allowed() {
        assert!(matches!(
            check_advertise("127.0.0.1", false),
            Err(AdvertiseError::Loopback(_))
        ));
        assert!(matches!(
            check_advertise("[::1]", false),
            Err(AdvertiseError::Loopback(_))
        ));
        assert!(matches!(
            check_advertise("LocalHost", false),
            Err(AdvertiseError::Loopback(_))
        ));
        assert_eq!(check_advertise("127.0.0.1", true).unwrap(), "127.0.0.1");
        assert!(matches!(
            check_advertise("0.0.0.0", true),
            Err(AdvertiseError::Unspecified(_))
        ));
        assert!(matches!(
            check_advertise("ff02::1", true),
            Err(AdvertiseError::Multicast(_))
        ));
        assert_eq!(check_advertise("192.0.2.5", false).unwrap(), "192.0.2.5");
        assert_eq!(
            check_advertise("Agent-1.lan", false).unwrap(),
            "agent-1.lan"
        );
        assert!(matches!(
            check_advertise("a/b", false),
            Err(AdvertiseError::Invalid(_))
        ));
    }

    #[test]
    fn endpoint_url_brackets_ipv6() {
        assert_eq!(
            endpoint_url("2001:db8::5", 8080, "/invoke"),
            "http://[2001:db8::5]:8080/invoke"
        );
        assert_eq!(
            endpoint_url("192.0.2.5", 8080, "/invoke"),
            "http://192.0.2.5:8080/invoke"
        );
    }
}

//! What a health check probes: the identity of an endpoint.
//!
//! Two routes share a probe exactly when their targets are equal, so the
//! target is everything a probe's outcome depends on and nothing else:
//!
//! * HTTP checks (`health_check 'http'` on an `http://` endpoint): the
//!   probe is `GET /healthz` on host:port. The path of the endpoint URL
//!   plays no part (the health path is fixed), so
//!   `http://h:8080/a` and `http://h:8080/b` are one target.
//! * TCP checks (`health_check 'tcp'`, the default, and every `https://`
//!   endpoint — agentd carries no TLS client for probes): a bare connect
//!   carries nothing but host:port, so all endpoints on one host:port are
//!   one target whatever their scheme or path.
//!
//! Hosts compare case-insensitively (DNS names are), so they are stored in
//! lower case.

use crate::route::Text;
use std::fmt;

/// What to probe, derived once from a route's endpoint URL. The authority
/// is shared ([`Text`], one pointer wide): the health monitor keeps one
/// target per route and one per endpoint, and routes of one endpoint hold
/// the endpoint's string instead of a heap copy each. 16 bytes, where an
/// `Arc<str>` made it 24 (the monitor's id → target map costs a bucket
/// of id and target per route).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeTarget {
    /// `GET /healthz` on `authority` (`host:port`, IPv6 in brackets).
    Http { authority: Text },
    /// TCP connect only.
    Tcp { authority: Text },
}

/// Why an endpoint URL cannot be probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    Scheme,
    NoHost,
    BadPort,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TargetError::Scheme => "endpoint is not an http:// or https:// URL",
            TargetError::NoHost => "endpoint has no host",
            TargetError::BadPort => "endpoint port is not a number in 1..65535",
        })
    }
}

impl std::error::Error for TargetError {}

impl ProbeTarget {
    /// `http://host[:port]/...` → HTTP probe; `https://...` → TCP probe
    /// (agentd carries no TLS client for health checks).
    pub fn for_endpoint(url: &str) -> Result<ProbeTarget, TargetError> {
        let (rest, default_port, http) = if let Some(r) = url.strip_prefix("http://") {
            (r, 80, true)
        } else if let Some(r) = url.strip_prefix("https://") {
            (r, 443, false)
        } else {
            return Err(TargetError::Scheme);
        };
        let hostport = rest.split(['/', '?', '#']).next().unwrap_or("");
        let hostport = hostport.rsplit_once('@').map_or(hostport, |(_, h)| h);
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or(TargetError::NoHost)?;
            (format!("[{h}]"), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() || host == "[]" {
            return Err(TargetError::NoHost);
        }
        let port = match port {
            None => default_port,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or(TargetError::BadPort)?,
        };
        let authority: Text = format!("{}:{port}", host.to_ascii_lowercase()).into();
        Ok(if http {
            ProbeTarget::Http { authority }
        } else {
            ProbeTarget::Tcp { authority }
        })
    }

    /// The target of `url` under the configured check kind.
    pub fn for_check(url: &str, tcp_only: bool) -> Result<ProbeTarget, TargetError> {
        let t = ProbeTarget::for_endpoint(url)?;
        Ok(if tcp_only { t.tcp_only() } else { t })
    }

    /// The same endpoint probed by TCP connect only (`health_check 'tcp'`).
    pub fn tcp_only(self) -> ProbeTarget {
        match self {
            ProbeTarget::Http { authority } | ProbeTarget::Tcp { authority } => {
                ProbeTarget::Tcp { authority }
            }
        }
    }

    pub fn authority(&self) -> &str {
        match self {
            ProbeTarget::Http { authority } | ProbeTarget::Tcp { authority } => authority,
        }
    }
}

impl fmt::Display for ProbeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeTarget::Http { authority } => write!(f, "http://{authority}/healthz"),
            ProbeTarget::Tcp { authority } => write!(f, "tcp {authority}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The monitor holds one target per tracked route (its id → target
    /// map): a target stays two words.
    #[test]
    fn a_target_is_two_words() {
        assert_eq!(std::mem::size_of::<ProbeTarget>(), 16);
    }

    #[test]
    fn endpoint_urls_map_to_probe_targets() {
        assert_eq!(
            ProbeTarget::for_endpoint("http://192.0.2.10:8080/invoke"),
            Ok(ProbeTarget::Http {
                authority: "192.0.2.10:8080".into()
            })
        );
        assert_eq!(
            ProbeTarget::for_endpoint("http://[2001:db8::1]/x"),
            Ok(ProbeTarget::Http {
                authority: "[2001:db8::1]:80".into()
            })
        );
        assert_eq!(
            ProbeTarget::for_endpoint("https://agent.lab.example"),
            Ok(ProbeTarget::Tcp {
                authority: "agent.lab.example:443".into()
            })
        );
        assert_eq!(
            ProbeTarget::for_endpoint("ftp://x"),
            Err(TargetError::Scheme)
        );
        assert_eq!(
            ProbeTarget::for_endpoint("http://:80/"),
            Err(TargetError::NoHost)
        );
        assert_eq!(
            ProbeTarget::for_endpoint("http://h:0/"),
            Err(TargetError::BadPort)
        );
        assert_eq!(
            ProbeTarget::for_endpoint("http://h:99999/"),
            Err(TargetError::BadPort)
        );
    }

    #[test]
    fn one_endpoint_is_one_target_whatever_the_path_or_host_case() {
        let a = ProbeTarget::for_check("http://Agent.LAB.example:8080/a", false).unwrap();
        let b = ProbeTarget::for_check("http://agent.lab.example:8080/b?x#y", false).unwrap();
        assert_eq!(a, b);
        // Another port or another check kind is another target.
        let c = ProbeTarget::for_check("http://agent.lab.example:8081/a", false).unwrap();
        assert_ne!(a, c);
        let tcp = ProbeTarget::for_check("http://agent.lab.example:8080/a", true).unwrap();
        assert_ne!(a, tcp);
    }

    #[test]
    fn tcp_checks_dedupe_by_host_and_port_across_schemes() {
        let http = ProbeTarget::for_check("http://192.0.2.7:443/x", true).unwrap();
        let https = ProbeTarget::for_check("https://192.0.2.7/y", true).unwrap();
        assert_eq!(http, https);
        // An https endpoint is TCP-checked even under 'http' checks.
        assert_eq!(
            ProbeTarget::for_check("https://192.0.2.7/y", false).unwrap(),
            https
        );
    }
}

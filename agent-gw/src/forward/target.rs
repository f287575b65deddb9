//! Handler endpoint URLs: what the gateway can connect to.
//!
//! Only plain `http://host:port/path` endpoints are forwarded locally (the
//! handler sits on the LAN); the authority is the pool key.

use std::fmt;

use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;

use agentd::route::MAX_ENDPOINT_LEN;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetError {
    TooLong,
    NotAUrl,
    NotHttp,
    NoPort,
    UserInfo,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TargetError::TooLong => "endpoint URL is too long",
            TargetError::NotAUrl => "endpoint is not an absolute URL",
            TargetError::NotHttp => "only http:// endpoints are supported",
            TargetError::NoPort => "endpoint URL must name a port",
            TargetError::UserInfo => "endpoint URL must not carry credentials",
        })
    }
}

impl std::error::Error for TargetError {}

/// A parsed handler endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `host:port` (IPv6 in brackets): connect address, pool key and `Host`.
    pub authority: Authority,
    pub path: PathAndQuery,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        if url.len() > MAX_ENDPOINT_LEN {
            return Err(TargetError::TooLong);
        }
        let uri: Uri = url.parse().map_err(|_| TargetError::NotAUrl)?;
        match uri.scheme() {
            Some(s) if *s == Scheme::HTTP => {}
            Some(_) => return Err(TargetError::NotHttp),
            None => return Err(TargetError::NotAUrl),
        }
        let authority = uri.authority().ok_or(TargetError::NotAUrl)?.clone();
        if authority.as_str().contains('@') {
            return Err(TargetError::UserInfo);
        }
        if authority.port_u16().is_none() || authority.host().is_empty() {
            return Err(TargetError::NoPort);
        }
        let path = uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        Ok(Target { authority, path })
    }

    /// `host:port` for `TcpStream::connect` (brackets kept for IPv6).
    pub fn connect_addr(&self) -> &str {
        self.authority.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ipv4_and_ipv6_endpoints() {
        let t = Target::parse("http://192.0.2.10:8080/invoke").unwrap();
        assert_eq!(t.connect_addr(), "192.0.2.10:8080");
        assert_eq!(t.path.as_str(), "/invoke");
        let t = Target::parse("http://[2001:db8::1]:9000/a?b=1").unwrap();
        assert_eq!(t.connect_addr(), "[2001:db8::1]:9000");
        assert_eq!(t.path.as_str(), "/a?b=1");
    }

    #[test]
    fn refuses_what_cannot_be_forwarded() {
        assert_eq!(Target::parse("https://h:1/x"), Err(TargetError::NotHttp));
        assert_eq!(Target::parse("http://h/x"), Err(TargetError::NoPort));
        assert_eq!(Target::parse("/x"), Err(TargetError::NotAUrl));
        assert_eq!(
            Target::parse("http://u:p@h:1/x"),
            Err(TargetError::UserInfo)
        );
        assert_eq!(
            Target::parse(&format!("http://h:1/{}", "a".repeat(600))),
            Err(TargetError::TooLong)
        );
    }
}

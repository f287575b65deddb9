//! A handler endpoint as the gateway forwards to it: agentd's shared
//! [`Endpoint`] (the rules agentd applied at registration, so nothing is
//! accepted there that cannot be forwarded here) with the request path
//! and the `host:port` the pool keys connections by. A value type below
//! every layer: registrations check it, the FIB's routes carry it, and
//! `forward::target` resolves it at connect time.

use http::uri::PathAndQuery;
use http::HeaderValue;

use agentd::endpoint::{Endpoint, EndpointError};

pub use agentd::endpoint::EndpointError as TargetError;

/// A parsed handler endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub endpoint: Endpoint,
    /// `host:port` (IPv6 in brackets): pool key and `Host` header.
    authority: Box<str>,
    pub path: PathAndQuery,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, EndpointError> {
        let endpoint = Endpoint::parse(url)?;
        let path = PathAndQuery::try_from(&*endpoint.path).map_err(|_| EndpointError::BadChar)?;
        Ok(Target {
            authority: endpoint.authority().into(),
            endpoint,
            path,
        })
    }

    /// `host:port`: the pool key (brackets kept for IPv6).
    pub fn connect_addr(&self) -> &str {
        &self.authority
    }

    pub fn host_header(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(&self.authority).ok()
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
        let t = Target::parse("http://192.0.2.10/invoke").unwrap();
        assert_eq!(t.connect_addr(), "192.0.2.10:80");
    }

    #[test]
    fn refuses_what_cannot_be_forwarded() {
        assert_eq!(
            Target::parse("https://h:1/x"),
            Err(TargetError::HttpsUnsupported)
        );
        assert_eq!(Target::parse("/x"), Err(TargetError::Scheme));
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

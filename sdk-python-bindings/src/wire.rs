//! Decoders for the router's JSON replies (LAN SDK API, DESIGN §9).
//!
//! These bytes come from the network, so every decoder bounds the input,
//! rejects duplicate keys (serde's derived visitors do) and returns a typed
//! error naming the field. Unknown fields are accepted: the router may add
//! reply fields (e.g. `ignored`) without breaking old SDKs. The public-IPv6
//! answer of a register reply (`PublicIpv6`) is read by its own decoder,
//! so a malformed one costs the address, never the lease.

use std::fmt;
use std::net::Ipv6Addr;

use serde::Deserialize;

/// Largest reply body a decoder here looks at.
pub const MAX_REPLY: usize = 64 * 1024;
const MAX_ID: usize = 256;
const MAX_MESSAGE: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    TooLarge(usize),
    /// Not JSON, wrong types, duplicate keys or a missing required field;
    /// carries serde's description (which names the field).
    Json(String),
    /// A field decoded but its value is out of bounds.
    Field {
        field: &'static str,
        reason: &'static str,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::TooLarge(n) => write!(f, "router reply of {n} bytes exceeds {MAX_REPLY}"),
            WireError::Json(e) => write!(f, "router reply is not the expected JSON: {e}"),
            WireError::Field { field, reason } => {
                write!(f, "router reply field `{field}` {reason}")
            }
        }
    }
}

impl std::error::Error for WireError {}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, WireError> {
    if bytes.len() > MAX_REPLY {
        return Err(WireError::TooLarge(bytes.len()));
    }
    serde_json::from_slice(bytes).map_err(|e| WireError::Json(e.to_string()))
}

/// The lease object of register/renew/unregister replies.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct LeaseReply {
    pub route_id: String,
    pub generation: u64,
    #[serde(default)]
    pub lease_seconds: u64,
    #[serde(default)]
    pub removed: bool,
}

impl LeaseReply {
    pub fn decode(bytes: &[u8]) -> Result<LeaseReply, WireError> {
        let r: LeaseReply = decode(bytes)?;
        if r.route_id.is_empty() || r.route_id.len() > MAX_ID {
            return Err(WireError::Field {
                field: "route_id",
                reason: "must be 1..=256 bytes",
            });
        }
        if r.lease_seconds > 86_400 {
            return Err(WireError::Field {
                field: "lease_seconds",
                reason: "exceeds one day",
            });
        }
        Ok(r)
    }
}

/// How a caller outside the mesh speaks to an agent's public address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Https,
    Http,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Https => "https",
            Scheme::Http => "http",
        }
    }
}

/// The agent's own public IPv6 endpoint, as a register reply offers it
/// (`public_endpoint`, docs/ipv6.md): the router terminates TLS there with
/// a certificate for `tls_server_name` issued by the CA `ca_bundle_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicEndpoint {
    pub address: Ipv6Addr,
    pub port: u16,
    pub scheme: Scheme,
    /// Required (non-empty) for `https`.
    pub tls_server_name: Option<String>,
    /// Required (non-empty) for `https`.
    pub ca_bundle_id: Option<String>,
}

impl PublicEndpoint {
    /// `https://[2001:db8::7]:7443`, the form the nexilume SDK builds.
    pub fn url(&self) -> String {
        format!(
            "{}://[{}]:{}",
            self.scheme.as_str(),
            self.address,
            self.port
        )
    }
}

/// The router's report on a `public_ipv6` request (`public_ipv6_status`):
/// whether an address is bound and served, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicIpv6Status {
    pub address: Option<Ipv6Addr>,
    pub served: bool,
    pub reason: Option<String>,
}

/// The public-IPv6 part of a register reply. Each piece is `None` when the
/// reply does not carry it (the agent did not ask, the router does not
/// support it, or the address is not served).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublicIpv6 {
    /// `public_ipv6`; only set together with a valid endpoint, or alone
    /// when the reply offers no endpoint at all.
    pub address: Option<Ipv6Addr>,
    pub endpoint: Option<PublicEndpoint>,
    pub status: Option<PublicIpv6Status>,
}

#[derive(Deserialize)]
struct PublicEndpointRaw {
    address: String,
    port: u64,
    scheme: String,
    tls_server_name: Option<String>,
    ca_bundle_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PublicStatusRaw {
    Object {
        address: Option<String>,
        served: bool,
        reason: Option<String>,
    },
    /// A bare reason (nothing served).
    Reason(String),
}

#[derive(Deserialize)]
struct PublicRaw {
    public_ipv6: Option<String>,
    public_endpoint: Option<PublicEndpointRaw>,
    // The flat copy of the endpoint, read when the object is missing.
    public_port: Option<u64>,
    tls_server_name: Option<String>,
    ca_bundle_id: Option<String>,
    public_ipv6_status: Option<PublicStatusRaw>,
}

const MAX_ADDRESS: usize = 64;
const MAX_SERVER_NAME: usize = 253;

fn field(field: &'static str, reason: &'static str) -> WireError {
    WireError::Field { field, reason }
}

/// A global-scope IPv6 literal a URL can carry: no zone, not link-local,
/// multicast, unspecified or IPv4-mapped.
fn public_address(text: &str, name: &'static str) -> Result<Ipv6Addr, WireError> {
    if text.len() > MAX_ADDRESS {
        return Err(field(name, "is too long for an IPv6 address"));
    }
    let a: Ipv6Addr = text
        .parse()
        .map_err(|_| field(name, "is not an IPv6 address (zones are not allowed)"))?;
    let link_local = a.segments()[0] & 0xffc0 == 0xfe80;
    if a.is_unspecified() || a.is_multicast() || link_local || a.to_ipv4_mapped().is_some() {
        return Err(field(
            name,
            "is not a unicast address a caller can reach without a zone",
        ));
    }
    Ok(a)
}

fn tls_name(v: Option<String>, name: &'static str) -> Result<Option<String>, WireError> {
    let Some(v) = v.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let ok = v.len() <= MAX_SERVER_NAME
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if !ok {
        return Err(field(name, "must be a DNS name of at most 253 bytes"));
    }
    Ok(Some(v))
}

fn bundle_id(v: Option<String>) -> Result<Option<String>, WireError> {
    let Some(v) = v.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if v.len() > MAX_ID || v.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
        return Err(field(
            "public_endpoint.ca_bundle_id",
            "must be 1..=256 visible ASCII bytes",
        ));
    }
    Ok(Some(v))
}

fn endpoint(raw: PublicEndpointRaw, public: Ipv6Addr) -> Result<PublicEndpoint, WireError> {
    let address = public_address(&raw.address, "public_endpoint.address")?;
    if address != public {
        return Err(field("public_endpoint.address", "differs from public_ipv6"));
    }
    let port = match u16::try_from(raw.port) {
        Ok(p) if p > 0 => p,
        _ => return Err(field("public_endpoint.port", "is not in 1..=65535")),
    };
    let scheme = match raw.scheme.as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        _ => return Err(field("public_endpoint.scheme", "is not https or http")),
    };
    let tls_server_name = tls_name(raw.tls_server_name, "public_endpoint.tls_server_name")?;
    let ca_bundle_id = bundle_id(raw.ca_bundle_id)?;
    if scheme == Scheme::Https {
        if tls_server_name.is_none() {
            return Err(field(
                "public_endpoint.tls_server_name",
                "is required for https",
            ));
        }
        if ca_bundle_id.is_none() {
            return Err(field(
                "public_endpoint.ca_bundle_id",
                "is required for https",
            ));
        }
    }
    Ok(PublicEndpoint {
        address,
        port,
        scheme,
        tls_server_name,
        ca_bundle_id,
    })
}

fn status(raw: PublicStatusRaw) -> Result<PublicIpv6Status, WireError> {
    let (address, served, reason) = match raw {
        PublicStatusRaw::Object {
            address,
            served,
            reason,
        } => (address, served, reason),
        PublicStatusRaw::Reason(r) => (None, false, Some(r)),
    };
    let address = address
        .map(|a| public_address(&a, "public_ipv6_status.address"))
        .transpose()?;
    Ok(PublicIpv6Status {
        address,
        served,
        reason: reason.map(|r| clip(&r, MAX_MESSAGE)),
    })
}

impl PublicIpv6 {
    /// Reads the public-IPv6 answer of a register reply. Never fails: it
    /// returns the pieces that are valid and the first problem found. The
    /// registration itself succeeded either way, so a malformed answer
    /// must cost the agent its public address, not its route:
    ///
    /// - a reply that is not the expected JSON → nothing, and the error;
    /// - an invalid `public_ipv6` or endpoint (bad address, an endpoint
    ///   address other than `public_ipv6`, port outside 1..=65535, https
    ///   without `tls_server_name`/`ca_bundle_id`) → no address and no
    ///   endpoint, the status kept;
    /// - an invalid `public_ipv6_status` → no status.
    ///
    /// The endpoint is the `public_endpoint` object, or — when a reply has
    /// only the flat copy — `public_port`, `tls_server_name`, `ca_bundle_id`
    /// with scheme https.
    pub fn decode(bytes: &[u8]) -> (PublicIpv6, Option<WireError>) {
        let raw: PublicRaw = match decode(bytes) {
            Ok(r) => r,
            Err(e) => return (PublicIpv6::default(), Some(e)),
        };
        let mut out = PublicIpv6::default();
        let mut problem = None;
        let flat = match (raw.public_endpoint, raw.public_port) {
            (Some(e), _) => Some(e),
            (None, Some(port)) => raw.public_ipv6.clone().map(|address| PublicEndpointRaw {
                address,
                port,
                scheme: "https".into(),
                tls_server_name: raw.tls_server_name,
                ca_bundle_id: raw.ca_bundle_id,
            }),
            (None, None) => None,
        };
        let served = match (raw.public_ipv6, flat) {
            (None, None) => Ok((None, None)),
            (None, Some(_)) => Err(field("public_endpoint", "is offered without public_ipv6")),
            (Some(a), e) => public_address(&a, "public_ipv6").and_then(|address| {
                let e = e.map(|e| endpoint(e, address)).transpose()?;
                Ok((Some(address), e))
            }),
        };
        match served {
            Ok((address, endpoint)) => {
                out.address = address;
                out.endpoint = endpoint;
            }
            Err(e) => problem = Some(e),
        }
        if let Some(s) = raw.public_ipv6_status {
            match status(s) {
                Ok(s) => out.status = Some(s),
                Err(e) => problem = problem.or(Some(e)),
            }
        }
        (out, problem)
    }
}

/// `{"error":{"code","message"}}` (our router) or the flat
/// `{"code","message"}` that Nexus-style agents answer with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    pub detail: ErrorDetail,
}

/// The optional context fields of a gateway error (docs/sdk-api.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ErrorDetail {
    /// What happened to the call: `rejected`, `not_delivered`, `unknown`,
    /// `error`.
    pub outcome: Option<String>,
    /// Why nothing was eligible (for `no_route`).
    pub reason: Option<String>,
    pub retry_after_ms: Option<u64>,
}

#[derive(Deserialize)]
struct Flat {
    code: Option<String>,
    message: Option<String>,
    outcome: Option<String>,
    reason: Option<String>,
    retry_after_ms: Option<u64>,
}

#[derive(Deserialize)]
struct Nested {
    error: Option<Flat>,
    code: Option<String>,
    message: Option<String>,
}

impl ErrorBody {
    /// Decodes an error body; `None` when the body carries no error code
    /// (the caller then falls back to the HTTP status).
    pub fn decode(bytes: &[u8]) -> Option<ErrorBody> {
        let n: Nested = decode(bytes).ok()?;
        let (code, message, detail) = match n.error {
            Some(f) => {
                let detail = ErrorDetail {
                    outcome: f.outcome.map(|o| clip(&o, MAX_ID)),
                    reason: f.reason.map(|r| clip(&r, MAX_ID)),
                    retry_after_ms: f.retry_after_ms,
                };
                (f.code, f.message, detail)
            }
            None => (n.code, n.message, ErrorDetail::default()),
        };
        let code = code.filter(|c| !c.is_empty())?;
        Some(ErrorBody {
            code: clip(&code, MAX_ID),
            message: clip(message.as_deref().unwrap_or(""), MAX_MESSAGE),
            detail,
        })
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The trusted-LAN bootstrap offer inside `GET /agent/v1/authentication`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct BootstrapOffer {
    pub endpoint: String,
    #[serde(default)]
    pub token_ttl_seconds: u64,
}

#[derive(Deserialize)]
struct AuthMetadataRaw {
    bootstrap: Option<BootstrapOffer>,
}

/// Decodes the authentication metadata and returns the bootstrap offer, if
/// the router makes one. The endpoint must be a same-origin absolute path:
/// a token request must never be sent elsewhere.
pub fn bootstrap_offer(bytes: &[u8]) -> Result<Option<BootstrapOffer>, WireError> {
    let raw: AuthMetadataRaw = decode(bytes)?;
    let Some(offer) = raw.bootstrap else {
        return Ok(None);
    };
    let e = &offer.endpoint;
    if !e.starts_with('/') || e.starts_with("//") || e.contains(['?', '#']) || e.len() > MAX_ID {
        return Err(WireError::Field {
            field: "bootstrap.endpoint",
            reason: "must be a same-origin absolute path",
        });
    }
    if offer.token_ttl_seconds > 300 {
        return Err(WireError::Field {
            field: "bootstrap.token_ttl_seconds",
            reason: "exceeds 300 s",
        });
    }
    Ok(Some(offer))
}

/// A bootstrap token grant.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct TokenGrant {
    pub access_token: String,
    #[serde(default)]
    pub token_type: Option<String>,
    pub expires_in: u64,
}

impl TokenGrant {
    pub fn decode(bytes: &[u8]) -> Result<TokenGrant, WireError> {
        let g: TokenGrant = decode(bytes)?;
        if g.access_token.is_empty() || g.access_token.len() > 8192 {
            return Err(WireError::Field {
                field: "access_token",
                reason: "must be 1..=8192 bytes",
            });
        }
        if g.access_token.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
            return Err(WireError::Field {
                field: "access_token",
                reason: "contains bytes not allowed in a header",
            });
        }
        if let Some(t) = &g.token_type {
            if !t.eq_ignore_ascii_case("bearer") {
                return Err(WireError::Field {
                    field: "token_type",
                    reason: "is not Bearer",
                });
            }
        }
        if g.expires_in == 0 || g.expires_in > 300 {
            return Err(WireError::Field {
                field: "expires_in",
                reason: "must be 1..=300 s",
            });
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_reply_decodes_and_tolerates_extra_fields() {
        let r = LeaseReply::decode(
            br#"{"route_id":"r-1","generation":3,"lease_seconds":30,"public_ipv6":null}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            LeaseReply {
                route_id: "r-1".into(),
                generation: 3,
                lease_seconds: 30,
                removed: false
            }
        );
    }

    #[test]
    fn lease_reply_rejections_name_the_field() {
        let e = LeaseReply::decode(br#"{"generation":3}"#).unwrap_err();
        assert!(
            matches!(&e, WireError::Json(m) if m.contains("route_id")),
            "{e}"
        );
        let e =
            LeaseReply::decode(br#"{"route_id":"a","route_id":"b","generation":1}"#).unwrap_err();
        assert!(
            matches!(&e, WireError::Json(m) if m.contains("duplicate")),
            "{e}"
        );
        assert_eq!(
            LeaseReply::decode(br#"{"route_id":"","generation":1}"#),
            Err(WireError::Field {
                field: "route_id",
                reason: "must be 1..=256 bytes"
            })
        );
        assert!(matches!(
            LeaseReply::decode(br#"{"route_id":"a","generation":-1}"#),
            Err(WireError::Json(_))
        ));
        assert!(matches!(
            LeaseReply::decode(&vec![b' '; MAX_REPLY + 1]),
            Err(WireError::TooLarge(_))
        ));
    }

    const ENDPOINT: &str = r#""public_endpoint":{"address":"2001:db8::7","port":7443,"scheme":"https","tls_server_name":"router-a","ca_bundle_id":"agentd-ca-0011223344556677"}"#;

    fn public(json: &str) -> (PublicIpv6, Option<WireError>) {
        PublicIpv6::decode(json.as_bytes())
    }

    #[test]
    fn public_ipv6_reads_a_served_endpoint() {
        let (p, problem) = public(&format!(
            r#"{{"route_id":"r","generation":1,"public_ipv6":"2001:DB8:0::7",{ENDPOINT},
               "public_ipv6_status":{{"address":"2001:db8::7","served":true}}}}"#
        ));
        assert_eq!(problem, None);
        let e = p.endpoint.unwrap();
        assert_eq!(p.address, Some(e.address));
        assert_eq!(e.url(), "https://[2001:db8::7]:7443");
        assert_eq!(e.tls_server_name.as_deref(), Some("router-a"));
        let s = p.status.unwrap();
        assert_eq!(
            (s.address, s.served, s.reason),
            (Some(e.address), true, None)
        );
    }

    #[test]
    fn public_ipv6_falls_back_to_the_flat_fields() {
        let (p, problem) = public(
            r#"{"public_ipv6":"2001:db8::7","public_port":8443,"tls_server_name":"r","ca_bundle_id":"c"}"#,
        );
        assert_eq!(problem, None);
        assert_eq!(p.endpoint.unwrap().url(), "https://[2001:db8::7]:8443");
        // Nothing offered: nothing set, no problem.
        assert_eq!(public(r#"{"route_id":"r"}"#), (PublicIpv6::default(), None));
        assert_eq!(
            public(r#"{"public_ipv6":null}"#),
            (PublicIpv6::default(), None)
        );
    }

    #[test]
    fn public_ipv6_not_served_keeps_only_the_status() {
        let (p, problem) = public(
            r#"{"public_ipv6_status":{"address":"2001:db8::7","served":false,"reason":"not served: auth is 'none'"}}"#,
        );
        assert_eq!(problem, None);
        assert_eq!((p.address, p.endpoint), (None, None));
        let s = p.status.unwrap();
        assert!(!s.served && s.address.is_some());
        assert_eq!(s.reason.as_deref(), Some("not served: auth is 'none'"));
        let (p, _) = public(r#"{"public_ipv6_status":"binding is off"}"#);
        assert_eq!(p.status.unwrap().reason.as_deref(), Some("binding is off"));
        let long = format!(
            r#"{{"public_ipv6_status":{{"address":null,"served":false,"reason":"{}"}}}}"#,
            "x".repeat(5000)
        );
        assert_eq!(
            public(&long).0.status.unwrap().reason.unwrap().len(),
            MAX_MESSAGE
        );
    }

    #[test]
    fn public_ipv6_invalid_endpoints_are_dropped_with_the_field_named() {
        let status = r#""public_ipv6_status":{"address":"2001:db8::7","served":true}"#;
        let cases = [
            (
                ENDPOINT.replace(r#""address":"2001:db8::7""#, r#""address":"2001:db8::8""#),
                "public_endpoint.address",
            ),
            (ENDPOINT.replace("7443", "0"), "public_endpoint.port"),
            (ENDPOINT.replace("7443", "65536"), "public_endpoint.port"),
            (ENDPOINT.replace("https", "ftp"), "public_endpoint.scheme"),
            (
                ENDPOINT.replace(r#""router-a""#, r#""""#),
                "public_endpoint.tls_server_name",
            ),
            (
                ENDPOINT.replace(r#""router-a""#, r#""a b""#),
                "public_endpoint.tls_server_name",
            ),
            (
                ENDPOINT.replace(r#","ca_bundle_id":"agentd-ca-0011223344556677""#, ""),
                "public_endpoint.ca_bundle_id",
            ),
        ];
        for (endpoint, name) in cases {
            let body = format!(r#"{{"public_ipv6":"2001:db8::7",{endpoint},{status}}}"#);
            let (p, problem) = public(&body);
            assert_eq!((p.address, p.endpoint), (None, None), "{body}");
            assert!(p.status.is_some(), "{body}");
            assert!(
                matches!(problem, Some(WireError::Field { field, .. }) if field == name),
                "{body}"
            );
        }
        for addr in [
            "fe80::1",
            "ff02::1",
            "::",
            "::ffff:192.0.2.1",
            "2001:db8::7%eth0",
            "10.0.0.1",
        ] {
            let (p, problem) = public(&format!(r#"{{"public_ipv6":"{addr}"}}"#));
            assert_eq!(p, PublicIpv6::default(), "{addr}");
            assert!(
                matches!(
                    problem,
                    Some(WireError::Field {
                        field: "public_ipv6",
                        ..
                    })
                ),
                "{addr}"
            );
        }
        let (p, problem) = public(&format!("{{{ENDPOINT}}}"));
        assert_eq!(p.endpoint, None);
        assert!(matches!(
            problem,
            Some(WireError::Field {
                field: "public_endpoint",
                ..
            })
        ));
        // http needs no TLS names.
        let http = r#"{"public_ipv6":"2001:db8::7","public_endpoint":{"address":"2001:db8::7","port":80,"scheme":"http"}}"#;
        assert_eq!(
            public(http).0.endpoint.unwrap().url(),
            "http://[2001:db8::7]:80"
        );
    }

    #[test]
    fn public_ipv6_malformed_json_yields_nothing() {
        for body in [
            r#"{"public_ipv6":true}"#,
            r#"{"public_ipv6":"2001:db8::7","public_ipv6":"2001:db8::8"}"#,
            r#"{"public_endpoint":{"port":"x"}}"#,
        ] {
            let (p, problem) = public(body);
            assert_eq!(p, PublicIpv6::default(), "{body}");
            assert!(matches!(problem, Some(WireError::Json(_))), "{body}");
        }
        let (p, problem) = PublicIpv6::decode(&vec![b' '; MAX_REPLY + 1]);
        assert_eq!(
            (p, problem),
            (
                PublicIpv6::default(),
                Some(WireError::TooLarge(MAX_REPLY + 1))
            )
        );
    }

    #[test]
    fn error_body_reads_nested_and_flat_forms() {
        let e = ErrorBody::decode(
            br#"{"error":{"code":"NO_ROUTE","message":"no route for demo.echo v1"}}"#,
        )
        .unwrap();
        assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("NO_ROUTE", "no route for demo.echo v1")
        );
        let e = ErrorBody::decode(
            br#"{"error":{"code":"no_route","message":"m","outcome":"rejected","reason":"tenant_access","retry_after_ms":5}}"#,
        )
        .unwrap();
        assert_eq!(e.detail.outcome.as_deref(), Some("rejected"));
        assert_eq!(e.detail.reason.as_deref(), Some("tenant_access"));
        assert_eq!(e.detail.retry_after_ms, Some(5));
        let e = ErrorBody::decode(br#"{"code":"HANDLER_FAILED","message":"boom"}"#).unwrap();
        assert_eq!(e.code, "HANDLER_FAILED");
        assert_eq!(ErrorBody::decode(b"<html>"), None);
        assert_eq!(ErrorBody::decode(br#"{"error":{"message":"x"}}"#), None);
        let long = format!(r#"{{"code":"X","message":"{}"}}"#, "é".repeat(2000));
        assert!(ErrorBody::decode(long.as_bytes()).unwrap().message.len() <= MAX_MESSAGE);
    }

    #[test]
    fn bootstrap_offer_must_be_same_origin() {
        let body = br#"{"schema_version":2,"bootstrap":{"type":"trusted-lan","endpoint":"/agent/v1/bootstrap","token_ttl_seconds":300}}"#;
        assert_eq!(
            bootstrap_offer(body).unwrap().unwrap().endpoint,
            "/agent/v1/bootstrap"
        );
        assert_eq!(bootstrap_offer(br#"{"schema_version":2}"#).unwrap(), None);
        for bad in ["http://evil/x", "//evil/x", "/x?y"] {
            let body = format!(r#"{{"bootstrap":{{"endpoint":"{bad}"}}}}"#);
            assert!(
                matches!(
                    bootstrap_offer(body.as_bytes()),
                    Err(WireError::Field { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn token_grant_is_bounded() {
        let g = TokenGrant::decode(
            br#"{"access_token":"a.b.c","token_type":"Bearer","expires_in":300}"#,
        )
        .unwrap();
        assert_eq!(g.access_token, "a.b.c");
        assert!(TokenGrant::decode(br#"{"access_token":"a b","expires_in":30}"#).is_err());
        assert!(TokenGrant::decode(br#"{"access_token":"a","expires_in":301}"#).is_err());
        assert!(
            TokenGrant::decode(br#"{"access_token":"a","token_type":"mac","expires_in":3}"#)
                .is_err()
        );
    }
}

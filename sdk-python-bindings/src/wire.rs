//! Decoders for the router's JSON replies (LAN SDK API, DESIGN §9).
//!
//! These bytes come from the network, so every decoder bounds the input,
//! rejects duplicate keys (serde's derived visitors do) and returns a typed
//! error naming the field. Unknown fields are accepted: the router may add
//! reply fields (e.g. `public_ipv6` reports) without breaking old SDKs.

use std::fmt;

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

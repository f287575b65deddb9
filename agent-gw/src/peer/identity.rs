//! Whom a call acts for, stated in headers on a link inside our domain
//! (DESIGN §3): the mutually authenticated h2 connection authenticates
//! the sending router, and that router states the call's ingress router,
//! caller, tenant and capability. No signature, no replay cache, no
//! clock agreement.
//!
//! Only the peer listener reads these headers, and only from a link that
//! is not signed; every other listener strips them (`serve::http`), so a
//! caller that sends them gets nothing from them.
//!
//! Values are percent-encoded (a caller's name may hold any UTF-8) and
//! decoded strictly, each bounded like the field it stands for.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::api::envelope::{MAX_AGENT, MAX_INTENT, MAX_TENANT};
use crate::forward::hop::CallIdentity;

pub const INGRESS: HeaderName = HeaderName::from_static("x-agentd-ingress");
pub const CALLER: HeaderName = HeaderName::from_static("x-agentd-caller");
pub const TENANT: HeaderName = HeaderName::from_static("x-agentd-tenant");
pub const CAPABILITY: HeaderName = HeaderName::from_static("x-agentd-capability");
/// Hops the call may still take from the receiving router on (the
/// envelope's `hop_limit` as the sending router left it). A router that
/// passes a call through sends the body on unread (`forward::transit`),
/// so the count travels here, on signed links as well: like the body's
/// own count it is the sender's word, and only ever lowers what the body
/// says.
pub const HOP_LIMIT: HeaderName = HeaderName::from_static("x-agentd-hop-limit");

/// Every header a neighbour states a call's handling with, for the
/// listeners that strip them.
pub const ALL: [HeaderName; 5] = [INGRESS, CALLER, TENANT, CAPABILITY, HOP_LIMIT];

/// Removes every identity header from `headers` (the listeners that do
/// not honour them). A caller's request almost never holds one, so the
/// names are looked for in one pass over its few headers, and only a
/// request that does hold one pays for the removals.
pub fn strip(headers: &mut HeaderMap) {
    if headers.keys().any(|k| ALL.contains(k)) {
        for name in &ALL {
            headers.remove(name);
        }
    }
}

/// Longest router id (a DNS label).
const MAX_ROUTER_ID: usize = 63;

/// Why the identity headers of a request were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentityError {
    /// A header is absent (or sent twice).
    Missing(&'static str),
    /// A header's value is not what the field allows.
    Invalid(&'static str, &'static str),
}

impl std::fmt::Display for IdentityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdentityError::Missing(h) => write!(
                f,
                "a call over a link of our domain needs exactly one {h} header"
            ),
            IdentityError::Invalid(h, why) => write!(f, "header {h}: {why}"),
        }
    }
}

impl std::error::Error for IdentityError {}

/// Writes `who` into `h`.
pub fn encode(who: &CallIdentity, h: &mut HeaderMap) {
    for (name, value) in [
        (INGRESS, &who.origin),
        (CALLER, &who.caller),
        (TENANT, &who.tenant),
        (CAPABILITY, &who.capability),
    ] {
        if let Ok(v) = HeaderValue::from_str(&escape(value)) {
            h.insert(name, v);
        }
    }
}

/// Reads the identity a neighbour stated, bounded and checked.
pub fn decode(h: &HeaderMap) -> Result<CallIdentity, IdentityError> {
    let origin = field(h, &INGRESS, "x-agentd-ingress", MAX_ROUTER_ID)?;
    agentd::route::check_router_id(&origin)
        .map_err(|_| IdentityError::Invalid("x-agentd-ingress", "not a router id"))?;
    let caller = field(h, &CALLER, "x-agentd-caller", MAX_AGENT)?;
    let tenant = field(h, &TENANT, "x-agentd-tenant", MAX_TENANT)?;
    agentd::route::check_tenant(&tenant)
        .map_err(|_| IdentityError::Invalid("x-agentd-tenant", "not a tenant name"))?;
    let capability = field(h, &CAPABILITY, "x-agentd-capability", MAX_INTENT)?;
    agentd::route::check_capability(&capability)
        .map_err(|_| IdentityError::Invalid("x-agentd-capability", "not a capability name"))?;
    Ok(CallIdentity {
        tenant: tenant.into(),
        caller: caller.into(),
        capability: capability.into(),
        origin: origin.into(),
    })
}

/// The hop limit a neighbour stated, if it stated one: exactly one
/// decimal value from 1 to 255.
pub fn hop_limit(h: &HeaderMap) -> Result<Option<u8>, IdentityError> {
    const LABEL: &str = "x-agentd-hop-limit";
    let mut values = h.get_all(&HOP_LIMIT).iter();
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(IdentityError::Missing(LABEL));
    }
    let b = v.as_bytes();
    if b.is_empty() || b.len() > 3 || !b.iter().all(u8::is_ascii_digit) {
        return Err(IdentityError::Invalid(LABEL, "not a number from 1 to 255"));
    }
    match std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<u8>().ok())
    {
        Some(n) if n >= 1 => Ok(Some(n)),
        _ => Err(IdentityError::Invalid(LABEL, "not a number from 1 to 255")),
    }
}

fn field(
    h: &HeaderMap,
    name: &HeaderName,
    label: &'static str,
    max: usize,
) -> Result<String, IdentityError> {
    let mut values = h.get_all(name).iter();
    let (Some(v), None) = (values.next(), values.next()) else {
        return Err(IdentityError::Missing(label));
    };
    // Three bytes of escape per byte at most: longer cannot decode to
    // `max` bytes.
    if v.len() > max.saturating_mul(3) {
        return Err(IdentityError::Invalid(label, "too long"));
    }
    let s = unescape(v.as_bytes()).ok_or(IdentityError::Invalid(
        label,
        "bad percent-encoding or not UTF-8",
    ))?;
    if s.is_empty() {
        return Err(IdentityError::Invalid(label, "empty"));
    }
    if s.len() > max {
        return Err(IdentityError::Invalid(label, "too long"));
    }
    Ok(s)
}

/// Percent-encodes every byte that is not visible ASCII, and `%`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unescape(v: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        match v[i] {
            b'%' => {
                let hex = v.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b if b.is_ascii_graphic() => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_removes_every_identity_header_and_nothing_else() {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, HeaderValue::from_static("*/*"));
        let untouched = h.clone();
        strip(&mut h);
        assert_eq!(h, untouched, "a request without them is left as it is");
        for name in &ALL {
            h.append(name, HeaderValue::from_static("a"));
            h.append(name, HeaderValue::from_static("b"));
        }
        strip(&mut h);
        assert_eq!(h, untouched, "every value of every identity header goes");
    }

    fn who() -> CallIdentity {
        CallIdentity {
            tenant: "lab".into(),
            caller: "agent://lab/caller é 100%".into(),
            capability: "demo.echo".into(),
            origin: "router-c".into(),
        }
    }

    #[test]
    fn what_is_encoded_decodes_to_the_same_identity() {
        let mut h = HeaderMap::new();
        encode(&who(), &mut h);
        assert_eq!(h["x-agentd-caller"], "agent://lab/caller%20%C3%A9%20100%25");
        assert_eq!(decode(&h).unwrap(), who());
    }

    #[test]
    fn a_hop_limit_is_one_number_from_1_to_255_or_absent() {
        let mut h = HeaderMap::new();
        assert_eq!(hop_limit(&h), Ok(None));
        h.insert(HOP_LIMIT, HeaderValue::from(7u16));
        assert_eq!(hop_limit(&h), Ok(Some(7)));
        for bad in ["0", "256", "-1", "+3", " 3", "1000", "", "x"] {
            h.insert(HOP_LIMIT, HeaderValue::from_str(bad).unwrap());
            assert!(
                matches!(hop_limit(&h), Err(IdentityError::Invalid(..))),
                "{bad:?}"
            );
        }
        h.insert(HOP_LIMIT, HeaderValue::from_static("3"));
        h.append(HOP_LIMIT, HeaderValue::from_static("9"));
        assert_eq!(
            hop_limit(&h),
            Err(IdentityError::Missing("x-agentd-hop-limit"))
        );
    }

    #[test]
    fn missing_doubled_and_bad_values_are_typed_refusals() {
        let mut h = HeaderMap::new();
        encode(&who(), &mut h);
        let mut missing = h.clone();
        missing.remove("x-agentd-tenant");
        assert_eq!(
            decode(&missing),
            Err(IdentityError::Missing("x-agentd-tenant"))
        );
        let mut twice = h.clone();
        twice.append("x-agentd-ingress", HeaderValue::from_static("router-d"));
        assert_eq!(
            decode(&twice),
            Err(IdentityError::Missing("x-agentd-ingress"))
        );
        for (name, value) in [
            ("x-agentd-tenant", "bad tenant"),
            ("x-agentd-tenant", "%zz"),
            ("x-agentd-caller", "%FF"),
            ("x-agentd-ingress", "Not_A_Label"),
            ("x-agentd-capability", ""),
        ] {
            let mut bad = h.clone();
            bad.insert(
                HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            );
            assert!(
                matches!(decode(&bad), Err(IdentityError::Invalid(..))),
                "{name}: {value}"
            );
        }
        let mut long = h.clone();
        long.insert(
            CALLER,
            HeaderValue::from_str(&"a".repeat(MAX_AGENT + 1)).unwrap(),
        );
        assert_eq!(
            decode(&long),
            Err(IdentityError::Invalid("x-agentd-caller", "too long"))
        );
    }
}

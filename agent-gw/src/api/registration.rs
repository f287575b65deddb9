//! Lease requests: register, renew, unregister (nexilume's
//! `CapabilityRegistration` / `LeaseInfo` shapes plus our extensions).
//!
//! Decoding only; the decision is agentd's (see `control`).

use bytes::Bytes;
use serde_json::{json, Map, Value};

use agentd::route::{attr_default, Access, Attributes, Contract, Effect, RouteId};

use crate::api::envelope::DecodeError;
use crate::api::fields::{self, err, Problem};
use crate::api::json;
use crate::target::Target;

/// Longest lease a request may ask for (agentd clamps into its bounds).
pub const MAX_LEASE_REQUEST_S: u64 = 86_400;
const MAX_SCHEMA_BYTES: usize = 8192;
const MAX_DESCRIPTION: usize = 512;
const MAX_ACCESS_ITEMS: usize = 32;

/// Optional fields accepted but not acted on yet; echoed in `ignored`.
const UNSUPPORTED: [&str; 2] = ["backend_tls", "cloud"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub capability: Box<str>,
    pub version: u32,
    pub origin: Box<str>,
    pub endpoint: Box<str>,
    pub tenant: Box<str>,
    pub region: Box<str>,
    pub route_id: Option<RouteId>,
    pub attrs: Attributes,
    pub lease_seconds: Option<u64>,
    pub contract: Option<Contract>,
    pub access: Access,
    /// The agent asks for a public IPv6 address: nexilume's
    /// `public_ipv6: "auto"` (its default) or `true`.
    pub public_ipv6: bool,
    pub ignored: Vec<&'static str>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renewal {
    pub route_id: RouteId,
    pub lease_seconds: Option<u64>,
    pub latency_ms: Option<u64>,
    pub load_permille: Option<u64>,
    pub healthy: Option<bool>,
    pub endpoint: Option<Box<str>>,
    pub ignored: Vec<&'static str>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unregistration {
    pub route_id: RouteId,
}

/// What register/renew/unregister answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseReply {
    pub route_id: RouteId,
    pub generation: u64,
    pub lease_seconds: u64,
    pub removed: bool,
    pub ignored: Vec<&'static str>,
    /// What became of the registration's `public_ipv6` request, if it
    /// made one (the front end renders it with how the address is
    /// served, docs/ipv6.md).
    pub public_ipv6: Option<agentd::ipc::message::Ipv6Grant>,
}

impl LeaseReply {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "route_id": self.route_id.as_str(),
            "generation": self.generation,
            "lease_seconds": self.lease_seconds,
            "removed": self.removed,
        });
        if !self.ignored.is_empty() {
            v["ignored"] = json!(self.ignored);
        }
        v
    }
}

fn ignored(doc: &Map<String, Value>) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = UNSUPPORTED
        .iter()
        .copied()
        .filter(|k| doc.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    // A value that is neither a request nor a refusal: not understood,
    // never a failure (the registration itself stands).
    if doc
        .get("public_ipv6")
        .is_some_and(|v| !v.is_null() && !v.is_boolean() && v != "auto")
    {
        out.insert(0, "public_ipv6");
    }
    out
}

/// Whether the registration asks for a public IPv6 address.
fn wants_public_ipv6(doc: &Map<String, Value>) -> bool {
    matches!(doc.get("public_ipv6"), Some(Value::Bool(true)))
        || doc.get("public_ipv6").is_some_and(|v| v == "auto")
}

fn route_id(doc: &Map<String, Value>) -> Result<Option<RouteId>, DecodeError> {
    match fields::opt_str(doc, "route_id", agentd::route::MAX_ID_LEN)? {
        None => Ok(None),
        Some(s) => {
            Ok(Some(RouteId::new(s).map_err(|_| {
                err("route_id", Problem::Invalid("not a route id"))
            })?))
        }
    }
}

fn endpoint(doc: &Map<String, Value>, required: bool) -> Result<Option<Box<str>>, DecodeError> {
    let s = if required {
        Some(fields::req_str(
            doc,
            "endpoint",
            agentd::route::MAX_ENDPOINT_LEN,
        )?)
    } else {
        fields::opt_str(doc, "endpoint", agentd::route::MAX_ENDPOINT_LEN)?
    };
    match s {
        None => Ok(None),
        Some(s) => {
            Target::parse(s).map_err(|e| err("endpoint", Problem::Invalid(e.message())))?;
            Ok(Some(s.into()))
        }
    }
}

/// An optional route attribute in the range the schema gives it (the same
/// rule agentd applies: `agentd::route::check_attr`).
fn attr(doc: &Map<String, Value>, field: &'static str) -> Result<Option<u64>, DecodeError> {
    let option = agentd::route::ATTR_FIELDS
        .iter()
        .find(|(f, _)| *f == field)
        .map_or(field, |(_, o)| o);
    let (min, max) = agentd::route::attr_range(option);
    Ok(fields::opt_uint(doc, field, min, max)?)
}

fn contract(doc: &Map<String, Value>) -> Result<Option<Contract>, DecodeError> {
    let Some(c) = fields::opt_object(doc, "contract")? else {
        return Ok(None);
    };
    let effect =
        match fields::opt_str(c, "effect", 16).map_err(|e| err("contract.effect", e.problem))? {
            None | Some("write") => Effect::Write,
            Some("read") => Effect::Read,
            Some("external") => Effect::External,
            Some(_) => {
                return Err(err(
                    "contract.effect",
                    Problem::Invalid("must be read, write or external"),
                )
                .into())
            }
        };
    let idempotent =
        fields::opt_bool(c, "idempotent").map_err(|e| err("contract.idempotent", e.problem))?;
    let input_schema = match fields::opt_object(c, "input_schema")
        .map_err(|e| err("contract.input_schema", e.problem))?
    {
        None => None,
        Some(s) => {
            let text = Value::Object(s.clone()).to_string();
            if text.len() > MAX_SCHEMA_BYTES {
                return Err(
                    err("contract.input_schema", Problem::TooLong(MAX_SCHEMA_BYTES)).into(),
                );
            }
            Some(text.into_boxed_str())
        }
    };
    let description = fields::opt_str(c, "description", MAX_DESCRIPTION)
        .map_err(|e| err("contract.description", e.problem))?
        .map(Into::into);
    Ok(Some(Contract {
        effect,
        idempotent: idempotent.unwrap_or(false),
        input_schema,
        description,
    }))
}

impl Registration {
    pub fn decode(bytes: &Bytes) -> Result<Registration, DecodeError> {
        let doc = json::parse_object(bytes)?;
        let capability = fields::req_str(&doc, "intent", agentd::route::MAX_ID_LEN)?;
        agentd::route::check_capability(capability)
            .map_err(|_| err("intent", Problem::Invalid("not a capability name")))?;
        let version = fields::opt_uint(&doc, "version", 1, u32::MAX as u64)?.unwrap_or(1) as u32;
        let origin = fields::req_str(&doc, "origin", 2 * agentd::route::MAX_ID_LEN)?;
        agentd::route::check_agent_uri(origin).map_err(|_| {
            err(
                "origin",
                Problem::Invalid("must be agent://<tenant>/<name>"),
            )
        })?;
        let tenant = fields::req_str(&doc, "tenant", agentd::route::MAX_ID_LEN)?;
        agentd::route::check_tenant(tenant)
            .map_err(|_| err("tenant", Problem::Invalid("not a tenant name")))?;
        let region = fields::opt_str(&doc, "region", agentd::route::MAX_ID_LEN)?.unwrap_or("local");
        let attrs = Attributes {
            latency_ms: attr(&doc, "latency_ms")?.unwrap_or(attr_default("latency_ms")),
            cost_micros: attr(&doc, "cost_microunits")?.unwrap_or(attr_default("cost")),
            load_permille: attr(&doc, "load_permille")?.unwrap_or(attr_default("load")),
            trust: attr(&doc, "trust")?.unwrap_or(attr_default("trust")),
        };
        fields::opt_uint(&doc, "hop_count", 0, 255)?;
        let lease_seconds = fields::opt_uint(&doc, "lease_seconds", 1, MAX_LEASE_REQUEST_S)?;
        let access = Access {
            allowed_tenants: fields::opt_str_list(
                &doc,
                "allowed_tenants",
                MAX_ACCESS_ITEMS,
                agentd::route::MAX_ID_LEN,
            )?,
            allowed_sources: fields::opt_str_list(&doc, "allowed_sources", MAX_ACCESS_ITEMS, 255)?,
        };
        Ok(Registration {
            capability: capability.into(),
            version,
            origin: origin.into(),
            endpoint: endpoint(&doc, true)?.unwrap_or_default(),
            tenant: tenant.into(),
            region: region.into(),
            route_id: route_id(&doc)?,
            attrs,
            lease_seconds,
            contract: contract(&doc)?,
            access,
            public_ipv6: wants_public_ipv6(&doc),
            ignored: ignored(&doc),
        })
    }
}

impl Renewal {
    pub fn decode(bytes: &Bytes) -> Result<Renewal, DecodeError> {
        let doc = json::parse_object(bytes)?;
        Ok(Renewal {
            route_id: route_id(&doc)?.ok_or(err("route_id", Problem::Missing))?,
            lease_seconds: fields::opt_uint(&doc, "lease_seconds", 1, MAX_LEASE_REQUEST_S)?,
            latency_ms: attr(&doc, "latency_ms")?,
            load_permille: attr(&doc, "load_permille")?,
            healthy: fields::opt_bool(&doc, "healthy")?,
            endpoint: endpoint(&doc, false)?,
            ignored: ignored(&doc),
        })
    }
}

impl Unregistration {
    pub fn decode(bytes: &Bytes) -> Result<Unregistration, DecodeError> {
        let doc = json::parse_object(bytes)?;
        Ok(Unregistration {
            route_id: route_id(&doc)?.ok_or(err("route_id", Problem::Missing))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(s: &str) -> Result<Registration, DecodeError> {
        Registration::decode(&Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn decodes_the_nexilume_registration_and_reports_unsupported_fields() {
        let r = reg(r#"{"intent":"demo.echo","origin":"agent://lab/echo","endpoint":"http://192.0.2.5:4000/invoke",
            "tenant":"lab","version":1,"region":"local","cost_microunits":0,"latency_ms":3,"trust":50,
            "load_permille":0,"hop_count":0,"lease_seconds":300,"public_ipv6":"auto"}"#)
        .unwrap();
        assert_eq!(&*r.capability, "demo.echo");
        assert_eq!(r.attrs.latency_ms, 3);
        assert_eq!(r.lease_seconds, Some(300));
        assert_eq!(r.route_id, None);
        assert!(r.public_ipv6, "nexilume's default asks for an address");
        assert!(r.ignored.is_empty(), "{:?}", r.ignored);
        assert_eq!(r.contract, None);
        let base = r#"{"intent":"demo.echo","origin":"agent://lab/echo","endpoint":"http://192.0.2.5:4000/invoke","tenant":"lab""#;
        for (value, asks, ignored) in [
            ("true", true, false),
            ("false", false, false),
            ("null", false, false),
            ("\"2001:db8::1\"", false, true),
            ("7", false, true),
        ] {
            let r = reg(&format!(r#"{base},"public_ipv6":{value}}}"#)).unwrap();
            assert_eq!(r.public_ipv6, asks, "{value}");
            assert_eq!(r.ignored.contains(&"public_ipv6"), ignored, "{value}");
        }
    }

    #[test]
    fn decodes_our_contract_extension() {
        let r = reg(r#"{"intent":"kv.get","origin":"agent://lab/kv","endpoint":"http://[2001:db8::5]:80/",
            "tenant":"lab","route_id":"r-1","contract":{"effect":"read","idempotent":true,"input_schema":{"type":"object"}}}"#)
        .unwrap();
        let c = r.contract.unwrap();
        assert!(c.idempotent);
        assert_eq!(c.effect, Effect::Read);
        assert_eq!(c.input_schema.as_deref(), Some(r#"{"type":"object"}"#));
        assert_eq!(r.route_id.unwrap().as_str(), "r-1");
    }

    #[test]
    fn refuses_bad_registrations_with_the_field_named() {
        let e =
            reg(r#"{"intent":"x","origin":"lab/echo","endpoint":"http://h:1/","tenant":"lab"}"#)
                .unwrap_err();
        assert!(e.to_string().contains("origin"), "{e}");
        let e = reg(
            r#"{"intent":"x","origin":"agent://lab/e","endpoint":"https://h:1/","tenant":"lab"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("http://"), "{e}");
        let e = reg(r#"{"intent":"x","origin":"agent://lab/e","endpoint":"http://h:1/","tenant":"lab","trust":101}"#)
            .unwrap_err();
        assert!(e.to_string().contains("trust"), "{e}");
    }

    #[test]
    fn attribute_and_port_rules_are_the_shared_models() {
        let base = r#"{"intent":"x","origin":"agent://lab/e","endpoint":"http://192.0.2.5:1/","tenant":"lab""#;
        let e = reg(&format!(r#"{base},"load_permille":5000}}"#)).unwrap_err();
        assert!(e.to_string().contains("load_permille"), "{e}");
        assert!(reg(&format!(r#"{base},"load_permille":1000}}"#)).is_ok());
        let e = Renewal::decode(&Bytes::from_static(
            br#"{"route_id":"r-1","load_permille":1001}"#,
        ))
        .unwrap_err();
        assert!(e.to_string().contains("load_permille"), "{e}");
        let port0 = base.replace(":1/", ":0/") + "}";
        assert!(reg(&port0).unwrap_err().to_string().contains("port"));
        // No port means 80, as agentd and the forwarder read it too.
        let r = reg(&(base.replace(":1/", "/") + "}")).unwrap();
        assert_eq!(
            agentd::endpoint::Endpoint::parse(&r.endpoint).unwrap().port,
            80
        );
        assert_eq!(reg(&(base.to_string() + "}")).unwrap().attrs.trust, 50);
    }

    #[test]
    fn renew_and_unregister_need_a_route_id() {
        assert!(Renewal::decode(&Bytes::from_static(b"{}"))
            .unwrap_err()
            .to_string()
            .contains("route_id"));
        let r = Renewal::decode(&Bytes::from_static(
            br#"{"route_id":"r-1","lease_seconds":30,"healthy":true}"#,
        ))
        .unwrap();
        assert_eq!(r.healthy, Some(true));
        assert_eq!(
            Unregistration::decode(&Bytes::from_static(br#"{"route_id":"r-9"}"#))
                .unwrap()
                .route_id
                .as_str(),
            "r-9"
        );
    }

    #[test]
    fn lease_reply_matches_nexilume_lease_info() {
        let r = LeaseReply {
            route_id: RouteId::new("r-1").unwrap(),
            generation: 3,
            lease_seconds: 30,
            removed: false,
            ignored: vec![],
            public_ipv6: None,
        };
        assert_eq!(
            r.to_json(),
            json!({"route_id":"r-1","generation":3,"lease_seconds":30,"removed":false})
        );
    }
}

//! The Nexus invocation envelope (`route`, `invoke`, `invoke-stream`).
//!
//! Decoded strictly (see `api::json`) and validated like the nexilume
//! agent server validates it, so a request we accept is one the handler
//! accepts too. The original bytes are kept: the handler gets the
//! protocol's members of what the caller sent (unknown top-level members
//! dropped, the payload byte for byte), with the gateway's own values for
//! `hop_limit` and, with auth on, `tenant`/`source_agent` (see
//! `api::handler_body`).
//!
//! Decoding validates the whole body but builds only the members routing
//! needs (see `json::parse_sketch`); the full document is built on first
//! use, which plain synchronous invocations never need.

use std::cell::OnceCell;
use std::fmt;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::api::error::{ApiError, ErrorCode};
use crate::api::fields::{self, err, FieldError, Problem};
use crate::api::handler_body;
use crate::api::json::{self, JsonError, Keep};
use crate::api::scan;

pub const MAX_INTENT: usize = 127;
pub const MAX_TASK_ID: usize = 127;
pub const MAX_AGENT: usize = 255;
pub const MAX_TENANT: usize = 95;
/// Largest caller timeout honoured (5 min).
pub const MAX_TIMEOUT_MS: u64 = 300_000;
/// Largest resume cursor (i64::MAX, as nexilume).
pub const MAX_CURSOR: u64 = i64::MAX as u64;
/// nexilume's direct task control rides in the payload under this key.
pub const DIRECT_TASK_CONTROL: &str = "nexus_direct_task_control";

/// The members `from_slots` reads, in slot order (see the `AT_*`
/// indices): the rest of the body is validated only.
const ROUTING: &[(&str, Keep)] = &[
    ("version", Keep::Whole),
    ("intent", Keep::Whole),
    ("intent_version", Keep::Whole),
    ("task_id", Keep::Whole),
    ("source_agent", Keep::Whole),
    ("tenant", Keep::Whole),
    ("hop_limit", Keep::Whole),
    (
        "payload",
        Keep::Members(&[(DIRECT_TASK_CONTROL, Keep::Whole)]),
    ),
    ("constraints", Keep::Members(&[("timeout_ms", Keep::Whole)])),
    ("target_agent", Keep::Whole),
    ("resume_from_event_id", Keep::Whole),
];
const AT_VERSION: usize = 0;
const AT_INTENT: usize = 1;
const AT_INTENT_VERSION: usize = 2;
const AT_TASK_ID: usize = 3;
const AT_SOURCE_AGENT: usize = 4;
const AT_TENANT: usize = 5;
const AT_HOP_LIMIT: usize = 6;
const AT_PAYLOAD: usize = 7;
const AT_CONSTRAINTS: usize = 8;
const AT_TARGET_AGENT: usize = 9;
const AT_RESUME_FROM: usize = 10;

/// Why a request body could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Json(JsonError),
    Field(FieldError),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Json(e) => e.fmt(f),
            DecodeError::Field(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DecodeError {}

impl From<JsonError> for DecodeError {
    fn from(e: JsonError) -> Self {
        DecodeError::Json(e)
    }
}

impl From<FieldError> for DecodeError {
    fn from(e: FieldError) -> Self {
        DecodeError::Field(e)
    }
}

impl From<DecodeError> for ApiError {
    fn from(e: DecodeError) -> ApiError {
        match e {
            DecodeError::Json(j @ JsonError::DuplicateKey(_)) => {
                ApiError::new(ErrorCode::DuplicateKey, j.to_string())
            }
            DecodeError::Json(j) => ApiError::new(ErrorCode::InvalidJson, j.to_string()),
            DecodeError::Field(f) if f.field == "resume_from_event_id" => {
                ApiError::new(ErrorCode::InvalidCursor, f.to_string())
            }
            DecodeError::Field(f) => f.into(),
        }
    }
}

/// The fields of a call a protocol front end makes (`Envelope::for_call`).
#[derive(Clone, Debug)]
pub struct NewCall<'a> {
    pub intent: &'a str,
    pub intent_version: u32,
    pub task_id: &'a str,
    pub tenant: &'a str,
    pub source_agent: &'a str,
    pub hop_limit: u8,
    /// What the handler receives: tool arguments, a message's parts.
    pub payload: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub intent: Box<str>,
    pub intent_version: u32,
    pub task_id: Box<str>,
    pub source_agent: Box<str>,
    pub tenant: Box<str>,
    pub hop_limit: u8,
    pub target_agent: Option<Box<str>>,
    /// Stream resume cursor from the body (`resume_from_event_id`).
    pub resume_from: Option<u64>,
    /// `constraints.timeout_ms`, the caller's budget.
    pub timeout_ms: Option<u64>,
    /// `payload.nexus_direct_task_control`, when present and not null.
    direct_control: Option<Value>,
    /// The whole document, built from `original` on first use.
    doc: OnceCell<Map<String, Value>>,
    /// The received bytes.
    original: Option<Bytes>,
    /// Where `original`'s top-level members are, when the scanner found
    /// them (the handler body is spliced from them, not scanned again).
    members: Option<Vec<scan::Member>>,
}

impl Envelope {
    /// Decodes one request body.
    pub fn decode(bytes: Bytes) -> Result<Envelope, DecodeError> {
        let (slots, members) =
            json::sketch_with_members(&bytes, ROUTING, &handler_body::HANDLER_MEMBERS)?;
        let mut env = Envelope::from_slots(&slots)?;
        env.direct_control = slots[AT_PAYLOAD]
            .as_ref()
            .and_then(|p| p.get(DIRECT_TASK_CONTROL))
            .filter(|c| !c.is_null())
            .cloned();
        env.original = Some(bytes);
        env.members = members;
        Ok(env)
    }

    /// The envelope of a call a protocol front end makes (MCP, A2A):
    /// built from typed fields, checked by the same rules as a decoded
    /// one, never a document decoded again.
    pub fn for_call(c: NewCall<'_>) -> Result<Envelope, ApiError> {
        let check = |ok: bool, field: &'static str, why: &'static str| {
            if ok {
                Ok(())
            } else {
                Err(ApiError::from(err(field, Problem::Invalid(why))))
            }
        };
        check(
            agentd::route::check_capability(c.intent).is_ok() && c.intent.len() <= MAX_INTENT,
            "intent",
            "not a capability name",
        )?;
        check(
            c.intent_version >= 1,
            "intent_version",
            "must be at least 1",
        )?;
        check(
            !c.task_id.is_empty() && c.task_id.len() <= MAX_TASK_ID,
            "task_id",
            "must be 1 to 127 bytes",
        )?;
        check(
            agentd::route::check_tenant(c.tenant).is_ok() && c.tenant.len() <= MAX_TENANT,
            "tenant",
            "not a tenant name",
        )?;
        check(
            !c.source_agent.is_empty() && c.source_agent.len() <= MAX_AGENT,
            "source_agent",
            "must be 1 to 255 bytes",
        )?;
        check(c.hop_limit >= 1, "hop_limit", "must be at least 1")?;
        check(!c.payload.is_null(), "payload", "must not be null")?;
        let mut doc = Map::new();
        doc.insert("version".into(), "1.0".into());
        doc.insert("intent".into(), c.intent.into());
        doc.insert("intent_version".into(), c.intent_version.into());
        doc.insert("task_id".into(), c.task_id.into());
        doc.insert("source_agent".into(), c.source_agent.into());
        doc.insert("tenant".into(), c.tenant.into());
        doc.insert("hop_limit".into(), c.hop_limit.into());
        doc.insert("payload".into(), c.payload);
        let bytes = Bytes::from(Value::Object(doc.clone()).to_string());
        Ok(Envelope {
            intent: c.intent.into(),
            intent_version: c.intent_version,
            task_id: c.task_id.into(),
            source_agent: c.source_agent.into(),
            tenant: c.tenant.into(),
            hop_limit: c.hop_limit,
            target_agent: None,
            resume_from: None,
            timeout_ms: None,
            direct_control: None,
            doc: OnceCell::from(doc),
            original: Some(bytes),
            members: None,
        })
    }

    fn from_slots(slots: &json::Slots) -> Result<Envelope, FieldError> {
        let at = |i: usize| slots.get(i).and_then(Option::as_ref);
        let req_str = |i: usize, field: &'static str, max: usize| {
            fields::str_of(at(i), field, max)?.ok_or(err(field, Problem::Missing))
        };
        let req_uint = |i: usize, field: &'static str, min: u64, max: u64| {
            fields::uint_of(at(i), field, min, max)?.ok_or(err(field, Problem::Missing))
        };
        let version = req_str(AT_VERSION, "version", 16)?;
        if version != "1.0" {
            return Err(err("version", Problem::Invalid("must be \"1.0\"")));
        }
        let intent = req_str(AT_INTENT, "intent", MAX_INTENT)?;
        agentd::route::check_capability(intent)
            .map_err(|_| err("intent", Problem::Invalid("not a capability name")))?;
        let intent_version =
            req_uint(AT_INTENT_VERSION, "intent_version", 1, u32::MAX as u64)? as u32;
        let task_id = req_str(AT_TASK_ID, "task_id", MAX_TASK_ID)?;
        let source_agent = req_str(AT_SOURCE_AGENT, "source_agent", MAX_AGENT)?;
        let tenant = req_str(AT_TENANT, "tenant", MAX_TENANT)?;
        agentd::route::check_tenant(tenant)
            .map_err(|_| err("tenant", Problem::Invalid("not a tenant name")))?;
        let hop_limit = req_uint(AT_HOP_LIMIT, "hop_limit", 1, 255)? as u8;
        match at(AT_PAYLOAD) {
            None | Some(Value::Null) => return Err(err("payload", Problem::Missing)),
            Some(_) => {}
        }
        let constraints = fields::object_of(at(AT_CONSTRAINTS), "constraints")?;
        let timeout_ms = match constraints {
            Some(c) => fields::opt_uint(c, "timeout_ms", 1, MAX_TIMEOUT_MS)
                .map_err(|e| err("constraints.timeout_ms", e.problem))?,
            None => None,
        };
        let target_agent =
            fields::str_of(at(AT_TARGET_AGENT), "target_agent", MAX_AGENT)?.map(Into::into);
        let resume_from =
            fields::uint_of(at(AT_RESUME_FROM), "resume_from_event_id", 0, MAX_CURSOR)?;
        Ok(Envelope {
            intent: intent.into(),
            intent_version,
            task_id: task_id.into(),
            source_agent: source_agent.into(),
            tenant: tenant.into(),
            hop_limit,
            target_agent,
            resume_from,
            timeout_ms,
            direct_control: None,
            original: None,
            members: None,
            doc: OnceCell::new(),
        })
    }

    /// Writes the verified caller identity over whatever the body claimed.
    pub fn apply_identity(&mut self, tenant: &str, source_agent: &str) {
        if *self.tenant != *tenant {
            self.doc();
            self.tenant = tenant.into();
            if let Some(doc) = self.doc.get_mut() {
                doc.insert("tenant".into(), tenant.into());
            }
        }
        if *self.source_agent != *source_agent {
            self.doc();
            self.source_agent = source_agent.into();
            if let Some(doc) = self.doc.get_mut() {
                doc.insert("source_agent".into(), source_agent.into());
            }
        }
    }

    /// [`Envelope::to_bytes`], and the received bytes let go: a call
    /// forwarded as it is needs nothing more of them, and they are a slice
    /// of the caller connection's read buffer, which they would hold for
    /// the whole call. The routing fields stay; the document must have been
    /// built before, if it is wanted after (debug builds check).
    pub fn take_handler_body(&mut self) -> Bytes {
        let body = self.to_bytes();
        self.original = None;
        self.members = None;
        body
    }

    /// The decoded document (for stream fingerprints and tests).
    pub fn doc(&self) -> &Map<String, Value> {
        debug_assert!(
            self.original.is_some() || self.doc.get().is_some(),
            "an envelope's document asked for after its bytes were let go (take_handler_body)"
        );
        self.doc.get_or_init(|| {
            // `original` passed the same strict rules in `decode`, so this
            // parse succeeds; the document is only dropped on a change,
            // after it was built.
            self.original
                .as_deref()
                .and_then(|b| json::parse_object(b).ok())
                .unwrap_or_default()
        })
    }

    /// `payload.nexus_direct_task_control`, if the caller sent one.
    pub fn direct_task_control(&self) -> Option<&Value> {
        self.direct_control.as_ref()
    }

    /// Takes the hop this forward uses (DESIGN §7, [`next_hop_limit`]):
    /// the handler or next gateway gets what is left.
    pub fn consume_hop(&mut self, cap: u8, router: &str) -> Result<(), ApiError> {
        self.hop_limit = next_hop_limit(self.hop_limit, cap, router, &self.intent)?;
        Ok(())
    }

    /// Lowers the hops left to what the sending router stated beside the
    /// body (`x-agentd-hop-limit`): a router that passed the call through
    /// counted its hop there, not in the body.
    pub fn limit_hops(&mut self, stated: u8) {
        self.hop_limit = self.hop_limit.min(stated);
    }

    /// The body a handler receives (docs/sdk-api.md): the protocol's
    /// members of the caller's envelope, payload byte for byte, with the
    /// gateway's `hop_limit`, `tenant` and `source_agent`.
    pub fn to_bytes(&self) -> Bytes {
        let o = handler_body::Overrides {
            tenant: &self.tenant,
            source_agent: &self.source_agent,
            hop_limit: self.hop_limit,
        };
        let spliced = match (self.original.as_deref(), &self.members) {
            (Some(src), Some(members)) => handler_body::splice(src, members, o),
            (Some(src), None) => handler_body::build(src, o),
            (None, _) => None,
        };
        if let Some(b) = spliced {
            return Bytes::from(b);
        }
        // Not expected (the bytes passed the strict decoder): re-encode
        // the decoded document under the same rules.
        let mut doc = Map::new();
        for (k, v) in self.doc() {
            if handler_body::HANDLER_MEMBERS.contains(&k.as_str()) {
                doc.insert(k.clone(), v.clone());
            }
        }
        doc.insert("tenant".into(), (*self.tenant).into());
        doc.insert("source_agent".into(), (*self.source_agent).into());
        doc.insert("hop_limit".into(), self.hop_limit.into());
        Bytes::from(Value::Object(doc).to_string())
    }
}

/// The hops a call arriving at `router` with `arrived` left may take on:
/// one fewer, capped at the gateway's own `hop_limit`; a call arriving
/// with 1 has none left and is refused before dispatch, which ends any
/// forwarding loop. The refusal names `router` (the caller may be several
/// routers away) and the hop_limit the call arrived with.
pub fn next_hop_limit(
    arrived: u8,
    cap: u8,
    router: &str,
    capability: &str,
) -> Result<u8, ApiError> {
    if arrived <= 1 {
        return Err(ApiError::new(
            ErrorCode::HopLimitExceeded,
            format!(
                "{capability} not forwarded by router {router}: the call arrived with hop_limit {arrived}, which leaves no hop (a forwarding loop, or more routers on the path than the caller's hop_limit or a gateway.hop_limit on the way allows; docs/data-plane.md, \"Hop limit\")"
            ),
        )
        .rejected()
        .capability(capability));
    }
    Ok((arrived - 1).min(cap.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(s: &str) -> Result<Envelope, DecodeError> {
        Envelope::decode(Bytes::copy_from_slice(s.as_bytes()))
    }

    const OK: &str = r#"{"version":"1.0","intent":"demo.echo","intent_version":1,"task_id":"t1",
        "source_agent":"agent://lab/caller","tenant":"lab","hop_limit":8,"constraints":{"timeout_ms":500},
        "payload":{"x":1}}"#;

    /// A forwarded call's envelope lets go of the received bytes (a slice
    /// of the caller connection's read buffer) once the handler body is
    /// built, and keeps what routing reads.
    #[test]
    fn the_handler_body_taken_releases_the_received_bytes() {
        let received = Bytes::copy_from_slice(OK.as_bytes());
        let mut e = Envelope::decode(received.clone()).unwrap();
        let expected = e.to_bytes();
        assert!(!received.is_unique());
        assert_eq!(e.take_handler_body(), expected);
        assert!(received.is_unique());
        assert_eq!(&*e.intent, "demo.echo");
        assert_eq!(&*e.tenant, "lab");
        assert_eq!(e.hop_limit, 8);
    }

    #[test]
    fn slot_indices_name_their_members() {
        let names = [
            (AT_VERSION, "version"),
            (AT_INTENT, "intent"),
            (AT_INTENT_VERSION, "intent_version"),
            (AT_TASK_ID, "task_id"),
            (AT_SOURCE_AGENT, "source_agent"),
            (AT_TENANT, "tenant"),
            (AT_HOP_LIMIT, "hop_limit"),
            (AT_PAYLOAD, "payload"),
            (AT_CONSTRAINTS, "constraints"),
            (AT_TARGET_AGENT, "target_agent"),
            (AT_RESUME_FROM, "resume_from_event_id"),
        ];
        assert_eq!(names.len(), ROUTING.len());
        for (i, name) in names {
            assert_eq!(ROUTING[i].0, name);
        }
    }

    #[test]
    fn direct_task_control_and_constraints_are_read_from_the_sketch() {
        let e = env(&OK.replace(
            r#""payload":{"x":1}"#,
            r#""payload":{"x":1,"nexus_direct_task_control":{"action":"status"}}"#,
        ))
        .unwrap();
        assert_eq!(e.direct_task_control().unwrap()["action"], "status");
        assert_eq!(e.timeout_ms, Some(500));
        assert!(env(OK).unwrap().direct_task_control().is_none());
        let code = |s: &str| ApiError::from(env(s).unwrap_err()).code;
        assert_eq!(
            code(&OK.replace(
                r#""constraints":{"timeout_ms":500}"#,
                r#""constraints":[1]"#
            )),
            ErrorCode::InvalidField
        );
        assert_eq!(
            code(&OK.replace(r#""payload":{"x":1}"#, r#""other":{"x":1}"#)),
            ErrorCode::InvalidField
        );
    }

    #[test]
    fn decodes_a_nexilume_envelope_and_keeps_its_bytes() {
        let e = env(OK).unwrap();
        assert_eq!(&*e.intent, "demo.echo");
        assert_eq!(e.timeout_ms, Some(500));
        // Untouched: the same members with the same values (only the
        // whitespace between members is the gateway's).
        let got: Value = serde_json::from_slice(&e.to_bytes()).unwrap();
        assert_eq!(got, serde_json::from_str::<Value>(OK).unwrap());
    }

    #[test]
    fn each_forward_takes_one_hop_and_the_last_one_is_refused() {
        let mut e = env(OK).unwrap();
        e.consume_hop(64, "router-a").unwrap();
        assert_eq!(e.hop_limit, 7);
        let v: Value = serde_json::from_slice(&e.to_bytes()).unwrap();
        assert_eq!(v["hop_limit"], 7);
        e.consume_hop(3, "router-a").unwrap();
        assert_eq!(e.hop_limit, 3, "capped by the gateway's hop_limit");
        let mut last = env(&OK.replace(r#""hop_limit":8"#, r#""hop_limit":1"#)).unwrap();
        let err = last.consume_hop(8, "router-b").unwrap_err();
        assert_eq!(err.code, ErrorCode::HopLimitExceeded);
        assert!(
            err.message.contains("router router-b") && err.message.contains("hop_limit 1"),
            "names the refusing router and the hop count: {}",
            err.message
        );
        assert_eq!(err.outcome, Some(crate::api::error::Outcome::Rejected));
    }

    #[test]
    fn identity_overwrite_changes_the_forwarded_document() {
        let mut e = env(OK).unwrap();
        e.apply_identity("other", "agent://other/x");
        let v: Value = serde_json::from_slice(&e.to_bytes()).unwrap();
        assert_eq!(v["tenant"], "other");
        assert_eq!(v["source_agent"], "agent://other/x");
        assert_eq!(v["payload"]["x"], 1);
    }

    #[test]
    fn typed_errors_for_each_bad_input() {
        let code = |s: &str| ApiError::from(env(s).unwrap_err()).code;
        assert_eq!(code("{"), ErrorCode::InvalidJson);
        assert_eq!(
            code(&OK.replace(r#""hop_limit":8"#, r#""hop_limit":8,"hop_limit":9"#)),
            ErrorCode::DuplicateKey
        );
        assert_eq!(
            code(&OK.replace(r#""version":"1.0""#, r#""version":"2.0""#)),
            ErrorCode::InvalidField
        );
        assert_eq!(
            code(&OK.replace(r#""hop_limit":8"#, r#""hop_limit":0"#)),
            ErrorCode::InvalidField
        );
        assert_eq!(
            code(&OK.replace(r#""payload":{"x":1}"#, r#""payload":null"#)),
            ErrorCode::InvalidField
        );
        assert_eq!(
            code(&OK.replace(r#""intent":"demo.echo""#, r#""intent":"a b""#)),
            ErrorCode::InvalidField
        );
        assert_eq!(
            code(&OK.replace(
                r#""hop_limit":8"#,
                r#""hop_limit":8,"resume_from_event_id":-1"#
            )),
            ErrorCode::InvalidCursor
        );
    }

    #[test]
    fn a_protocol_call_builds_the_envelope_a_handler_gets() {
        let call = NewCall {
            intent: "demo.echo",
            intent_version: 2,
            task_id: "m1",
            tenant: "lab",
            source_agent: "agent://lab/mcp-client",
            hop_limit: 9,
            payload: serde_json::json!({"x": [1, "é"]}),
        };
        let e = Envelope::for_call(call.clone()).unwrap();
        assert_eq!(
            (&*e.intent, e.intent_version, e.hop_limit),
            ("demo.echo", 2, 9)
        );
        let sent: Value = serde_json::from_slice(&e.to_bytes()).unwrap();
        assert_eq!(sent["payload"], serde_json::json!({"x": [1, "é"]}));
        assert_eq!(sent["tenant"], "lab");
        // What the handler gets decodes under the strict rules.
        assert_eq!(Envelope::decode(e.to_bytes()).unwrap().intent, e.intent);
        let long = "m".repeat(MAX_TASK_ID + 1);
        for bad in [
            NewCall {
                intent: "not a cap",
                ..call.clone()
            },
            NewCall {
                task_id: &long,
                ..call.clone()
            },
            NewCall {
                tenant: "Bad Tenant",
                ..call.clone()
            },
            NewCall {
                payload: Value::Null,
                ..call.clone()
            },
        ] {
            assert!(Envelope::for_call(bad).is_err());
        }
    }
}

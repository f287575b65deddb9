//! The invocation envelope the router POSTs to the agent's endpoint.
//!
//! `{version:"1.0", intent, intent_version, task_id, source_agent, tenant,
//! hop_limit, constraints, payload, target_agent?}` (DESIGN §9, the Nexus
//! router protocol). The served endpoint validates it here, before any
//! Python runs, so a malformed request costs no GIL time and gets the same
//! typed 400 whatever the handler is. Bounds follow the Nexus agent server
//! so envelopes valid there are valid here.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvelopeError {
    /// Not one JSON object, duplicate top-level key, or a field of the
    /// wrong type (serde's text names the field).
    Json(String),
    Field {
        field: &'static str,
        reason: &'static str,
    },
}

impl EnvelopeError {
    /// The stable error code sent back in the 400 body.
    pub fn code(&self) -> &'static str {
        match self {
            EnvelopeError::Json(m) if m.starts_with("duplicate field") => "duplicate_key",
            EnvelopeError::Json(_) => "invalid_json",
            EnvelopeError::Field {
                field: "resume_from_event_id",
                ..
            } => "invalid_cursor",
            EnvelopeError::Field { .. } => "invalid_field",
        }
    }
}

impl fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvelopeError::Json(e) => write!(f, "envelope is not one valid JSON object: {e}"),
            EnvelopeError::Field { field, reason } => {
                write!(f, "envelope field `{field}` {reason}")
            }
        }
    }
}

impl std::error::Error for EnvelopeError {}

#[derive(Deserialize)]
struct Raw {
    version: Option<String>,
    intent: Option<String>,
    intent_version: Option<i64>,
    task_id: Option<String>,
    source_agent: Option<String>,
    tenant: Option<String>,
    hop_limit: Option<i64>,
    #[serde(default)]
    constraints: Option<Value>,
    #[serde(default)]
    payload: Option<Value>,
    target_agent: Option<String>,
    resume_from_event_id: Option<i64>,
}

/// The validated routing fields; the payload stays in the body bytes and
/// is decoded by the handler side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub intent: String,
    pub intent_version: u32,
    pub task_id: String,
    pub source_agent: String,
    pub tenant: String,
    pub hop_limit: u8,
    pub target_agent: Option<String>,
    pub resume_from_event_id: u64,
}

fn required(
    value: Option<String>,
    field: &'static str,
    max: usize,
) -> Result<String, EnvelopeError> {
    match value {
        Some(s) if !s.is_empty() && s.len() <= max => Ok(s),
        Some(_) => Err(EnvelopeError::Field {
            field,
            reason: "is empty or too long",
        }),
        None => Err(EnvelopeError::Field {
            field,
            reason: "is missing",
        }),
    }
}

impl Envelope {
    pub fn decode(body: &[u8]) -> Result<Envelope, EnvelopeError> {
        let raw: Raw =
            serde_json::from_slice(body).map_err(|e| EnvelopeError::Json(e.to_string()))?;
        if raw.version.as_deref() != Some("1.0") {
            return Err(EnvelopeError::Field {
                field: "version",
                reason: "must be \"1.0\"",
            });
        }
        let intent = required(raw.intent, "intent", 127)?;
        let task_id = required(raw.task_id, "task_id", 127)?;
        let source_agent = required(raw.source_agent, "source_agent", 255)?;
        let tenant = required(raw.tenant, "tenant", 95)?;
        let intent_version = match raw.intent_version {
            Some(v) if (1..=i64::from(u32::MAX)).contains(&v) => v as u32,
            _ => {
                return Err(EnvelopeError::Field {
                    field: "intent_version",
                    reason: "must be an integer >= 1",
                })
            }
        };
        let hop_limit = match raw.hop_limit {
            Some(v) if (1..=255).contains(&v) => v as u8,
            _ => {
                return Err(EnvelopeError::Field {
                    field: "hop_limit",
                    reason: "must be an integer in 1..=255",
                })
            }
        };
        match raw.payload {
            None | Some(Value::Null) => {
                return Err(EnvelopeError::Field {
                    field: "payload",
                    reason: "is required",
                })
            }
            Some(_) => {}
        }
        if !matches!(raw.constraints, None | Some(Value::Object(_))) {
            return Err(EnvelopeError::Field {
                field: "constraints",
                reason: "must be an object",
            });
        }
        let target_agent = match raw.target_agent {
            None => None,
            Some(t) if !t.is_empty() && t.len() <= 255 => Some(t),
            Some(_) => {
                return Err(EnvelopeError::Field {
                    field: "target_agent",
                    reason: "is empty or too long",
                })
            }
        };
        let resume_from_event_id = match raw.resume_from_event_id {
            None => 0,
            Some(v) if v >= 0 => v as u64,
            Some(_) => {
                return Err(EnvelopeError::Field {
                    field: "resume_from_event_id",
                    reason: "is negative",
                })
            }
        };
        Ok(Envelope {
            intent,
            intent_version,
            task_id,
            source_agent,
            tenant,
            hop_limit,
            target_agent,
            resume_from_event_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"version":"1.0","intent":"demo.echo","intent_version":1,"task_id":"t-1",
        "source_agent":"agent://lab/caller","tenant":"lab","hop_limit":8,"constraints":{},"payload":{"text":"hi"}}"#;

    #[test]
    fn decodes_a_nexus_envelope() {
        let e = Envelope::decode(GOOD.as_bytes()).unwrap();
        assert_eq!(e.intent, "demo.echo");
        assert_eq!(
            (e.intent_version, e.hop_limit, e.resume_from_event_id),
            (1, 8, 0)
        );
        assert_eq!(e.target_agent, None);
    }

    fn with(field: &str, value: &str) -> Vec<u8> {
        let mut v: serde_json::Map<String, Value> = serde_json::from_str(GOOD).unwrap();
        if value == "DELETE" {
            v.remove(field);
        } else {
            v.insert(field.into(), serde_json::from_str(value).unwrap());
        }
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases = [
            ("version", r#""2.0""#, "version"),
            ("intent", r#""""#, "intent"),
            ("intent", "DELETE", "intent"),
            ("intent_version", "0", "intent_version"),
            ("hop_limit", "256", "hop_limit"),
            ("hop_limit", "DELETE", "hop_limit"),
            ("payload", "null", "payload"),
            ("payload", "DELETE", "payload"),
            ("constraints", "[]", "constraints"),
            ("target_agent", r#""""#, "target_agent"),
            ("resume_from_event_id", "-1", "resume_from_event_id"),
            ("tenant", &format!("\"{}\"", "t".repeat(96)), "tenant"),
        ];
        for (field, value, named) in cases {
            match Envelope::decode(&with(field, value)) {
                Err(EnvelopeError::Field { field: f, .. }) => {
                    assert_eq!(f, named, "{field}={value}")
                }
                other => panic!("{field}={value}: {other:?}"),
            }
        }
    }

    #[test]
    fn duplicate_keys_and_wrong_types_are_json_errors() {
        let dup = GOOD.replacen(
            "\"tenant\":\"lab\"",
            "\"tenant\":\"lab\",\"tenant\":\"other\"",
            1,
        );
        let e = Envelope::decode(dup.as_bytes()).unwrap_err();
        assert_eq!(e.code(), "duplicate_key");
        assert!(e.to_string().contains("duplicate"), "{e}");
        assert_eq!(
            Envelope::decode(&with("hop_limit", r#""8""#))
                .unwrap_err()
                .code(),
            "invalid_json"
        );
        assert_eq!(Envelope::decode(b"[1]").unwrap_err().code(), "invalid_json");
        assert_eq!(
            Envelope::decode(&with("resume_from_event_id", "-1"))
                .unwrap_err()
                .code(),
            "invalid_cursor"
        );
    }
}

//! Bounded decoders of the A2A 1.0 JSON-RPC `params` this gateway serves
//! (`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`,
//! `SubscribeToTask`).
//!
//! The params arrive already parsed by the JSON-RPC layer (the body read
//! bounds their size, the strict JSON decoder their nesting and repeated
//! keys). Here every field is checked for type and length and every list
//! for count, and anything wrong is an `InvalidParams` naming the field.
//! Field names are the protobuf JSON mapping's lowerCamelCase (what
//! `a2a-sdk` sends); the original snake_case names are accepted too, as
//! every protobuf JSON parser must. Unknown fields are ignored (forward
//! compatibility, as the official servers do).

use serde_json::{Map, Value};

use super::error::A2aError;
use super::part::{self, Part};

/// Longest id a client may send (message, context and task ids).
pub const MAX_ID: usize = 128;
/// Most parts in one message.
pub const MAX_PARTS: usize = 64;
/// Longest skill name in `metadata.skill`.
pub const MAX_SKILL: usize = 128;
/// Most `acceptedOutputModes` / `extensions` entries.
pub const MAX_LIST: usize = 32;

/// Who sent a message (`ROLE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

/// A decoded A2A `Message`.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub message_id: Box<str>,
    pub context_id: Option<Box<str>>,
    /// Set when the client continues an existing task.
    pub task_id: Option<Box<str>>,
    pub role: Role,
    pub parts: Vec<Part>,
    /// `metadata.skill`, when given.
    pub skill: Option<Box<str>>,
}

/// `SendMessage` / `SendStreamingMessage` params.
#[derive(Clone, Debug, PartialEq)]
pub struct SendMessage {
    pub message: Message,
    /// `configuration.returnImmediately`: answer once the task exists.
    pub return_immediately: bool,
    /// `configuration.acceptedOutputModes` (media types).
    pub accepted_output_modes: Vec<Box<str>>,
    /// Request-level `metadata.skill` (the message's wins).
    pub skill: Option<Box<str>>,
}

impl SendMessage {
    /// The skill the call names, message metadata first.
    pub fn skill(&self) -> Option<&str> {
        self.message.skill.as_deref().or(self.skill.as_deref())
    }
}

/// `GetTask`, `CancelTask` and `SubscribeToTask` params: the task id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskQuery {
    pub id: Box<str>,
    /// `historyLength` of `GetTask` (we keep no message history, so any
    /// value gives none; still type-checked).
    pub history_length: Option<u32>,
}

/// Looks up `camel` or its protobuf snake_case twin.
pub(crate) fn field<'a>(o: &'a Map<String, Value>, camel: &str, snake: &str) -> Option<&'a Value> {
    o.get(camel).or_else(|| o.get(snake))
}

fn object<'a>(
    v: Option<&'a Value>,
    name: &str,
) -> Result<Option<&'a Map<String, Value>>, A2aError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(_) => Err(A2aError::invalid_params(format!(
            "{name} must be an object"
        ))),
    }
}

/// An optional bounded string.
pub(crate) fn string(
    v: Option<&Value>,
    name: &str,
    max: usize,
) -> Result<Option<Box<str>>, A2aError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= max => Ok(Some(s.as_str().into())),
        Some(Value::String(_)) => Err(A2aError::invalid_params(format!(
            "{name} is longer than {max} bytes"
        ))),
        Some(_) => Err(A2aError::invalid_params(format!("{name} must be a string"))),
    }
}

/// An id: a non-empty bounded string without control characters.
fn id(v: Option<&Value>, name: &str) -> Result<Option<Box<str>>, A2aError> {
    let s = string(v, name, MAX_ID)?;
    match s {
        Some(s) if s.is_empty() => Ok(None),
        Some(s) if s.chars().any(char::is_control) => Err(A2aError::invalid_params(format!(
            "{name} must not contain control characters"
        ))),
        other => Ok(other),
    }
}

fn boolean(v: Option<&Value>, name: &str) -> Result<bool, A2aError> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(A2aError::invalid_params(format!(
            "{name} must be a boolean"
        ))),
    }
}

fn strings(v: Option<&Value>, name: &str) -> Result<Vec<Box<str>>, A2aError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) if a.len() <= MAX_LIST => a,
        Some(Value::Array(_)) => {
            return Err(A2aError::invalid_params(format!(
                "{name} has more than {MAX_LIST} entries"
            )))
        }
        Some(_) => return Err(A2aError::invalid_params(format!("{name} must be a list"))),
    };
    list.iter()
        .map(|s| string(Some(s), name, MAX_ID).map(Option::unwrap_or_default))
        .collect()
}

fn role(v: Option<&Value>) -> Result<Role, A2aError> {
    match v {
        Some(Value::String(s)) if s == "ROLE_USER" => Ok(Role::User),
        Some(Value::String(s)) if s == "ROLE_AGENT" => Ok(Role::Agent),
        Some(Value::Number(n)) if n.as_u64() == Some(1) => Ok(Role::User),
        Some(Value::Number(n)) if n.as_u64() == Some(2) => Ok(Role::Agent),
        None | Some(Value::Null) => Err(A2aError::invalid_params(
            "message.role is required (ROLE_USER)",
        )),
        Some(other) => Err(A2aError::invalid_params(format!(
            "message.role {other} is not ROLE_USER or ROLE_AGENT"
        ))),
    }
}

/// `metadata.skill` of a metadata object (must be a string when present).
fn skill_of(meta: Option<&Value>, name: &str) -> Result<Option<Box<str>>, A2aError> {
    let Some(meta) = object(meta, name)? else {
        return Ok(None);
    };
    string(meta.get("skill"), &format!("{name}.skill"), MAX_SKILL)
}

fn params_object(params: Option<&Value>) -> Result<&Map<String, Value>, A2aError> {
    match params {
        Some(Value::Object(o)) => Ok(o),
        None => Err(A2aError::invalid_params("params are required")),
        Some(_) => Err(A2aError::invalid_params("params must be an object")),
    }
}

fn message(v: Option<&Value>) -> Result<Message, A2aError> {
    let m = object(v, "message")?
        .ok_or_else(|| A2aError::invalid_params("params.message is required"))?;
    let message_id = id(field(m, "messageId", "message_id"), "message.messageId")?
        .ok_or_else(|| A2aError::invalid_params("message.messageId is required"))?;
    let parts = match m.get("parts") {
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(A2aError::invalid_params("message.parts must not be empty"))
        }
        Some(Value::Array(a)) if a.len() <= MAX_PARTS => a
            .iter()
            .enumerate()
            .map(|(i, p)| part::decode(p, i))
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::Array(_)) => {
            return Err(A2aError::invalid_params(format!(
                "message.parts has more than {MAX_PARTS} parts"
            )))
        }
        None => return Err(A2aError::invalid_params("message.parts is required")),
        Some(_) => return Err(A2aError::invalid_params("message.parts must be a list")),
    };
    strings(m.get("extensions"), "message.extensions")?;
    strings(
        field(m, "referenceTaskIds", "reference_task_ids"),
        "message.referenceTaskIds",
    )?;
    Ok(Message {
        message_id,
        context_id: id(field(m, "contextId", "context_id"), "message.contextId")?,
        task_id: id(field(m, "taskId", "task_id"), "message.taskId")?,
        role: role(m.get("role"))?,
        parts,
        skill: skill_of(m.get("metadata"), "message.metadata")?,
    })
}

impl SendMessage {
    pub fn decode(params: Option<&Value>) -> Result<SendMessage, A2aError> {
        let p = params_object(params)?;
        let message = message(p.get("message"))?;
        let config = object(p.get("configuration"), "configuration")?;
        let (return_immediately, accepted_output_modes) = match config {
            None => (false, Vec::new()),
            Some(c) => {
                if let Some(h) = field(c, "historyLength", "history_length") {
                    history_length(Some(h))?;
                }
                (
                    boolean(
                        field(c, "returnImmediately", "return_immediately"),
                        "configuration.returnImmediately",
                    )?,
                    strings(
                        field(c, "acceptedOutputModes", "accepted_output_modes"),
                        "configuration.acceptedOutputModes",
                    )?,
                )
            }
        };
        string(p.get("tenant"), "tenant", MAX_ID)?;
        Ok(SendMessage {
            message,
            return_immediately,
            accepted_output_modes,
            skill: skill_of(p.get("metadata"), "metadata")?,
        })
    }
}

fn history_length(v: Option<&Value>) -> Result<Option<u32>, A2aError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                A2aError::invalid_params("historyLength must be a non-negative integer")
            }),
        Some(_) => Err(A2aError::invalid_params(
            "historyLength must be a non-negative integer",
        )),
    }
}

impl TaskQuery {
    pub fn decode(params: Option<&Value>) -> Result<TaskQuery, A2aError> {
        let p = params_object(params)?;
        let id =
            id(p.get("id"), "id")?.ok_or_else(|| A2aError::invalid_params("id is required"))?;
        string(p.get("tenant"), "tenant", MAX_ID)?;
        Ok(TaskQuery {
            id,
            history_length: history_length(field(p, "historyLength", "history_length"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::a2a::error::Kind;
    use serde_json::json;

    fn send(v: Value) -> Result<SendMessage, A2aError> {
        SendMessage::decode(Some(&v))
    }

    #[test]
    fn what_the_official_client_sends_decodes() {
        let s = send(json!({
            "message": {"messageId": "m1", "role": "ROLE_USER",
                        "parts": [{"text": "hi"}, {"data": {"a": 1}}],
                        "metadata": {"skill": "echo"}},
            "configuration": {"returnImmediately": true, "acceptedOutputModes": ["text/plain"]}
        }))
        .unwrap();
        assert_eq!(&*s.message.message_id, "m1");
        assert_eq!(s.message.role, Role::User);
        assert_eq!(s.message.parts.len(), 2);
        assert_eq!(s.skill(), Some("echo"));
        assert!(s.return_immediately);
        assert_eq!(s.accepted_output_modes, vec![Box::from("text/plain")]);
    }

    #[test]
    fn snake_case_names_and_request_metadata_are_accepted() {
        let s = send(json!({
            "message": {"message_id": "m1", "role": 1, "context_id": "c1", "parts": [{"text": "x"}]},
            "configuration": {"return_immediately": false},
            "metadata": {"skill": "upper"}
        }))
        .unwrap();
        assert_eq!(s.message.context_id.as_deref(), Some("c1"));
        assert_eq!(s.skill(), Some("upper"));
        assert!(!s.return_immediately);
    }

    #[test]
    fn every_bad_field_is_invalid_params_naming_it() {
        let cases = [
            (json!({}), "params.message"),
            (
                json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}),
                "messageId",
            ),
            (
                json!({"message": {"messageId": "m", "parts": [{"text": "x"}]}}),
                "role",
            ),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_X", "parts": [{"text": "x"}]}}),
                "role",
            ),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
                "parts",
            ),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_USER"}}),
                "parts",
            ),
            (
                json!({"message": {"messageId": "m".repeat(MAX_ID + 1), "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
                "messageId",
            ),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}], "metadata": {"skill": 3}}}),
                "skill",
            ),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"returnImmediately": "yes"}}),
                "returnImmediately",
            ),
            (
                json!({"message": {"messageId": "m\n", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
                "control",
            ),
        ];
        for (v, what) in cases {
            let e = send(v.clone()).unwrap_err();
            assert_eq!(e.kind, Kind::InvalidParams, "{v}");
            assert!(e.message.contains(what), "{v}: {}", e.message);
        }
        let many: Vec<Value> = (0..=MAX_PARTS).map(|_| json!({"text": "x"})).collect();
        let e = send(json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": many}}))
            .unwrap_err();
        assert!(e.message.contains("more than"));
        assert!(SendMessage::decode(None).is_err());
        assert!(SendMessage::decode(Some(&json!([1]))).is_err());
    }

    #[test]
    fn task_queries_need_a_bounded_id() {
        let q = TaskQuery::decode(Some(&json!({"id": "t1", "historyLength": 3}))).unwrap();
        assert_eq!(&*q.id, "t1");
        assert_eq!(q.history_length, Some(3));
        for bad in [
            json!({}),
            json!({"id": 5}),
            json!({"id": ""}),
            json!({"id": "x".repeat(MAX_ID + 1)}),
            json!({"id": "t", "historyLength": -1}),
        ] {
            assert_eq!(
                TaskQuery::decode(Some(&bad)).unwrap_err().kind,
                Kind::InvalidParams,
                "{bad}"
            );
        }
    }
}

//! A2A 1.0 ingress (DESIGN §9 "A2A"): the agent card, JSON-RPC at `/a2a`
//! (and one agent per mapping at `/a2a/<name>`), SSE for streaming.
//!
//! An A2A message is an ordinary invocation of the skill's capability
//! (same auth, tenant rate, policy, selection and forwarding — through
//! peer routers too), held as one of this gateway's async tasks: the A2A
//! task *is* that task (its state, result, cancellation and event
//! history), held on the router the client talks to, so `GetTask`,
//! `CancelTask` and `SubscribeToTask` never depend on a path staying up
//! and a cancel reaches the handler as the dropped call (h2 RST_STREAM on
//! every hop).
//!
//! Layout: [`wire`] and [`part`] (bounded decoders of what clients send,
//! the payload and result mappings), [`task_view`] (our task states and
//! history as A2A tasks and stream events), [`card`], [`handle`] (task
//! ids), [`error`] (the spec's codes), all sans-IO; [`rpc`] and [`stream`]
//! are the endpoint.

pub mod card;
pub mod error;
pub mod handle;
pub mod part;
pub mod remote;
pub mod rpc;
pub mod stream;
pub mod task_view;
pub mod wire;

use card::Skill;
use error::{A2aError, Kind};

/// The request header naming the client's protocol version.
pub const VERSION_HEADER: &str = "a2a-version";

/// What a missing `A2A-Version` means (the spec: 0.3).
pub const DEFAULT_VERSION: &str = "0.3";

/// Checks the `A2A-Version` header: any 1.x is served (the minor and
/// patch do not change the JSON-RPC binding); missing means 0.3, which is
/// refused like every other version.
pub fn check_version(header: Option<&[u8]>) -> Result<(), A2aError> {
    let v = header
        .map(|h| String::from_utf8_lossy(h).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_VERSION.to_string());
    let major = v.split('.').next().unwrap_or("");
    if major == "1"
        && v.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Ok(());
    }
    let shown: String = v.chars().take(32).collect();
    Err(A2aError::new(
        Kind::VersionNotSupported,
        format!(
            "A2A version '{shown}' is not supported: this gateway serves {} (send the A2A-Version: {} header)",
            card::PROTOCOL_VERSION,
            card::PROTOCOL_VERSION
        ),
    )
    .with("requested", shown)
    .with("supported", card::PROTOCOL_VERSION))
}

/// The JSON-RPC methods of A2A 1.0, as this gateway treats them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    CancelTask,
    SubscribeToTask,
}

impl Method {
    /// The method by name, or the typed refusal: the 1.0 methods we do
    /// not serve answer their own error (push configs: not supported;
    /// extended card: not configured; listing: unsupported), anything
    /// else is "method not found".
    pub fn parse(name: &str) -> Result<Method, A2aError> {
        Ok(match name {
            "SendMessage" => Method::SendMessage,
            "SendStreamingMessage" => Method::SendStreamingMessage,
            "GetTask" => Method::GetTask,
            "CancelTask" => Method::CancelTask,
            "SubscribeToTask" => Method::SubscribeToTask,
            "CreateTaskPushNotificationConfig"
            | "GetTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfigs"
            | "DeleteTaskPushNotificationConfig" => {
                return Err(A2aError::new(
                    Kind::PushNotificationNotSupported,
                    format!("{name}: push notifications are not supported (the card says pushNotifications: false)"),
                ))
            }
            "GetExtendedAgentCard" => {
                return Err(A2aError::new(
                    Kind::ExtendedAgentCardNotConfigured,
                    "this gateway has no extended agent card",
                ))
            }
            "ListTasks" => {
                return Err(A2aError::new(
                    Kind::UnsupportedOperation,
                    "ListTasks is not supported: use the task ids SendMessage returned",
                ))
            }
            other => {
                let shown: String = other.chars().take(64).collect();
                return Err(A2aError::new(
                    Kind::MethodNotFound,
                    format!("method {shown:?} is not an A2A 1.0 method this gateway serves"),
                ))
            }
        })
    }

    /// Whether the answer is an event stream.
    pub fn streams(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }
}

/// The skill a message calls: the one it names (`metadata.skill`), or
/// the only one there is. Anything else is invalid params listing the
/// skills the caller may use.
pub fn select_skill<'s>(
    requested: Option<&str>,
    skills: &'s [Skill],
) -> Result<&'s Skill, A2aError> {
    let list = || {
        skills
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (requested, skills) {
        (Some(name), _) => skills.iter().find(|s| s.id == name).ok_or_else(|| {
            A2aError::invalid_params(format!(
                "unknown skill {name:?}; the skills here are: {}",
                if skills.is_empty() {
                    "(none)".to_string()
                } else {
                    list()
                }
            ))
            .with("skill", name)
            .with("skills", list())
        }),
        (None, [only]) => Ok(only),
        (None, []) => Err(
            A2aError::invalid_params("this agent has no skills the caller may use")
                .with("skills", ""),
        ),
        (None, _) => Err(A2aError::invalid_params(format!(
            "the message names no skill (metadata.skill) and there are several: {}",
            list()
        ))
        .with("skills", list())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_1_is_served_and_anything_else_is_refused() {
        for ok in ["1.0", "1", "1.0.0", "1.1", " 1.0 "] {
            assert!(check_version(Some(ok.as_bytes())).is_ok(), "{ok}");
        }
        let missing = check_version(None).unwrap_err();
        assert_eq!(missing.kind, Kind::VersionNotSupported);
        assert!(missing.message.contains("'0.3'"), "{}", missing.message);
        for bad in ["0.3", "2.0", "1.x", "", "1..0", "10"] {
            let e = check_version(Some(bad.as_bytes())).unwrap_err();
            assert_eq!(e.kind.code(), -32009, "{bad}");
        }
    }

    #[test]
    fn methods_we_do_not_serve_answer_their_own_errors() {
        assert_eq!(Method::parse("SendMessage").unwrap(), Method::SendMessage);
        assert!(Method::parse("SubscribeToTask").unwrap().streams());
        let k = |m| Method::parse(m).unwrap_err().kind;
        assert_eq!(
            k("CreateTaskPushNotificationConfig"),
            Kind::PushNotificationNotSupported
        );
        assert_eq!(
            k("GetExtendedAgentCard"),
            Kind::ExtendedAgentCardNotConfigured
        );
        assert_eq!(k("ListTasks"), Kind::UnsupportedOperation);
        assert_eq!(k("message/send"), Kind::MethodNotFound);
    }

    fn skill(id: &str) -> Skill {
        Skill {
            id: id.into(),
            name: id.into(),
            description: String::new(),
            capability: format!("cap.{id}"),
            version: 1,
        }
    }

    #[test]
    fn one_skill_is_implied_several_need_a_name() {
        let one = [skill("echo")];
        assert_eq!(select_skill(None, &one).unwrap().id, "echo");
        let two = [skill("echo"), skill("upper")];
        assert_eq!(select_skill(Some("upper"), &two).unwrap().id, "upper");
        let e = select_skill(None, &two).unwrap_err();
        assert_eq!(e.kind, Kind::InvalidParams);
        assert!(e.message.contains("echo, upper"), "{}", e.message);
        let e = select_skill(Some("nope"), &two).unwrap_err();
        assert!(
            e.message.contains("unknown skill \"nope\""),
            "{}",
            e.message
        );
        assert_eq!(e.to_value()["data"][0]["metadata"]["skills"], "echo, upper");
        assert!(select_skill(None, &[]).is_err());
    }
}

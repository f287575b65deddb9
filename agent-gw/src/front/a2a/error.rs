//! A2A 1.0 errors: the spec's JSON-RPC codes, each with the
//! `google.rpc.ErrorInfo` detail the official clients read (`a2a-sdk`
//! 1.x takes the detail's `metadata` as the error's `data` and picks the
//! exception class by code).
//!
//! Every refusal of the A2A layer is one [`A2aError`]: a kind (the code
//! and the ErrorInfo reason), a message naming the thing and the reason,
//! and string metadata (ErrorInfo's `metadata` is a string map). Gateway
//! refusals of the invocation ([`ApiError`]) keep their stable gateway
//! code in `metadata.code`, so nothing typed is lost in the translation.

use serde_json::{json, Map, Value};

use crate::api::error::{ApiError, ErrorCode};

/// `@type` of the detail object.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// ErrorInfo `domain` of A2A errors.
pub const DOMAIN: &str = "a2a-protocol.org";

/// The A2A 1.0 error kinds (spec §5.4; JSON-RPC standard codes included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Parse,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
}

impl Kind {
    pub fn code(self) -> i64 {
        use Kind::*;
        match self {
            Parse => -32700,
            InvalidRequest => -32600,
            MethodNotFound => -32601,
            InvalidParams => -32602,
            Internal => -32603,
            TaskNotFound => -32001,
            TaskNotCancelable => -32002,
            PushNotificationNotSupported => -32003,
            UnsupportedOperation => -32004,
            ContentTypeNotSupported => -32005,
            InvalidAgentResponse => -32006,
            ExtendedAgentCardNotConfigured => -32007,
            ExtensionSupportRequired => -32008,
            VersionNotSupported => -32009,
        }
    }

    /// The ErrorInfo `reason` (what the official SDK's servers send).
    pub fn reason(self) -> &'static str {
        use Kind::*;
        match self {
            Parse => "PARSE_ERROR",
            InvalidRequest => "INVALID_REQUEST",
            MethodNotFound => "METHOD_NOT_FOUND",
            InvalidParams => "INVALID_PARAMS",
            Internal => "INTERNAL_ERROR",
            TaskNotFound => "TASK_NOT_FOUND",
            TaskNotCancelable => "TASK_NOT_CANCELABLE",
            PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            UnsupportedOperation => "UNSUPPORTED_OPERATION",
            ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ExtensionSupportRequired => "EXTENSION_SUPPORT_REQUIRED",
            VersionNotSupported => "VERSION_NOT_SUPPORTED",
        }
    }
}

/// One A2A refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct A2aError {
    pub kind: Kind,
    pub message: String,
    /// ErrorInfo metadata (string values only).
    pub metadata: Vec<(&'static str, String)>,
}

impl A2aError {
    pub fn new(kind: Kind, message: impl Into<String>) -> A2aError {
        A2aError {
            kind,
            message: message.into(),
            metadata: Vec::new(),
        }
    }

    pub fn with(mut self, key: &'static str, value: impl Into<String>) -> A2aError {
        self.metadata.push((key, value.into()));
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> A2aError {
        A2aError::new(Kind::InvalidParams, message)
    }

    /// The task-not-found answer; the same for an unknown id, a wrong
    /// token and another caller's task, so nothing tells them apart.
    pub fn task_not_found(id: &str) -> A2aError {
        A2aError::new(Kind::TaskNotFound, format!("task {id:?} not found")).with("taskId", id)
    }

    /// The JSON-RPC `error` member: `{code, message, data: [ErrorInfo]}`.
    pub fn to_value(&self) -> Value {
        let metadata: Map<String, Value> = self
            .metadata
            .iter()
            .map(|(k, v)| ((*k).to_string(), Value::String(v.clone())))
            .collect();
        json!({
            "code": self.kind.code(),
            "message": self.message,
            "data": [{
                "@type": ERROR_INFO_TYPE,
                "reason": self.kind.reason(),
                "domain": DOMAIN,
                "metadata": metadata,
            }],
        })
    }
}

impl std::fmt::Display for A2aError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.kind.reason(),
            self.kind.code(),
            self.message
        )
    }
}

impl From<ApiError> for A2aError {
    /// A gateway refusal of a call as an A2A error: malformed input is
    /// invalid params or an invalid request (an oversized body, as the
    /// official servers answer it), everything else an internal error
    /// carrying the gateway's stable code, the retry hint and the
    /// capability, so a client can tell a policy refusal from overload.
    fn from(e: ApiError) -> A2aError {
        let kind = match e.code {
            ErrorCode::InvalidJson | ErrorCode::DuplicateKey | ErrorCode::InvalidField => {
                Kind::InvalidParams
            }
            ErrorCode::PayloadTooLarge | ErrorCode::RequestTimeout => Kind::InvalidRequest,
            ErrorCode::NotFound => Kind::TaskNotFound,
            _ => Kind::Internal,
        };
        let d = e.detail();
        let mut out = A2aError::new(kind, e.message.clone()).with("code", e.code.as_str());
        if let Some(c) = &d.capability {
            out = out.with("capability", &**c);
        }
        if let Some(r) = d.reason {
            out = out.with("reason", r);
        }
        if let Some(ms) = d.retry_after_ms {
            out = out.with("retryAfterMs", ms.to_string());
        }
        if let Some(o) = e.outcome {
            out = out.with("outcome", o.as_str());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_codes_and_the_error_info_detail() {
        let e = A2aError::task_not_found("abc").to_value();
        assert_eq!(e["code"], -32001);
        assert_eq!(e["data"][0]["@type"], ERROR_INFO_TYPE);
        assert_eq!(e["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(e["data"][0]["domain"], DOMAIN);
        assert_eq!(e["data"][0]["metadata"]["taskId"], "abc");
        assert_eq!(Kind::TaskNotCancelable.code(), -32002);
        assert_eq!(Kind::VersionNotSupported.code(), -32009);
        assert_eq!(Kind::VersionNotSupported.reason(), "VERSION_NOT_SUPPORTED");
    }

    #[test]
    fn gateway_refusals_keep_their_stable_code() {
        let e: A2aError = ApiError::new(ErrorCode::PolicyDenied, "denied by rule r1")
            .capability("echo")
            .rejected()
            .into();
        assert_eq!(e.kind, Kind::Internal);
        let v = e.to_value();
        assert_eq!(v["data"][0]["metadata"]["code"], "policy_denied");
        assert_eq!(v["data"][0]["metadata"]["capability"], "echo");
        assert_eq!(v["data"][0]["metadata"]["outcome"], "rejected");
        let big: A2aError = ApiError::new(ErrorCode::PayloadTooLarge, "too big").into();
        assert_eq!(big.kind, Kind::InvalidRequest);
        let bad: A2aError = ApiError::new(ErrorCode::InvalidField, "x").into();
        assert_eq!(bad.kind, Kind::InvalidParams);
    }
}

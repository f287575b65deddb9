//! Gateway errors as the SDK sees them: a stable code, an HTTP status, a
//! human message and — on the invocation path — the typed outcome of the
//! call. The table of codes is the contract in `docs/sdk-api.md`; change
//! both together.

use std::fmt;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::body::{full, Body};

/// Stable error codes. `as_str` is what goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidJson,
    DuplicateKey,
    InvalidField,
    InvalidCursor,
    /// An endpoint points where no handler may be (see `reason`).
    EndpointRefused,
    Unauthenticated,
    Forbidden,
    OriginMismatch,
    PolicyDenied,
    NotFound,
    NoRoute,
    MethodNotAllowed,
    Conflict,
    /// `hop_limit` used up (a loop or too long a path).
    HopLimitExceeded,
    /// A call this gateway forwarded came back to it.
    ForwardingLoop,
    StreamChanged,
    HistoryLost,
    TaskNotFinished,
    TaskExpired,
    RequestTimeout,
    PayloadTooLarge,
    RateLimited,
    /// A registration quota is full (`reason` names the option).
    QuotaExceeded,
    NotDelivered,
    UpstreamUnknown,
    UpstreamError,
    /// The handler answered a redirect (3xx): never followed, never relayed.
    HandlerRedirect,
    /// The HTTP layer could not parse the request head (request line,
    /// header syntax, obs-fold, `Content-Length`, `Transfer-Encoding`).
    MalformedRequest,
    /// The request head is larger than the gateway reads.
    HeaderTooLarge,
    /// The request target is longer than the HTTP layer accepts.
    UriTooLong,
    Overloaded,
    ControlPlaneUnavailable,
    TaskTableFull,
    DeadlineExceeded,
    /// The handler of an async task answered with a 4xx/5xx status.
    HandlerRejected,
    /// A finished task's outcome was already fetched and released.
    ResultReleased,
    /// The caller's tenant or address holds its whole share of the task
    /// table or of the buffer budget.
    ShareExceeded,
    Internal,
    /// A code owned by another module (auth, tasks) with its HTTP status.
    Other {
        code: &'static str,
        status: u16,
    },
}

impl ErrorCode {
    /// The code named `s` (as [`as_str`](ErrorCode::as_str) spells it),
    /// for codes another gateway reported; `None` for codes this build
    /// does not know.
    pub fn parse(s: &str) -> Option<ErrorCode> {
        use ErrorCode::*;
        const ALL: [ErrorCode; 38] = [
            InvalidJson,
            DuplicateKey,
            InvalidField,
            InvalidCursor,
            EndpointRefused,
            Unauthenticated,
            Forbidden,
            OriginMismatch,
            PolicyDenied,
            NotFound,
            NoRoute,
            MethodNotAllowed,
            Conflict,
            HopLimitExceeded,
            ForwardingLoop,
            StreamChanged,
            HistoryLost,
            TaskNotFinished,
            TaskExpired,
            RequestTimeout,
            PayloadTooLarge,
            RateLimited,
            QuotaExceeded,
            NotDelivered,
            UpstreamUnknown,
            UpstreamError,
            HandlerRedirect,
            MalformedRequest,
            HeaderTooLarge,
            UriTooLong,
            Overloaded,
            ControlPlaneUnavailable,
            TaskTableFull,
            DeadlineExceeded,
            HandlerRejected,
            ResultReleased,
            ShareExceeded,
            Internal,
        ];
        ALL.into_iter().find(|c| c.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        use ErrorCode::*;
        match self {
            InvalidJson => "invalid_json",
            DuplicateKey => "duplicate_key",
            InvalidField => "invalid_field",
            InvalidCursor => "invalid_cursor",
            EndpointRefused => "endpoint_refused",
            Unauthenticated => "unauthenticated",
            Forbidden => "forbidden",
            OriginMismatch => "origin_mismatch",
            PolicyDenied => "policy_denied",
            NotFound => "not_found",
            NoRoute => "no_route",
            MethodNotAllowed => "method_not_allowed",
            Conflict => "conflict",
            HopLimitExceeded => "hop_limit_exceeded",
            ForwardingLoop => "forwarding_loop",
            StreamChanged => "stream_changed",
            HistoryLost => "history_lost",
            TaskNotFinished => "task_not_finished",
            TaskExpired => "task_expired",
            RequestTimeout => "request_timeout",
            PayloadTooLarge => "payload_too_large",
            RateLimited => "rate_limited",
            QuotaExceeded => "quota_exceeded",
            NotDelivered => "not_delivered",
            UpstreamUnknown => "upstream_unknown",
            UpstreamError => "upstream_error",
            HandlerRedirect => "handler_redirect",
            MalformedRequest => "malformed_request",
            HeaderTooLarge => "header_too_large",
            UriTooLong => "uri_too_long",
            Overloaded => "overloaded",
            ControlPlaneUnavailable => "control_plane_unavailable",
            TaskTableFull => "task_table_full",
            DeadlineExceeded => "deadline_exceeded",
            HandlerRejected => "handler_rejected",
            ResultReleased => "result_released",
            ShareExceeded => "share_exceeded",
            Internal => "internal",
            Other { code, .. } => code,
        }
    }

    pub fn status(self) -> StatusCode {
        use ErrorCode::*;
        match self {
            InvalidJson | DuplicateKey | InvalidField | InvalidCursor | MalformedRequest
            | EndpointRefused => StatusCode::BAD_REQUEST,
            HeaderTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            UriTooLong => StatusCode::URI_TOO_LONG,
            Unauthenticated => StatusCode::UNAUTHORIZED,
            Forbidden | OriginMismatch | PolicyDenied | QuotaExceeded => StatusCode::FORBIDDEN,
            NotFound | NoRoute => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Conflict | StreamChanged | HistoryLost | TaskNotFinished => StatusCode::CONFLICT,
            TaskExpired | ResultReleased => StatusCode::GONE,
            HopLimitExceeded | ForwardingLoop => StatusCode::LOOP_DETECTED,
            RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            RateLimited | ShareExceeded => StatusCode::TOO_MANY_REQUESTS,
            NotDelivered | UpstreamUnknown | UpstreamError | HandlerRedirect | HandlerRejected => {
                StatusCode::BAD_GATEWAY
            }
            Overloaded | ControlPlaneUnavailable | TaskTableFull => StatusCode::SERVICE_UNAVAILABLE,
            DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Other { status, .. } => {
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

/// What happened to an invocation (DESIGN §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Refused by the gateway before anything was sent.
    Rejected,
    /// Connection refused / unreachable: the handler never saw it.
    NotDelivered,
    /// Sent (possibly partly), no complete answer.
    Unknown,
    /// The handler answered something unusable.
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Rejected => "rejected",
            Outcome::NotDelivered => "not_delivered",
            Outcome::Unknown => "unknown",
            Outcome::Error => "error",
        }
    }
}

/// One gateway error answer. Kept small (details boxed) because it is
/// the error type of every endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub outcome: Option<Outcome>,
    /// Close the connection after answering (body left unread).
    pub close: bool,
    pub detail: Option<Box<Detail>>,
}

/// Optional context of an error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Detail {
    pub capability: Option<Box<str>>,
    pub route_id: Option<Box<str>>,
    /// Rejection reason of a `no_route`.
    pub reason: Option<&'static str>,
    pub retry_after_ms: Option<u64>,
    /// `Allow` header of a 405.
    pub allow: Option<&'static str>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            outcome: None,
            close: false,
            detail: None,
        }
    }

    fn detail_mut(&mut self) -> &mut Detail {
        self.detail.get_or_insert_with(Default::default)
    }

    pub fn detail(&self) -> &Detail {
        const NONE: &Detail = &Detail {
            capability: None,
            route_id: None,
            reason: None,
            retry_after_ms: None,
            allow: None,
        };
        self.detail.as_deref().unwrap_or(NONE)
    }

    pub fn outcome(mut self, outcome: Outcome) -> ApiError {
        self.outcome = Some(outcome);
        self
    }

    /// Marks an invocation error as refused before dispatch unless an
    /// outcome was already set.
    pub fn rejected(mut self) -> ApiError {
        self.outcome.get_or_insert(Outcome::Rejected);
        self
    }

    pub fn capability(mut self, capability: &str) -> ApiError {
        self.detail_mut().capability = Some(capability.into());
        self
    }

    pub fn route_id(mut self, route_id: &str) -> ApiError {
        self.detail_mut().route_id = Some(route_id.into());
        self
    }

    pub fn reason(mut self, reason: &'static str) -> ApiError {
        self.detail_mut().reason = Some(reason);
        self
    }

    pub fn retry_after_ms(mut self, ms: u64) -> ApiError {
        self.detail_mut().retry_after_ms = Some(ms);
        self
    }

    pub fn allow(mut self, allow: &'static str) -> ApiError {
        self.detail_mut().allow = Some(allow);
        self
    }

    pub fn close(mut self) -> ApiError {
        self.close = true;
        self
    }

    /// The JSON body `{"error":{...}}`.
    pub fn body_json(&self) -> serde_json::Value {
        let mut e = serde_json::Map::new();
        e.insert("code".into(), self.code.as_str().into());
        e.insert("message".into(), self.message.as_str().into());
        if let Some(o) = self.outcome {
            e.insert("outcome".into(), o.as_str().into());
        }
        let d = self.detail();
        if let Some(c) = &d.capability {
            e.insert("capability".into(), c.as_ref().into());
        }
        if let Some(r) = &d.route_id {
            e.insert("route_id".into(), r.as_ref().into());
        }
        if let Some(r) = d.reason {
            e.insert("reason".into(), r.into());
        }
        if let Some(ms) = d.retry_after_ms {
            e.insert("retry_after_ms".into(), ms.into());
        }
        let mut root = serde_json::Map::new();
        root.insert("error".into(), serde_json::Value::Object(e));
        serde_json::Value::Object(root)
    }

    pub fn into_response(self) -> Response<Body> {
        let bytes = Bytes::from(self.body_json().to_string());
        let mut resp = Response::new(full(bytes));
        *resp.status_mut() = self.code.status();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(o) = self.outcome {
            h.insert("x-agentd-outcome", HeaderValue::from_static(o.as_str()));
        }
        let d = self.detail();
        if let Some(ms) = d.retry_after_ms {
            let secs = ms.div_ceil(1000).max(1);
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(allow) = d.allow {
            h.insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        if self.close {
            h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ApiError {}

// ===== conversions from the layers below =====
//
// Each refusal type of a lower layer maps onto the SDK's codes here, by
// variant: no layer inspects another's code strings or status numbers.

impl From<crate::auth::AuthError> for ApiError {
    fn from(e: crate::auth::AuthError) -> ApiError {
        let code = if e.is_forbidden() {
            ErrorCode::Forbidden
        } else {
            ErrorCode::Unauthenticated
        };
        ApiError::new(code, e.to_string()).reason(e.reason())
    }
}

impl From<crate::auth::bootstrap::BootstrapError> for ApiError {
    fn from(e: crate::auth::bootstrap::BootstrapError) -> ApiError {
        use crate::auth::bootstrap::BootstrapError as B;
        let code = match &e {
            B::Disabled | B::UntrustedSource(_) | B::TenantNotBootstrappable(_) => {
                ErrorCode::Forbidden
            }
            B::TooLarge { .. } => ErrorCode::PayloadTooLarge,
            B::Random => ErrorCode::Internal,
            B::Json | B::BadTenant | B::BadOrigin | B::UnknownScope => ErrorCode::InvalidField,
        };
        let err = ApiError::new(code, e.to_string());
        match e.reason() {
            Some(r) => err.reason(r),
            None => err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_has_code_message_and_outcome() {
        let e = ApiError::new(ErrorCode::NoRoute, "no eligible route for demo.echo v1")
            .rejected()
            .capability("demo.echo")
            .reason("unknown_capability");
        let v = e.body_json();
        assert_eq!(v["error"]["code"], "no_route");
        assert_eq!(v["error"]["outcome"], "rejected");
        assert_eq!(v["error"]["capability"], "demo.echo");
        assert_eq!(v["error"]["reason"], "unknown_capability");
        let r = e.into_response();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(r.headers()["x-agentd-outcome"], "rejected");
    }

    #[test]
    fn rate_limited_answers_retry_after_in_whole_seconds() {
        let r = ApiError::new(ErrorCode::RateLimited, "x")
            .retry_after_ms(1200)
            .into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn auth_refusals_convert_by_variant() {
        use crate::auth::bootstrap::BootstrapError;
        use crate::auth::{AuthError, Scope};
        let e = ApiError::from(AuthError::MissingScope(Scope::Register));
        assert_eq!(
            (e.code, e.code.status().as_u16(), e.detail().reason),
            (ErrorCode::Forbidden, 403, Some("insufficient_scope"))
        );
        let e = ApiError::from(AuthError::BadSignature);
        assert_eq!(
            (e.code, e.code.status().as_u16()),
            (ErrorCode::Unauthenticated, 401)
        );
        let outside = "203.0.113.7".parse().unwrap();
        let e = ApiError::from(BootstrapError::UntrustedSource(outside));
        assert_eq!(
            (e.code, e.detail().reason),
            (ErrorCode::Forbidden, Some("bootstrap_untrusted_source"))
        );
        let e = ApiError::from(BootstrapError::TooLarge { len: 9, max: 1 });
        assert_eq!(e.code.status().as_u16(), 413);
        assert_eq!(
            ApiError::from(BootstrapError::BadOrigin).code,
            ErrorCode::InvalidField
        );
    }

    #[test]
    fn rejected_keeps_an_outcome_already_set() {
        let e = ApiError::new(ErrorCode::DeadlineExceeded, "x")
            .outcome(Outcome::Unknown)
            .rejected();
        assert_eq!(e.outcome, Some(Outcome::Unknown));
    }
}

//! Calls to the router: one place that adds the bearer token, retries a
//! 401 once with a fresh bootstrap token, and turns non-2xx answers into
//! `CallError::Status` carrying the router's stable error code.

use std::fmt;
use std::time::Duration;

use agentd::time::Millis;

use crate::auth::TokenSource;
use crate::http::body::read_to_vec;
use crate::http::client::{self, ClientError, OpenBody, Request, Response};
use crate::http::head::ResponseHead;
use crate::router_url::HttpUrl;
use crate::wire::{ErrorBody, ErrorDetail, MAX_REPLY};

/// Largest synchronous reply body accepted from the router.
pub const MAX_RESPONSE: usize = 16 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The router was not reached or did not answer completely.
    Transport {
        not_delivered: bool,
        timeout: bool,
        message: String,
    },
    /// The router answered with a non-2xx status.
    Status {
        status: u16,
        code: String,
        message: String,
        detail: ErrorDetail,
    },
    /// The router's 2xx reply could not be decoded.
    Decode(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Transport { message, .. } => write!(f, "router unreachable: {message}"),
            CallError::Status {
                status,
                code,
                message,
                ..
            } => write!(f, "{status} {code}: {message}"),
            CallError::Decode(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for CallError {}

impl From<ClientError> for CallError {
    fn from(e: ClientError) -> Self {
        CallError::Transport {
            not_delivered: e.not_delivered(),
            timeout: e.is_timeout(),
            message: e.to_string(),
        }
    }
}

fn status_error(status: u16, body: &[u8]) -> CallError {
    match ErrorBody::decode(body) {
        Some(e) => CallError::Status {
            status,
            code: e.code,
            message: e.message,
            detail: e.detail,
        },
        None => {
            let text: String = String::from_utf8_lossy(&body[..body.len().min(256)]).into_owned();
            CallError::Status {
                status,
                code: format!("HTTP_{status}"),
                message: text,
                detail: ErrorDetail::default(),
            }
        }
    }
}

/// The router's base URL; unauthenticated requests.
#[derive(Clone, Debug)]
pub struct Router {
    pub url: HttpUrl,
}

impl Router {
    /// Sends a request and reads the whole reply; non-2xx → `Status`.
    pub fn send_raw(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
        timeout: Duration,
        authorization: Option<&str>,
    ) -> Result<Response, CallError> {
        let mut all: Vec<(String, String)> = Vec::with_capacity(headers.len() + 3);
        all.push(("Accept".into(), "application/json".into()));
        if !body.is_empty() {
            all.push(("Content-Type".into(), "application/json".into()));
        }
        if let Some(a) = authorization {
            all.push(("Authorization".into(), a.to_string()));
        }
        all.extend(headers.iter().cloned());
        let req = Request {
            method,
            url: &self.url,
            target,
            headers: &all,
            body,
            timeout,
            read_timeout: Some(timeout),
        };
        let resp = client::send(&req, MAX_RESPONSE)?;
        if !(200..300).contains(&resp.status) {
            return Err(status_error(resp.status, &resp.body));
        }
        Ok(resp)
    }
}

/// A router plus the token source for its calls.
#[derive(Debug)]
pub struct Client {
    pub router: Router,
    pub tokens: TokenSource,
}

impl Client {
    /// An authenticated call; a 401 is retried once with a fresh token
    /// when the token came from bootstrap.
    pub fn call(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
        timeout: Duration,
    ) -> Result<Response, CallError> {
        let auth = self
            .tokens
            .authorization(&self.router, Millis::now(), timeout)?;
        match self
            .router
            .send_raw(method, target, headers, body, timeout, auth.as_deref())
        {
            Err(CallError::Status { status: 401, .. }) if self.tokens.invalidate() => {
                let auth = self
                    .tokens
                    .authorization(&self.router, Millis::now(), timeout)?;
                self.router
                    .send_raw(method, target, headers, body, timeout, auth.as_deref())
            }
            other => other,
        }
    }

    /// Opens a streaming call: returns the head and the unread body of a
    /// 2xx reply; a non-2xx reply becomes `Status`.
    pub fn open(
        &self,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
        timeout: Duration,
        read_timeout: Option<Duration>,
    ) -> Result<(ResponseHead, OpenBody), CallError> {
        let auth = self
            .tokens
            .authorization(&self.router, Millis::now(), timeout)?;
        let mut all: Vec<(String, String)> = vec![
            ("Accept".into(), "text/event-stream".into()),
            ("Content-Type".into(), "application/json".into()),
        ];
        if let Some(a) = auth {
            all.push(("Authorization".into(), a));
        }
        all.extend(headers.iter().cloned());
        let req = Request {
            method: "POST",
            url: &self.router.url,
            target,
            headers: &all,
            body,
            timeout,
            read_timeout,
        };
        let (head, mut reader) = client::open(&req)?;
        if !(200..300).contains(&head.status) {
            let body = read_to_vec(&mut reader, MAX_REPLY).unwrap_or_default();
            return Err(status_error(head.status, &body));
        }
        Ok((head, reader))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_errors_carry_the_router_code_or_the_status() {
        assert_eq!(
            status_error(
                404,
                br#"{"error":{"code":"NO_ROUTE","message":"no route for x v1"}}"#
            ),
            CallError::Status {
                status: 404,
                code: "NO_ROUTE".into(),
                message: "no route for x v1".into(),
                detail: ErrorDetail::default(),
            }
        );
        assert_eq!(
            status_error(502, b"Bad Gateway"),
            CallError::Status {
                status: 502,
                code: "HTTP_502".into(),
                message: "Bad Gateway".into(),
                detail: ErrorDetail::default(),
            }
        );
    }
}

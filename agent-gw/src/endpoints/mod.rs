//! One function per SDK endpoint. Each takes the request context, the
//! request head and its (unread) body, and answers a response or a typed
//! `ApiError`; `server` turns errors into `{"error":{...}}` answers.

pub mod health;
pub mod invoke;
pub mod lease;
pub mod tasks;

use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Response, StatusCode};
use hyper::body::Incoming;

use crate::api::error::{ApiError, ErrorCode};
use crate::body::{full, read_limited, Body};
use crate::config::AuthMode;
use crate::state::AppState;

/// Per-request context.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub state: Rc<AppState>,
    pub peer: SocketAddr,
}

/// What an endpoint needs the caller to be allowed to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Register,
    Route,
    Invoke,
}

/// The identity a request acts for, when authentication proved one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub tenant: Box<str>,
    /// Agent URI of the caller (`sub`).
    pub subject: Box<str>,
}

/// Authenticates the request for `need`. `Ok(None)` is lab mode (auth
/// `none`): the body's identity is used as sent.
pub fn authenticate(cx: &Ctx, _parts: &Parts, need: Need) -> Result<Option<Verified>, ApiError> {
    match cx.state.cfg.auth {
        AuthMode::None => Ok(None),
        AuthMode::Jwt => Err(ApiError::new(
            ErrorCode::Other {
                code: "authentication_required",
                status: 401,
            },
            format!("a bearer token with the {need:?} scope is required"),
        )),
    }
}

/// Reads the whole body within the configured request size limit.
pub async fn read_body(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Bytes, ApiError> {
    read_limited(&parts.headers, body, cx.state.cfg.max_request_bytes).await
}

/// A JSON answer.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(full(value.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

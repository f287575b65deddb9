//! `GET /agent/v1/authentication` (auth discovery in the Nexus schema) and
//! `POST /agent/v1/bootstrap` (trusted-LAN tokens bound to the caller's
//! address). Neither needs a token.

use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::Incoming;

use crate::api::error::{ApiError, ErrorCode};
use crate::api::json::parse_object;
use crate::auth::bootstrap::{BootstrapRequest, MAX_BODY};
use crate::auth::UnixSeconds;
use crate::body::{read_limited, Body};
use crate::endpoints::{json, Ctx};

pub fn authentication(cx: &Ctx) -> Response<Body> {
    json(StatusCode::OK, &cx.state.auth.metadata())
}

pub async fn bootstrap(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    cx.state
        .auth
        .bootstrap_allowed(cx.peer.ip())
        .map_err(bootstrap_error)?;
    let bytes = read_limited(&parts.headers, body, MAX_BODY).await?;
    // The shared strict decoder first (duplicate keys anywhere, depth),
    // then the bootstrap fields.
    parse_object(&bytes).map_err(|e| ApiError::from(crate::api::envelope::DecodeError::Json(e)))?;
    let req = BootstrapRequest::decode(&bytes).map_err(bootstrap_error)?;
    let issued = cx
        .state
        .auth
        .bootstrap(req, cx.peer.ip(), UnixSeconds::now())
        .map_err(bootstrap_error)?;
    Ok(json(StatusCode::OK, &issued.to_json()))
}

fn bootstrap_error(e: crate::auth::bootstrap::BootstrapError) -> ApiError {
    let code = match e.code() {
        "forbidden" => ErrorCode::Forbidden,
        "payload_too_large" => ErrorCode::PayloadTooLarge,
        "internal" => ErrorCode::Internal,
        _ => ErrorCode::InvalidField,
    };
    let reason = e.reason();
    let err = ApiError::new(code, e.to_string());
    match reason {
        Some(r) => err.reason(r),
        None => err,
    }
}

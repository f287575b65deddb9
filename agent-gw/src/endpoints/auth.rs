//! `GET /agent/v1/authentication` (auth discovery in the Nexus schema) and
//! `POST /agent/v1/bootstrap` (trusted-LAN tokens bound to the caller's
//! address). Neither needs a token.

use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::Incoming;

use crate::api::error::ApiError;
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
    cx.state.auth.bootstrap_allowed(cx.peer.ip())?;
    let bytes = read_limited(&parts.headers, body, MAX_BODY).await?;
    // The shared strict decoder first (duplicate keys anywhere, depth),
    // then the bootstrap fields.
    parse_object(&bytes).map_err(|e| ApiError::from(crate::api::envelope::DecodeError::Json(e)))?;
    let req = BootstrapRequest::decode(&bytes)?;
    let issued = cx
        .state
        .auth
        .bootstrap(req, cx.peer.ip(), UnixSeconds::now())?;
    Ok(json(StatusCode::OK, &issued.to_json()))
}

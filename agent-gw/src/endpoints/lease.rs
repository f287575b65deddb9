//! `POST /agent/v1/register | renew | unregister`: decoded here, decided
//! by agentd (see `control`).

use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::Incoming;

use crate::api::error::{ApiError, ErrorCode};
use crate::api::registration::{Registration, Renewal, Unregistration};
use crate::body::Body;
use crate::endpoints::{authenticate, json, read_body, Ctx, Need};

pub async fn register(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let who = authenticate(cx, parts, Need::Register)?;
    let bytes = read_body(cx, parts, body).await?;
    let mut reg = Registration::decode(&bytes)?;
    if let Some(v) = who {
        // The token decides tenant and origin; the body cannot claim
        // someone else's agent.
        reg.tenant = v.tenant.clone();
        if reg.origin != v.subject {
            return Err(ApiError::new(
                ErrorCode::OriginMismatch,
                format!(
                    "origin {} is not the authenticated agent {}",
                    reg.origin, v.subject
                ),
            ));
        }
    }
    let reply = cx.state.control.register(reg).await?;
    Ok(json(StatusCode::OK, &reply.to_json()))
}

pub async fn renew(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let who = authenticate(cx, parts, Need::Register)?;
    let bytes = read_body(cx, parts, body).await?;
    let renewal = Renewal::decode(&bytes)?;
    let reply = cx
        .state
        .control
        .renew(renewal, who.as_ref().map(|v| &*v.subject))
        .await?;
    Ok(json(StatusCode::OK, &reply.to_json()))
}

pub async fn unregister(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    let who = authenticate(cx, parts, Need::Register)?;
    let bytes = read_body(cx, parts, body).await?;
    let req = Unregistration::decode(&bytes)?;
    let reply = cx
        .state
        .control
        .unregister(req, who.as_ref().map(|v| &*v.subject))
        .await?;
    Ok(json(StatusCode::OK, &reply.to_json()))
}

//! `GET /healthz` and `GET /agent/v1/authentication` (auth discovery).

use http::{Response, StatusCode};
use serde_json::json;

use crate::api::error::{ApiError, ErrorCode};
use crate::body::Body;
use crate::config::AuthMode;
use crate::endpoints::{json, Ctx};

pub fn healthz(cx: &Ctx) -> Response<Body> {
    let s = &cx.state;
    let fib = s.fib.borrow();
    json(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "control_plane": if s.control.is_up() { "up" } else { "down" },
            "fib": {"generation": fib.generation(), "routes": fib.routes(), "in_sync": fib.replica().in_sync()},
            "inflight": s.inflight.current(),
        }),
    )
}

/// Nexus auth discovery (schema 2). In lab mode the SDK learns that no
/// token is needed and never asks for one.
pub fn authentication(cx: &Ctx) -> Result<Response<Body>, ApiError> {
    match cx.state.cfg.auth {
        AuthMode::None => Ok(json(
            StatusCode::OK,
            &json!({
                "schema_version": 2,
                "authentication": {"required": false, "type": "none"},
                "required_scopes": {
                    "register": ["agent.register"],
                    "route": ["agent.route"],
                    "invoke": ["agent.invoke"],
                },
            }),
        )),
        AuthMode::Jwt => Err(ApiError::new(
            ErrorCode::NotFound,
            "JWT auth discovery is not available on this gateway",
        )),
    }
}

/// `POST /agent/v1/bootstrap`.
pub fn bootstrap(_cx: &Ctx) -> Result<Response<Body>, ApiError> {
    Err(ApiError::new(
        ErrorCode::NotFound,
        "trusted-LAN bootstrap is not available on this gateway",
    ))
}

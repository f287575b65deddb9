//! `/agent/v1/tasks/{id}[/events|/result]`: status, events, result,
//! cancel of asynchronous tasks held by this gateway.

use http::request::Parts;
use http::Response;

use crate::api::error::{ApiError, ErrorCode};
use crate::body::Body;
use crate::endpoints::Ctx;
use crate::router::TaskOp;

pub fn task(_cx: &Ctx, _parts: &Parts, id: &str, _op: TaskOp) -> Result<Response<Body>, ApiError> {
    Err(ApiError::new(
        ErrorCode::NotFound,
        format!("task {id} is not known to this gateway"),
    ))
}

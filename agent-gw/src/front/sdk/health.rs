//! `GET /healthz`.

use http::{Response, StatusCode};
use serde_json::json;

use crate::body::Body;
use crate::front::{json, Ctx};

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
            "connections": s.conns.open(),
        }),
    )
}

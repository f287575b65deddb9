//! The invocation pipeline: the one path every call takes, whichever
//! front end it came in on.
//!
//! ```text
//!  front ends (SDK API, MCP, A2A, peer listener)
//!      │ each builds one typed Invocation { principal, envelope, mode, hints }
//!      ▼
//!  invoke ─ admission (slot, tenant rate, hop) ─ decision (policy,
//!           selection, pinning, deadline) ─ placement (where a task or
//!           stream lives) ─ dispatch (a handler here, or the next router)
//! ```
//!
//! Nothing here knows a front end's wire format; the front ends know
//! nothing of each other.

pub mod admission;
pub mod decision;
pub mod dispatch;
pub mod invocation;
pub mod placement;
pub mod remote;
pub mod stream;
pub mod tasks;
pub mod transit;

use std::rc::Rc;

use http::Response;

use crate::api::error::ApiError;
use crate::body::Body;
use crate::core::Core;

pub use invocation::{ConnAbort, Hints, Invocation, Mode, Neighbour, Principal};
pub use placement::Placement;

/// What an invocation came to.
#[derive(Debug)]
pub enum Answer {
    /// The handler's answer (sync), an event stream, or a routed task
    /// control answered here.
    Response(Response<Body>),
    /// An async call's task, placed.
    Placed(Placement),
}

impl Answer {
    /// The SDK API's answer (placements as 202 with their handle).
    pub fn into_response(self) -> Response<Body> {
        match self {
            Answer::Response(r) => r,
            Answer::Placed(p) => p.into_response(),
        }
    }
}

/// Runs `inv` through admission, decision, placement and dispatch: the
/// entry point of every front end.
pub async fn invoke(core: &Rc<Core>, mut inv: Box<Invocation>) -> Result<Answer, ApiError> {
    admission::rate(core, &inv.principal, &inv.envelope.tenant)?;
    let header_cursor = match inv.mode {
        Mode::Stream { cursor } => cursor,
        Mode::Sync | Mode::Async => {
            if let Some(answer) = tasks::direct_control(core, &inv.envelope)? {
                return Ok(Answer::Response(answer));
            }
            None
        }
    };
    inv.envelope
        .consume_hop(core.cfg.hop_limit, &core.cfg.router_id)?;
    match inv.mode {
        Mode::Sync => {
            let kind = decision::kind(&inv, true, false);
            let d = decision::decide(core, &inv, kind)?;
            let resp = dispatch::forward(core, inv, d, dispatch::Relay::Sync).await?;
            Ok(Answer::Response(resp))
        }
        Mode::Async => Ok(Answer::Placed(placement::place(core, inv).await?)),
        Mode::Stream { .. } => Ok(Answer::Response(
            stream::serve(core, inv, header_cursor).await?,
        )),
    }
}

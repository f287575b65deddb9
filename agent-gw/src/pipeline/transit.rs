//! Transit: a call a neighbour pinned to a route that another router
//! serves, passed on with its body streamed (`forward::transit`).
//!
//! The caller's router decided the call and read its body; a router in
//! between (a relay carrying calls to its clients, a path through a
//! reflector) applies its own rules to what the link and the headers
//! state — whom the call acts for, the pinned route, the hops left — and
//! never reads the envelope. Admission, the hop limit, policy and the
//! route's eligibility for that tenant and caller are the same stages as
//! for any invocation; what this router holds per call is the two HTTP/2
//! windows, not the body.
//!
//! A call whose route is served here is read whole and takes the
//! ordinary pipeline instead.

use std::rc::Rc;

use http::{header, HeaderValue, Response};

use agentd::route::{RouteId, RouteSource};

use crate::api::envelope::next_hop_limit;
use crate::api::error::{ApiError, ErrorCode};
use crate::body::{with_deadline, Body};
use crate::budget::Holder;
use crate::core::Core;
use crate::forward::deadline::{fold_budget, Deadline};
use crate::forward::hop::OutBody;
use crate::forward::retry::CallKind;
use crate::forward::{relay_response, Outgoing, INVOKE_PATH, INVOKE_STREAM_PATH};
use crate::limits::InflightGuard;
use crate::peer::PeerStats;

use super::decision::{self, deadline_millis};
use super::dispatch::hold;
use super::invocation::{Hints, Mode, Neighbour, Principal};
use super::{admission, remote};
use tokio::time::Instant;

/// A call to pass on.
#[derive(Debug)]
pub struct Pass {
    pub neighbour: Rc<Neighbour>,
    pub mode: Mode,
    /// Sent to the next hop's stream endpoint.
    pub stream: bool,
    pub hints: Hints,
    pub started: Instant,
    pub slot: InflightGuard,
    /// Hops left as the neighbour stated them.
    pub hop_limit: u8,
    /// Streamed, or — declared within [`WHOLE_UP_TO`] — read already.
    pub body: OutBody,
}

/// Bodies declared at most this long are read before they are passed on:
/// one stream's flow-control window, what the neighbour may send before
/// we read anyway. They go on in one write (headers and body in one TLS
/// record, the assertion in the headers) instead of a body followed by
/// trailers a turn later.
pub const WHOLE_UP_TO: usize = crate::peer::h2_settings::STREAM_WINDOW as usize;

/// Does a call pinned to `route` pass through here unread? When the
/// route is another router's and a path to it is known: `Some`, saying
/// whether a path goes to a next hop that wants calls signed (a body
/// that nothing signed to us is then hashed as it passes).
pub fn passes(core: &Core, route: &RouteId) -> Option<bool> {
    let fib = core.fib.borrow();
    let table = fib.replica().table();
    if table
        .get(route)
        .is_some_and(|r| matches!(r.source, RouteSource::Local | RouteSource::Static))
    {
        return None;
    }
    let mut paths = table
        .next_hops()
        .filter(|hop| RouteId::via(route, hop).is_ok_and(|id| table.get(&id).is_some()))
        .peekable();
    paths.peek()?;
    Some(paths.any(|hop| core.peer.signed(hop)))
}

/// Passes `p` on down its pinned route's paths and relays the answer.
pub async fn pass(core: &Rc<Core>, p: Pass) -> Result<Response<Body>, ApiError> {
    let n = &p.neighbour;
    let who = &n.who;
    admission::rate(core, &Principal::Neighbour(n.clone()), &who.tenant)?;
    let hop_limit = next_hop_limit(
        p.hop_limit,
        core.cfg.hop_limit,
        &core.cfg.router_id,
        &who.capability,
    )?;
    let no_route = || {
        ApiError::new(
            ErrorCode::NoRoute,
            format!("route {} is not known here (its paths are gone)", n.route),
        )
        .rejected()
        .capability(&who.capability)
        .route_id(n.route.as_str())
    };
    let (_, version) = remote::route_info(core, &n.route).ok_or_else(no_route)?;
    let candidates = decision::pinned_candidates(core, n, &who.capability, version)?;
    let deadline = Deadline::after_ms(
        p.started,
        fold_budget(p.hints.timeout_ms, None, core.cfg.default_timeout_ms),
    );
    let kind = CallKind {
        sync: p.mode == Mode::Sync,
        resumed_stream: matches!(p.mode, Mode::Stream { cursor: Some(c) } if c > 0),
        caller_idempotent: p.hints.caller_idempotent,
        has_key: p.hints.has_key,
    };
    let mut relay = p.hints.relay;
    if p.stream {
        relay.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
    }
    let transit = match &p.body {
        OutBody::Transit(t) => Some(t.clone()),
        OutBody::Whole(_) => None,
    };
    // A body read here counts against the buffer budget while it is held,
    // as a whole-read call's does (never refused: the in-flight cap bounds
    // these).
    let _held = core.budget.reserve_forced(
        Holder::new(&who.tenant, n.addr.ip()),
        p.body.held(),
        Some(deadline_millis(deadline)),
    );
    let out = Outgoing {
        body: p.body,
        relay,
        who: Some(who.clone()),
        peer_path: if p.stream {
            INVOKE_STREAM_PATH
        } else {
            INVOKE_PATH
        },
        hop_limit: Some(hop_limit),
    };
    let stats = &core.peer.stats;
    PeerStats::add(&stats.transit_calls, 1);
    let sent = core
        .forwarder
        .forward(&who.capability, &candidates, &out, kind, deadline)
        .await;
    let passed = match &transit {
        Some(t) => t.seen(),
        None => out.body.held(),
    };
    PeerStats::add(&stats.transit_bytes, passed as u64);
    // A body cut on its way (too large, not what was signed, its sender
    // gone) never ended at the next hop: nothing was dispatched there,
    // whatever the attempt saw.
    if let Some(cut) = transit.and_then(|t| t.failure()) {
        return Err(cut.to_api_error().capability(&who.capability));
    }
    let resp = relay_response(sent?);
    let resp = if p.stream {
        resp
    } else {
        let (head, body) = resp.into_parts();
        Response::from_parts(head, with_deadline(body, deadline.instant()))
    };
    Ok(hold(resp, Some(p.slot)))
}

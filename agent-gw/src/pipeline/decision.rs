//! Decision: which routes a call may take, in what order, and by when.
//! Made once per call on the FIB replica (policy and selection are the
//! replica's), then fixed for every attempt and retry.

use std::rc::Rc;

use agentd::select::Query;
use agentd::time::Millis;

use crate::api::envelope::Envelope;
use crate::api::error::{ApiError, ErrorCode};
use crate::core::Core;
use crate::fib_sync::Ranked;
use crate::forward::deadline::{fold_budget, Deadline};
use crate::forward::retry::CallKind;
use crate::forward::{Candidate, Dest};

use agentd::fib::AgentAddr;

use super::invocation::{Invocation, Neighbour, Principal};

/// Where and how a call is sent: one ordered FIB snapshot, the retry
/// class, and the caller's one deadline.
#[derive(Debug)]
pub struct Dispatch {
    pub candidates: Vec<Candidate>,
    pub kind: CallKind,
    pub deadline: Deadline,
}

pub fn query(env: &Envelope) -> Query<'_> {
    Query {
        capability: &env.intent,
        version: env.intent_version,
        tenant: &env.tenant,
        source: Some(&env.source_agent),
        target_agent: env.target_agent.as_deref(),
    }
}

/// The ranked routes of a call with their scores (`/route`).
pub fn rank(core: &Core, env: &Envelope) -> Result<Vec<Ranked>, ApiError> {
    core.fib.borrow().decide(&query(env), Millis::now())
}

/// What a call walks down, in order. A call a neighbour forwarded is
/// pinned to the route it was sent for: that route itself when it is
/// ours, else our paths to it (never back through the router it came
/// from).
pub fn candidates(
    core: &Core,
    principal: &Principal,
    env: &Envelope,
) -> Result<Vec<Candidate>, ApiError> {
    match principal {
        Principal::Caller { pin: None, .. } => {
            core.fib.borrow().candidates(&query(env), Millis::now())
        }
        Principal::Caller { pin: Some(a), .. } => at_agent_addr(core, a, env),
        Principal::Neighbour(n) => {
            let all = core.fib.borrow().candidates(&query(env), Millis::now())?;
            pinned(n, all, &env.intent)
        }
    }
}

/// The candidates of a call to agent address `a`: that agent's own
/// routes on this router, under the caller's policy — never another
/// agent's, never a path through a peer, no fallback when it has none.
pub fn at_agent_addr(
    core: &Core,
    a: &AgentAddr,
    env: &Envelope,
) -> Result<Vec<Candidate>, ApiError> {
    let refuse = |why: String| {
        ApiError::new(
            ErrorCode::NoRoute,
            format!(
                "[{}] serves {} of {} only: {why}",
                a.addr, a.capability, a.origin
            ),
        )
        .rejected()
        .capability(&env.intent)
    };
    if *env.intent != *a.capability {
        return Err(refuse(format!("this call is for {}", env.intent)));
    }
    if env.target_agent.as_deref().is_some_and(|t| *t != *a.origin) {
        return Err(refuse(format!(
            "this call targets {}",
            env.target_agent.as_deref().unwrap_or_default()
        )));
    }
    let q = Query {
        target_agent: Some(&a.origin),
        ..query(env)
    };
    let own: Vec<Candidate> = core
        .fib
        .borrow()
        .candidates(&q, Millis::now())
        .map_err(|mut e| {
            // The selection's own refusal (its code, e.g. a policy's),
            // saying which address it is about.
            e.message = format!(
                "[{}] ({} of {}): {}",
                a.addr, a.capability, a.origin, e.message
            );
            e
        })?
        .into_iter()
        .filter(|c| matches!(c.dest, Dest::Handler(_)))
        .collect();
    if own.is_empty() {
        return Err(refuse("its agent has no route on this router now".into()));
    }
    Ok(own)
}

/// Whether route `id` is one of agent address `a`'s own routes here (a
/// task or stream it may be asked about).
pub fn is_agents_route(core: &Core, a: &AgentAddr, id: &agentd::route::RouteId) -> bool {
    let fib = core.fib.borrow();
    fib.replica().table().get(id).is_some_and(|r| {
        *r.origin == *a.origin
            && *r.capability == *a.capability
            && matches!(
                r.source,
                agentd::route::RouteSource::Local | agentd::route::RouteSource::Static
            )
    })
}

/// `all` (the ordered candidates for the call's tenant and caller)
/// narrowed to the route `n` pinned: the route itself when it is ours,
/// else our paths to it, never back through the sender.
pub fn pinned(
    n: &Neighbour,
    all: Vec<Candidate>,
    capability: &str,
) -> Result<Vec<Candidate>, ApiError> {
    let pinned: Vec<Candidate> = all
        .into_iter()
        .filter(|c| c.route_id.base() == n.route.as_str())
        .filter(|c| !matches!(&c.dest, Dest::Peer { next_hop } if **next_hop == *n.router_id))
        .collect();
    if pinned.is_empty() {
        return Err(ApiError::new(
            ErrorCode::NoRoute,
            format!(
                "route {} is not eligible here for tenant {} (its lease ended, its path is gone, or policy excludes it)",
                n.route, n.who.tenant
            ),
        )
        .rejected()
        .capability(capability)
        .route_id(n.route.as_str()));
    }
    Ok(pinned)
}

/// The candidates of a call `n` pinned, for its tenant and caller, of
/// `capability` at `version` (the pinned route's own, for a neighbour's
/// call that carries no envelope here).
pub fn pinned_candidates(
    core: &Core,
    n: &Neighbour,
    capability: &str,
    version: u32,
) -> Result<Vec<Candidate>, ApiError> {
    let q = Query {
        capability,
        version,
        tenant: &n.who.tenant,
        source: Some(&n.who.caller),
        target_agent: None,
    };
    let all = core
        .fib
        .borrow()
        .candidates(&q, Millis::now())
        .map_err(ApiError::rejected)?;
    pinned(n, all, capability)
}

/// The call's one deadline: the smallest budget its headers and
/// envelope ask for, else the gateway's default, from when it arrived.
pub fn deadline(core: &Core, inv: &Invocation) -> Deadline {
    let budget = fold_budget(
        inv.hints.timeout_ms,
        inv.envelope.timeout_ms,
        core.cfg.default_timeout_ms,
    );
    Deadline::after_ms(inv.started, budget)
}

/// The caller's deadline on the monotonic clock the task table uses.
pub fn deadline_millis(deadline: Deadline) -> Millis {
    Millis::now().saturating_add_ms(deadline.remaining_ms(tokio::time::Instant::now()))
}

/// The retry class of a call (`forward::retry`).
pub fn kind(inv: &Invocation, sync: bool, resumed_stream: bool) -> CallKind {
    CallKind {
        sync,
        resumed_stream,
        caller_idempotent: inv.hints.caller_idempotent,
        has_key: inv.hints.has_key,
    }
}

/// Deadline and ordered candidates of a call, fixed once.
pub fn decide(core: &Core, inv: &Invocation, kind: CallKind) -> Result<Dispatch, ApiError> {
    Ok(Dispatch {
        deadline: deadline(core, inv),
        candidates: candidates(core, &inv.principal, &inv.envelope)?,
        kind,
    })
}

/// Is the first candidate a peer path (the call leaves this router)?
pub fn goes_to_peer(candidates: &[Candidate]) -> bool {
    matches!(candidates.first().map(|c| &c.dest), Some(Dest::Peer { .. }))
}

/// The neighbour a call came from, shared (the peer hop re-signs for
/// whom it acts).
pub fn neighbour(inv: &Invocation) -> Option<Rc<Neighbour>> {
    inv.principal.neighbour().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::error::Outcome;
    use crate::forward::hop::CallIdentity;
    use crate::forward::target::Target;
    use agentd::route::RouteId;

    fn cand(id: &str, dest: Dest) -> Candidate {
        Candidate {
            route_id: RouteId::parse_table_id(id).unwrap(),
            dest,
            idempotent: false,
            allow_loopback: false,
            lan_source: None,
        }
    }

    fn peer(hop: &str) -> Dest {
        Dest::Peer {
            next_hop: hop.into(),
        }
    }

    fn from(router: &str, route: &str) -> Neighbour {
        Neighbour {
            router_id: router.into(),
            addr: "192.0.2.1:7447".parse().unwrap(),
            route: RouteId::new(route).unwrap(),
            who: Rc::new(CallIdentity {
                tenant: "lab".into(),
                caller: "agent://lab/c".into(),
                capability: "demo.echo".into(),
                origin: "router-c".into(),
            }),
        }
    }

    #[test]
    fn a_pinned_call_keeps_its_route_and_never_goes_back_to_its_sender() {
        let all = vec![
            cand("other@router-a", peer("router-a")),
            cand("r1@router-c", peer("router-c")),
            cand("r1@router-a", peer("router-a")),
            cand("r1@router-d", peer("router-d")),
        ];
        let got = pinned(&from("router-c", "r1"), all, "demo.echo").unwrap();
        let ids: Vec<&str> = got.iter().map(|c| c.route_id.as_str()).collect();
        assert_eq!(ids, ["r1@router-a", "r1@router-d"], "rank order kept");
    }

    #[test]
    fn our_own_route_is_served_here_and_a_missing_one_is_a_typed_refusal() {
        let local = Dest::Handler(Target::parse("http://192.0.2.10:8080/x").unwrap());
        let all = vec![cand("r1", local.clone()), cand("r2", local)];
        let got = pinned(&from("router-c", "r1"), all.clone(), "demo.echo").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].route_id.as_str(), "r1");
        let e = pinned(&from("router-c", "r9"), all, "demo.echo").unwrap_err();
        assert_eq!(e.code, ErrorCode::NoRoute);
        assert_eq!(e.outcome, Some(Outcome::Rejected), "the sender may move on");
    }
}

//! The gateway's FIB replica and the decision on it.
//!
//! Invocations are decided here, on the gateway's own copy of agentd's
//! routes and policy, with `agentd::select` — the same code `agentctl
//! lookup` explains — and never with an IPC round trip. Lease deadlines
//! are absolute `CLOCK_MONOTONIC` instants, so an expired route is
//! ineligible at its deadline even when agentd is gone; `expire_due` only
//! reclaims the memory, driven by the table's next deadline.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::pending;
use std::rc::Rc;
use std::time::Duration;

use agentd::fib::replica::{Applied, FibReplica, ReplicaError};
use agentd::fib::{FibEvent, PeerLink};
use agentd::ipc::client::{Client, ClientError, FibStream};
use agentd::ipc::message::Registration;
use agentd::route::{Lease, Route, RouteSource};
use agentd::select::{self, Denial, Query, Refusal, Reject};
use agentd::time::Millis;

use crate::api::error::{ApiError, ErrorCode};
use crate::forward::target::Target;
use crate::forward::{Candidate, Dest};
use crate::state::AppState;

/// First and longest wait between reconnection attempts to agentd.
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct Fib {
    replica: FibReplica,
    /// Parsed endpoint URLs by their text, so a call does not re-parse
    /// its route's URL. Bounded: emptied when it reaches `max_targets`
    /// (a route table's worth), then refilled by the calls that follow.
    targets: RefCell<HashMap<Box<str>, Target>>,
    max_targets: usize,
}

/// A candidate plus its score, for `/agent/v1/route`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranked {
    pub candidate: Candidate,
    pub origin: Box<str>,
    pub tenant: Box<str>,
    pub region: Box<str>,
    pub source: &'static str,
    pub score: u64,
}

impl Fib {
    pub fn new(max_routes: usize) -> Fib {
        Fib {
            replica: FibReplica::new(max_routes),
            targets: RefCell::new(HashMap::new()),
            max_targets: max_routes.max(16),
        }
    }

    pub fn replica(&self) -> &FibReplica {
        &self.replica
    }

    /// Applies one event of agentd's FIB stream.
    pub fn apply(&mut self, event: FibEvent, now: Millis) -> Result<Applied, ReplicaError> {
        self.replica.apply(event, now)
    }

    /// The subscription ended; keep serving the last complete state.
    pub fn disconnected(&mut self) {
        self.replica.disconnected();
    }

    /// Generation of the served state; `None` before the first snapshot.
    pub fn generation(&self) -> Option<u64> {
        self.replica.generation()
    }

    /// The established peer sessions agentd published (sorted by
    /// router_id): whom the peer data plane dials and accepts, each with
    /// the key its ARPX session verified.
    pub fn links(&self) -> impl Iterator<Item = &PeerLink> {
        self.replica.links()
    }

    /// The link of `router_id`, if its session is established.
    pub fn link(&self, router_id: &str) -> Option<&PeerLink> {
        self.replica.link(router_id)
    }

    /// Grows whenever the link set changes.
    pub fn links_generation(&self) -> u64 {
        self.replica.links_generation()
    }

    pub fn routes(&self) -> usize {
        self.replica.table().len()
    }

    /// Drops routes whose lease ended by `now`; returns how many.
    pub fn expire_due(&mut self, now: Millis) -> usize {
        self.replica.expire(now).len()
    }

    pub fn next_deadline(&self) -> Option<Millis> {
        self.replica.next_deadline()
    }

    /// The ordered candidates for `q` at `now` — one snapshot the whole
    /// retry sequence of a call walks down — or a typed refusal.
    pub fn decide(&self, q: &Query<'_>, now: Millis) -> Result<Vec<Ranked>, ApiError> {
        self.decide_with(q, now, |r, candidate, score| Ranked {
            candidate,
            origin: r.origin.clone(),
            tenant: r.tenant.clone(),
            region: r.region.clone(),
            source: r.source.as_str(),
            score,
        })
    }

    /// [`Fib::decide`] without the per-route details only `/route` shows:
    /// what a call walks down.
    pub fn candidates(&self, q: &Query<'_>, now: Millis) -> Result<Vec<Candidate>, ApiError> {
        self.decide_with(q, now, |_, candidate, _| candidate)
    }

    fn decide_with<T>(
        &self,
        q: &Query<'_>,
        now: Millis,
        mut make: impl FnMut(&Route, Candidate, u64) -> T,
    ) -> Result<Vec<T>, ApiError> {
        if self.replica.generation().is_none() {
            return Err(ApiError::new(
                ErrorCode::ControlPlaneUnavailable,
                format!(
                    "cannot route {} v{}: no FIB received from agentd yet",
                    q.capability, q.version
                ),
            )
            .rejected()
            .capability(q.capability)
            .retry_after_ms(1000));
        }
        let ranked = select::select_ordered(self.replica.table(), self.replica.policy(), q, now)
            .map_err(|r| refusal(q, r))?;
        let mut out = Vec::with_capacity(ranked.len());
        let mut unusable = 0usize;
        for s in ranked {
            let r = s.route;
            // A peer path is a candidate of its own kind: its endpoint is
            // the next hop's data plane, not a handler URL, so it is never
            // parsed or SSRF-checked as one. Local and static routes need
            // an endpoint we can reach over HTTP/1.1; relay forwarding
            // arrives later.
            let dest = match (r.source, &r.next_hop) {
                (RouteSource::Peer, Some(hop)) => Dest::Peer {
                    next_hop: hop.clone(),
                },
                (RouteSource::Local | RouteSource::Static, _) => match self.target(&r.endpoint) {
                    Some(target) => Dest::Handler(target),
                    None => {
                        unusable += 1;
                        continue;
                    }
                },
                _ => {
                    unusable += 1;
                    continue;
                }
            };
            let candidate = Candidate {
                route_id: r.id.clone(),
                dest,
                idempotent: r.contract.as_ref().is_some_and(|c| c.idempotent),
                allow_loopback: r.allow_loopback,
                lan_source: match r.source {
                    RouteSource::Local => r.owner.and_then(|o| o.source()),
                    _ => None,
                },
            };
            out.push(make(r, candidate, s.score));
        }
        if out.is_empty() {
            return Err(ApiError::new(
                ErrorCode::NoRoute,
                format!(
                    "no usable route for {} v{}: {unusable} eligible route(s) have endpoints this gateway cannot reach",
                    q.capability, q.version
                ),
            )
            .rejected()
            .capability(q.capability)
            .reason("endpoint_unsupported"));
        }
        Ok(out)
    }
}

impl Fib {
    /// `endpoint` parsed, from the cache when seen before; `None` when it
    /// is not a URL this gateway can forward to.
    fn target(&self, endpoint: &str) -> Option<Target> {
        let mut cache = self.targets.borrow_mut();
        if let Some(t) = cache.get(endpoint) {
            return Some(t.clone());
        }
        let t = Target::parse(endpoint).ok()?;
        if cache.len() >= self.max_targets {
            cache.clear();
        }
        cache.insert(endpoint.into(), t.clone());
        Some(t)
    }
}

/// The typed answer for "nothing to call".
fn refusal(q: &Query<'_>, r: Refusal<'_>) -> ApiError {
    let cap = q.capability;
    let v = q.version;
    match r {
        Refusal::Denied(Denial::Rule(rule)) => ApiError::new(
            ErrorCode::PolicyDenied,
            format!(
                "{cap} v{v} denied for tenant {} by policy rule {}",
                q.tenant, rule.id
            ),
        ),
        Refusal::Denied(Denial::DefaultAction) => ApiError::new(
            ErrorCode::PolicyDenied,
            format!(
                "{cap} v{v} denied for tenant {}: no rule matched and the default action is deny",
                q.tenant
            ),
        ),
        Refusal::Denied(Denial::PolicyInvalid(why)) => ApiError::new(
            ErrorCode::PolicyDenied,
            format!("{cap} v{v} denied: the configured policy is invalid ({why})"),
        ),
        Refusal::NoRoute(reason) => {
            let why = match reason {
                Reject::CapabilityVersion => "no route offers this capability and version",
                Reject::TargetAgent => "no route of the named target agent",
                Reject::TenantAccess => "no route is open to this tenant or source",
                Reject::LeaseExpired => "every route's lease has expired",
                Reject::Unhealthy => "every route is unhealthy",
                Reject::PeerDown => "the peer router of every route is down",
                _ => "every route is excluded by the policy's constraints",
            };
            ApiError::new(
                ErrorCode::NoRoute,
                format!(
                    "no eligible route for {cap} v{v}: {why} ({})",
                    reason.as_str()
                ),
            )
            .reason(reason.as_str())
        }
    }
    .rejected()
    .capability(cap)
}

/// Sleeps until the replica's next lease deadline (forever if none).
async fn next_expiry(state: &AppState) {
    let due = state.fib.borrow().next_deadline();
    match due {
        Some(at) => {
            let wait = at.saturating_sub(Millis::now());
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        None => pending::<()>().await,
    }
}

fn expire(state: &AppState) {
    let n = state.fib.borrow_mut().expire_due(Millis::now());
    if n > 0 {
        agentd::log_info!("{n} route(s) expired");
    }
}

/// Waits `d` while still expiring leases on time.
async fn wait_expiring(state: &AppState, d: Duration) {
    let until = tokio::time::Instant::now() + d;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(until) => return,
            () = next_expiry(state) => expire(state),
        }
    }
}

/// Follows agentd's FIB for as long as the gateway runs: connect,
/// subscribe, apply snapshot and deltas, expire leases at their deadlines;
/// on any break keep the last state and reconnect with backoff. Also hands
/// the live IPC connection to `Control` for registrations.
pub async fn run(state: Rc<AppState>) {
    let mut backoff = MIN_BACKOFF;
    let mut was_up = true;
    // When the last subscription broke; `None` before the first one.
    let mut lost_at: Option<Millis> = None;
    loop {
        match subscribe(&state, lost_at).await {
            Ok(mut stream) => {
                agentd::log_notice!("following agentd FIB at {}", state.cfg.ipc_socket.display());
                was_up = true;
                backoff = MIN_BACKOFF;
                let why = loop {
                    let ev = tokio::select! {
                        ev = stream.next() => ev,
                        () = next_expiry(&state) => { expire(&state); continue; }
                    };
                    match ev {
                        Some(Ok(ev)) => {
                            let (applied, links_changed) = {
                                let mut fib = state.fib.borrow_mut();
                                let before = fib.links_generation();
                                let applied = fib.apply(ev, Millis::now());
                                (applied, fib.links_generation() != before)
                            };
                            state.fib_applied.notify_waiters();
                            if links_changed {
                                // One consumer (the peer connection
                                // driver); a permit is kept until it looks.
                                state.links_changed.notify_one();
                            }
                            if let Err(e) = applied {
                                break e.to_string();
                            }
                        }
                        Some(Err(e)) => break e.to_string(),
                        None => break "agentd closed the FIB stream".to_string(),
                    }
                };
                state.control.set_link(None);
                state.fib.borrow_mut().disconnected();
                lost_at = Some(Millis::now());
                agentd::log_warn!(
                    "lost agentd FIB ({why}); forwarding on the last FIB, resubscribing"
                );
            }
            Err(e) => {
                if was_up {
                    agentd::log_warn!("agentd unreachable ({e}); retrying with backoff");
                    was_up = false;
                }
            }
        }
        wait_expiring(&state, backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn subscribe(state: &AppState, lost_at: Option<Millis>) -> Result<FibStream, ClientError> {
    let client = Client::connect(
        &state.cfg.ipc_socket,
        concat!("agent-gw ", env!("CARGO_PKG_VERSION")),
    )
    .await?;
    if let Some(lost) = lost_at {
        let status = client.status().await?;
        let ours = state.fib.borrow().generation();
        if restarted(
            lost,
            Millis::now(),
            status.uptime_s,
            status.generation,
            ours,
        ) {
            reseed(state, &client).await;
        }
    }
    let stream = client.subscribe_fib().await?;
    state.control.set_link(Some(client));
    Ok(stream)
}

/// Is the agentd we reconnected to a new process (which lost every leased
/// route)? It is if it started after we lost the old one — `uptime_s` has
/// whole seconds, so its start is known to within a second — or if its
/// table generation is behind the one our FIB already saw (generations
/// only grow within one process).
pub fn restarted(
    lost_at: Millis,
    now: Millis,
    uptime_s: u64,
    generation: u64,
    ours: Option<u64>,
) -> bool {
    let started_at_most = now.0.saturating_sub(uptime_s.saturating_mul(1000));
    started_at_most.saturating_add(1000) >= lost_at.0 || ours.is_some_and(|g| generation < g)
}

/// agentd came back as a new process and lost its leased routes: hand it
/// the local routes our last FIB still holds with live leases (same
/// route ids, the remaining lease), before subscribing. Its snapshot then
/// contains them again, so no call fails for want of a route and agents'
/// next renewals find their route ids. A remaining lease below the
/// minimum is raised to it (a few seconds at most).
async fn reseed(state: &AppState, client: &Client) {
    let now = Millis::now();
    let regs: Vec<Registration> = {
        let fib = state.fib.borrow();
        fib.replica()
            .table()
            .iter()
            .filter(|r| r.source == RouteSource::Local && r.lease.live_at(now))
            .map(|r| {
                let remaining_s = match r.lease {
                    Lease::Until(at) => at.saturating_sub(now).div_ceil(1000),
                    Lease::Permanent => state.cfg.lease_max_s,
                };
                let lease = remaining_s.clamp(state.cfg.lease_min_s, state.cfg.lease_max_s);
                Registration {
                    route_id: Some(r.id.clone()),
                    capability: r.capability.clone(),
                    version: r.version,
                    origin: r.origin.clone(),
                    endpoint: r.endpoint.clone(),
                    tenant: r.tenant.clone(),
                    region: r.region.clone(),
                    attrs: r.attrs,
                    access: r.access.clone(),
                    contract: r.contract.clone(),
                    lease_seconds: Some(u32::try_from(lease).unwrap_or(u32::MAX)),
                    // Handed back as administrator, keeping the owner the
                    // route was bound to (and its id).
                    caller: None,
                    owner: r.owner,
                }
            })
            .collect()
    };
    let total = regs.len();
    let mut restored = 0usize;
    for reg in regs {
        match client.register(reg).await {
            Ok(_) => restored += 1,
            Err(e) => {
                agentd::log_warn!("could not hand a route back to the restarted agentd: {e}")
            }
        }
    }
    if total > 0 {
        agentd::log_notice!(
            "agentd restarted; handed back {restored} of {total} live local route(s)"
        );
    }
}

/// Waits (at most `max`) until `cond` holds on the FIB replica; true if
/// it does. Lets a registration answer only once the gateway itself can
/// route by it (read-your-writes for the SDK).
pub async fn wait_fib(state: &AppState, max: Duration, cond: impl Fn(&Fib) -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let notified = state.fib_applied.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if cond(&state.fib.borrow()) {
            return true;
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(deadline) => return cond(&state.fib.borrow()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_started_after_we_lost_it_is_a_restart() {
        // Lost at 100 s; reconnect at 101.5 s to an agentd up for 1 s.
        assert!(restarted(Millis(100_000), Millis(101_500), 1, 5, Some(3)));
        // Up for an hour: the same process (the connection broke).
        assert!(!restarted(
            Millis(100_000),
            Millis(101_500),
            3600,
            9,
            Some(7)
        ));
    }

    #[test]
    fn endpoint_targets_are_cached_within_a_bound() {
        let fib = Fib::new(1);
        let url = "http://192.0.2.10:8080/invoke";
        assert_eq!(fib.target(url), Target::parse(url).ok());
        assert_eq!(fib.target(url), Target::parse(url).ok());
        assert_eq!(fib.targets.borrow().len(), 1);
        assert_eq!(fib.target("https://192.0.2.10:1/x"), None);
        assert_eq!(fib.targets.borrow().len(), 1);
        for port in 1..=40 {
            let u = format!("http://192.0.2.10:{port}/x");
            assert_eq!(
                fib.target(&u).unwrap().connect_addr(),
                format!("192.0.2.10:{port}")
            );
            assert!(fib.targets.borrow().len() <= fib.max_targets);
        }
    }

    #[test]
    fn a_generation_behind_ours_is_a_restart() {
        assert!(restarted(
            Millis(100_000),
            Millis(200_000),
            3600,
            2,
            Some(40)
        ));
        assert!(!restarted(
            Millis(100_000),
            Millis(200_000),
            3600,
            40,
            Some(40)
        ));
        assert!(!restarted(Millis(100_000), Millis(200_000), 3600, 0, None));
    }
}

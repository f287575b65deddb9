//! Following agentd: the FIB subscription that keeps the replica in
//! step (events, leases expiring between them, re-seeding a restarted
//! agentd with our live routes), and the read-your-writes wait of the
//! registration endpoints.

use std::future::pending;
use std::rc::Rc;
use std::time::Duration;

use agentd::ipc::client::{Client, ClientError, FibStream};
use agentd::ipc::message::Registration;
use agentd::route::{Lease, RouteSource};
use agentd::time::Millis;

use crate::fib_sync::Fib;

use super::Core;

/// First and longest wait between reconnection attempts to agentd.
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Sleeps until the replica's next lease deadline (forever if none).
async fn next_expiry(state: &Core) {
    let due = state.fib.borrow().next_deadline();
    match due {
        Some(at) => {
            let wait = at.saturating_sub(Millis::now());
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        None => pending::<()>().await,
    }
}

fn expire(state: &Core) {
    let n = state.fib.borrow_mut().expire_due(Millis::now());
    if n > 0 {
        agentd::log_info!("{n} route(s) expired");
    }
}

/// Waits `d` while still expiring leases on time.
async fn wait_expiring(state: &Core, d: Duration) {
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
pub async fn run(state: Rc<Core>) {
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
                            let (applied, links_changed, addrs_changed) = {
                                let mut fib = state.fib.borrow_mut();
                                let before = fib.links_generation();
                                let addrs_before = fib.agent_addrs().generation();
                                let applied = fib.apply(ev, Millis::now());
                                (
                                    applied,
                                    fib.links_generation() != before,
                                    fib.agent_addrs().generation() != addrs_before,
                                )
                            };
                            state.fib_applied.notify_waiters();
                            if links_changed {
                                // One consumer (the peer connection
                                // driver); a permit is kept until it looks.
                                state.links_changed.notify_one();
                            }
                            if addrs_changed {
                                let g = state.fib.borrow().agent_addrs().generation();
                                state.agent_addrs_changed.send_replace(g);
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

async fn subscribe(state: &Core, lost_at: Option<Millis>) -> Result<FibStream, ClientError> {
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
async fn reseed(state: &Core, client: &Client) {
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
                    capability: r.capability.as_str().into(),
                    version: r.version,
                    origin: r.origin.as_str().into(),
                    endpoint: r.endpoint.as_str().into(),
                    tenant: r.tenant.as_str().into(),
                    region: r.region.as_str().into(),
                    attrs: r.attrs,
                    access: (*r.access).clone(),
                    contract: r.contract.as_deref().cloned(),
                    lease_seconds: Some(u32::try_from(lease).unwrap_or(u32::MAX)),
                    // Handed back as administrator, keeping the owner the
                    // route was bound to (and its id).
                    caller: None,
                    owner: r.owner,
                    public_ipv6: false,
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
pub async fn wait_fib(state: &Core, max: Duration, cond: impl Fn(&Fib) -> bool) -> bool {
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

//! The gateway's counters reported to agentd (`agentctl stats` shows them
//! under `gateway`): buffer budget use, task table use, refusals per
//! reason. Change-driven and throttled: a report goes out when the
//! counters changed, at most once per [`MIN_INTERVAL`], and at least every
//! [`MAX_INTERVAL`] (so a restarted agentd learns them again and a stale
//! report shows its age).

use std::rc::Rc;
use std::time::Duration;

use agentd::ipc::message::GatewayStats;

use crate::core::Core;

/// Shortest time between two reports.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Longest time without a report while agentd is reachable.
pub const MAX_INTERVAL: Duration = Duration::from_secs(5);

/// The counters now.
pub fn snapshot(state: &Core) -> GatewayStats {
    let (tasks, capacity, t) = {
        let table = state.tasks.borrow_mut();
        (table.len(), table.config().capacity, table.stats())
    };
    let (remote, r) = {
        let table = state.peer.remote.borrow();
        (table.len(), table.stats())
    };
    let ledger = state.budget.ledger();
    let b = ledger.stats();
    GatewayStats {
        buffer_used: ledger.used() as u64,
        buffer_limit: ledger.config().limit as u64,
        buffer_peak: b.peak as u64,
        tasks: tasks as u64,
        task_capacity: capacity as u64,
        refused_budget: b.refused_total,
        refused_budget_tenant: b.refused_tenant,
        refused_budget_source: b.refused_source,
        refused_tasks_full: t.refused_full,
        refused_tasks_tenant: t.refused_tenant_share,
        refused_tasks_source: t.refused_source_share,
        history_degraded: t.history_degraded,
        results_released: t.released,
        stalled_followers: state.stream_stats.get().stalled_detached,
        peer_conns: state.peer.stats.conns.get(),
        peer_handshakes_out: state.peer.stats.handshakes_out.get(),
        peer_handshakes_in: state.peer.stats.handshakes_in.get(),
        peer_streams_refused: state.peer.stats.streams_refused.get(),
        peer_assertions_signed: state.peer.signer.signed.get(),
        peer_signatures: state.peer.signer.batches.get(),
        peer_assertions_verified: state.peer.stats.assertions_verified.get(),
        peer_signature_checks: state.peer.roots.borrow().checked(),
        peer_transit_calls: state.peer.stats.transit_calls.get(),
        peer_transit_bytes: state.peer.stats.transit_bytes.get(),
        remote_tasks: remote as u64,
        refused_remote_full: r.refused_full,
        refused_remote_tenant: r.refused_tenant_share,
        refused_remote_source: r.refused_source_share,
        remote_released: r.released,
    }
}

/// Whether a report is due: changed counters after `MIN_INTERVAL`, or
/// `MAX_INTERVAL` since the last one. (Pure, for tests.)
pub fn due(last: Option<&GatewayStats>, now: &GatewayStats, since_last: Duration) -> bool {
    match last {
        None => true,
        Some(l) => since_last >= MAX_INTERVAL || (l != now && since_last >= MIN_INTERVAL),
    }
}

/// Reports to agentd for as long as the gateway runs. A failed report is
/// retried at the next tick (agentd may be restarting).
pub async fn report(state: Rc<Core>) {
    let mut last: Option<GatewayStats> = None;
    let mut sent_at = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(MIN_INTERVAL).await;
        let now = snapshot(&state);
        if !due(last.as_ref(), &now, sent_at.elapsed()) {
            continue;
        }
        match state.control.report_stats(now).await {
            Ok(()) => {
                last = Some(now);
                sent_at = tokio::time::Instant::now();
            }
            Err(_) => last = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_on_change_throttled_and_periodically() {
        let a = GatewayStats::default();
        let b = GatewayStats { tasks: 1, ..a };
        assert!(due(None, &a, Duration::ZERO));
        assert!(!due(Some(&a), &a, MIN_INTERVAL), "unchanged");
        assert!(!due(Some(&a), &b, Duration::from_millis(10)), "throttled");
        assert!(due(Some(&a), &b, MIN_INTERVAL), "changed");
        assert!(due(Some(&a), &a, MAX_INTERVAL), "periodic");
    }
}

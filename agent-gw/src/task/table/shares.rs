//! Per-tenant and per-source shares of the task table, and when held
//! slots free by themselves (the truthful `Retry-After` of a refusal).

use std::net::IpAddr;

use agentd::time::Millis;

use super::{Task, TaskKind, TaskTable};
use crate::budget::BudgetConfig;
use crate::task::id::TaskId;

impl TaskTable {
    /// Most slots one tenant / one client address may hold.
    pub fn tenant_slots(&self) -> usize {
        BudgetConfig::share(self.cfg.capacity, self.cfg.tenant_share_percent)
    }

    pub fn source_slots(&self) -> usize {
        BudgetConfig::share(self.cfg.capacity, self.cfg.source_share_percent)
    }

    pub fn tenant_len(&self, tenant: &str) -> usize {
        self.per_tenant.get(tenant).copied().unwrap_or(0)
    }

    pub fn source_len(&self, source: IpAddr) -> usize {
        self.per_source
            .get(&crate::sources::SourceKey::of(source))
            .copied()
            .unwrap_or(0)
    }

    /// When `t` leaves the table by itself: its expiry once finished, the
    /// end of its deadline plus `ttl` while an async task runs, its idle
    /// deadline while a stream is unfollowed; `None` while a followed
    /// stream runs (no end is known).
    pub(super) fn frees_at(&self, t: &Task) -> Option<Millis> {
        let ttl = self.cfg.ttl_ms;
        if let Some(f) = t.finished {
            return Some(f.saturating_add_ms(ttl));
        }
        match t.kind {
            TaskKind::Async => t.deadline.map(|d| d.saturating_add_ms(ttl)),
            TaskKind::Stream => t.detached_at.map(|d| d.saturating_add_ms(ttl)),
        }
    }

    /// The earliest moment a slot of the matching tasks frees by itself.
    pub(super) fn slot_frees_at(&self, matches: impl Fn(&Task) -> bool) -> Option<Millis> {
        self.tasks
            .values()
            .filter(|t| matches(t))
            .filter_map(|t| self.frees_at(t))
            .min()
    }

    /// Updates the budget's release hint of task `id` after a state change.
    pub(super) fn hint(&self, id: &TaskId) {
        if let Some(t) = self.tasks.get(id) {
            t.bytes.set_free_at(self.frees_at(t));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

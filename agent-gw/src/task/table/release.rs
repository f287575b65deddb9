//! Releasing a finished async task whose result was fetched: its slot and
//! budget bytes free at once; a small record keeps answering its caller's
//! status calls (`result_released`) until the task's original expiry.

use agentd::route::RouteId;
use agentd::time::Millis;
use serde_json::{json, Value};

use super::{TaskKind, TaskState, TaskTable};
use crate::task::id::{TaskId, TaskToken};

/// A finished async task whose outcome was fetched: its slot and bytes are
/// free; this small record answers later status calls.
#[derive(Debug)]
pub(super) struct Released {
    pub(super) id: TaskId,
    pub(super) token: TaskToken,
    pub(super) tenant: String,
    pub(super) state: TaskState,
    pub(super) capability: String,
    pub(super) route_id: Option<RouteId>,
    pub(super) result_status: Option<u16>,
    /// The task's original expiry: after it, `task_expired`.
    pub(super) expires: Millis,
}

impl TaskTable {
    /// The caller fetched the outcome of finished async task `id`: its
    /// slot and bytes are freed at once (so a client that collects its
    /// results never waits for `ttl`), and a small record answers later
    /// status calls with `result_released` until the original expiry.
    /// Returns whether the task was released.
    pub fn release(&mut self, id: &TaskId) -> bool {
        let releasable = self
            .tasks
            .get(id)
            .is_some_and(|t| t.kind == TaskKind::Async && t.state.is_terminal());
        if !releasable {
            return false;
        }
        let Some(t) = self.take(id) else {
            return false;
        };
        if self.released.len() == self.cfg.capacity.max(1) {
            self.released.pop_front();
        }
        self.released.push_back(Released {
            id: t.id,
            token: t.token.clone(),
            tenant: t.tenant.clone(),
            state: t.state,
            capability: t.capability.clone(),
            route_id: t.route_id.clone(),
            result_status: t.result.as_ref().map(|r| r.status),
            expires: t
                .finished
                .unwrap_or(Millis::ZERO)
                .saturating_add_ms(self.cfg.ttl_ms),
        });
        self.stats.released += 1;
        true
    }

    /// The status document of a released task for its own caller, or
    /// `None` (unknown, wrong token, other tenant).
    pub fn released_status(
        &self,
        id: &TaskId,
        token: &[u8],
        tenant: Option<&str>,
        now: Millis,
    ) -> Option<Value> {
        let r = self.released.iter().find(|r| r.id == *id)?;
        if !r.token.matches(token) || tenant.is_some_and(|t| t != r.tenant) {
            return None;
        }
        Some(json!({
            "task_id": r.id.to_string(),
            "status": r.state.as_str(),
            "kind": "async",
            "capability": r.capability,
            "route_id": r.route_id.as_ref().map(|r| r.as_str()),
            "result_released": true,
            "result_status": r.result_status,
            "expires_in_ms": r.expires.saturating_sub(now),
        }))
    }
}

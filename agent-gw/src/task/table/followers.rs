//! Stream followers on the task table: attaching and detaching, each
//! follower's cursor, and the history bound a stream may grow to under
//! the byte budget (degrading only its own history, never past an event
//! a connected follower has not taken).

use super::*;

impl TaskTable {
    /// A follower attaches to a stream at `cursor`: the stream is no longer
    /// idle, and the producer will not drop events it has not taken.
    /// Returns the follower's handle.
    pub fn attach(&mut self, id: &TaskId, cursor: u64) -> Option<u64> {
        let t = self.tasks.get_mut(id)?;
        let f = t.next_follower;
        t.next_follower += 1;
        t.followers.push((f, cursor));
        if let Some(at) = t.detached_at.take() {
            self.idle
                .remove(&(at.saturating_add_ms(self.cfg.ttl_ms), *id));
        }
        self.hint(id);
        Some(f)
    }

    /// Follower `f` has taken the events up to `cursor`.
    pub fn advance(&mut self, id: &TaskId, f: u64, cursor: u64) {
        if let Some(t) = self.tasks.get_mut(id) {
            if let Some(entry) = t.followers.iter_mut().find(|(g, _)| *g == f) {
                entry.1 = cursor;
                t.drained.send_modify(|v| *v = v.wrapping_add(1));
            }
        }
    }

    /// Follower `f` left (the caller disconnected or the stream ended). The
    /// last one leaving a still-producing stream starts its idle timer.
    pub fn detach(&mut self, id: &TaskId, f: u64, now: Millis) {
        if let Some(t) = self.tasks.get_mut(id) {
            t.followers.retain(|(g, _)| *g != f);
            t.drained.send_modify(|v| *v = v.wrapping_add(1));
            if t.followers.is_empty() && !t.state.is_terminal() && t.kind == TaskKind::Stream {
                t.detached_at = Some(now);
                self.idle
                    .insert((now.saturating_add_ms(self.cfg.ttl_ms), *id));
            }
        }
        self.hint(id);
    }

    /// Whether appending this event keeps every event an attached follower
    /// has not taken yet. When not, the producer waits (`drain_signal`)
    /// instead of appending: the history bound limits what a *reconnect*
    /// can replay, never what a connected caller receives. `None` if the
    /// task is gone.
    pub fn room_for(&self, id: &TaskId, event: Option<&str>, data: &str) -> Option<bool> {
        let t = self.tasks.get(id)?;
        let target = Self::history_target(t, event, data);
        let bound = if target <= t.bytes.bytes() || t.bytes.can_resize(target) {
            t.history.max_bytes()
        } else {
            Self::degraded_bound(t)
        };
        let Some(dropped) = t.history.would_drop_within(event, data, bound) else {
            return Some(true);
        };
        Some(t.followers.iter().all(|(_, cursor)| *cursor >= dropped))
    }

    /// What stream `t` must hold in the budget to push this event under
    /// its configured history bound.
    fn history_target(t: &Task, event: Option<&str>, data: &str) -> usize {
        let cfg_bound = t.history.max_bytes();
        let cost = event_cost(event, data);
        let after = (t.history.bytes() + cost).min(cfg_bound.max(cost));
        TASK_OVERHEAD + t.body_bytes + t.floor.max(after)
    }

    /// The history bound of a stream whose charge cannot grow: what it
    /// already holds (never less than its event reserve). The stream then
    /// drops its own oldest events instead of taking bytes nobody granted.
    fn degraded_bound(t: &Task) -> usize {
        t.bytes
            .bytes()
            .saturating_sub(TASK_OVERHEAD + t.body_bytes)
            .max(t.floor)
    }

    /// A receiver that wakes when a follower of `id` advances or leaves.
    pub fn drain_signal(&self, id: &TaskId) -> Option<watch::Receiver<u64>> {
        self.tasks.get(id).map(|t| t.drained.subscribe())
    }

    /// Pending → Running. No effect in any other state.
    pub fn start(&mut self, id: &TaskId) {
        if let Some(t) = self.tasks.get_mut(id) {
            if t.state == TaskState::Pending {
                t.state = TaskState::Running;
                if t.kind == TaskKind::Async {
                    t.history.push(
                        Some("task_started"),
                        &json!({"task_id": id.to_string(), "status": "running"}).to_string(),
                    );
                }
                t.bump();
            }
        }
    }

    /// Appends a stream event; returns its id, or `None` if the task is
    /// gone or already terminal (a cancelled stream accepts nothing more).
    pub fn push_event(&mut self, id: &TaskId, event: Option<&str>, data: &str) -> Option<u64> {
        let t = self.tasks.get_mut(id)?;
        if t.state.is_terminal() {
            return None;
        }
        t.state = TaskState::Running;
        let target = Self::history_target(t, event, data);
        let degraded = target > t.bytes.bytes() && t.bytes.resize(target).is_err();
        let bound = if degraded {
            Self::degraded_bound(t)
        } else {
            t.history.max_bytes()
        };
        let n = t.history.push_within(event, data, bound);
        t.settle();
        t.bump();
        if degraded {
            self.stats.history_degraded += 1;
        }
        Some(n)
    }
}

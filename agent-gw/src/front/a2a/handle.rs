//! A2A task ids and what the A2A layer remembers about each task.
//!
//! An A2A task id is the gateway task's id followed by its access token
//! (32 + 64 hex digits): 384 random bits from the gateway's generator, so
//! an id can be neither guessed nor derived from another, and presenting
//! it is presenting the token. Every lookup also checks the caller's
//! tenant and subject against the task's (another caller's id reads as
//! "not found", exactly like an unknown one).
//!
//! [`Contexts`] keeps the per-task A2A facts the task table has no field
//! for (the context id and the skill); it is bounded by the task table's
//! capacity and forgets entries whose task has left the table.

use std::collections::HashMap;

use crate::task::{TaskId, TaskToken};

/// Hex digits of an A2A task id.
pub const HANDLE_LEN: usize = 32 + 64;

/// The A2A task id of task `id` with access token `token`.
pub fn encode(id: &TaskId, token: &TaskToken) -> String {
    format!("{id}{}", token.to_hex())
}

/// Splits an A2A task id into the task id and the token text; `None` for
/// anything that is not one of ours.
pub fn parse(handle: &str) -> Option<(TaskId, &[u8])> {
    if handle.len() != HANDLE_LEN || !handle.is_ascii() {
        return None;
    }
    let (id, token) = handle.split_at(32);
    Some((TaskId::parse(id)?, token.as_bytes()))
}

/// The A2A facts of one task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub context_id: Box<str>,
    pub skill: Box<str>,
    /// The task lives on another router (its handle is in the remote
    /// task table; the A2A id carries that router's token).
    pub remote: bool,
}

/// Per-task A2A facts, bounded (see the module doc).
#[derive(Debug, Default)]
pub struct Contexts {
    map: HashMap<TaskId, Meta>,
}

impl Contexts {
    /// Records `meta` for task `id`. When `cap` entries are held, the
    /// entries whose task is gone (`live` says no) are dropped first; the
    /// task table holds at most `cap` tasks, so the map stays within
    /// `cap` entries of live tasks plus this one.
    pub fn insert(&mut self, id: TaskId, meta: Meta, cap: usize, live: impl Fn(&TaskId) -> bool) {
        if self.map.len() >= cap {
            self.map.retain(|k, _| live(k));
        }
        self.map.insert(id, meta);
    }

    pub fn get(&self, id: &TaskId) -> Option<&Meta> {
        self.map.get(id)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_nothing_else_parses() {
        let id = TaskId::from_bytes([7; 16]);
        let token = TaskToken::from_bytes([9; 32]);
        let h = encode(&id, &token);
        assert_eq!(h.len(), HANDLE_LEN);
        let (back, tok) = parse(&h).unwrap();
        assert_eq!(back, id);
        assert!(token.matches(tok));
        assert!(parse(&h[1..]).is_none());
        assert!(parse(&format!("{h}0")).is_none());
        assert!(parse(&"g".repeat(HANDLE_LEN)).is_none());
        assert!(parse(&"é".repeat(HANDLE_LEN / 2)).is_none());
    }

    #[test]
    fn contexts_forget_gone_tasks_when_full() {
        let mut c = Contexts::default();
        let meta = |s: &str| Meta {
            context_id: s.into(),
            skill: "k".into(),
            remote: false,
        };
        for i in 0..4u8 {
            c.insert(TaskId::from_bytes([i; 16]), meta("x"), 4, |_| true);
        }
        assert_eq!(c.len(), 4);
        let live = TaskId::from_bytes([1; 16]);
        c.insert(TaskId::from_bytes([9; 16]), meta("y"), 4, |k| *k == live);
        assert_eq!(c.len(), 2);
        assert_eq!(&*c.get(&live).unwrap().context_id, "x");
        assert!(c.get(&TaskId::from_bytes([0; 16])).is_none());
    }
}

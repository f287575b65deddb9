//! Lease deadlines as a min-heap with lazy invalidation.
//!
//! Each leased route pushes `(deadline, slot, slot generation)`. Renewing
//! or removing a route does not search the heap: the old entry simply
//! stops matching the slot (its generation moved on, or the route's lease
//! is no longer `Until(deadline)`) and is discarded when it reaches the
//! top. The table keeps the top valid after every change, so
//! `next_deadline` is exact, and compacts the heap when stale entries
//! outnumber live ones, so repeated renewals cannot grow it without bound.
//! Expiry therefore costs O(log n) per due entry and never scans.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::Millis;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Timer {
    pub deadline: Millis,
    pub slot: u32,
    pub gen: u32,
}

#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Timer>>,
}

impl Timers {
    pub fn push(&mut self, t: Timer) {
        self.heap.push(Reverse(t));
    }

    pub fn peek(&self) -> Option<Timer> {
        self.heap.peek().map(|r| r.0)
    }

    pub fn pop(&mut self) -> Option<Timer> {
        self.heap.pop().map(|r| r.0)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Drops every entry `valid` rejects. O(n); the caller amortises it
    /// against the pushes that created the stale entries.
    pub fn retain(&mut self, mut valid: impl FnMut(&Timer) -> bool) {
        self.heap.retain(|r| valid(&r.0));
    }

    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = &Timer> {
        self.heap.iter().map(|r| &r.0)
    }

    pub fn allocated_bytes(&self) -> usize {
        self.heap.capacity() * std::mem::size_of::<Reverse<Timer>>()
    }
}

//! Bounded per-task event history with numeric ids, the basis of
//! `Last-Event-ID` resume (DESIGN §8).
//!
//! Ids are assigned here, 1, 2, 3… in append order, whatever ids the
//! upstream handler used, so a cursor always means "events up to N of this
//! task at this router". The history keeps at most `max_events` events and
//! `max_bytes` of event payload; the oldest are dropped first. A cursor
//! that points before the oldest retained event cannot be served without a
//! gap, and that is reported, never papered over.

use std::collections::VecDeque;

/// One retained event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: u64,
    /// SSE `event:` name; `None` means the default `message`.
    pub event: Option<Box<str>>,
    /// SSE `data:` payload; may contain newlines.
    pub data: Box<str>,
}

/// Fixed accounting overhead per event, so many empty events still count.
pub const EVENT_OVERHEAD: usize = 32;

impl Event {
    fn cost(&self) -> usize {
        EVENT_OVERHEAD + self.data.len() + self.event.as_ref().map_or(0, |e| e.len())
    }
}

/// What an event of this name and data counts against a byte bound.
pub fn event_cost(event: Option<&str>, data: &str) -> usize {
    EVENT_OVERHEAD + data.len() + event.map_or(0, str::len)
}

/// Why a cursor cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorError {
    /// Events after `cursor` up to `oldest - 1` were dropped.
    HistoryLost { cursor: u64, oldest: u64 },
    /// The cursor names an event that was never produced.
    Ahead { cursor: u64, last: u64 },
}

#[derive(Debug)]
pub struct History {
    events: VecDeque<Event>,
    bytes: usize,
    last_id: u64,
    max_events: usize,
    max_bytes: usize,
}

impl History {
    pub fn new(max_events: usize, max_bytes: usize) -> History {
        History {
            events: VecDeque::new(),
            bytes: 0,
            last_id: 0,
            max_events: max_events.max(1),
            max_bytes,
        }
    }

    /// Appends an event, assigns it the next id and drops the oldest ones
    /// until both bounds hold again. The newest event is always retained,
    /// even if it alone exceeds `max_bytes` (the SSE parser bounds a single
    /// event well below that).
    pub fn push(&mut self, event: Option<&str>, data: &str) -> u64 {
        self.push_within(event, data, self.max_bytes)
    }

    /// As [`push`](History::push), with a byte bound tighter than the
    /// configured one for this push (a stream whose history cannot grow
    /// within the gateway budget degrades its own history).
    pub fn push_within(&mut self, event: Option<&str>, data: &str, max_bytes: usize) -> u64 {
        let max_bytes = max_bytes.min(self.max_bytes);
        self.last_id += 1;
        let e = Event {
            id: self.last_id,
            event: event.map(Into::into),
            data: data.into(),
        };
        self.bytes += e.cost();
        self.events.push_back(e);
        while self.events.len() > 1
            && (self.events.len() > self.max_events || self.bytes > max_bytes)
        {
            if let Some(old) = self.events.pop_front() {
                self.bytes -= old.cost();
            }
        }
        self.last_id
    }

    /// The id of the newest event that appending an event of this size
    /// would drop, if any (what [`push`](History::push) would evict).
    pub fn would_drop(&self, event: Option<&str>, data: &str) -> Option<u64> {
        self.would_drop_within(event, data, self.max_bytes)
    }

    /// What [`push_within`](History::push_within) with this bound would evict.
    pub fn would_drop_within(
        &self,
        event: Option<&str>,
        data: &str,
        max_bytes: usize,
    ) -> Option<u64> {
        let max_bytes = max_bytes.min(self.max_bytes);
        let cost = event_cost(event, data);
        let mut len = self.events.len() + 1;
        let mut bytes = self.bytes + cost;
        let mut dropped = None;
        for e in &self.events {
            if !(len > self.max_events || bytes > max_bytes) {
                break;
            }
            len -= 1;
            bytes -= e.cost();
            dropped = Some(e.id);
        }
        dropped
    }

    /// The configured byte bound.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Id of the newest event (0 before the first).
    pub fn last_id(&self) -> u64 {
        self.last_id
    }

    /// Id of the oldest retained event.
    pub fn oldest_id(&self) -> Option<u64> {
        self.events.front().map(|e| e.id)
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Retained payload bytes (with per-event overhead).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Events with id > `cursor`, or why they cannot all be delivered.
    pub fn after(&self, cursor: u64) -> Result<impl Iterator<Item = &Event>, CursorError> {
        if cursor > self.last_id {
            return Err(CursorError::Ahead {
                cursor,
                last: self.last_id,
            });
        }
        if let Some(oldest) = self.oldest_id() {
            if cursor + 1 < oldest {
                return Err(CursorError::HistoryLost { cursor, oldest });
            }
        }
        // Ids are contiguous in the deque, so the start index is arithmetic.
        let skip = match self.oldest_id() {
            Some(oldest) => (cursor + 1).saturating_sub(oldest) as usize,
            None => 0,
        };
        Ok(self.events.iter().skip(skip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(h: &History, cursor: u64) -> Result<Vec<u64>, CursorError> {
        h.after(cursor).map(|it| it.map(|e| e.id).collect())
    }

    #[test]
    fn assigns_consecutive_ids_and_resumes_after_the_cursor() {
        let mut h = History::new(64, 1 << 20);
        for i in 0..5 {
            assert_eq!(h.push(Some("progress"), &format!("{i}")), i + 1);
        }
        assert_eq!(ids(&h, 0), Ok(vec![1, 2, 3, 4, 5]));
        assert_eq!(ids(&h, 3), Ok(vec![4, 5]));
        assert_eq!(ids(&h, 5), Ok(vec![]));
        assert_eq!(ids(&h, 6), Err(CursorError::Ahead { cursor: 6, last: 5 }));
    }

    #[test]
    fn drops_oldest_beyond_the_event_bound_and_reports_lost_history() {
        let mut h = History::new(3, 1 << 20);
        for _ in 0..5 {
            h.push(None, "x");
        }
        assert_eq!(h.len(), 3);
        assert_eq!(h.oldest_id(), Some(3));
        assert_eq!(ids(&h, 2), Ok(vec![3, 4, 5]));
        assert_eq!(
            ids(&h, 1),
            Err(CursorError::HistoryLost {
                cursor: 1,
                oldest: 3
            })
        );
        assert_eq!(
            ids(&h, 0),
            Err(CursorError::HistoryLost {
                cursor: 0,
                oldest: 3
            })
        );
    }

    #[test]
    fn would_drop_names_what_push_evicts() {
        let mut h = History::new(3, 1 << 20);
        for _ in 0..3 {
            assert_eq!(h.would_drop(None, "x"), None);
            h.push(None, "x");
        }
        assert_eq!(h.would_drop(None, "x"), Some(1));
        let mut b = History::new(64, 3 * (EVENT_OVERHEAD + 1));
        for _ in 0..3 {
            b.push(None, "x");
        }
        // Two events' worth of data evicts the two oldest.
        assert_eq!(b.would_drop(None, &"y".repeat(EVENT_OVERHEAD + 2)), Some(2));
    }

    #[test]
    fn a_tighter_bound_for_one_push_drops_more_but_keeps_the_newest() {
        let mut h = History::new(64, 1 << 20);
        for _ in 0..4 {
            h.push(None, "0123456789");
        }
        let one = event_cost(None, "0123456789");
        assert_eq!(h.would_drop_within(None, "0123456789", 2 * one), Some(3));
        h.push_within(None, "0123456789", 2 * one);
        assert_eq!((h.len(), h.oldest_id()), (2, Some(4)));
        assert_eq!(h.bytes(), 2 * one);
        // Never looser than the configured bound.
        let mut small = History::new(64, one);
        small.push_within(None, "0123456789", 1 << 20);
        small.push_within(None, "0123456789", 1 << 20);
        assert_eq!(small.len(), 1);
    }

    #[test]
    fn drops_oldest_beyond_the_byte_bound_but_keeps_the_newest() {
        let mut h = History::new(64, 3 * (EVENT_OVERHEAD + 10));
        for _ in 0..4 {
            h.push(None, "0123456789");
        }
        assert_eq!(h.len(), 3);
        assert!(h.bytes() <= 3 * (EVENT_OVERHEAD + 10));
        let big = "y".repeat(1000);
        h.push(None, &big);
        assert_eq!(h.len(), 1);
        assert_eq!(h.oldest_id(), Some(5));
    }
}

//! The caller side of a resumable stream: cursor, duplicate filter and the
//! decision whether a lost connection may be resumed.
//!
//! Events carry increasing numeric ids (DESIGN §8). After a disconnect the
//! client re-sends the same request (same `task_id`) with `Last-Event-ID`
//! set to the last id it delivered; the router replays only later events.
//! Should a replay still include an already-delivered id, the filter drops
//! it, so the iterator never yields a duplicate. A stream that never showed
//! an id cannot be resumed (a retry would re-run the producer), and a
//! stream ends normally only with the completion marker.

use std::fmt;

use crate::sse::{SseEvent, SseItem, COMPLETE_MARKER};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResumeError {
    /// An event id that is not a decimal `u64`.
    NonNumericId(String),
    /// The connection ended (or broke) and the stream cannot be resumed.
    Lost { reason: &'static str },
    /// The reconnect budget is spent.
    TooManyReconnects(u32),
}

impl fmt::Display for ResumeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResumeError::NonNumericId(id) => {
                write!(f, "stream event id {id:?} is not numeric; cannot resume")
            }
            ResumeError::Lost { reason } => {
                write!(f, "stream disconnected and cannot resume: {reason}")
            }
            ResumeError::TooManyReconnects(n) => {
                write!(f, "stream disconnected; gave up after {n} reconnects")
            }
        }
    }
}

impl std::error::Error for ResumeError {}

#[derive(Debug)]
pub struct ResumeState {
    cursor: u64,
    saw_id: bool,
    completed: bool,
    reconnects: u32,
    max_reconnects: u32,
}

impl ResumeState {
    /// `start_after` > 0 resumes a stream whose events up to that id were
    /// already seen (e.g. by an earlier process).
    pub fn new(start_after: u64, max_reconnects: u32) -> Self {
        ResumeState {
            cursor: start_after,
            saw_id: start_after > 0,
            completed: false,
            reconnects: 0,
            max_reconnects,
        }
    }

    /// Last delivered event id (0: none); goes into `Last-Event-ID`.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    pub fn completed(&self) -> bool {
        self.completed
    }

    pub fn reconnects(&self) -> u32 {
        self.reconnects
    }

    /// Filters one decoded item: `Some(event)` to deliver, `None` for
    /// comments and duplicates.
    pub fn on_item(&mut self, item: SseItem) -> Result<Option<SseEvent>, ResumeError> {
        let event = match item {
            SseItem::Comment(c) => {
                if c.trim() == COMPLETE_MARKER {
                    self.completed = true;
                }
                return Ok(None);
            }
            SseItem::Event(e) => e,
        };
        if let Some(id) = &event.id {
            let n: u64 = id
                .trim()
                .parse()
                .map_err(|_| ResumeError::NonNumericId(id.clone()))?;
            if n <= self.cursor && self.saw_id {
                return Ok(None);
            }
            self.cursor = n;
            self.saw_id = true;
        }
        Ok(Some(event))
    }

    /// The connection ended (cleanly or not) before the completion marker:
    /// returns the cursor to resume from, or why it cannot be resumed.
    pub fn on_disconnect(&mut self) -> Result<u64, ResumeError> {
        if !self.saw_id {
            return Err(ResumeError::Lost {
                reason: "no event id was received",
            });
        }
        if self.reconnects >= self.max_reconnects {
            return Err(ResumeError::TooManyReconnects(self.reconnects));
        }
        self.reconnects += 1;
        Ok(self.cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: &str) -> SseItem {
        SseItem::Event(SseEvent {
            id: Some(id.into()),
            data: format!("d{id}"),
            ..Default::default()
        })
    }

    fn delivered(s: &mut ResumeState, items: Vec<SseItem>) -> Vec<String> {
        items
            .into_iter()
            .filter_map(|i| s.on_item(i).unwrap())
            .map(|e| e.data)
            .collect()
    }

    #[test]
    fn replayed_events_after_resume_are_dropped() {
        let mut s = ResumeState::new(0, 3);
        assert_eq!(
            delivered(&mut s, vec![ev("1"), ev("2"), ev("3")]),
            ["d1", "d2", "d3"]
        );
        assert_eq!(s.on_disconnect(), Ok(3));
        // A replay that overlaps the cursor yields only the new events.
        assert_eq!(delivered(&mut s, vec![ev("2"), ev("3"), ev("4")]), ["d4"]);
        assert!(!s.completed());
        s.on_item(SseItem::Comment(COMPLETE_MARKER.into())).unwrap();
        assert!(s.completed());
    }

    #[test]
    fn a_stream_without_ids_cannot_resume() {
        let mut s = ResumeState::new(0, 3);
        let plain = SseItem::Event(SseEvent {
            data: "x".into(),
            ..Default::default()
        });
        assert_eq!(delivered(&mut s, vec![plain]), ["x"]);
        assert_eq!(
            s.on_disconnect(),
            Err(ResumeError::Lost {
                reason: "no event id was received"
            })
        );
    }

    #[test]
    fn reconnect_budget_is_enforced() {
        let mut s = ResumeState::new(5, 2);
        assert_eq!(s.on_disconnect(), Ok(5));
        assert_eq!(s.on_disconnect(), Ok(5));
        assert_eq!(s.on_disconnect(), Err(ResumeError::TooManyReconnects(2)));
    }

    #[test]
    fn starting_after_a_cursor_skips_earlier_ids() {
        let mut s = ResumeState::new(2, 1);
        assert_eq!(delivered(&mut s, vec![ev("1"), ev("2"), ev("3")]), ["d3"]);
        assert_eq!(s.cursor(), 3);
    }

    #[test]
    fn non_numeric_ids_are_errors() {
        let mut s = ResumeState::new(0, 1);
        assert_eq!(
            s.on_item(ev("abc")),
            Err(ResumeError::NonNumericId("abc".into()))
        );
    }
}

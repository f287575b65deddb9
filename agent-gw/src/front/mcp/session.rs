//! Sessions of the handshake revisions (2025-03-26 … 2025-11-25): what
//! `initialize` creates and `MCP-Session-Id` names.
//!
//! A session id is a random 192-bit value bound to the identity that
//! created it (tenant and subject): looked up by anyone else it does not
//! exist (404, like an unknown id), so an id seen in a log or guessed is
//! useless to another caller. The table is bounded in count
//! (`gateway.mcp_max_sessions`, one identity at most a quarter of it) and
//! in idle time (`gateway.mcp_session_idle`); a session with a call
//! running is not idle. Ending a session (DELETE, expiry) cancels its
//! running calls and closes its GET stream.
//!
//! Time is an input: every operation takes `now`.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use agentd::time::Millis;
use tokio::sync::Notify;

use super::stream::Stream;
use crate::front::protocol::Identity;
use crate::jsonrpc::Id;

/// Finished request streams a session keeps for resumption.
pub const KEPT_STREAMS: usize = 16;
/// Most calls one session runs at once (the gateway's in-flight caps
/// bound them all together too).
pub const MAX_CALLS: usize = 64;

#[derive(Debug)]
pub struct Session {
    pub owner: Identity,
    /// The negotiated revision.
    pub version: &'static str,
    last_used: Millis,
    /// Request streams by number (resumable with `Last-Event-ID`).
    streams: VecDeque<(u64, Rc<Stream>)>,
    next_stream: u64,
    /// Running calls by request id: notified to cancel.
    calls: HashMap<Id, Rc<Notify>>,
    /// Ends the GET stream, when one is open.
    get_stream: Option<Rc<Notify>>,
}

impl Session {
    /// A new request stream; the oldest finished ones beyond
    /// [`KEPT_STREAMS`] are forgotten.
    pub fn add_stream(&mut self, stream: Rc<Stream>) -> u64 {
        self.next_stream += 1;
        let n = self.next_stream;
        self.streams.push_back((n, stream));
        while self.streams.len() > KEPT_STREAMS {
            match self.streams.iter().position(|(_, s)| s.is_done()) {
                Some(i) => {
                    self.streams.remove(i);
                }
                None => break,
            }
        }
        n
    }

    /// Forgets the finished streams kept for resumption (their budget
    /// bytes free as the last follower lets go); returns how many.
    pub fn forget_finished(&mut self) -> usize {
        let before = self.streams.len();
        self.streams.retain(|(_, s)| !s.is_done());
        before - self.streams.len()
    }

    pub fn stream(&self, n: u64) -> Option<Rc<Stream>> {
        self.streams
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, s)| s.clone())
    }

    /// Registers a running call; `false` when the session runs
    /// [`MAX_CALLS`] already or the id is in use.
    pub fn start_call(&mut self, id: Id, cancel: Rc<Notify>) -> bool {
        if self.calls.len() >= MAX_CALLS || self.calls.contains_key(&id) {
            return false;
        }
        self.calls.insert(id, cancel);
        true
    }

    pub fn end_call(&mut self, id: &Id) {
        self.calls.remove(id);
    }

    /// Cancels the running call `id` (a `notifications/cancelled`).
    pub fn cancel_call(&mut self, id: &Id) -> bool {
        match self.calls.remove(id) {
            Some(c) => {
                c.notify_one();
                true
            }
            None => false,
        }
    }

    /// Opens the GET stream; `None` when one is open already.
    pub fn open_get(&mut self) -> Option<Rc<Notify>> {
        if self.get_stream.is_some() {
            return None;
        }
        let n = Rc::new(Notify::new());
        self.get_stream = Some(n.clone());
        Some(n)
    }

    /// The GET stream's client went away.
    pub fn get_closed(&mut self) {
        self.get_stream = None;
    }

    fn end(&mut self) {
        for (_, c) in self.calls.drain() {
            c.notify_one();
        }
        if let Some(g) = self.get_stream.take() {
            g.notify_one();
        }
    }

    fn idle_since(&self) -> Option<Millis> {
        self.calls.is_empty().then_some(self.last_used)
    }
}

/// Why no session was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// The table holds `max` sessions.
    Table { max: usize },
    /// This identity holds its share.
    Owner { max: usize },
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Full::Table { max } => write!(
                f,
                "{max} MCP sessions are open (gateway.mcp_max_sessions); end one with DELETE or retry later"
            ),
            Full::Owner { max } => write!(
                f,
                "this caller holds {max} MCP sessions, its share of gateway.mcp_max_sessions; end one with DELETE"
            ),
        }
    }
}

#[derive(Debug)]
pub struct Sessions {
    map: HashMap<Box<str>, Session>,
    max: usize,
    idle_ms: u64,
}

impl Sessions {
    pub fn new(max: usize, idle_ms: u64) -> Sessions {
        Sessions {
            map: HashMap::new(),
            max: max.max(1),
            idle_ms,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Ends sessions idle for longer than the idle limit.
    pub fn expire(&mut self, now: Millis) {
        let idle_ms = self.idle_ms;
        self.map.retain(|_, s| {
            let keep = s
                .idle_since()
                .is_none_or(|t| now.0.saturating_sub(t.0) < idle_ms);
            if !keep {
                s.end();
            }
            keep
        });
    }

    /// Opens session `id` for `owner`.
    pub fn open(
        &mut self,
        id: Box<str>,
        owner: Identity,
        version: &'static str,
        now: Millis,
    ) -> Result<(), Full> {
        self.expire(now);
        if self.map.len() >= self.max {
            return Err(Full::Table { max: self.max });
        }
        let share = (self.max / 4).max(1);
        if self.map.values().filter(|s| s.owner == owner).count() >= share {
            return Err(Full::Owner { max: share });
        }
        self.map.insert(
            id,
            Session {
                owner,
                version,
                last_used: now,
                streams: VecDeque::new(),
                next_stream: 0,
                calls: HashMap::new(),
                get_stream: None,
            },
        );
        Ok(())
    }

    /// Session `id` as `owner` sees it (touched: it is in use); `None`
    /// when unknown, expired or another identity's.
    pub fn get(&mut self, id: &str, owner: &Identity, now: Millis) -> Option<&mut Session> {
        self.expire(now);
        let s = self.map.get_mut(id).filter(|s| s.owner == *owner)?;
        s.last_used = now;
        Some(s)
    }

    /// Ends session `id` of `owner`; `false` when there is none.
    pub fn close(&mut self, id: &str, owner: &Identity) -> bool {
        match self.map.get(id) {
            Some(s) if s.owner == *owner => {
                if let Some(mut s) = self.map.remove(id) {
                    s.end();
                }
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(t: &str) -> Identity {
        Identity {
            tenant: t.into(),
            subject: format!("agent://{t}/mcp-client").into(),
        }
    }

    #[test]
    fn a_session_is_only_its_owners() {
        let mut s = Sessions::new(8, 60_000);
        let now = Millis(1000);
        s.open("s1".into(), who("a"), "2025-11-25", now).unwrap();
        assert!(s.get("s1", &who("a"), now).is_some());
        assert!(s.get("s1", &who("b"), now).is_none());
        assert!(!s.close("s1", &who("b")));
        assert!(s.get("s1", &who("a"), now).is_some());
        assert!(s.close("s1", &who("a")));
        assert!(s.get("s1", &who("a"), now).is_none());
    }

    #[test]
    fn sessions_are_bounded_in_count_share_and_idle_time() {
        let mut s = Sessions::new(8, 60_000);
        let t0 = Millis(1000);
        for i in 0..2 {
            s.open(format!("a{i}").into(), who("a"), "2025-11-25", t0)
                .unwrap();
        }
        // One identity holds at most a quarter.
        assert_eq!(
            s.open("a2".into(), who("a"), "2025-11-25", t0),
            Err(Full::Owner { max: 2 })
        );
        for i in 0..6 {
            s.open(
                format!("x{i}").into(),
                who(&format!("t{i}")),
                "2025-11-25",
                t0,
            )
            .unwrap();
        }
        assert_eq!(
            s.open("y".into(), who("y"), "2025-11-25", t0),
            Err(Full::Table { max: 8 })
        );
        // A running call keeps its session; the idle ones go.
        let cancel = Rc::new(Notify::new());
        assert!(s
            .get("a0", &who("a"), t0)
            .unwrap()
            .start_call(Id::Number(1), cancel.clone()));
        let later = Millis(t0.0 + 60_000);
        s.expire(later);
        assert_eq!(s.len(), 1);
        assert!(s.get("a0", &who("a"), later).is_some());
        assert!(s.open("y".into(), who("y"), "2025-11-25", later).is_ok());
    }

    #[test]
    fn ending_a_session_cancels_its_calls_and_get_stream() {
        let mut s = Sessions::new(8, 60_000);
        let now = Millis(5);
        s.open("s".into(), who("a"), "2025-11-25", now).unwrap();
        let cancel = Rc::new(Notify::new());
        let sess = s.get("s", &who("a"), now).unwrap();
        assert!(sess.start_call(Id::Text("c".into()), cancel.clone()));
        assert!(!sess.start_call(Id::Text("c".into()), cancel.clone()));
        let get = sess.open_get().unwrap();
        assert!(sess.open_get().is_none());
        assert!(s.close("s", &who("a")));
        // Both were notified (a stored permit each).
        let waker = futures_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        for n in [cancel, get] {
            let mut f = std::pin::pin!(n.notified());
            assert!(f.as_mut().poll(&mut cx).is_ready());
        }
    }

    #[test]
    fn streams_beyond_the_kept_number_are_forgotten_once_done() {
        let mut s = Sessions::new(8, 60_000);
        let now = Millis(5);
        s.open("s".into(), who("a"), "2025-11-25", now).unwrap();
        let sess = s.get("s", &who("a"), now).unwrap();
        let first = Stream::new(4, 1024, super::super::stream::unbounded(0));
        let n1 = sess.add_stream(first.clone());
        for _ in 0..KEPT_STREAMS {
            sess.add_stream(Stream::new(4, 1024, super::super::stream::unbounded(0)));
        }
        // Still running: kept.
        assert!(sess.stream(n1).is_some());
        first.finish();
        sess.add_stream(Stream::new(4, 1024, super::super::stream::unbounded(0)));
        assert!(sess.stream(n1).is_none());
    }

    /// Input: a session keeping finished and running streams whose
    /// histories are charged to one budget. Output: forgetting the
    /// finished ones, or ending the session, gives their bytes back.
    #[test]
    fn kept_streams_hold_budget_bytes_until_forgotten() {
        use crate::budget::{Budget, BudgetConfig, Holder};
        let b = Budget::new(BudgetConfig {
            limit: 1 << 20,
            tenant_share_percent: 100,
            source_share_percent: 100,
        });
        let h = || Holder::new("a", [192, 0, 2, 1].into());
        let mut s = Sessions::new(8, 60_000);
        let now = Millis(5);
        s.open("s".into(), who("a"), "2025-11-25", now).unwrap();
        let sess = s.get("s", &who("a"), now).unwrap();
        for _ in 0..3 {
            let st = Stream::new(4, 1 << 20, b.reserve(h(), 100, None).unwrap());
            st.push(vec![b'x'; 500]);
            st.finish();
            sess.add_stream(st);
        }
        let running = Stream::new(4, 1 << 20, b.reserve(h(), 100, None).unwrap());
        sess.add_stream(running.clone());
        drop(running);
        assert_eq!(b.ledger().used(), 3 * 500 + 100);
        assert_eq!(sess.forget_finished(), 3);
        assert_eq!(b.ledger().used(), 100);
        assert!(s.close("s", &who("a")));
        assert_eq!(b.ledger().used(), 0);
    }

    fn futures_waker() -> std::task::Waker {
        use std::sync::Arc;
        use std::task::Wake;
        struct W;
        impl Wake for W {
            fn wake(self: Arc<Self>) {}
        }
        std::task::Waker::from(Arc::new(W))
    }

    use std::future::Future;
}

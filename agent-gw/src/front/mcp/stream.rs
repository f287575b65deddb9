//! The event stream of one MCP request (a `tools/call` answered as SSE):
//! a bounded history of encoded SSE frames that the call appends to and
//! any number of followers read from a cursor — the POST's own response,
//! or, in the handshake revisions, a `GET` with `Last-Event-ID` after the
//! client lost that response.
//!
//! The history's bytes are held in the gateway budget
//! (`gateway.buffer_budget`, with its tenant and source shares), like a
//! task's stream history: a call reserves a floor before it starts (or is
//! refused), the history grows only while the budget grants it — else it
//! drops its own oldest frames — and the newest frame (the answer) is
//! always kept. A finished stream holds what it keeps for resumption
//! until its session forgets it, and gives the bytes back when dropped.
//!
//! A follower is a small task feeding a channel-backed response body, so
//! a client that goes away is noticed either when its connection closes
//! (hyper drops the body) or at the next keep-alive comment. What a
//! detached follower means is the caller's choice: in 2026-07-28 closing
//! the response *is* the cancellation; in the handshake revisions it is
//! not (the client may resume) and only `notifications/cancelled` or the
//! end of the session cancels.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch, Notify};

use crate::body::Body;
use crate::budget::Reservation;

/// A comment line every this often keeps proxies from timing the stream
/// out and makes a vanished client show (the write fails).
pub const KEEPALIVE: Duration = Duration::from_secs(5);

/// The stream's events so far.
#[derive(Debug)]
struct Events {
    /// (sequence number from 1, encoded frame).
    kept: VecDeque<(u64, Bytes)>,
    bytes: usize,
    last: u64,
    done: bool,
}

/// One request's event stream, shared by the call and its followers.
#[derive(Debug)]
pub struct Stream {
    events: RefCell<Events>,
    max_events: usize,
    max_bytes: usize,
    /// Bytes held in the gateway budget: at least `floor` while the call
    /// runs, the kept frames once it is done.
    bytes: RefCell<Reservation>,
    floor: usize,
    /// Frames pushed under a tighter bound than configured because the
    /// budget would not grow.
    degraded: std::cell::Cell<u64>,
    /// Bumped on every change (followers wait on it).
    tick: watch::Sender<u64>,
}

/// A follower asked for events that were dropped from the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lost;

impl Stream {
    /// A stream whose history is charged to `bytes`, a reservation of
    /// its floor taken at admission.
    pub fn new(max_events: usize, max_bytes: usize, bytes: Reservation) -> Rc<Stream> {
        let floor = bytes.bytes();
        Rc::new(Stream {
            events: RefCell::new(Events {
                kept: VecDeque::new(),
                bytes: 0,
                last: 0,
                done: false,
            }),
            max_events: max_events.max(2),
            max_bytes: max_bytes.max(1),
            bytes: RefCell::new(bytes),
            floor,
            degraded: std::cell::Cell::new(0),
            tick: watch::Sender::new(0),
        })
    }

    /// Bytes the stream holds in the budget now.
    pub fn reserved_bytes(&self) -> usize {
        self.bytes.borrow().bytes()
    }

    /// Frames pushed with a history bound tighter than configured.
    pub fn degraded(&self) -> u64 {
        self.degraded.get()
    }

    /// What the stream must hold: its floor while frames may come, its
    /// kept frames always.
    fn needed(&self, e: &Events) -> usize {
        if e.done {
            e.bytes
        } else {
            e.bytes.max(self.floor)
        }
    }

    /// The sequence number the next frame gets.
    pub fn next_seq(&self) -> u64 {
        self.events.borrow().last + 1
    }

    /// Appends a frame; the oldest go when the history is full, or when
    /// the budget will not grow to hold them (the last one always stays:
    /// it is the answer).
    pub fn push(&self, frame: Vec<u8>) -> u64 {
        let mut e = self.events.borrow_mut();
        e.last += 1;
        let seq = e.last;
        e.bytes += frame.len();
        e.kept.push_back((seq, Bytes::from(frame)));
        trim(&mut e, self.max_events, self.max_bytes);
        let mut bytes = self.bytes.borrow_mut();
        let want = self.needed(&e);
        if want > bytes.bytes() && bytes.resize(want).is_err() {
            self.degraded.set(self.degraded.get() + 1);
            trim(&mut e, self.max_events, bytes.bytes().max(self.floor));
            let want = self.needed(&e);
            if want > bytes.bytes() {
                // Only the newest frame is left and it is larger than
                // what the stream holds: it is kept all the same.
                bytes.resize_forced(want);
            }
        } else if want < bytes.bytes() {
            bytes.resize_forced(want);
        }
        drop((e, bytes));
        self.tick.send_modify(|t| *t += 1);
        seq
    }

    /// No more frames will come: the floor is given back, the kept
    /// frames stay charged.
    pub fn finish(&self) {
        let mut e = self.events.borrow_mut();
        e.done = true;
        self.bytes.borrow_mut().resize_forced(self.needed(&e));
        drop(e);
        self.tick.send_modify(|t| *t += 1);
    }

    pub fn is_done(&self) -> bool {
        self.events.borrow().done
    }

    /// Holds a frame with this sequence number (or did: it was dropped).
    pub fn covers(&self, seq: u64) -> bool {
        seq <= self.events.borrow().last
    }

    /// Frames after `cursor`, and whether the stream is done.
    fn after(&self, cursor: u64) -> Result<(Vec<(u64, Bytes)>, bool), Lost> {
        let e = self.events.borrow();
        let first = e.kept.front().map_or(e.last + 1, |(s, _)| *s);
        if cursor + 1 < first && cursor < e.last {
            return Err(Lost);
        }
        let out = e
            .kept
            .iter()
            .filter(|(s, _)| *s > cursor)
            .cloned()
            .collect();
        Ok((out, e.done))
    }

    /// Checks that a follower from `cursor` would miss nothing.
    pub fn check_cursor(&self, cursor: u64) -> Result<(), Lost> {
        self.after(cursor).map(|_| ())
    }
}

/// Drops the oldest frames until `max_events` and `max_bytes` hold, the
/// newest always kept.
fn trim(e: &mut Events, max_events: usize, max_bytes: usize) {
    while e.kept.len() > 1 && (e.kept.len() > max_events || e.bytes > max_bytes) {
        if let Some((_, f)) = e.kept.pop_front() {
            e.bytes -= f.len();
        }
    }
}

/// A response body that delivers `stream` after `cursor` until it is
/// done. `on_detach` is notified when the client goes away first.
pub fn follow(stream: Rc<Stream>, cursor: u64, on_detach: Option<Rc<Notify>>) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::task::spawn_local(async move {
        let detached = run_follower(&stream, cursor, &tx).await;
        if detached {
            if let Some(n) = on_detach {
                n.notify_one();
            }
        }
    });
    crate::body::channel(rx)
}

/// A response body that stays open (keep-alive comments only) until
/// `until` is notified or the client goes away (then `on_end` runs):
/// the handshake revisions' optional GET stream, on which this server
/// never sends anything.
pub fn idle(until: Rc<Notify>, on_end: Box<dyn FnOnce()>) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    tokio::task::spawn_local(async move {
        loop {
            tokio::select! {
                () = until.notified() => return,
                () = tx.closed() => break,
                () = tokio::time::sleep(KEEPALIVE) => {
                    if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                        break;
                    }
                }
            }
        }
        on_end();
    });
    crate::body::channel(rx)
}

/// Feeds `tx` until the stream is done (false) or the client left
/// (true). A history gap ends the response: the client resumes and is
/// told the events are lost.
async fn run_follower(stream: &Stream, mut cursor: u64, tx: &mpsc::Sender<Bytes>) -> bool {
    let mut tick = stream.tick.subscribe();
    loop {
        tick.mark_unchanged();
        let Ok((frames, done)) = stream.after(cursor) else {
            return false;
        };
        for (seq, f) in frames {
            if tx.send(f).await.is_err() {
                return true;
            }
            cursor = seq;
        }
        if done {
            return false;
        }
        tokio::select! {
            r = tick.changed() => if r.is_err() { return false },
            () = tx.closed() => return true,
            () = tokio::time::sleep(KEEPALIVE) => {
                if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    return true;
                }
            }
        }
    }
}

/// A reservation of `bytes` in a budget of its own that never binds.
#[cfg(test)]
pub(crate) fn unbounded(bytes: usize) -> Reservation {
    use crate::budget::{Budget, BudgetConfig, Holder};
    Budget::new(BudgetConfig {
        limit: usize::MAX,
        tenant_share_percent: 100,
        source_share_percent: 100,
    })
    .reserve(Holder::new("t", [192, 0, 2, 1].into()), bytes, None)
    .expect("an unbounded budget")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Budget, BudgetConfig, Holder};
    use http_body_util::BodyExt;

    #[test]
    fn history_is_bounded_and_gaps_are_told() {
        let s = Stream::new(3, 1 << 20, unbounded(0));
        for i in 0..5 {
            s.push(format!("e{i}").into_bytes());
        }
        // Seqs 3, 4, 5 are kept.
        assert_eq!(s.check_cursor(2), Ok(()));
        assert_eq!(s.check_cursor(1), Err(Lost));
        assert_eq!(s.check_cursor(5), Ok(()));
        let (f, done) = s.after(3).unwrap();
        assert_eq!(f.iter().map(|(q, _)| *q).collect::<Vec<_>>(), [4, 5]);
        assert!(!done);
        s.finish();
        assert!(s.is_done());
        // The byte bound keeps at least the last frame.
        let b = Stream::new(100, 4, unbounded(0));
        b.push(vec![b'x'; 10]);
        b.push(vec![b'y'; 10]);
        assert_eq!(b.after(0), Err(Lost));
        assert_eq!(b.after(1).unwrap().0.len(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_follower_gets_every_frame_then_the_end() {
        tokio::task::LocalSet::new()
            .run_until(async {
                let s = Stream::new(16, 1 << 20, unbounded(0));
                s.push(b"a".to_vec());
                let body = follow(s.clone(), 0, None);
                let s2 = s.clone();
                tokio::task::spawn_local(async move {
                    tokio::task::yield_now().await;
                    s2.push(b"b".to_vec());
                    s2.finish();
                });
                let all = body.collect().await.unwrap().to_bytes();
                assert_eq!(&all[..], b"ab");
            })
            .await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_body_reports_the_detach() {
        tokio::task::LocalSet::new()
            .run_until(async {
                let s = Stream::new(16, 1 << 20, unbounded(0));
                let gone = Rc::new(Notify::new());
                let body = follow(s.clone(), 0, Some(gone.clone()));
                drop(body);
                tokio::time::timeout(Duration::from_secs(5), gone.notified())
                    .await
                    .expect("detach noticed");
            })
            .await;
    }

    fn budget(limit: usize) -> Budget {
        Budget::new(BudgetConfig {
            limit,
            tenant_share_percent: 100,
            source_share_percent: 100,
        })
    }

    fn holder(last: u8) -> Holder {
        Holder::new("lab", [192, 0, 2, last].into())
    }

    /// Input: a stream with a 1000-byte floor; frames pushed, then done,
    /// then dropped. Output: the budget holds the floor or the kept
    /// frames, whichever is more, while it runs; only the kept frames
    /// once done; nothing once the stream is gone.
    #[test]
    fn the_history_is_charged_to_the_budget_until_the_stream_goes() {
        let b = budget(1 << 20);
        let s = Stream::new(16, 1 << 20, b.reserve(holder(1), 1000, None).unwrap());
        assert_eq!(b.ledger().used(), 1000);
        s.push(vec![b'a'; 600]);
        assert_eq!(b.ledger().used(), 1000, "within the floor");
        s.push(vec![b'b'; 600]);
        assert_eq!(b.ledger().used(), 1200);
        s.finish();
        assert_eq!(b.ledger().used(), 1200, "the kept frames, for resumption");
        let small = Stream::new(16, 1 << 20, b.reserve(holder(1), 1000, None).unwrap());
        small.push(vec![b'c'; 10]);
        small.finish();
        assert_eq!(
            small.reserved_bytes(),
            10,
            "a done stream gives its floor back"
        );
        drop((s, small));
        assert_eq!(b.ledger().used(), 0);
    }

    /// Input: a budget nearly held by someone else; a stream's history
    /// would grow past what is left. Output: the stream drops its own
    /// oldest frames instead (a resume from before them is told `Lost`)
    /// and counts the degradation; an answer larger than everything it
    /// holds is still kept, alone.
    #[test]
    fn a_full_budget_degrades_the_history_and_keeps_the_answer() {
        let b = budget(4000);
        let other = b.reserve(holder(9), 2500, None).unwrap();
        let s = Stream::new(16, 1 << 20, b.reserve(holder(1), 1000, None).unwrap());
        for f in [b'1', b'2', b'3'] {
            s.push(vec![f; 400]);
        }
        assert_eq!(s.reserved_bytes(), 1200);
        assert_eq!(s.degraded(), 0);
        s.push(vec![b'4'; 400]);
        assert_eq!(s.degraded(), 1);
        assert_eq!(s.reserved_bytes(), 1200, "no growth past the budget");
        assert_eq!(s.check_cursor(0), Err(Lost));
        assert_eq!(s.check_cursor(1), Ok(()));
        s.push(vec![b'A'; 3000]);
        assert_eq!(s.after(4).unwrap().0.len(), 1, "the answer is kept");
        assert_eq!(s.reserved_bytes(), 3000);
        assert_eq!(b.ledger().used(), 2500 + 3000);
        drop((s, other));
        assert_eq!(b.ledger().used(), 0);
    }
}

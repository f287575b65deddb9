//! What the connections' readers deliver, queued per connection and
//! taken by the daemon's loop in fair turns.
//!
//! Every advertisement costs an Ed25519 check on the loop, the daemon's
//! only one. Behind one FIFO channel, a neighbour sending routes as fast
//! as it can put its frames in front of every other neighbour's
//! heartbeat: an honest session could time out behind a flood that is
//! none of its doing. Here each connection has its own short queue (its
//! reader waits when it is full, and TCP pushes back on the sender), and
//! the loop takes one connection's frames per turn, round-robin, for at
//! most [`TURN_ROUTES`] routes' worth of work (deficit round-robin: a
//! frame is never split, its overdraft is paid off in later turns). A
//! flood thus delays only its own connection: another connection's
//! frames are taken within one turn per busy connection, and between two
//! turns the loop serves its other inputs (timers, IPC).
//!
//! ```text
//!   reader of conn 1 --push--> [queue 1] \
//!   reader of conn 2 --push--> [queue 2]  +--> ready ring --turn()--> Peers
//!   writer (its Closed) -----> [queue n] /     (bell wakes the loop)
//! ```
//!
//! The scheduling ([`Queues`]) is plain data, tested without tasks; the
//! [`Inbox`] wraps it for the reader tasks (a lock held for a push or a
//! take, a semaphore per connection for its queue bound, a bell).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use arpx::frame::FrameError;
use arpx::instance::ConnId;
use arpx::message::Message;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Routes (signature checks) one connection may cost the loop in one
/// turn. Other frames cost 1, so heartbeats, opens and closes are never
/// held back by their own connection's budget.
pub const TURN_ROUTES: i64 = 128;

/// Frames queued for the loop per connection; the reader waits for room
/// (memory per connection: this many frames of at most `arpx.max_frame`).
pub const QUEUE_FRAMES: usize = 8;

/// What a connection's tasks report, in order.
#[derive(Debug)]
pub enum ConnEvent {
    Frame(Message),
    /// Framing is lost (the reader has ended).
    FrameError(FrameError),
    /// The transport ended (EOF, reset, TLS error, write timeout).
    Closed(String),
    /// The writer wrote every frame queued before a notice
    /// (`arpx` `Output::NotifyWritten`).
    Written,
}

/// The loop's work for one item, in the unit of [`TURN_ROUTES`].
pub trait Cost {
    fn cost(&self) -> i64;
}

impl Cost for ConnEvent {
    fn cost(&self) -> i64 {
        match self {
            ConnEvent::Frame(Message::Update(u)) => {
                i64::try_from(u.routes.len()).unwrap_or(i64::MAX).max(1)
            }
            _ => 1,
        }
    }
}

/// One connection's queue and its turn credit.
#[derive(Debug)]
struct Queue<T> {
    items: VecDeque<T>,
    /// Deficit round-robin credit: topped up by the budget at each turn,
    /// spent by the items taken; negative after a frame bigger than
    /// what was left.
    credit: i64,
    /// In the ready ring.
    ready: bool,
}

/// Per-connection queues and the ring of those with something queued.
#[derive(Debug)]
pub struct Queues<T> {
    queues: HashMap<ConnId, Queue<T>>,
    ready: VecDeque<ConnId>,
    budget: i64,
}

impl<T: Cost> Queues<T> {
    pub fn new(budget: i64) -> Queues<T> {
        Queues {
            queues: HashMap::new(),
            ready: VecDeque::new(),
            budget: budget.max(1),
        }
    }

    /// A new connection's queue.
    pub fn open(&mut self, conn: ConnId) {
        self.queues.insert(
            conn,
            Queue {
                items: VecDeque::new(),
                credit: 0,
                ready: false,
            },
        );
    }

    /// Drops a connection's queue and what is in it.
    pub fn forget(&mut self, conn: ConnId) {
        if self.queues.remove(&conn).is_some() {
            self.ready.retain(|c| *c != conn);
        }
    }

    /// Queues `item`; `Err` gives it back when the connection is gone.
    pub fn push(&mut self, conn: ConnId, item: T) -> Result<(), T> {
        let Some(q) = self.queues.get_mut(&conn) else {
            return Err(item);
        };
        q.items.push_back(item);
        if !q.ready {
            q.ready = true;
            self.ready.push_back(conn);
        }
        Ok(())
    }

    /// Whether a turn would find something.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// One turn: the next connection in the ring with credit gets its
    /// items until its credit is spent (at least one item), and goes to
    /// the back of the ring if it has more. A connection whose credit is
    /// still negative from an earlier big frame is topped up and passed
    /// over (it still moves on: every pass adds the budget).
    pub fn turn(&mut self) -> Option<(ConnId, Vec<T>)> {
        loop {
            let conn = self.ready.pop_front()?;
            let q = self.queues.get_mut(&conn)?;
            q.credit = q.credit.saturating_add(self.budget);
            if q.credit <= 0 {
                self.ready.push_back(conn);
                continue;
            }
            let mut taken = Vec::new();
            while q.credit > 0 {
                let Some(item) = q.items.pop_front() else {
                    break;
                };
                q.credit = q.credit.saturating_sub(item.cost());
                taken.push(item);
            }
            if q.items.is_empty() {
                // Deficit round-robin: an idle connection keeps no
                // savings, but pays off its overdraft.
                q.credit = q.credit.min(0);
                q.ready = false;
            } else {
                self.ready.push_back(conn);
            }
            return Some((conn, taken));
        }
    }

    /// Items queued for `conn`.
    pub fn queued(&self, conn: ConnId) -> usize {
        self.queues.get(&conn).map_or(0, |q| q.items.len())
    }
}

/// An item with the queue slot it holds (frames only).
#[derive(Debug)]
struct Slotted {
    event: ConnEvent,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Cost for Slotted {
    fn cost(&self) -> i64 {
        self.event.cost()
    }
}

#[derive(Debug)]
struct Shared {
    queues: Queues<Slotted>,
    /// Each open connection's queue bound.
    slots: HashMap<ConnId, Arc<Semaphore>>,
}

/// The loop's side: turns, and the bell that wakes it.
#[derive(Debug, Clone)]
pub struct Inbox {
    shared: Arc<Mutex<Shared>>,
    bell: Arc<Notify>,
}

/// A connection's tasks' side.
#[derive(Debug, Clone)]
pub struct InboxSender {
    conn: ConnId,
    shared: Arc<Mutex<Shared>>,
    bell: Arc<Notify>,
    slots: Arc<Semaphore>,
}

impl Default for Inbox {
    fn default() -> Inbox {
        Inbox::new(TURN_ROUTES)
    }
}

impl Inbox {
    pub fn new(budget: i64) -> Inbox {
        Inbox {
            shared: Arc::new(Mutex::new(Shared {
                queues: Queues::new(budget),
                slots: HashMap::new(),
            })),
            bell: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // Nothing panics while holding the lock; a poisoned one still
        // holds consistent queues.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens `conn`'s queue; its tasks push through the sender.
    pub fn open(&self, conn: ConnId) -> InboxSender {
        let slots = Arc::new(Semaphore::new(QUEUE_FRAMES));
        let mut s = self.lock();
        s.queues.open(conn);
        s.slots.insert(conn, slots.clone());
        InboxSender {
            conn,
            shared: self.shared.clone(),
            bell: self.bell.clone(),
            slots,
        }
    }

    /// Drops `conn`'s queue; its reader, if waiting for room, ends.
    pub fn forget(&self, conn: ConnId) {
        let mut s = self.lock();
        s.queues.forget(conn);
        if let Some(slots) = s.slots.remove(&conn) {
            slots.close();
        }
    }

    /// Rung whenever a connection's queue gets its first item.
    pub fn bell(&self) -> Arc<Notify> {
        self.bell.clone()
    }

    pub fn has_ready(&self) -> bool {
        self.lock().queues.has_ready()
    }

    /// One connection's share of work (see [`Queues::turn`]); the queue
    /// slots of the frames taken are free again.
    pub fn turn(&self) -> Option<(ConnId, Vec<ConnEvent>)> {
        let (conn, items) = self.lock().queues.turn()?;
        Some((conn, items.into_iter().map(|s| s.event).collect()))
    }
}

impl InboxSender {
    /// Queues a frame, waiting while the connection's queue is full.
    /// `false`: the connection is gone (the reader ends).
    pub async fn frame(&self, msg: Message) -> bool {
        let Ok(slot) = self.slots.clone().acquire_owned().await else {
            return false;
        };
        self.push(ConnEvent::Frame(msg), Some(slot))
    }

    /// Queues a connection's last word (a frame error or its end). Not
    /// bounded by the queue: each task says it once, as it ends.
    pub fn last(&self, event: ConnEvent) -> bool {
        self.push(event, None)
    }

    /// Queues the writer's report that a notice was reached
    /// ([`ConnEvent::Written`]). Not bounded by the queue: the instance
    /// has at most two notices unanswered per connection.
    pub fn written(&self) -> bool {
        self.push(ConnEvent::Written, None)
    }

    fn push(&self, event: ConnEvent, slot: Option<OwnedSemaphorePermit>) -> bool {
        let pushed = {
            let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            s.queues
                .push(self.conn, Slotted { event, _slot: slot })
                .is_ok()
        };
        if pushed {
            self.bell.notify_one();
        }
        pushed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test item: its connection's label and cost.
    #[derive(Debug, Clone, PartialEq)]
    struct Item(&'static str, i64);

    impl Cost for Item {
        fn cost(&self) -> i64 {
            self.1
        }
    }

    fn conn(n: u64) -> ConnId {
        ConnId(n)
    }

    #[test]
    fn a_flood_on_one_connection_delays_another_by_one_turn_at_most() {
        let mut q = Queues::new(128);
        q.open(conn(1));
        q.open(conn(2));
        // Connection 1: 10,000 routes in frames of 300 (each over the
        // whole budget), queued before connection 2's heartbeat.
        for _ in 0..34 {
            q.push(conn(1), Item("flood", 300)).unwrap();
        }
        q.push(conn(2), Item("heartbeat", 1)).unwrap();
        let first = q.turn().unwrap();
        assert_eq!(first.0, conn(1));
        assert_eq!(first.1.len(), 1, "one big frame spends the whole turn");
        let second = q.turn().unwrap();
        assert_eq!(second, (conn(2), vec![Item("heartbeat", 1)]));
        // Whenever connection 2 has something again, it is served within
        // two turns (connection 1 passing over its overdraft costs none).
        for round in 0..20 {
            q.push(conn(2), Item("heartbeat", 1)).unwrap();
            let mut turns = 0;
            loop {
                turns += 1;
                let (c, _) = q.turn().unwrap();
                if c == conn(2) {
                    break;
                }
            }
            assert!(turns <= 2, "round {round}: {turns} turns");
        }
    }

    #[test]
    fn routes_are_shared_evenly_between_busy_connections_whatever_their_frame_size() {
        let mut q = Queues::new(128);
        q.open(conn(1));
        q.open(conn(2));
        for _ in 0..200 {
            q.push(conn(1), Item("big", 300)).unwrap();
        }
        for _ in 0..6000 {
            q.push(conn(2), Item("small", 10)).unwrap();
        }
        let mut done = [0i64; 3];
        for _ in 0..400 {
            let (c, items) = q.turn().unwrap();
            done[c.0 as usize] += items.iter().map(|i| i.1).sum::<i64>();
        }
        let (a, b) = (done[1], done[2]);
        // Deficit round-robin: each got its share within one frame.
        assert!((a - b).abs() <= 300, "{a} vs {b}");
        assert!(a > 10_000 && b > 10_000, "{a} {b}");
    }

    #[test]
    fn small_frames_are_taken_in_batches_up_to_the_budget() {
        let mut q = Queues::new(128);
        q.open(conn(1));
        for _ in 0..300 {
            q.push(conn(1), Item("hb", 1)).unwrap();
        }
        assert_eq!(q.turn().unwrap().1.len(), 128);
        assert_eq!(q.turn().unwrap().1.len(), 128);
        assert_eq!(q.turn().unwrap().1.len(), 44);
        assert!(!q.has_ready());
        assert!(q.turn().is_none());
    }

    #[test]
    fn a_forgotten_connection_takes_its_queue_along_and_refuses_more() {
        let mut q = Queues::new(128);
        q.open(conn(1));
        q.push(conn(1), Item("x", 1)).unwrap();
        q.forget(conn(1));
        assert!(!q.has_ready());
        assert_eq!(q.push(conn(1), Item("late", 1)), Err(Item("late", 1)));
        assert_eq!(q.queued(conn(1)), 0);
        assert!(q.turn().is_none());
    }

    #[test]
    fn an_idle_connection_saves_no_credit_but_pays_its_overdraft() {
        let mut q = Queues::new(100);
        q.open(conn(1));
        q.push(conn(1), Item("big", 250)).unwrap();
        assert_eq!(q.turn().unwrap().1.len(), 1);
        // Overdraft 150: the next frame waits one pass-over.
        q.push(conn(1), Item("next", 1)).unwrap();
        q.push(conn(1), Item("more", 1)).unwrap();
        let (_, items) = q.turn().unwrap();
        assert_eq!(items, vec![Item("next", 1), Item("more", 1)]);
        // Credit is back at most 0 after the queue ran empty: a burst
        // later gets one budget, not savings.
        for _ in 0..150 {
            q.push(conn(1), Item("hb", 1)).unwrap();
        }
        assert_eq!(q.turn().unwrap().1.len(), 100);
    }

    fn update(routes: usize) -> Message {
        use arpx::message::Update;
        let ad = arpx::testing::ad("r", &["origin"]);
        Message::Update(Update {
            seq: 1,
            routes: vec![ad; routes],
        })
    }

    /// Real reader-like tasks on a real runtime: one floods without
    /// pause, the other sends one heartbeat after the flood has filled
    /// its queue. The heartbeat is taken within two turns, and the
    /// flooder's queue never holds more than its bound.
    #[tokio::test]
    async fn a_flooding_task_cannot_hold_back_another_connections_heartbeat() {
        let inbox = Inbox::new(128);
        let flood = inbox.open(conn(1));
        let honest = inbox.open(conn(2));
        let flood_task = flood.clone();
        let flooder = tokio::spawn(async move {
            let mut sent = 0;
            while sent < 1000 && flood_task.frame(update(300)).await {
                sent += 1;
            }
            sent
        });
        // Let the flooder fill its queue.
        while inbox.lock().queues.queued(conn(1)) < QUEUE_FRAMES {
            tokio::task::yield_now().await;
        }
        tokio::task::yield_now().await;
        assert_eq!(inbox.lock().queues.queued(conn(1)), QUEUE_FRAMES);
        assert!(honest.frame(Message::Heartbeat).await);
        let mut turns = 0;
        let mut served_flood = 0;
        loop {
            turns += 1;
            let (c, events) = inbox.turn().expect("work queued");
            if c == conn(2) {
                assert!(matches!(events[..], [ConnEvent::Frame(Message::Heartbeat)]));
                break;
            }
            served_flood += events.len();
            tokio::task::yield_now().await;
        }
        assert!(turns <= 2, "{turns} turns");
        assert!(served_flood <= 1);
        // The connection goes: the waiting flooder ends.
        inbox.forget(conn(1));
        let sent = flooder.await.unwrap();
        assert!(sent <= QUEUE_FRAMES + 2, "{sent}");
        assert!(!flood.last(ConnEvent::Closed("late".into())));
        assert!(!inbox.has_ready());
    }
}

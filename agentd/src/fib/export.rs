//! agentd's side of FIB export: turns table changes into per-subscriber
//! event streams.
//!
//! The exporter is sans-IO. Each subscriber is a [`FibSink`] — in the
//! daemon, the bounded outbound queue of one IPC connection
//! ([`crate::ipc::server::FibSink`]). A sink that refuses an event (queue
//! full: the subscriber fell too far behind, or it disconnected) is dropped
//! on the spot; the IPC layer then closes that connection, and the
//! subscriber reconnects and receives a fresh snapshot. Nothing is ever
//! buffered here, so a slow gateway costs at most its own queue.

use crate::fib::{FibChange, FibEvent};
use crate::ipc::frame::MAX_FRAME_LEN;
use crate::route::Route;

/// Target encoded size of one snapshot chunk or delta part. Well under
/// [`MAX_FRAME_LEN`], so a chunk plus its framing always fits.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// A route bigger than this can never be sent in one frame and is skipped
/// (registration validation keeps real routes far below it).
pub const MAX_ROUTE_BYTES: usize = MAX_FRAME_LEN - 1024;

/// Where a subscriber's events go.
pub trait FibSink {
    /// Queues one event without blocking. `false` means the subscriber is
    /// gone or its queue is full; the exporter then drops it.
    fn offer(&mut self, event: FibEvent) -> bool;
}

/// Identifies a subscriber for [`FibExporter::unsubscribe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriberId(pub u64);

#[derive(Debug)]
struct Subscriber<S> {
    id: SubscriberId,
    sink: S,
    /// Generation the subscriber has after everything sent so far.
    generation: u64,
}

/// Counters for `agentctl stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    pub snapshots: u64,
    pub deltas: u64,
    /// Subscribers dropped because their queue was full or gone.
    pub dropped: u64,
    /// Routes left out because they could not fit in a frame.
    pub oversized_routes: u64,
}

/// Fans FIB changes out to subscribers.
#[derive(Debug)]
pub struct FibExporter<S> {
    subscribers: Vec<Subscriber<S>>,
    next_id: u64,
    stats: ExportStats,
}

impl<S> Default for FibExporter<S> {
    fn default() -> Self {
        FibExporter {
            subscribers: Vec::new(),
            next_id: 1,
            stats: ExportStats::default(),
        }
    }
}

impl<S: FibSink> FibExporter<S> {
    pub fn new() -> FibExporter<S> {
        FibExporter::default()
    }

    pub fn len(&self) -> usize {
        self.subscribers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    pub fn stats(&self) -> ExportStats {
        self.stats
    }

    /// Adds a subscriber and sends it a snapshot of `routes` at
    /// `generation` (the table's current generation). Returns `None` if
    /// the sink could not even take the snapshot.
    pub fn subscribe<'a>(
        &mut self,
        mut sink: S,
        generation: u64,
        routes: impl IntoIterator<Item = &'a Route>,
    ) -> Option<SubscriberId> {
        self.stats.snapshots += 1;
        let mut ok = sink.offer(FibEvent::SnapshotBegin { generation });
        let mut chunker = Chunker::default();
        for route in routes {
            if !ok {
                break;
            }
            match chunker.add(route.clone()) {
                Err(()) => self.stats.oversized_routes += 1,
                Ok(Some(full)) => ok = sink.offer(FibEvent::SnapshotChunk(full)),
                Ok(None) => {}
            }
        }
        if ok {
            if let Some(rest) = chunker.finish() {
                ok = sink.offer(FibEvent::SnapshotChunk(rest));
            }
        }
        ok = ok && sink.offer(FibEvent::SnapshotEnd { generation });
        if !ok {
            self.stats.dropped += 1;
            return None;
        }
        let id = SubscriberId(self.next_id);
        self.next_id += 1;
        self.subscribers.push(Subscriber {
            id,
            sink,
            generation,
        });
        Some(id)
    }

    pub fn unsubscribe(&mut self, id: SubscriberId) -> Option<S> {
        let at = self.subscribers.iter().position(|s| s.id == id)?;
        Some(self.subscribers.swap_remove(at).sink)
    }

    /// Sends `changes`, which bring the table to `generation`, to every
    /// subscriber; returns the ids of subscribers dropped on the way.
    /// Changes larger than one frame are split into several deltas.
    pub fn publish(&mut self, generation: u64, changes: Vec<FibChange>) -> Vec<SubscriberId> {
        // Without changes nothing is sent: a subscriber's next delta names
        // its older base, which is still exactly what it holds.
        if changes.is_empty() || self.subscribers.is_empty() {
            return Vec::new();
        }
        let mut parts: Vec<Vec<FibChange>> = Vec::new();
        let mut chunker = Chunker::default();
        for change in changes {
            match chunker.add(change) {
                Err(()) => self.stats.oversized_routes += 1,
                Ok(Some(full)) => parts.push(full),
                Ok(None) => {}
            }
        }
        parts.extend(chunker.finish());
        self.stats.deltas += 1;
        let mut dropped = Vec::new();
        self.subscribers.retain_mut(|s| {
            for (i, part) in parts.iter().enumerate() {
                let base = if i == 0 { s.generation } else { generation };
                let event = FibEvent::Delta {
                    base,
                    generation,
                    changes: part.clone(),
                };
                if !s.sink.offer(event) {
                    dropped.push(s.id);
                    return false;
                }
            }
            s.generation = generation;
            true
        });
        self.stats.dropped += dropped.len() as u64;
        dropped
    }
}

/// Groups items into chunks of about [`CHUNK_BYTES`] encoded bytes.
#[derive(Debug)]
struct Chunker<T> {
    items: Vec<T>,
    bytes: usize,
}

impl<T> Default for Chunker<T> {
    fn default() -> Self {
        Chunker {
            items: Vec::new(),
            bytes: 0,
        }
    }
}

impl<T: serde::Serialize> Chunker<T> {
    /// Adds an item; returns the previous chunk when this one would not
    /// fit, or `Err` if the item alone is too big for any frame.
    fn add(&mut self, item: T) -> Result<Option<Vec<T>>, ()> {
        let size = postcard::experimental::serialized_size(&item).map_err(|_| ())?;
        if size > MAX_ROUTE_BYTES {
            return Err(());
        }
        let full = if !self.items.is_empty() && self.bytes + size > CHUNK_BYTES {
            self.bytes = 0;
            Some(std::mem::take(&mut self.items))
        } else {
            None
        };
        self.bytes += size;
        self.items.push(item);
        Ok(full)
    }

    fn finish(self) -> Option<Vec<T>> {
        (!self.items.is_empty()).then_some(self.items)
    }
}

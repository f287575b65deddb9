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
//!
//! What to publish for each change the daemon makes to its `RouteTable`
//! (several may go into one `publish` call, with the table's generation
//! after the last of them):
//!
//! | table call | change |
//! |---|---|
//! | `upsert`, `renew`, `set_health` | `Upsert(route as now in the table)` |
//! | `remove`, each route `expire` returned | `Remove(route_id)` |
//! | `set_peer_up(router, up)` | `PeerUp { router_id, up }` |
//! | policy replaced (reload) | `Policy(new policy)` |
//! | an ARPX session established / closed | `Link(link)` / `Unlink(router_id)` |
//!
//! Expiry is published too, although the replica expires the same routes
//! at the same instant by itself: removals are idempotent, and publishing
//! keeps a replica whose clock read came a little early from holding a
//! route agentd already dropped.

use crate::fib::{AgentAddr, FibChange, FibEvent, PeerLink};
use crate::ipc::frame::MAX_FRAME_LEN;
use crate::policy::Policy;
use crate::table::RouteTable;

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

    /// Adds a subscriber and sends it a snapshot of `table` (at the
    /// table's generation), `policy` and `links`. Returns `None` if the
    /// sink could not even take the snapshot. Publish every change made to
    /// the table before subscribing, or the newcomer's first delta will
    /// not line up.
    ///
    /// The links go into `SnapshotEnd` sorted by router_id; when they do
    /// not fit into one chunk, the rest follow at once as deltas on the
    /// snapshot's generation (`base == generation`), so no frame ever
    /// outgrows the bound whatever the number of peers.
    pub fn subscribe(
        &mut self,
        mut sink: S,
        table: &RouteTable,
        policy: &Policy,
        links: &[PeerLink],
        agent_addrs: &[AgentAddr],
    ) -> Option<SubscriberId> {
        let generation = table.generation();
        let mut ok = sink.offer(FibEvent::SnapshotBegin { generation });
        let mut chunker = Chunker::default();
        for route in table.iter() {
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
        let mut sorted = links.to_vec();
        sorted.sort_by(|a, b| a.router_id.cmp(&b.router_id));
        let mut parts = parts_of(sorted, &mut self.stats).into_iter();
        let mut addrs = agent_addrs.to_vec();
        addrs.sort_by_key(|a| a.addr);
        let mut addr_parts = parts_of(addrs, &mut self.stats).into_iter();
        ok = ok
            && sink.offer(FibEvent::SnapshotEnd {
                generation,
                policy: Box::new(policy.clone()),
                peers_down: table.peers_down().map(Box::from).collect(),
                links: parts.next().unwrap_or_default(),
                agent_addrs: addr_parts.next().unwrap_or_default(),
            });
        let rest = parts
            .map(|p| p.into_iter().map(FibChange::Link).collect::<Vec<_>>())
            .chain(addr_parts.map(|p| p.into_iter().map(FibChange::Bind).collect()));
        for changes in rest {
            if !ok {
                break;
            }
            ok = sink.offer(FibEvent::Delta {
                base: generation,
                generation,
                changes,
            });
        }
        if !ok {
            self.stats.dropped += 1;
            return None;
        }
        self.stats.snapshots += 1;
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

/// `items` (links, agent addresses) in chunks of about [`CHUNK_BYTES`].
/// agentd validates what it publishes (`MAX_LINK_DATA_LEN`, identifier
/// lengths), so none is near a frame's size; one that were would be
/// counted like an oversized route.
fn parts_of<T: serde::Serialize>(items: Vec<T>, stats: &mut ExportStats) -> Vec<Vec<T>> {
    let mut parts = Vec::new();
    let mut chunker = Chunker::default();
    for item in items {
        match chunker.add(item) {
            Err(()) => stats.oversized_routes += 1,
            Ok(Some(full)) => parts.push(full),
            Ok(None) => {}
        }
    }
    parts.extend(chunker.finish());
    parts
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{Access, Attributes, Contract, Effect, Lease, Route, RouteId, RouteSource};
    use crate::time::Millis;

    /// A sink with a fixed capacity that records what it accepted.
    #[derive(Debug, Default)]
    struct VecSink {
        events: Vec<FibEvent>,
        cap: usize,
    }

    impl FibSink for VecSink {
        fn offer(&mut self, event: FibEvent) -> bool {
            if self.events.len() >= self.cap {
                return false;
            }
            self.events.push(event);
            true
        }
    }

    fn sink(cap: usize) -> VecSink {
        VecSink {
            events: Vec::new(),
            cap,
        }
    }

    fn route(i: usize, schema: usize) -> Route {
        Route {
            id: RouteId::new(&format!("r{i}")).unwrap(),
            capability: "demo.echo".into(),
            version: 1,
            origin: "agent://lab/echo".into(),
            endpoint: "http://192.0.2.10:8080/".into(),
            tenant: "lab".into(),
            region: "local".into(),
            attrs: Attributes::default(),
            access: Access::default().into(),
            contract: (schema > 0)
                .then(|| Contract {
                    effect: Effect::Read,
                    idempotent: true,
                    input_schema: Some("s".repeat(schema).into()),
                    description: None,
                })
                .map(Box::new),
            source: RouteSource::Local,
            path: Box::default(),
            next_hop: None,
            lease: Lease::Until(Millis(5_000)),
            healthy: true,
            allow_loopback: false,
            owner: None,
            proof: Default::default(),
            disputed: false,
        }
    }

    fn table_of(routes: &[Route]) -> RouteTable {
        let mut t = RouteTable::new(10_000);
        for r in routes {
            t.upsert(r.clone()).unwrap();
        }
        t
    }

    fn end(generation: u64) -> FibEvent {
        FibEvent::SnapshotEnd {
            generation,
            policy: Box::default(),
            peers_down: vec![],
            links: vec![],
            agent_addrs: vec![],
        }
    }

    fn sinks(ex: &mut FibExporter<VecSink>) -> Vec<Vec<FibEvent>> {
        let ids: Vec<_> = ex.subscribers.iter().map(|s| s.id).collect();
        ids.into_iter()
            .map(|id| ex.unsubscribe(id).unwrap().events)
            .collect()
    }

    #[test]
    fn snapshot_is_chunked_by_encoded_size_and_every_chunk_fits_a_frame() {
        let routes: Vec<_> = (0..40).map(|i| route(i, 10_000)).collect();
        let mut ex = FibExporter::new();
        ex.subscribe(sink(1000), &table_of(&routes), &Policy::default(), &[], &[])
            .unwrap();
        let events = sinks(&mut ex).remove(0);
        assert_eq!(
            events.first(),
            Some(&FibEvent::SnapshotBegin { generation: 40 })
        );
        assert_eq!(events.last(), Some(&end(40)));
        let mut seen = Vec::new();
        for ev in &events[1..events.len() - 1] {
            let FibEvent::SnapshotChunk(c) = ev else {
                panic!("{ev:?}")
            };
            let bytes = postcard::experimental::serialized_size(ev).unwrap();
            assert!(bytes <= CHUNK_BYTES + 11_000, "chunk of {bytes} bytes");
            seen.extend(c.iter().cloned());
        }
        assert_eq!(seen, routes);
        assert!(events.len() > 3, "several chunks");
    }

    #[test]
    fn empty_table_snapshot_has_no_chunks_but_carries_policy_and_peer_states() {
        let mut ex = FibExporter::new();
        let mut t = RouteTable::new(10);
        t.set_peer_up("router-b", false);
        let policy = Policy::invalid("broken config");
        ex.subscribe(sink(10), &t, &policy, &[], &[]).unwrap();
        let end = FibEvent::SnapshotEnd {
            generation: 1,
            policy: Box::new(policy),
            peers_down: vec!["router-b".into()],
            links: vec![],
            agent_addrs: vec![],
        };
        assert_eq!(
            sinks(&mut ex).remove(0),
            [FibEvent::SnapshotBegin { generation: 1 }, end]
        );
    }

    #[test]
    fn snapshot_end_carries_the_links_sorted_and_link_changes_go_out_as_deltas() {
        let link = |id: &str| PeerLink {
            router_id: id.into(),
            key: [7; 32],
            data: "198.51.100.2:7447".into(),
            signed: true,
            relay: Default::default(),
        };
        let mut ex = FibExporter::new();
        let t = RouteTable::new(10);
        ex.subscribe(
            sink(10),
            &t,
            &Policy::default(),
            &[link("router-c"), link("router-b")],
            &[],
        )
        .unwrap();
        // Link changes do not move the table generation.
        ex.publish(0, vec![FibChange::Unlink("router-c".into())]);
        let events = sinks(&mut ex).remove(0);
        assert_eq!(
            events,
            [
                FibEvent::SnapshotBegin { generation: 0 },
                FibEvent::SnapshotEnd {
                    generation: 0,
                    policy: Box::default(),
                    peers_down: vec![],
                    links: vec![link("router-b"), link("router-c")],
                    agent_addrs: vec![],
                },
                FibEvent::Delta {
                    base: 0,
                    generation: 0,
                    changes: vec![FibChange::Unlink("router-c".into())],
                },
            ]
        );
        assert_eq!(ex.stats().snapshots, 1);
    }

    #[test]
    fn deltas_name_each_subscribers_base() {
        let mut ex = FibExporter::new();
        let mut t = table_of(&[route(0, 0), route(1, 0), route(2, 0)]);
        ex.subscribe(sink(100), &t, &Policy::default(), &[], &[])
            .unwrap();
        t.remove(&RouteId::new("r0").unwrap());
        ex.publish(
            t.generation(),
            vec![FibChange::Remove(RouteId::new("r0").unwrap())],
        );
        ex.subscribe(sink(100), &t, &Policy::default(), &[], &[])
            .unwrap();
        // Empty change sets send nothing.
        assert!(ex.publish(5, vec![]).is_empty());
        ex.publish(6, vec![FibChange::Remove(RouteId::new("r1").unwrap())]);
        let all = sinks(&mut ex);
        let deltas = |evs: &[FibEvent]| -> Vec<(u64, u64)> {
            evs.iter()
                .filter_map(|e| match e {
                    FibEvent::Delta {
                        base, generation, ..
                    } => Some((*base, *generation)),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(deltas(&all[0]), [(3, 4), (4, 6)]);
        assert_eq!(deltas(&all[1]), [(4, 6)]);
    }

    #[test]
    fn large_change_set_is_split_with_followups_based_on_the_new_generation() {
        let mut ex = FibExporter::new();
        ex.subscribe(
            sink(100),
            &table_of(&[route(0, 0)]),
            &Policy::default(),
            &[],
            &[],
        )
        .unwrap();
        let changes: Vec<_> = (0..20)
            .map(|i| FibChange::Upsert(Box::new(route(i, 10_000))))
            .collect();
        ex.publish(2, changes.clone());
        let events = sinks(&mut ex).remove(0);
        let mut got = Vec::new();
        for (i, ev) in events[3..].iter().enumerate() {
            let FibEvent::Delta {
                base,
                generation,
                changes,
            } = ev
            else {
                panic!("{ev:?}")
            };
            assert_eq!((*base, *generation), (if i == 0 { 1 } else { 2 }, 2));
            got.extend(changes.iter().cloned());
        }
        assert!(events.len() > 4);
        assert_eq!(got, changes);
    }

    #[test]
    fn a_full_sink_is_dropped_and_others_keep_receiving() {
        let mut ex = FibExporter::new();
        let t = RouteTable::new(10);
        let slow = ex
            .subscribe(sink(3), &t, &Policy::default(), &[], &[])
            .unwrap();
        let fast = ex
            .subscribe(sink(100), &t, &Policy::default(), &[], &[])
            .unwrap();
        let rm = |g: u64| vec![FibChange::Remove(RouteId::new(&format!("x{g}")).unwrap())];
        assert!(ex.publish(1, rm(1)).is_empty());
        assert_eq!(ex.publish(2, rm(2)), [slow]);
        assert_eq!(ex.len(), 1);
        assert!(ex.publish(3, rm(3)).is_empty());
        assert_eq!(ex.unsubscribe(fast).unwrap().events.len(), 5);
        assert_eq!(ex.stats().dropped, 1);
    }

    #[test]
    fn a_sink_that_cannot_hold_the_snapshot_is_never_added() {
        let routes: Vec<_> = (0..10).map(|i| route(i, 40_000)).collect();
        let mut ex = FibExporter::new();
        assert_eq!(
            ex.subscribe(sink(4), &table_of(&routes), &Policy::default(), &[], &[]),
            None
        );
        assert!(ex.is_empty());
        assert_eq!(ex.stats().dropped, 1);
    }

    #[test]
    fn a_route_too_big_for_any_frame_is_skipped_and_counted() {
        let routes = [route(0, 0), route(1, MAX_FRAME_LEN), route(2, 0)];
        let mut ex = FibExporter::new();
        ex.subscribe(sink(10), &table_of(&routes), &Policy::default(), &[], &[])
            .unwrap();
        assert_eq!(ex.stats().oversized_routes, 1);
        let events = sinks(&mut ex).remove(0);
        assert_eq!(
            events[1],
            FibEvent::SnapshotChunk(vec![route(0, 0), route(2, 0)])
        );
    }
}

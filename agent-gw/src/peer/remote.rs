//! Task handles of calls that live on another router.
//!
//! An async task or stream whose route is a peer path lives where its
//! handler is called (the route's origin router): that gateway holds the
//! task, its result and its stream history, and issued the id and token.
//! The caller's router only remembers where each such task is — its
//! route id, pinned for every later status, result, events, cancel or
//! resume, which travel to that route's router over whatever path is up.
//!
//! Bounded like the local task table, with the same shares: when the
//! table is full, or the caller's tenant or client address holds its
//! share of it, a new remote task is refused before dispatch (an entry is
//! never dropped early, or its caller would lose the task). An entry
//! lives as long as the task can (`task_ttl` after its last use, at least
//! the call's deadline plus `task_ttl`), and frees its slot as soon as
//! its result was collected: a small record then still routes the
//! caller's status and cancel calls to the task's router, which answers
//! them (`result_released`). Sans-IO: time is an argument.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;

use agentd::route::RouteId;
use agentd::time::Millis;

use crate::budget::{BudgetConfig, Scope};
use crate::sources::SourceKey;
use crate::task::{StreamKey, TaskError, TaskId};

/// Where a remote task lives and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteTask {
    /// The base route id (never a `R@hop` path id).
    pub route: RouteId,
    pub capability: Box<str>,
    pub version: u32,
    pub tenant: Box<str>,
    pub caller: Box<str>,
    pub stream: Option<StreamKey>,
    /// The client address that started it (its share).
    pub source: IpAddr,
    expires: Millis,
}

/// Whose a remote task is (the call's verified identity and address).
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    pub capability: &'a str,
    pub version: u32,
    pub tenant: &'a str,
    pub caller: &'a str,
    pub source: IpAddr,
}

/// Counters for `agentctl tasks`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RemoteStats {
    pub refused_full: u64,
    pub refused_tenant_share: u64,
    pub refused_source_share: u64,
    /// Entries freed because their result was collected.
    pub released: u64,
}

#[derive(Debug)]
pub struct RemoteTasks {
    capacity: usize,
    ttl_ms: u64,
    tenant_share_percent: u64,
    source_share_percent: u64,
    by_id: HashMap<TaskId, RemoteTask>,
    by_stream: HashMap<StreamKey, TaskId>,
    by_expiry: BTreeSet<(Millis, TaskId)>,
    per_tenant: HashMap<Box<str>, usize>,
    per_source: HashMap<SourceKey, usize>,
    /// Collected tasks: no slot, still routed (bounded by `capacity`,
    /// oldest first out).
    released: VecDeque<(TaskId, RemoteTask)>,
    stats: RemoteStats,
}

impl RemoteTasks {
    pub fn new(capacity: usize, ttl_ms: u64) -> RemoteTasks {
        RemoteTasks {
            capacity: capacity.max(1),
            ttl_ms,
            tenant_share_percent: 100,
            source_share_percent: 100,
            by_id: HashMap::new(),
            by_stream: HashMap::new(),
            by_expiry: BTreeSet::new(),
            per_tenant: HashMap::new(),
            per_source: HashMap::new(),
            released: VecDeque::new(),
            stats: RemoteStats::default(),
        }
    }

    /// The shares of the local task table (`tenant_share_percent`,
    /// `source_share_percent`).
    pub fn with_shares(mut self, tenant_percent: u64, source_percent: u64) -> RemoteTasks {
        self.tenant_share_percent = tenant_percent;
        self.source_share_percent = source_percent;
        self
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn stats(&self) -> RemoteStats {
        self.stats
    }

    fn tenant_slots(&self) -> usize {
        BudgetConfig::share(self.capacity, self.tenant_share_percent)
    }

    fn source_slots(&self) -> usize {
        BudgetConfig::share(self.capacity, self.source_share_percent)
    }

    /// When the first matching entry frees by itself.
    fn frees_at(&self, matches: impl Fn(&RemoteTask) -> bool) -> Option<Millis> {
        self.by_expiry
            .iter()
            .find(|(_, id)| self.by_id.get(id).is_some_and(&matches))
            .map(|(at, _)| *at)
    }

    /// Is there room for one more task of `tenant` from `source` (checked
    /// before dispatching)? The refusal is the local table's.
    pub fn room(&mut self, tenant: &str, source: IpAddr, now: Millis) -> Result<(), TaskError> {
        self.expire(now);
        if self.by_id.len() >= self.capacity {
            self.stats.refused_full += 1;
            return Err(TaskError::Full {
                capacity: self.capacity,
                retry_at: self.frees_at(|_| true),
            });
        }
        let held = self.per_tenant.get(tenant).copied().unwrap_or(0);
        let limit = self.tenant_slots();
        if held >= limit {
            self.stats.refused_tenant_share += 1;
            return Err(TaskError::Share {
                scope: Scope::Tenant,
                held,
                limit,
                retry_at: self.frees_at(|t| *t.tenant == *tenant),
            });
        }
        let key = SourceKey::of(source);
        let held = self.per_source.get(&key).copied().unwrap_or(0);
        let limit = self.source_slots();
        if held >= limit {
            self.stats.refused_source_share += 1;
            return Err(TaskError::Share {
                scope: Scope::Source,
                held,
                limit,
                retry_at: self.frees_at(|t| SourceKey::of(t.source) == key),
            });
        }
        Ok(())
    }

    /// Records task `id` at `route`; `deadline` is the call's. A task id
    /// already known is replaced (the same task answered again).
    pub fn insert(
        &mut self,
        id: TaskId,
        route: RouteId,
        owner: Owner<'_>,
        stream: Option<StreamKey>,
        deadline: Millis,
        now: Millis,
    ) -> Result<(), TaskError> {
        if !self.by_id.contains_key(&id) {
            self.room(owner.tenant, owner.source, now)?;
        }
        self.remove(&id);
        let expires = deadline.max(now).saturating_add_ms(self.ttl_ms);
        if let Some(key) = stream {
            if let Some(old) = self.by_stream.insert(key, id) {
                if old != id {
                    self.remove(&old);
                    self.by_stream.insert(key, id);
                }
            }
        }
        self.by_expiry.insert((expires, id));
        *self.per_tenant.entry(owner.tenant.into()).or_default() += 1;
        *self
            .per_source
            .entry(SourceKey::of(owner.source))
            .or_default() += 1;
        self.by_id.insert(
            id,
            RemoteTask {
                route,
                capability: owner.capability.into(),
                version: owner.version,
                tenant: owner.tenant.into(),
                caller: owner.caller.into(),
                stream,
                source: owner.source,
                expires,
            },
        );
        Ok(())
    }

    /// The task `id`, its life extended by use; a collected task is
    /// still found (its router answers for it) but holds no slot.
    pub fn get(&mut self, id: &TaskId, now: Millis) -> Option<RemoteTask> {
        self.expire(now);
        let Some(t) = self.by_id.get_mut(id) else {
            return self
                .released
                .iter()
                .find(|(r, t)| r == id && t.expires > now)
                .map(|(_, t)| t.clone());
        };
        let later = now.saturating_add_ms(self.ttl_ms);
        if later > t.expires {
            self.by_expiry.remove(&(t.expires, *id));
            t.expires = later;
            self.by_expiry.insert((later, *id));
        }
        Some(t.clone())
    }

    /// The remote task serving stream `key`.
    pub fn stream(&mut self, key: &StreamKey, now: Millis) -> Option<(TaskId, RemoteTask)> {
        self.expire(now);
        let id = *self.by_stream.get(key)?;
        self.get(&id, now).map(|t| (id, t))
    }

    /// Whether `id` is a handle here (held, or collected and still
    /// routed), without touching its life.
    pub fn contains(&self, id: &TaskId) -> bool {
        self.by_id.contains_key(id) || self.released.iter().any(|(r, _)| r == id)
    }

    /// The caller collected the result of task `id` (its router released
    /// it): the slot frees now, not `task_ttl` later.
    pub fn release(&mut self, id: &TaskId) -> bool {
        let Some(t) = self.remove(id) else {
            return false;
        };
        if self.released.len() >= self.capacity {
            self.released.pop_front();
        }
        self.released.push_back((*id, t));
        self.stats.released += 1;
        true
    }

    fn remove(&mut self, id: &TaskId) -> Option<RemoteTask> {
        let t = self.by_id.remove(id)?;
        self.by_expiry.remove(&(t.expires, *id));
        if let Some(key) = t.stream {
            if self.by_stream.get(&key) == Some(id) {
                self.by_stream.remove(&key);
            }
        }
        if let Some(n) = self.per_tenant.get_mut(&*t.tenant) {
            *n -= 1;
            if *n == 0 {
                self.per_tenant.remove(&*t.tenant);
            }
        }
        let key = SourceKey::of(t.source);
        if let Some(n) = self.per_source.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&key);
            }
        }
        Some(t)
    }

    fn expire(&mut self, now: Millis) {
        while let Some(&(at, id)) = self.by_expiry.first() {
            if at > now {
                break;
            }
            self.remove(&id);
        }
        while self.released.front().is_some_and(|(_, t)| t.expires <= now) {
            self.released.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> TaskId {
        TaskId::parse(&format!("{n:032x}")).unwrap()
    }

    fn route() -> RouteId {
        RouteId::new("r1").unwrap()
    }

    fn addr(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    const OWNER: Owner<'static> = Owner {
        capability: "c",
        version: 1,
        tenant: "lab",
        caller: "a",
        source: IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1)),
    };

    fn from(tenant: &'static str, last: u8) -> Owner<'static> {
        Owner {
            tenant,
            source: addr(last),
            ..OWNER
        }
    }

    #[test]
    fn full_table_refuses_and_never_drops_a_live_entry() {
        let mut t = RemoteTasks::new(2, 1000);
        let now = Millis(0);
        t.insert(id(1), route(), OWNER, None, Millis(500), now)
            .unwrap();
        t.insert(id(2), route(), OWNER, None, Millis(100), now)
            .unwrap();
        let full = t.insert(id(3), route(), OWNER, None, Millis(100), now);
        assert_eq!(
            full,
            Err(TaskError::Full {
                capacity: 2,
                retry_at: Some(Millis(1100))
            })
        );
        assert!(t.get(&id(1), Millis(1099)).is_some());
        assert!(t.get(&id(2), Millis(1099)).is_some());
        // Both were just used: their lives run from now.
        assert!(t.room("lab", addr(1), Millis(2000)).is_err());
        assert!(t.room("lab", addr(1), Millis(2099)).is_ok());
        assert!(t.get(&id(1), Millis(2100)).is_none());
        assert_eq!(t.stats().refused_full, 2);
    }

    #[test]
    fn a_stream_key_finds_its_task_and_a_new_stream_replaces_the_old() {
        let mut t = RemoteTasks::new(8, 1000);
        let key = StreamKey::new("lab", "agent://lab/a", "demo.stream", "t1");
        t.insert(id(1), route(), OWNER, Some(key), Millis(0), Millis(0))
            .unwrap();
        assert_eq!(t.stream(&key, Millis(10)).map(|(i, _)| i), Some(id(1)));
        t.insert(id(2), route(), OWNER, Some(key), Millis(0), Millis(20))
            .unwrap();
        assert_eq!(t.stream(&key, Millis(30)).map(|(i, _)| i), Some(id(2)));
        assert!(t.get(&id(1), Millis(30)).is_none());
        assert_eq!(t.len(), 1);
    }

    /// Input: a table of 8 with the default shares (tenant 50 %, source
    /// 25 %). Output: one address holds at most 2 entries and one tenant
    /// 4; other addresses and tenants still get in, each refusal typed
    /// with its scope and counted.
    #[test]
    fn one_address_or_tenant_holds_only_its_share() {
        let mut t = RemoteTasks::new(8, 1000).with_shares(50, 25);
        let now = Millis(0);
        for n in 1..=2 {
            t.insert(id(n), route(), from("lab", 1), None, now, now)
                .unwrap();
        }
        let e = t.insert(id(3), route(), from("lab", 1), None, now, now);
        assert!(
            matches!(
                e,
                Err(TaskError::Share {
                    scope: Scope::Source,
                    held: 2,
                    limit: 2,
                    ..
                })
            ),
            "{e:?}"
        );
        for n in 3..=4 {
            t.insert(id(n), route(), from("lab", n), None, now, now)
                .unwrap();
        }
        let e = t.insert(id(5), route(), from("lab", 9), None, now, now);
        assert!(
            matches!(
                e,
                Err(TaskError::Share {
                    scope: Scope::Tenant,
                    held: 4,
                    limit: 4,
                    ..
                })
            ),
            "{e:?}"
        );
        t.insert(id(5), route(), from("other", 9), None, now, now)
            .unwrap();
        assert_eq!(t.len(), 5);
        let s = t.stats();
        assert_eq!((s.refused_source_share, s.refused_tenant_share), (1, 1));
    }

    /// Input: one address fills the whole table with short tasks and
    /// collects each result. Output: every collected entry frees its slot
    /// at once (the table is empty, not full for `ttl`), and the released
    /// task is still routed for its caller's status calls until its
    /// expiry.
    #[test]
    fn collecting_a_result_frees_the_slot_and_keeps_the_route() {
        let mut t = RemoteTasks::new(4, 300_000);
        let now = Millis(0);
        for round in 0..10u8 {
            for n in 0..4u8 {
                let tid = id(round * 4 + n + 1);
                t.insert(tid, route(), OWNER, None, Millis(100), now)
                    .unwrap();
                assert!(t.release(&tid));
            }
        }
        assert!(t.is_empty());
        assert!(t.room("lab", addr(7), now).is_ok());
        assert_eq!(t.stats().released, 40);
        // The last few are still found (bounded by the capacity).
        assert_eq!(t.get(&id(40), Millis(1000)).map(|r| r.route), Some(route()));
        assert!(
            t.get(&id(1), Millis(1000)).is_none(),
            "only `capacity` kept"
        );
        assert!(t.get(&id(40), Millis(400_000)).is_none(), "expired");
        assert!(!t.release(&id(40)));
    }
}

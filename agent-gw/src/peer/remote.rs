//! Task handles of calls that live on another router.
//!
//! An async task or stream whose route is a peer path lives where its
//! handler is called (the route's origin router): that gateway holds the
//! task, its result and its stream history, and issued the id and token.
//! The caller's router only remembers where each such task is — its
//! route id, pinned for every later status, result, events, cancel or
//! resume, which travel to that route's router over whatever path is up.
//!
//! Bounded: when full, a new remote task is refused before dispatch (an
//! entry is never dropped early, or its caller would lose the task); an
//! entry lives as long as the task can (`task_ttl` after its last use,
//! at least the call's deadline plus `task_ttl`). Sans-IO: time is an
//! argument.

use std::collections::{BTreeSet, HashMap};

use agentd::route::RouteId;
use agentd::time::Millis;

use crate::task::{StreamKey, TaskId};

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
    expires: Millis,
}

/// Whose a remote task is (the call's verified identity).
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    pub capability: &'a str,
    pub version: u32,
    pub tenant: &'a str,
    pub caller: &'a str,
}

#[derive(Debug)]
pub struct RemoteTasks {
    capacity: usize,
    ttl_ms: u64,
    by_id: HashMap<TaskId, RemoteTask>,
    by_stream: HashMap<StreamKey, TaskId>,
    by_expiry: BTreeSet<(Millis, TaskId)>,
}

/// The table holds `capacity` live entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full {
    pub capacity: usize,
    /// When the first entry frees by itself.
    pub retry_at: Option<Millis>,
}

impl RemoteTasks {
    pub fn new(capacity: usize, ttl_ms: u64) -> RemoteTasks {
        RemoteTasks {
            capacity: capacity.max(1),
            ttl_ms,
            by_id: HashMap::new(),
            by_stream: HashMap::new(),
            by_expiry: BTreeSet::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Is there room for one more (checked before dispatching)?
    pub fn room(&mut self, now: Millis) -> Result<(), Full> {
        self.expire(now);
        if self.by_id.len() >= self.capacity {
            return Err(Full {
                capacity: self.capacity,
                retry_at: self.by_expiry.first().map(|(at, _)| *at),
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
    ) -> Result<(), Full> {
        if !self.by_id.contains_key(&id) {
            self.room(now)?;
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
        self.by_id.insert(
            id,
            RemoteTask {
                route,
                capability: owner.capability.into(),
                version: owner.version,
                tenant: owner.tenant.into(),
                caller: owner.caller.into(),
                stream,
                expires,
            },
        );
        Ok(())
    }

    /// The task `id`, its life extended by use.
    pub fn get(&mut self, id: &TaskId, now: Millis) -> Option<RemoteTask> {
        self.expire(now);
        let t = self.by_id.get_mut(id)?;
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

    fn remove(&mut self, id: &TaskId) {
        if let Some(t) = self.by_id.remove(id) {
            self.by_expiry.remove(&(t.expires, *id));
            if let Some(key) = t.stream {
                if self.by_stream.get(&key) == Some(id) {
                    self.by_stream.remove(&key);
                }
            }
        }
    }

    fn expire(&mut self, now: Millis) {
        while let Some(&(at, id)) = self.by_expiry.first() {
            if at > now {
                break;
            }
            self.remove(&id);
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

    const OWNER: Owner<'static> = Owner {
        capability: "c",
        version: 1,
        tenant: "lab",
        caller: "a",
    };

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
            Err(Full {
                capacity: 2,
                retry_at: Some(Millis(1100))
            })
        );
        assert!(t.get(&id(1), Millis(1099)).is_some());
        assert!(t.get(&id(2), Millis(1099)).is_some());
        // Both were just used: their lives run from now.
        assert!(t.room(Millis(2000)).is_err());
        assert!(t.room(Millis(2099)).is_ok());
        assert!(t.get(&id(1), Millis(2100)).is_none());
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
}

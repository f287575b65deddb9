//! The (capability, version) index.
//!
//! One hash-table bucket per capability *name*, holding the slab slots of
//! all its routes in one exact-size boxed slice sorted by version. A lookup
//! hashes the name once, then binary-searches the version run inside the
//! group, so its cost depends only on that capability's routes. Keeping the
//! versions of one name together also yields, for free, how many routes
//! were rejected for carrying the right name but another version (the
//! first rejection reason of `lookup --explain`).
//!
//! The name itself is not stored: the group's first slot points at a route
//! that carries it. That keeps the index at 4 bytes per route plus one
//! 16-byte bucket per capability name (see `RouteTable::memory`).

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use super::Slot;
use crate::route::Route;

#[derive(Debug, Default)]
pub(crate) struct CapIndex {
    groups: HashTable<Box<[u32]>>,
}

fn route(slab: &[Slot], slot: u32) -> Option<&Route> {
    slab.get(slot as usize).and_then(|s| s.route.as_ref())
}

fn name_of<'a>(slab: &'a [Slot], group: &[u32]) -> &'a str {
    group
        .first()
        .and_then(|&s| route(slab, s))
        .map_or("", |r| &r.capability)
}

fn version_of(slab: &[Slot], slot: u32) -> u32 {
    route(slab, slot).map_or(0, |r| r.version)
}

/// The candidates of one (capability, version) and the number of routes
/// that carry the name with another version.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run<'a> {
    pub slots: &'a [u32],
    pub other_versions: usize,
}

impl CapIndex {
    pub fn run<'a>(
        &'a self,
        slab: &[Slot],
        hasher: &DefaultHashBuilder,
        name: &str,
        version: u32,
    ) -> Run<'a> {
        let Some(group) = self
            .groups
            .find(hasher.hash_one(name), |g| name_of(slab, g) == name)
        else {
            return Run {
                slots: &[],
                other_versions: 0,
            };
        };
        let start = group.partition_point(|&s| version_of(slab, s) < version);
        let end = start + group[start..].partition_point(|&s| version_of(slab, s) <= version);
        Run {
            slots: &group[start..end],
            other_versions: group.len() - (end - start),
        }
    }

    /// Adds `slot`, whose route is already in the slab.
    pub fn insert(&mut self, slab: &[Slot], hasher: &DefaultHashBuilder, slot: u32) {
        let Some(r) = route(slab, slot) else { return };
        let (name, version) = (&*r.capability, r.version);
        let hash = hasher.hash_one(name);
        match self.groups.find_mut(hash, |g| name_of(slab, g) == name) {
            Some(group) => {
                let at = group.partition_point(|&s| version_of(slab, s) <= version);
                let mut grown = Vec::with_capacity(group.len() + 1);
                grown.extend_from_slice(&group[..at]);
                grown.push(slot);
                grown.extend_from_slice(&group[at..]);
                *group = grown.into_boxed_slice();
            }
            None => {
                self.groups.insert_unique(hash, Box::new([slot]), |g| {
                    hasher.hash_one(name_of(slab, g))
                });
            }
        }
    }

    /// Removes `slot`, whose route is still in the slab.
    pub fn remove(&mut self, slab: &[Slot], hasher: &DefaultHashBuilder, slot: u32) {
        let Some(r) = route(slab, slot) else { return };
        let name = &*r.capability;
        let Ok(entry) = self
            .groups
            .find_entry(hasher.hash_one(name), |g| name_of(slab, g) == name)
        else {
            return;
        };
        if entry.get().len() == 1 {
            if entry.get()[0] == slot {
                entry.remove();
            }
            return;
        }
        let group = entry.into_mut();
        if let Some(at) = group.iter().position(|&s| s == slot) {
            let mut shrunk = Vec::with_capacity(group.len() - 1);
            shrunk.extend_from_slice(&group[..at]);
            shrunk.extend_from_slice(&group[at + 1..]);
            *group = shrunk.into_boxed_slice();
        }
    }

    /// Bytes allocated by the index: the hash table plus every group.
    pub fn allocated_bytes(&self) -> usize {
        self.groups.allocation_size()
            + self
                .groups
                .iter()
                .map(|g| std::mem::size_of_val(&**g))
                .sum::<usize>()
    }

    pub fn names(&self) -> usize {
        self.groups.len()
    }
}

//! The (capability, version) index.
//!
//! One hash-table bucket per capability *name*. Its group is a single
//! exact-size `Box<[u32]>` holding the slab slots of all routes of that
//! name, sorted by version, followed by the name itself packed into words:
//!
//! ```text
//!   [ name_len | name bytes, 4 per word, 0-padded | slot … slot ]
//! ```
//!
//! A lookup hashes the name, checks it against the group's own copy (same
//! allocation as the slots: no extra cache miss), then binary-searches the
//! version run, so its cost depends only on that capability's routes.
//! Keeping the versions of one name together also yields, for free, how
//! many routes carry the right name with another version (the first
//! rejection reason of `lookup --explain`).

use std::hash::{BuildHasher, Hasher};

use hashbrown::{DefaultHashBuilder, HashTable};

use super::Hot;

const HEAD: usize = 1;

/// Packs `name` into little-endian words, zero-padded.
fn words(name: &str) -> impl Iterator<Item = u32> + '_ {
    name.as_bytes().chunks(4).map(|c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(w)
    })
}

fn hash_name(hasher: &DefaultHashBuilder, len: usize, words: impl Iterator<Item = u32>) -> u64 {
    let mut h = hasher.build_hasher();
    h.write_usize(len);
    for w in words {
        h.write_u32(w);
    }
    h.finish()
}

#[derive(Debug)]
struct Group(Box<[u32]>);

impl Group {
    fn build(slots: &[u32], name: &str) -> Group {
        let mut v = Vec::with_capacity(HEAD + name.len().div_ceil(4) + slots.len());
        v.push(name.len() as u32);
        v.extend(words(name));
        v.extend_from_slice(slots);
        Group(v.into_boxed_slice())
    }

    #[inline]
    fn name_len(&self) -> usize {
        self.0.first().map_or(0, |&n| n as usize)
    }

    #[inline]
    fn name_end(&self) -> usize {
        HEAD + self.name_len().div_ceil(4)
    }

    #[inline]
    fn slots(&self) -> &[u32] {
        self.0.get(self.name_end()..).unwrap_or(&[])
    }

    #[inline]
    fn name_words(&self) -> &[u32] {
        self.0.get(HEAD..self.name_end()).unwrap_or(&[])
    }

    #[inline]
    fn is(&self, name: &str) -> bool {
        self.name_len() == name.len() && self.name_words().iter().copied().eq(words(name))
    }

    fn hash(&self, hasher: &DefaultHashBuilder) -> u64 {
        hash_name(hasher, self.name_len(), self.name_words().iter().copied())
    }

    /// Rebuilds the group with `slots` and the same name.
    fn with_slots(&self, slots: &[u32]) -> Group {
        let head = self.0.get(..self.name_end()).unwrap_or(&[]);
        let mut v = Vec::with_capacity(head.len() + slots.len());
        v.extend_from_slice(head);
        v.extend_from_slice(slots);
        Group(v.into_boxed_slice())
    }
}

#[derive(Debug, Default)]
pub(crate) struct CapIndex {
    groups: HashTable<Group>,
}

fn version_of(hot: &[Hot], slot: u32) -> u32 {
    hot.get(slot as usize).map_or(0, |h| h.version)
}

/// The candidates of one (capability, version) and the number of routes
/// that carry the name with another version.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run<'a> {
    pub slots: &'a [u32],
    pub other_versions: usize,
}

impl CapIndex {
    /// The group's slots: every route of the capability name, any version.
    #[inline]
    pub fn group<'a>(&'a self, hasher: &DefaultHashBuilder, name: &str) -> &'a [u32] {
        let hash = hash_name(hasher, name.len(), words(name));
        self.groups
            .find(hash, |g| g.is(name))
            .map_or(&[], |g| g.slots())
    }

    /// Narrows a group to one version (the group is sorted by version).
    #[inline]
    pub fn run<'a>(hot: &[Hot], group: &'a [u32], version: u32) -> Run<'a> {
        let all_same = |v: u32| group.first().is_some_and(|&s| version_of(hot, s) == v);
        if all_same(version) && group.last().is_some_and(|&s| version_of(hot, s) == version) {
            return Run {
                slots: group,
                other_versions: 0,
            };
        }
        let start = group.partition_point(|&s| version_of(hot, s) < version);
        let end = start + group[start..].partition_point(|&s| version_of(hot, s) <= version);
        Run {
            slots: &group[start..end],
            other_versions: group.len() - (end - start),
        }
    }

    /// Adds `slot` (its hot record already holds the version).
    pub fn insert(&mut self, hot: &[Hot], hasher: &DefaultHashBuilder, name: &str, slot: u32) {
        let version = version_of(hot, slot);
        let hash = hash_name(hasher, name.len(), words(name));
        match self.groups.find_mut(hash, |g| g.is(name)) {
            Some(group) => {
                let old = group.slots();
                let at = old.partition_point(|&s| version_of(hot, s) <= version);
                let mut slots = Vec::with_capacity(old.len() + 1);
                slots.extend_from_slice(&old[..at]);
                slots.push(slot);
                slots.extend_from_slice(&old[at..]);
                *group = group.with_slots(&slots);
            }
            None => {
                self.groups
                    .insert_unique(hash, Group::build(&[slot], name), |g| g.hash(hasher));
            }
        }
    }

    /// Removes `slot` (its hot record still holds the version).
    pub fn remove(&mut self, hot: &[Hot], hasher: &DefaultHashBuilder, name: &str, slot: u32) {
        let hash = hash_name(hasher, name.len(), words(name));
        let Ok(entry) = self.groups.find_entry(hash, |g| g.is(name)) else {
            return;
        };
        let old = entry.get().slots();
        // Search only the run of the slot's version.
        let version = version_of(hot, slot);
        let start = old.partition_point(|&s| version_of(hot, s) < version);
        let Some(at) = old[start..]
            .iter()
            .position(|&s| s == slot)
            .map(|p| start + p)
        else {
            return;
        };
        if old.len() == 1 {
            entry.remove();
            return;
        }
        let mut slots = Vec::with_capacity(old.len() - 1);
        slots.extend_from_slice(&old[..at]);
        slots.extend_from_slice(&old[at + 1..]);
        let group = entry.into_mut();
        *group = group.with_slots(&slots);
    }

    /// Bytes allocated by the index: the hash table plus every group.
    pub fn allocated_bytes(&self) -> usize {
        self.groups.allocation_size()
            + self
                .groups
                .iter()
                .map(|g| std::mem::size_of_val(&*g.0))
                .sum::<usize>()
    }

    pub fn names(&self) -> usize {
        self.groups.len()
    }

    /// Every group's slots (consistency checks in tests).
    #[cfg(test)]
    pub fn all_groups(&self) -> impl Iterator<Item = &[u32]> {
        self.groups.iter().map(|g| g.slots())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_keeps_slots_and_name_apart() {
        let h = DefaultHashBuilder::default();
        for name in ["a", "demo", "demo.echo", "x".repeat(128).as_str()] {
            let g = Group::build(&[7, 9], name);
            assert_eq!(g.slots(), &[7, 9]);
            assert!(g.is(name));
            assert!(!g.is(&format!("{name}\0")), "padding must not alias");
            assert_eq!(g.hash(&h), hash_name(&h, name.len(), words(name)));
            assert!(g.with_slots(&[1]).is(name));
        }
    }
}

//! A sorted map and an id list that keep a single entry inline.
//!
//! The claims ledger holds, per origin, a map of origin routers and per
//! origin router a map of table ids. Almost every origin has one claimant
//! with one route, and an empty `BTreeMap` that gets one entry allocates a
//! whole leaf node (room for eleven entries: hundreds of bytes per route
//! for the two levels). [`SmallMap`] holds that one entry in place and
//! becomes a `BTreeMap` only from the second key on (and goes back when
//! removals leave one), with the same sorted iteration either way.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use crate::route::RouteId;

#[derive(Debug, Default)]
pub(super) enum SmallMap<K, V> {
    #[default]
    Empty,
    One(K, V),
    /// Two or more entries (a removal that leaves one moves it inline).
    Many(BTreeMap<K, V>),
}

impl<K: Ord, V> SmallMap<K, V> {
    pub fn len(&self) -> usize {
        match self {
            SmallMap::Empty => 0,
            SmallMap::One(..) => 1,
            SmallMap::Many(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match self {
            SmallMap::Empty => None,
            SmallMap::One(k, v) => (k.borrow() == key).then_some(v),
            SmallMap::Many(m) => m.get(key),
        }
    }

    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match self {
            SmallMap::Empty => None,
            SmallMap::One(k, v) => ((*k).borrow() == key).then_some(v),
            SmallMap::Many(m) => m.get_mut(key),
        }
    }

    /// The entry of `key`, inserted by `make` when missing.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        if matches!(self, SmallMap::One(k, _) if *k != key) {
            if let SmallMap::One(k, v) = std::mem::take(self) {
                // Two keys from here on (the entry below adds the second).
                *self = SmallMap::Many(BTreeMap::from([(k, v)]));
            }
        }
        match self {
            SmallMap::Empty => {
                *self = SmallMap::One(key, make());
                match self {
                    SmallMap::One(_, v) => v,
                    _ => unreachable!("just filled"),
                }
            }
            // The same key (another one made this a tree above).
            SmallMap::One(_, v) => v,
            SmallMap::Many(m) => m.entry(key).or_insert_with(make),
        }
    }

    /// Inserts or replaces; returns the value replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match std::mem::take(self) {
            SmallMap::Empty => {
                *self = SmallMap::One(key, value);
                None
            }
            SmallMap::One(k, v) if k == key => {
                *self = SmallMap::One(k, value);
                Some(v)
            }
            SmallMap::One(k, v) => {
                *self = SmallMap::Many(BTreeMap::from([(k, v), (key, value)]));
                None
            }
            SmallMap::Many(mut m) => {
                let old = m.insert(key, value);
                *self = SmallMap::Many(m);
                old
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match std::mem::take(self) {
            SmallMap::Empty => None,
            SmallMap::One(k, v) if k.borrow() == key => Some(v),
            one @ SmallMap::One(..) => {
                *self = one;
                None
            }
            SmallMap::Many(mut m) => {
                let old = m.remove(key);
                *self = if m.len() == 1 {
                    let (k, v) = m.pop_first().expect("one entry");
                    SmallMap::One(k, v)
                } else {
                    SmallMap::Many(m)
                };
                old
            }
        }
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        let (one, many) = match self {
            SmallMap::Empty => (None, None),
            SmallMap::One(k, v) => (Some((k, v)), None),
            SmallMap::Many(m) => (None, Some(m)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
}

/// One origin's route ids in registration order, the first held inline:
/// almost every origin registers one route, and a `Vec` of one id cost a
/// heap block (~64 B with malloc's overhead) per origin. The same size as
/// a `Vec` (its capacity's niche tells the variants apart).
#[derive(Debug, Default)]
pub(super) enum Ids {
    #[default]
    Empty,
    One(RouteId),
    /// Two or more (removals that leave one keep the vector: rare).
    Many(Vec<RouteId>),
}

impl Ids {
    pub fn as_slice(&self) -> &[RouteId] {
        match self {
            Ids::Empty => &[],
            Ids::One(id) => std::slice::from_ref(id),
            Ids::Many(v) => v,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    pub fn push(&mut self, id: RouteId) {
        match std::mem::take(self) {
            Ids::Empty => *self = Ids::One(id),
            Ids::One(first) => *self = Ids::Many(vec![first, id]),
            Ids::Many(mut v) => {
                v.push(id);
                *self = Ids::Many(v);
            }
        }
    }

    pub fn remove(&mut self, id: &RouteId) {
        match self {
            Ids::Empty => {}
            Ids::One(x) if x == id => *self = Ids::Empty,
            Ids::One(_) => {}
            Ids::Many(v) => v.retain(|x| x != id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(m: &SmallMap<u8, char>) -> Vec<(u8, char)> {
        m.iter().map(|(k, v)| (*k, *v)).collect()
    }

    #[test]
    fn one_entry_stays_inline_and_more_become_a_sorted_tree() {
        let mut m = SmallMap::default();
        assert!(m.is_empty());
        assert_eq!(m.insert(5, 'a'), None);
        assert!(matches!(m, SmallMap::One(5, 'a')));
        assert_eq!(m.insert(5, 'b'), Some('a'), "replaced inline");
        assert_eq!(m.insert(2, 'c'), None);
        assert_eq!(m.insert(9, 'd'), None);
        assert!(matches!(m, SmallMap::Many(_)));
        assert_eq!(entries(&m), [(2, 'c'), (5, 'b'), (9, 'd')]);
        assert_eq!(m.get(&9), Some(&'d'));
        *m.get_mut(&2).unwrap() = 'e';
        assert_eq!(m.insert(2, 'f'), Some('e'));
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn removals_go_back_inline_and_to_empty() {
        let mut m = SmallMap::default();
        m.insert(1, 'a');
        m.insert(3, 'b');
        assert_eq!(m.remove(&7), None);
        assert_eq!(m.remove(&1), Some('a'));
        assert!(matches!(m, SmallMap::One(3, 'b')), "{m:?}");
        assert_eq!(m.remove(&1), None);
        assert_eq!(m.get(&1), None);
        assert_eq!(m.remove(&3), Some('b'));
        assert!(m.is_empty());
        assert_eq!(m.keys().count(), 0);
    }

    #[test]
    fn get_or_insert_with_keeps_what_is_there() {
        let mut m = SmallMap::default();
        *m.get_or_insert_with(4, || 'a') = 'b';
        assert_eq!(*m.get_or_insert_with(4, || 'z'), 'b');
        assert_eq!(*m.get_or_insert_with(1, || 'c'), 'c');
        assert_eq!(m.values().copied().collect::<String>(), "cb");
    }
}

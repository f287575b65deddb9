//! The routes on one probed endpoint.
//!
//! Most endpoints serve one route (an agent listens on its own
//! host:port), and a one-element `BTreeSet` still allocates a whole leaf
//! node (~100 bytes for one 8-byte id): with 10k agents that was a tenth
//! of agentd's memory per route. So one route is held inline and a
//! B-tree only from the second, which keeps an endpoint with thousands
//! of routes (static routes to one service) cheap to change.

use std::collections::BTreeSet;

use crate::route::RouteId;

#[derive(Debug, Default)]
pub(super) enum RouteSet {
    #[default]
    Empty,
    One(RouteId),
    Many(BTreeSet<RouteId>),
}

impl RouteSet {
    pub fn insert(&mut self, id: RouteId) {
        match self {
            RouteSet::Empty => *self = RouteSet::One(id),
            RouteSet::One(first) if *first == id => {}
            RouteSet::One(first) => {
                let mut set = BTreeSet::new();
                set.insert(first.clone());
                set.insert(id);
                *self = RouteSet::Many(set);
            }
            RouteSet::Many(set) => {
                set.insert(id);
            }
        }
    }

    pub fn remove(&mut self, id: &RouteId) {
        match self {
            RouteSet::One(only) if only == id => *self = RouteSet::Empty,
            RouteSet::Many(set) => {
                set.remove(id);
                // Back to the inline form once one is left.
                if set.len() == 1 {
                    if let Some(last) = set.iter().next().cloned() {
                        *self = RouteSet::One(last);
                    }
                }
            }
            _ => {}
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, RouteSet::Empty)
    }

    /// In id order.
    pub fn iter(&self) -> impl Iterator<Item = &RouteId> {
        let (one, many) = match self {
            RouteSet::Empty => (None, None),
            RouteSet::One(id) => (Some(id), None),
            RouteSet::Many(set) => (None, Some(set)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rid(s: &str) -> RouteId {
        RouteId::new(s).unwrap()
    }

    fn ids(s: &RouteSet) -> Vec<&str> {
        s.iter().map(|id| id.as_str()).collect()
    }

    #[test]
    fn holds_a_set_in_order_inline_for_one() {
        let mut s = RouteSet::default();
        assert!(s.is_empty());
        s.insert(rid("b"));
        s.insert(rid("b"));
        assert!(matches!(s, RouteSet::One(_)));
        s.insert(rid("a"));
        s.insert(rid("c"));
        assert_eq!(ids(&s), ["a", "b", "c"]);
        s.remove(&rid("x"));
        s.remove(&rid("a"));
        s.remove(&rid("c"));
        assert!(matches!(s, RouteSet::One(_)), "{s:?}");
        assert_eq!(ids(&s), ["b"]);
        s.remove(&rid("c"));
        assert_eq!(ids(&s), ["b"]);
        s.remove(&rid("b"));
        assert!(s.is_empty());
        assert_eq!(ids(&s), Vec::<&str>::new());
    }
}

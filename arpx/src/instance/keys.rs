//! The origin key directory: which Ed25519 key speaks for which router.
//!
//! A direct peer's key comes from its verified TLS certificate and is
//! authoritative. Any other origin's key is learned from the first
//! authenticated peer that brings a route of it, and kept while we hold a
//! path from that origin; a later route carrying another key for it is a
//! forgery (or an unannounced key change) and closes the session that
//! sent it.

use std::collections::HashMap;

#[derive(Debug)]
pub(super) struct KeyDir {
    direct: HashMap<String, [u8; 32]>,
    learned: HashMap<String, [u8; 32]>,
    /// Paths held per origin router (releases learned keys at zero).
    held: HashMap<String, usize>,
}

impl KeyDir {
    /// The directory knowing our own key.
    pub fn new(us: &str, key: [u8; 32]) -> KeyDir {
        KeyDir {
            direct: HashMap::from([(us.to_owned(), key)]),
            learned: HashMap::new(),
            held: HashMap::new(),
        }
    }

    pub fn known(&self, router: &str) -> Option<&[u8; 32]> {
        self.direct.get(router).or_else(|| self.learned.get(router))
    }

    /// A direct peer's verified key. Returns true when a different key
    /// had been learned for it (paths carrying that key must go).
    pub fn set_direct(&mut self, router: &str, key: [u8; 32]) -> bool {
        self.direct.insert(router.to_owned(), key);
        matches!(self.learned.remove(router), Some(k) if k != key)
    }

    /// The peer section is gone: its key is no longer authoritative, but
    /// stays the known key while paths of that origin are held.
    pub fn remove_direct(&mut self, router: &str) {
        if let Some(key) = self.direct.remove(router) {
            if self.held.get(router).is_some_and(|n| *n > 0) {
                self.learned.insert(router.to_owned(), key);
            }
        }
    }

    /// A path from `origin` with `key` is now held.
    pub fn hold(&mut self, origin: &str, key: [u8; 32]) {
        *self.held.entry(origin.to_owned()).or_default() += 1;
        if !self.direct.contains_key(origin) {
            self.learned.entry(origin.to_owned()).or_insert(key);
        }
    }

    /// A path from `origin` is no longer held.
    pub fn release(&mut self, origin: &str) {
        if let Some(n) = self.held.get_mut(origin) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(origin);
                self.learned.remove(origin);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learned_key_lives_as_long_as_paths_of_its_origin() {
        let mut k = KeyDir::new("router-b", [2; 32]);
        k.hold("router-x", [7; 32]);
        k.hold("router-x", [8; 32]);
        assert_eq!(k.known("router-x"), Some(&[7; 32]), "first seen stays");
        k.release("router-x");
        assert_eq!(k.known("router-x"), Some(&[7; 32]));
        k.release("router-x");
        assert_eq!(k.known("router-x"), None);
    }

    #[test]
    fn a_direct_key_overrides_and_reports_a_different_learned_one() {
        let mut k = KeyDir::new("router-b", [2; 32]);
        k.hold("router-a", [7; 32]);
        assert!(k.set_direct("router-a", [1; 32]));
        assert_eq!(k.known("router-a"), Some(&[1; 32]));
        assert!(!k.set_direct("router-a", [1; 32]));
        k.remove_direct("router-a");
        assert_eq!(
            k.known("router-a"),
            Some(&[1; 32]),
            "held paths keep it known"
        );
        k.release("router-a");
        assert_eq!(k.known("router-a"), None);
    }
}

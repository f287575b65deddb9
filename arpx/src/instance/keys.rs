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

    /// The peer section is gone: its key is no longer authoritative.
    pub fn remove_direct(&mut self, router: &str) {
        self.direct.remove(router);
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

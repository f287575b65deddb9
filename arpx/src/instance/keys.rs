//! The origin key directory: which Ed25519 key speaks for which router.
//!
//! Keys come with three strengths (DESIGN §3 "Origin keys are
//! authenticated"):
//!
//! * **direct** — a peer's key from its verified TLS certificate;
//! * **certified** — a key read from an origin router's certificate that
//!   our domain CA issued for that router id (attached to its routes);
//! * **learned** — the key the first route of an origin carried, when
//!   neither of the above vouches for it; kept while paths of that
//!   origin are held.
//!
//! Direct and certified keys are authoritative: a route carrying another
//! key for that origin is refused, and a learned key they contradict is
//! replaced (its paths were never the origin's). A learned key never
//! overrides an authoritative one, and a route contradicting a learned
//! key costs only that route — the neighbour that brought it may be
//! honest and the first claim the forgery, so no session is closed over
//! it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Checks an origin router's certificate against the domain CA. The
/// driver supplies it (agentd: `router-pki`), so the instance stays free
/// of X.509 and of the wall clock.
pub trait OriginCa: Send + Sync {
    /// The Ed25519 key of `cert` (DER) when our domain CA issued it for
    /// `router_id` and it is valid now; `None` otherwise.
    fn origin_key(&self, router_id: &str, cert: &[u8]) -> Option<[u8; 32]>;
}

/// A shared [`OriginCa`] (cloned with the instance's configuration).
#[derive(Clone)]
pub struct OriginCaRef(pub Arc<dyn OriginCa>);

impl fmt::Debug for OriginCaRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OriginCa")
    }
}

/// Origins whose refused certificate is remembered.
const MAX_REFUSED: usize = 1024;

/// Where an origin's key came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    Direct,
    Certified,
    Learned,
}

/// What an advertisement's origin key is, against the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyCheck {
    /// Matches the known key, or nothing is known yet.
    Agrees,
    /// Contradicts a key of this strength.
    Contradicts(Source),
}

#[derive(Debug)]
pub(super) struct KeyDir {
    direct: HashMap<String, [u8; 32]>,
    /// Certified keys, with the certificate bytes that proved them (a
    /// route carrying the same bytes needs no second check).
    certified: HashMap<String, ([u8; 32], Vec<u8>)>,
    learned: HashMap<String, [u8; 32]>,
    /// The last certificate the CA refused, per origin router, so a
    /// flood of routes carrying it costs one check (bounded: cleared
    /// when [`MAX_REFUSED`] origins are remembered).
    refused: HashMap<String, Vec<u8>>,
    /// Paths held per origin router (releases learned and certified keys
    /// at zero: a certificate is re-checked when the origin returns), and
    /// the origin's name those paths share.
    held: HashMap<Arc<str>, usize>,
}

impl KeyDir {
    /// The directory knowing our own key.
    pub fn new(us: &str, key: [u8; 32]) -> KeyDir {
        KeyDir {
            direct: HashMap::from([(us.to_owned(), key)]),
            certified: HashMap::new(),
            learned: HashMap::new(),
            refused: HashMap::new(),
            held: HashMap::new(),
        }
    }

    /// The authoritative key of `router`, if any.
    fn authoritative(&self, router: &str) -> Option<(&[u8; 32], Source)> {
        self.direct
            .get(router)
            .map(|k| (k, Source::Direct))
            .or_else(|| {
                self.certified
                    .get(router)
                    .map(|(k, _)| (k, Source::Certified))
            })
    }

    pub fn known(&self, router: &str) -> Option<(&[u8; 32], Source)> {
        self.authoritative(router)
            .or_else(|| self.learned.get(router).map(|k| (k, Source::Learned)))
    }

    pub fn check(&self, router: &str, key: &[u8; 32]) -> KeyCheck {
        match self.known(router) {
            Some((k, source)) if k != key => KeyCheck::Contradicts(source),
            _ => KeyCheck::Agrees,
        }
    }

    /// Whether `cert` already proved `router`'s key (same bytes).
    pub fn certified_by(&self, router: &str, cert: &[u8]) -> bool {
        self.certified
            .get(router)
            .is_some_and(|(_, c)| c.as_slice() == cert)
    }

    /// Whether `cert` is the one last refused for `router`.
    pub fn refused_cert(&self, router: &str, cert: &[u8]) -> bool {
        self.refused
            .get(router)
            .is_some_and(|c| c.as_slice() == cert)
    }

    pub fn refuse_cert(&mut self, router: &str, cert: &[u8]) {
        if self.refused.len() >= MAX_REFUSED {
            self.refused.clear();
        }
        self.refused.insert(router.to_owned(), cert.to_vec());
    }

    /// A direct peer's verified key. Returns true when a different key
    /// had been learned for it (paths carrying that key must go).
    pub fn set_direct(&mut self, router: &str, key: [u8; 32]) -> bool {
        self.direct.insert(router.to_owned(), key);
        matches!(self.learned.remove(router), Some(k) if k != key)
    }

    /// A CA-checked certificate proved `router`'s key. Returns true when
    /// a different learned key must go with its paths. A direct key
    /// stays the one consulted (both come from the same CA or pin).
    pub fn set_certified(&mut self, router: &str, key: [u8; 32], cert: &[u8]) -> bool {
        self.certified
            .insert(router.to_owned(), (key, cert.to_vec()));
        matches!(self.learned.remove(router), Some(k) if k != key)
    }

    /// The peer section is gone: its key is no longer authoritative, but
    /// stays the known key while paths of that origin are held.
    pub fn remove_direct(&mut self, router: &str) {
        if let Some(key) = self.direct.remove(router) {
            if self.held.get(router).is_some_and(|n| *n > 0) && !self.certified.contains_key(router)
            {
                self.learned.insert(router.to_owned(), key);
            }
        }
    }

    /// A path from `origin` with `key` is now held. Returns the origin's
    /// name, one copy for all its paths while any is held.
    pub fn hold(&mut self, origin: &str, key: [u8; 32]) -> Arc<str> {
        let name = match self.held.get_key_value(origin) {
            Some((name, _)) => name.clone(),
            None => Arc::from(origin),
        };
        *self.held.entry(name.clone()).or_default() += 1;
        if self.authoritative(origin).is_none() {
            self.learned.entry(origin.to_owned()).or_insert(key);
        }
        name
    }

    /// A path from `origin` is no longer held.
    pub fn release(&mut self, origin: &str) {
        if let Some(n) = self.held.get_mut(origin) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(origin);
                self.learned.remove(origin);
                self.certified.remove(origin);
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
        let one = k.hold("router-x", [7; 32]);
        let two = k.hold("router-x", [8; 32]);
        assert!(Arc::ptr_eq(&one, &two), "one name for the origin's paths");
        assert_eq!(
            k.known("router-x"),
            Some((&[7; 32], Source::Learned)),
            "first seen stays"
        );
        assert_eq!(
            k.check("router-x", &[8; 32]),
            KeyCheck::Contradicts(Source::Learned)
        );
        k.release("router-x");
        assert_eq!(k.known("router-x").map(|(k, _)| *k), Some([7; 32]));
        k.release("router-x");
        assert_eq!(k.known("router-x"), None);
        assert_eq!(k.check("router-x", &[8; 32]), KeyCheck::Agrees);
    }

    #[test]
    fn a_direct_key_overrides_and_reports_a_different_learned_one() {
        let mut k = KeyDir::new("router-b", [2; 32]);
        k.hold("router-a", [7; 32]);
        assert!(k.set_direct("router-a", [1; 32]));
        assert_eq!(k.known("router-a"), Some((&[1; 32], Source::Direct)));
        assert!(!k.set_direct("router-a", [1; 32]));
        k.remove_direct("router-a");
        assert_eq!(
            k.known("router-a"),
            Some((&[1; 32], Source::Learned)),
            "held paths keep it known"
        );
        k.release("router-a");
        assert_eq!(k.known("router-a"), None);
    }

    #[test]
    fn a_certified_key_replaces_a_learned_one_and_a_learned_one_never_replaces_it() {
        let mut k = KeyDir::new("router-c", [3; 32]);
        // The forger's key came first.
        k.hold("router-a", [9; 32]);
        assert!(k.set_certified("router-a", [1; 32], b"cert-a"));
        assert_eq!(k.known("router-a"), Some((&[1; 32], Source::Certified)));
        assert!(k.certified_by("router-a", b"cert-a"));
        assert!(!k.certified_by("router-a", b"other"));
        // Another second-hand claim changes nothing.
        k.hold("router-a", [9; 32]);
        assert_eq!(
            k.check("router-a", &[9; 32]),
            KeyCheck::Contradicts(Source::Certified)
        );
        k.release("router-a");
        k.release("router-a");
        assert_eq!(k.known("router-a"), None, "checked again when it returns");
    }
}

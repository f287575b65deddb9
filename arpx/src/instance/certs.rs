//! One copy of each origin router's certificate for all the paths that
//! carry it.
//!
//! Every advertisement carries its origin router's certificate (DER,
//! ~430 bytes for an Ed25519 router certificate) so that a receiver of
//! our domain can take the origin key from it. Held as it arrived, each
//! path learned from a peer kept its own copy: more than the rest of
//! the advertisement, for every route and every peer it came from. The
//! paths of one origin share one copy instead, and it is attached again
//! to what we reflect.

use std::collections::HashMap;
use std::sync::Arc;

/// The certificate last seen per origin router, shared with the paths
/// that carry those bytes. Bounded by the paths held: an entry goes when
/// the last path holding its certificate does.
#[derive(Debug, Default)]
pub(super) struct Certs {
    by_origin: HashMap<String, Arc<[u8]>>,
}

impl Certs {
    /// The shared copy of `cert` for a path of `origin`; `None` when the
    /// advertisement carries none. A certificate unlike the one held
    /// (renewed, or another router's forgery) becomes the held one; paths
    /// with the old bytes keep them.
    pub fn share(&mut self, origin: &str, cert: Vec<u8>) -> Option<Arc<[u8]>> {
        if cert.is_empty() {
            return None;
        }
        if let Some(held) = self.by_origin.get(origin) {
            if **held == *cert {
                return Some(held.clone());
            }
        }
        let shared: Arc<[u8]> = cert.into();
        self.by_origin.insert(origin.to_owned(), shared.clone());
        Some(shared)
    }

    /// A path of `origin` was dropped: forget the certificate once no
    /// path holds it.
    pub fn release(&mut self, origin: &str) {
        if self
            .by_origin
            .get(origin)
            .is_some_and(|held| Arc::strong_count(held) == 1)
        {
            self.by_origin.remove(origin);
        }
    }

    /// Origins with a certificate held (tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_origin.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_one_origin_share_one_copy_until_the_last_goes() {
        let mut c = Certs::default();
        assert_eq!(c.share("router-a", Vec::new()), None);
        let one = c.share("router-a", vec![1, 2, 3]).unwrap();
        let two = c.share("router-a", vec![1, 2, 3]).unwrap();
        assert!(Arc::ptr_eq(&one, &two));
        // A renewed certificate: new paths take it, old ones keep theirs.
        let renewed = c.share("router-a", vec![4, 5]).unwrap();
        assert_eq!(*renewed, [4, 5]);
        assert_eq!(*one, [1, 2, 3]);
        drop((one, two));
        c.release("router-a");
        assert_eq!(c.len(), 1, "the renewed one is still held");
        drop(renewed);
        c.release("router-a");
        assert_eq!(c.len(), 0);
        c.release("router-b");
    }
}

//! The links the RIB publishes to the data plane: one per established
//! ARPX session, with the key its handshake verified and the peer's
//! data-plane address (see [`crate::fib::PeerLink`]). The peer driver
//! sets and clears them as sessions come and go; a FIB snapshot carries
//! the current set, so a (re)connecting gateway learns it at once.
//!
//! Bound: only a configured peer can have a link, so there are never more
//! links than `peer` sections; a reload that removes a peer drops its
//! link in the same turn (before the driver closes the session).

use super::{Changes, State};
use crate::fib::{FibChange, PeerLink, MAX_LINKS};

impl State {
    /// The current links, sorted by router_id.
    pub fn links(&self) -> &[PeerLink] {
        &self.links
    }

    /// Records an established session's link (or its new key or data
    /// address). Refused, and counted (`links.refused`), for a router that
    /// is not a configured peer or a link that is not well-formed. Returns
    /// the `Link` change, none if the same link is held already.
    pub fn set_link(&mut self, link: PeerLink) -> Changes {
        let configured = self.is_peer(&link.router_id);
        if !configured || link.check().is_err() {
            self.count("links.refused");
            return Changes::new();
        }
        match self
            .links
            .binary_search_by(|l| l.router_id.cmp(&link.router_id))
        {
            Ok(at) if self.links[at] == link => return Changes::new(),
            Ok(at) => self.links[at] = link.clone(),
            Err(at) => {
                if self.links.len() >= MAX_LINKS {
                    self.count("links.refused");
                    return Changes::new();
                }
                self.links.insert(at, link.clone());
            }
        }
        self.count("links.up");
        vec![FibChange::Link(link)]
    }

    /// The session with `router_id` closed. Returns the `Unlink` change,
    /// none if it had no link.
    pub fn unlink(&mut self, router_id: &str) -> Changes {
        match self
            .links
            .binary_search_by(|l| (*l.router_id).cmp(router_id))
        {
            Ok(at) => {
                self.links.remove(at);
                self.count("links.down");
                vec![FibChange::Unlink(router_id.into())]
            }
            Err(_) => Changes::new(),
        }
    }

    /// A configured peer, or one discovery admitted.
    fn is_peer(&self, router_id: &str) -> bool {
        self.runtime.mesh.peer(router_id).is_some()
            || self.admitted.contains(router_id)
            || self.relayed.contains(router_id)
    }

    /// The routers the relay roles bring right now (set by the ARPX
    /// driver before it applies them, so their sessions' links are
    /// accepted).
    pub fn set_relayed(&mut self, ids: impl IntoIterator<Item = Box<str>>) {
        self.relayed = ids.into_iter().collect();
    }

    /// The routers discovery admits right now (set before the ARPX driver
    /// gets them, so their sessions' links are accepted).
    pub fn set_admitted(&mut self, ids: impl IntoIterator<Item = Box<str>>) {
        self.admitted = ids.into_iter().collect();
    }

    /// After a reload: drops the links of peers the configuration no
    /// longer has (and discovery does not admit).
    pub(super) fn unlink_unconfigured(&mut self) -> Changes {
        let gone: Vec<Box<str>> = self
            .links
            .iter()
            .filter(|l| !self.is_peer(&l.router_id))
            .map(|l| l.router_id.clone())
            .collect();
        gone.iter().flat_map(|id| self.unlink(id)).collect()
    }
}

#[cfg(test)]
mod tests;

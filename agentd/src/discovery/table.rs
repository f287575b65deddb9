//! The candidate table (DESIGN §6), sans-IO: time is an argument and
//! nothing here touches a socket or a file.
//!
//! A discovered router is a *candidate*: never a peer and never a route
//! source by itself. It lives while its announcement is current (its mDNS
//! records are within their TTL and were not withdrawn by a goodbye) and
//! for `candidate_lifetime_s` after the announcement ends; the table's
//! [`next_deadline`](Table::next_deadline) is the one timer the daemon
//! arms for that.
//!
//! What becomes of a candidate is the admission [`Policy`]'s:
//!
//! * `off` — observed only (`rejected`);
//! * `manual` — `pending` until an operator approves exactly its record
//!   version (`approved`: a `peer` section with `discovered '1'` and that
//!   `record_version` is in the file);
//! * `same-domain` — `admitted` when the announced domain is ours (the
//!   ARPX handshake then still requires the domain CA's signature when
//!   one is configured), else `rejected`;
//! * `allowlist` — `admitted` when the announced fingerprint is listed in
//!   `allow_fingerprint`, else `rejected`.
//!
//! Admitted candidates are peers only in memory, while they live. A new
//! record version resets an approval: the candidate is `pending` again
//! until its new version is approved. Our own announcements are ignored,
//! and the table holds at most [`MAX_CANDIDATES`]; more are refused and
//! counted, never evicting a known one.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use router_pki::Fingerprint;
use uci_schema::Admission;

use super::record::Record;
use crate::time::Millis;

/// Most candidates held at once.
pub const MAX_CANDIDATES: usize = 256;

/// What admission decides on, from the configuration and the identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub mode: Admission,
    /// Our router_id and key: announcements carrying either are ours.
    pub own_router_id: Option<String>,
    pub own_fingerprint: Option<Fingerprint>,
    /// `agentd.domain`; empty: none (same-domain admits nobody).
    pub domain: String,
    /// Whether `agentd.domain_ca` is set (same-domain peers are then not
    /// pinned: the handshake must chain to the CA).
    pub domain_ca: bool,
    pub allow: Vec<Fingerprint>,
    pub lifetime_ms: u64,
    /// Discovered `peer` sections in the file: router_id → the record
    /// version approved.
    pub approved: BTreeMap<String, u32>,
    /// router_ids of the other (static) `peer` sections.
    pub configured: BTreeSet<String>,
}

/// One announcement as the mDNS browser resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    pub record: Record,
    /// Where to reach it (chosen from the announced addresses).
    pub address: IpAddr,
    /// The ARPX port (the SRV port).
    pub port: u16,
}

/// A candidate's admission state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Pending,
    Approved,
    Admitted,
    Rejected,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Approved => "approved",
            State::Admitted => "admitted",
            State::Rejected => "rejected",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub seen: Sighting,
    /// The announcement is current (not withdrawn, not expired in mDNS).
    pub announced: bool,
    /// When it was last announced or its announcement ended.
    pub last_seen: Millis,
}

/// A candidate admitted automatically: the peer to run while it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedPeer {
    pub router_id: String,
    pub address: IpAddr,
    pub port: u16,
    pub data_port: u16,
    /// The key to pin; `None`: rely on the domain CA.
    pub pin: Option<Fingerprint>,
}

/// What an announcement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    New,
    /// Same record version as before (address or liveness may differ).
    Refreshed,
    /// A new record version: an approval of the old one no longer counts.
    NewVersion {
        old: u32,
    },
    /// Our own announcement.
    Own,
    /// The table is full.
    Refused,
}

/// Why an approval or revocation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `discovery.admission` is `off`.
    AdmissionOff,
    NotFound {
        router_id: String,
    },
    /// The candidate announces another version now.
    VersionMismatch {
        router_id: String,
        asked: u32,
        current: u32,
    },
    /// A static `peer` section already names the router.
    StaticPeer {
        router_id: String,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub announcements: u64,
    pub own_ignored: u64,
    pub refused_full: u64,
    pub expired: u64,
    pub version_changes: u64,
}

#[derive(Debug)]
pub struct Table {
    policy: Policy,
    candidates: BTreeMap<String, Candidate>,
    counters: Counters,
}

impl Table {
    pub fn new(policy: Policy) -> Table {
        Table {
            policy,
            candidates: BTreeMap::new(),
            counters: Counters::default(),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A new policy (reload, new identity); our own entries, if the
    /// identity now matches one, are dropped.
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
        let own: Vec<String> = self
            .candidates
            .iter()
            .filter(|(_, c)| self.is_own(&c.seen.record))
            .map(|(id, _)| id.clone())
            .collect();
        for id in own {
            self.candidates.remove(&id);
        }
    }

    fn is_own(&self, r: &Record) -> bool {
        self.policy.own_router_id.as_deref() == Some(r.router_id.as_str())
            || self.policy.own_fingerprint == Some(r.fingerprint)
    }

    /// An announcement was resolved (first time or changed).
    pub fn announced(&mut self, seen: Sighting, now: Millis) -> Seen {
        if self.is_own(&seen.record) {
            self.counters.own_ignored += 1;
            return Seen::Own;
        }
        self.counters.announcements += 1;
        let id = seen.record.router_id.clone();
        let full = self.candidates.len() >= MAX_CANDIDATES;
        match self.candidates.get_mut(&id) {
            Some(c) => {
                let old = c.seen.record.version;
                c.seen = seen;
                c.announced = true;
                c.last_seen = now;
                if old != c.seen.record.version {
                    self.counters.version_changes += 1;
                    Seen::NewVersion { old }
                } else {
                    Seen::Refreshed
                }
            }
            None if full => {
                self.counters.refused_full += 1;
                Seen::Refused
            }
            None => {
                self.candidates.insert(
                    id,
                    Candidate {
                        seen,
                        announced: true,
                        last_seen: now,
                    },
                );
                Seen::New
            }
        }
    }

    /// The announcement of `router_id` ended (goodbye or mDNS expiry):
    /// the candidate lives `lifetime` from now. Returns whether it was
    /// known.
    pub fn withdrawn(&mut self, router_id: &str, now: Millis) -> bool {
        match self.candidates.get_mut(router_id) {
            Some(c) => {
                if c.announced {
                    c.announced = false;
                    c.last_seen = now;
                }
                true
            }
            None => false,
        }
    }

    fn expires_at(&self, c: &Candidate) -> Option<Millis> {
        (!c.announced).then(|| Millis(c.last_seen.0.saturating_add(self.policy.lifetime_ms)))
    }

    /// Removes the candidates whose lifetime ended; returns their ids.
    pub fn expire(&mut self, now: Millis) -> Vec<String> {
        let gone: Vec<String> = self
            .candidates
            .iter()
            .filter(|(_, c)| self.expires_at(c).is_some_and(|t| t <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.candidates.remove(id);
        }
        self.counters.expired += gone.len() as u64;
        gone
    }

    /// When the next candidate expires.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.candidates
            .values()
            .filter_map(|c| self.expires_at(c))
            .min()
    }

    /// Milliseconds `c` has left at least (while announced: the whole
    /// lifetime, which only starts when the announcement ends).
    pub fn expires_in_ms(&self, c: &Candidate, now: Millis) -> u64 {
        match self.expires_at(c) {
            Some(t) => t.saturating_sub(now),
            None => self.policy.lifetime_ms,
        }
    }

    pub fn get(&self, router_id: &str) -> Option<&Candidate> {
        self.candidates.get(router_id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Candidate, State)> + '_ {
        self.candidates.values().map(|c| (c, self.state(c)))
    }

    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn state(&self, c: &Candidate) -> State {
        let r = &c.seen.record;
        let p = &self.policy;
        if p.configured.contains(&r.router_id) {
            return State::Approved;
        }
        if p.approved.get(&r.router_id) == Some(&r.version) {
            return State::Approved;
        }
        match p.mode {
            Admission::Off => State::Rejected,
            Admission::Manual => State::Pending,
            Admission::SameDomain if !p.domain.is_empty() && r.domain == p.domain => {
                State::Admitted
            }
            Admission::Allowlist if p.allow.contains(&r.fingerprint) => State::Admitted,
            Admission::SameDomain | Admission::Allowlist => State::Rejected,
        }
    }

    /// The peers admitted automatically, by router_id (what the daemon
    /// adds to the configured peers while they live).
    pub fn admitted(&self) -> Vec<AdmittedPeer> {
        self.candidates
            .values()
            .filter(|c| self.state(c) == State::Admitted)
            .map(|c| AdmittedPeer {
                router_id: c.seen.record.router_id.clone(),
                address: c.seen.address,
                port: c.seen.port,
                data_port: c.seen.record.data_port,
                pin: match self.policy.mode {
                    Admission::SameDomain if self.policy.domain_ca => None,
                    _ => Some(c.seen.record.fingerprint),
                },
            })
            .collect()
    }

    /// Whether `router_id` may be approved at `version`: it is a
    /// candidate announcing exactly that version, no static peer section
    /// names it, and admission is not `off`.
    pub fn check_approve(&self, router_id: &str, version: u32) -> Result<&Candidate, Refusal> {
        if self.policy.mode == Admission::Off {
            return Err(Refusal::AdmissionOff);
        }
        if self.policy.configured.contains(router_id) {
            return Err(Refusal::StaticPeer {
                router_id: router_id.into(),
            });
        }
        let c = self
            .candidates
            .get(router_id)
            .ok_or_else(|| Refusal::NotFound {
                router_id: router_id.into(),
            })?;
        if c.seen.record.version != version {
            return Err(Refusal::VersionMismatch {
                router_id: router_id.into(),
                asked: version,
                current: c.seen.record.version,
            });
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests;

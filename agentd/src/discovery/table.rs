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
//!
//! Candidates are kept by mDNS instance name, not by router_id: when two
//! hosts announce one router_id, mDNS conflict resolution renames the
//! later instance (`router-b (2)`), and both must stay visible. A
//! router_id whose key is known — our own, a peer section's pin, an
//! approval's pin — announced with another key is a [`Conflict`]
//! (`conflict`, with the two fingerprints), as are two unapproved
//! announcements of one router_id with different keys under an automatic
//! mode; a conflict is never admitted and counts as no approval, until an
//! operator approves exactly that record (which replaces the pin).

use std::collections::BTreeMap;
use std::fmt;
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
    /// Discovered `peer` sections in the file: router_id → what was
    /// approved.
    pub approved: BTreeMap<String, Approval>,
    /// The other (static) `peer` sections: router_id → their pin
    /// (`None`: the domain CA decides).
    pub configured: BTreeMap<String, Option<Fingerprint>>,
}

/// A discovered `peer` section: the approval of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approval {
    /// `record_version`.
    pub version: u32,
    /// `key_fingerprint` (approve always writes it; a hand-edited
    /// section may lack it).
    pub pin: Option<Fingerprint>,
}

/// How a candidate was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// mDNS on a LAN interface.
    Mdns,
    /// Unicast DNS-SD in a search domain.
    Unicast,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Mdns => "mdns",
            Source::Unicast => "unicast",
        }
    }
}

/// One announcement as the mDNS browser or a unicast lookup resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    pub source: Source,
    /// mDNS: the instance label, the router_id unless mDNS conflict
    /// resolution renamed it (`router-b (2)`) because another host
    /// announces that name. Unicast: the full instance name
    /// (`router-b._arpx._tcp.lab.example`).
    pub instance: String,
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
    /// Its key contradicts one we know for its router_id ([`Conflict`]).
    Conflict,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Approved => "approved",
            State::Admitted => "admitted",
            State::Rejected => "rejected",
            State::Conflict => "conflict",
        }
    }
}

/// Where the key we hold for a router_id comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownBy {
    /// It is our own router_id.
    Own,
    /// A static `peer` section pins it.
    PeerSection,
    /// An approval (a discovered `peer` section) at this record version.
    Approval { version: u32 },
}

/// Why a candidate is in [`State::Conflict`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// `router_id`'s key is `known` (by `by`); this announcement carries
    /// `announced`.
    KeyMismatch {
        router_id: String,
        by: KnownBy,
        known: Fingerprint,
        announced: Fingerprint,
    },
    /// Another announcement (`other_instance`) claims the same router_id
    /// with key `other`, none is approved, and the admission mode would
    /// admit both.
    Contested {
        router_id: String,
        announced: Fingerprint,
        other: Fingerprint,
        other_instance: String,
    },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::KeyMismatch {
                router_id,
                by,
                known,
                announced,
            } => {
                match by {
                    KnownBy::Own => write!(f, "{router_id} is this router's own router_id, with key {known}")?,
                    KnownBy::PeerSection => write!(f, "{router_id} is a configured peer pinned to key {known}")?,
                    KnownBy::Approval { version } => write!(
                        f,
                        "{router_id} is approved with key {known} (record version {version})"
                    )?,
                }
                write!(f, "; this announcement carries key {announced}")?;
                if *by != KnownBy::Own {
                    f.write_str(" (approve this record version to replace the pin)")?;
                }
                Ok(())
            }
            Conflict::Contested {
                router_id,
                announced,
                other,
                other_instance,
            } => write!(
                f,
                "{router_id} is also announced with key {other} (mDNS instance '{other_instance}'); this announcement carries key {announced}: neither is admitted until one is approved"
            ),
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
    /// By source and instance: the two never share a name space (an mDNS
    /// label cannot stand in for a unicast instance).
    candidates: BTreeMap<(Source, String), Candidate>,
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
        let own: Vec<(Source, String)> = self
            .candidates
            .iter()
            .filter(|(_, c)| self.is_own(&c.seen.record))
            .map(|(id, _)| id.clone())
            .collect();
        for id in own {
            self.candidates.remove(&id);
        }
    }

    /// Our key, or our router_id while our key is not known yet. Our
    /// router_id with another key is not us: it is a conflict to show.
    fn is_own(&self, r: &Record) -> bool {
        match self.policy.own_fingerprint {
            Some(own) => own == r.fingerprint,
            None => self.policy.own_router_id.as_deref() == Some(r.router_id.as_str()),
        }
    }

    /// An announcement was resolved (first time or changed).
    pub fn announced(&mut self, seen: Sighting, now: Millis) -> Seen {
        if self.is_own(&seen.record) {
            self.counters.own_ignored += 1;
            return Seen::Own;
        }
        self.counters.announcements += 1;
        let id = (seen.source, seen.instance.clone());
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

    /// The announcement of `instance` ended (mDNS goodbye or expiry, no
    /// longer in the zone): the candidate lives `lifetime` from now.
    /// Returns whether it was known.
    pub fn withdrawn(&mut self, source: Source, instance: &str, now: Millis) -> bool {
        match self.candidates.get_mut(&(source, instance.to_string())) {
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

    /// Removes the candidates whose lifetime ended; returns their
    /// sources and instance names.
    pub fn expire(&mut self, now: Millis) -> Vec<(Source, String)> {
        let gone: Vec<(Source, String)> = self
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

    /// The candidate of `instance` found by `source`.
    pub fn get(&self, source: Source, instance: &str) -> Option<&Candidate> {
        self.candidates.get(&(source, instance.to_string()))
    }

    /// The candidates announcing `router_id`, by instance name.
    pub fn of_router<'a>(&'a self, router_id: &'a str) -> impl Iterator<Item = &'a Candidate> {
        self.candidates
            .values()
            .filter(move |c| c.seen.record.router_id == router_id)
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
        if self.conflict(c).is_some() {
            State::Conflict
        } else {
            self.decided(c)
        }
    }

    /// Why `c` is in conflict, if it is: its key contradicts the one we
    /// know for its router_id, or another announcement of the router_id
    /// with another key would be admitted too.
    pub fn conflict(&self, c: &Candidate) -> Option<Conflict> {
        if let Some((by, known)) = self.known_key(&c.seen.record.router_id) {
            return (known != c.seen.record.fingerprint).then(|| Conflict::KeyMismatch {
                router_id: c.seen.record.router_id.clone(),
                by,
                known,
                announced: c.seen.record.fingerprint,
            });
        }
        if self.decided(c) != State::Admitted {
            return None;
        }
        let r = &c.seen.record;
        self.of_router(&r.router_id)
            .find(|o| {
                o.seen.record.fingerprint != r.fingerprint && self.decided(o) == State::Admitted
            })
            .map(|o| Conflict::Contested {
                router_id: r.router_id.clone(),
                announced: r.fingerprint,
                other: o.seen.record.fingerprint,
                other_instance: o.seen.instance.clone(),
            })
    }

    /// The key we hold for `router_id`, and where it comes from.
    fn known_key(&self, router_id: &str) -> Option<(KnownBy, Fingerprint)> {
        let p = &self.policy;
        if p.own_router_id.as_deref() == Some(router_id) {
            return p.own_fingerprint.map(|f| (KnownBy::Own, f));
        }
        if let Some(pin) = p.configured.get(router_id) {
            return pin.map(|f| (KnownBy::PeerSection, f));
        }
        let a = p.approved.get(router_id)?;
        a.pin.map(|f| (KnownBy::Approval { version: a.version }, f))
    }

    /// The state by the admission rules alone (before conflicts).
    fn decided(&self, c: &Candidate) -> State {
        let r = &c.seen.record;
        let p = &self.policy;
        if p.configured.contains_key(&r.router_id) {
            return State::Approved;
        }
        if p.approved.get(&r.router_id).map(|a| a.version) == Some(r.version) {
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

    /// Whether `router_id` may be approved at `version`: a candidate
    /// announces exactly that record (a conflict too: approving it is
    /// the fresh approval that replaces the pin), no static peer section
    /// names it, and admission is not `off`. Among several announcements
    /// of the router_id the version picks one; a mismatch names the
    /// first other version announced.
    pub fn check_approve<'a>(
        &'a self,
        router_id: &'a str,
        version: u32,
    ) -> Result<&'a Candidate, Refusal> {
        if self.policy.mode == Admission::Off {
            return Err(Refusal::AdmissionOff);
        }
        if self.policy.configured.contains_key(router_id) {
            return Err(Refusal::StaticPeer {
                router_id: router_id.into(),
            });
        }
        let mut announced = self.of_router(router_id).peekable();
        let Some(first) = announced.peek().copied() else {
            return Err(Refusal::NotFound {
                router_id: router_id.into(),
            });
        };
        announced
            .find(|c| c.seen.record.version == version)
            .ok_or_else(|| Refusal::VersionMismatch {
                router_id: router_id.into(),
                asked: version,
                current: first.seen.record.version,
            })
    }
}

#[cfg(test)]
mod tests;

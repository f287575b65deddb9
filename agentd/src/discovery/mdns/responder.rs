//! Our records on one interface (RFC 6762 §6, §8, §9, §10; RFC 6763
//! §9, §12).
//!
//! What we publish is a function of the configuration (host label,
//! services, the shared host name we claim, the interface's addresses)
//! and of where each unique name stands: a name enters the published
//! set only once its probes met no conflict. Every change goes through
//! one step, [`Responder::sync`], which compares the set we want with
//! the set we last published: records that left go out with TTL 0 (a
//! goodbye), records that came are announced twice, a second apart.
//! The same step serves a new address, a changed TXT record, a service
//! withdrawn, a rename after a conflict and the end of a probe.
//!
//! The shared host name (`nexus-router.local`) is claimed more
//! carefully than our own names, because another device may rightly
//! hold it: first a lookup (two queries a second apart, two seconds in
//! all); an answer from anyone else gives the name up without a single
//! probe. Only then is it probed like any unique name, and a conflict
//! at any time gives it up instead of renaming it.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use super::packet::{
    Data, Name, Packet, Question, Record, FLAG_AUTHORITATIVE, FLAG_RESPONSE, FLAG_TRUNCATED,
    TYPE_A, TYPE_AAAA, TYPE_ANY, TYPE_NSEC, TYPE_PTR, TYPE_SRV, TYPE_TXT,
};
use super::Jitter;
use crate::time::Millis;

/// TTLs of RFC 6762 §10: records naming a host or carrying its
/// addresses 120 s, the others 75 minutes.
pub const TTL_HOST: u32 = 120;
pub const TTL_OTHER: u32 = 4500;
/// A legacy querier's answers are cached at most this long (§6.7).
const TTL_LEGACY: u32 = 10;

/// Probes (§8.1): three, 250 ms apart, after a random 0–250 ms.
const PROBES: u8 = 3;
const PROBE_GAP: u64 = 250;
/// After a lost tie-break or a conflict, probing starts again after a
/// second; after 15 conflicts in a row, five (§8.1).
const PROBE_RETRY: u64 = 1000;
const PROBE_RETRY_SLOW: u64 = 5000;
const SLOW_AFTER: u32 = 15;
/// Renames tried for one name before we stop claiming it.
const MAX_RENAMES: u32 = 32;
/// Lookup of the shared host name before it is probed.
const LOOKUP: u64 = 2000;
const LOOKUP_GAP: u64 = 1000;
/// The second announcement (§8.3).
const ANNOUNCE_GAP: u64 = 1000;
/// A record is multicast at most once a second on an interface, a
/// quarter of that in defence of a name being probed (§6).
const RATE: u64 = 1000;
const RATE_PROBE: u64 = 250;

/// The service-type enumeration name (RFC 6763 §9).
pub const SERVICES_NAME: &str = "_services._dns-sd._udp.local";

/// A service we announce: `instance` under `kind` (`_arpx._tcp.local`),
/// on our host at `port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub kind: Name,
    pub port: u16,
    /// TXT data in wire form (length-prefixed strings).
    pub txt: Vec<u8>,
}

/// What the responder publishes. Instances are named after `host`
/// (the router id), as the host is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    pub host: Vec<u8>,
    pub services: Vec<Service>,
    /// Claim this shared host name for our addresses.
    pub alias: Option<Name>,
    /// The interface's addresses.
    pub addrs: Vec<IpAddr>,
    /// Every address of this machine: an answer for the shared name
    /// from one of them is our own (a cache, a loop), not a holder.
    pub own: Vec<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A conflict made us rename one of our names (§9).
    Renamed { from: Name, to: Name },
    /// We gave up one of our names after too many renames.
    GaveUp(Name),
    /// The shared name: looked up and now being probed.
    AliasClaiming,
    /// The shared name: probed and announced.
    AliasAnswering,
    /// The shared name is held by these addresses (found by the lookup).
    AliasHeld(Vec<IpAddr>),
    /// The shared name met a conflict while we probed or held it.
    AliasConflict,
}

/// A packet to send: multicast to the interface's group, or unicast
/// to a legacy querier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    pub to: Option<SocketAddr>,
    pub packet: Packet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Host,
    /// The instance of `Config::services[i]` (by kind).
    Instance,
    Alias,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Asking who answers the name (the shared name only).
    Lookup {
        until: Millis,
        next: Option<Millis>,
        found: BTreeSet<IpAddr>,
    },
    /// `sent` probes out; the next (or the verdict) at `next`.
    Probing { sent: u8, next: Millis },
    /// Ours: published.
    Claimed,
    /// Not ours (the shared name held by another, or too many renames).
    Given,
}

/// One unique name and where our claim on it stands.
#[derive(Debug, Clone)]
struct Claim {
    owner: Owner,
    /// The service type, for an instance.
    kind: Option<Name>,
    /// The label we were configured with (renames add to it).
    base: Vec<u8>,
    name: Name,
    renames: u32,
    conflicts: u32,
    phase: Phase,
    /// When the name's NSEC was last multicast (see `negative.rs`).
    negative_sent: Option<Millis>,
}

/// A record we published, and when we last multicast it.
#[derive(Debug, Clone)]
struct Published {
    record: Record,
    unique: bool,
    last: Option<Millis>,
}

/// Our side of mDNS on one interface.
pub struct Responder {
    config: Config,
    claims: Vec<Claim>,
    published: Vec<Published>,
    /// The second announcement of records that just came.
    reannounce: Option<(Millis, Vec<Record>)>,
    /// Answers waiting for their random delay (shared records, §6).
    delayed: Option<(Millis, Vec<Record>, Vec<Record>)>,
    out: Vec<Transmit>,
    events: Vec<Event>,
    jitter: Jitter,
    local: Name,
    services_name: Name,
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("claims", &self.claims)
            .field("published", &self.published.len())
            .finish_non_exhaustive()
    }
}

fn ttl_of(rtype: u16) -> u32 {
    match rtype {
        TYPE_A | TYPE_AAAA | TYPE_SRV => TTL_HOST,
        _ => TTL_OTHER,
    }
}

fn record(name: &Name, data: Data, unique: bool) -> Record {
    let rtype = match &data {
        Data::A(_) => TYPE_A,
        Data::Aaaa(_) => TYPE_AAAA,
        Data::Ptr(_) => TYPE_PTR,
        Data::Srv { .. } => TYPE_SRV,
        Data::Txt(_) => TYPE_TXT,
        Data::Other(_) => 0,
    };
    Record {
        name: name.clone(),
        rtype,
        cache_flush: unique,
        ttl: ttl_of(rtype),
        data,
    }
}

fn same(a: &Record, b: &Record) -> bool {
    a.name == b.name && a.rtype == b.rtype && a.data == b.data
}

/// `label` with the `n`-th rename applied: hosts `name-2`, instances
/// `name (2)` (the forms RFC 6762 §9 and RFC 6763 §4.1 examples use).
fn renamed(owner: Owner, base: &[u8], n: u32) -> Vec<u8> {
    if n == 0 {
        return base.to_vec();
    }
    let suffix = match owner {
        Owner::Instance => format!(" ({})", n + 1),
        _ => format!("-{}", n + 1),
    };
    // Keep the label within 63 bytes: shorten the base, never the suffix.
    let room = 63usize.saturating_sub(suffix.len());
    let mut out = base[..base.len().min(room)].to_vec();
    out.extend_from_slice(suffix.as_bytes());
    out
}

impl Responder {
    pub fn new(seed: u64) -> Responder {
        Responder {
            config: Config::default(),
            claims: Vec::new(),
            published: Vec::new(),
            reannounce: None,
            delayed: None,
            out: Vec::new(),
            events: Vec::new(),
            jitter: Jitter::new(seed),
            local: Name::dotted("local").expect("a valid name"),
            services_name: Name::dotted(SERVICES_NAME).expect("a valid name"),
        }
    }

    /// Replaces what we publish. Claims whose name is still wanted keep
    /// their state (a name we hold is not probed again for a new
    /// address or TXT record); new names are probed.
    pub fn configure(&mut self, now: Millis, config: Config) {
        let mut wanted: Vec<(Owner, Option<Name>, Vec<u8>)> = Vec::new();
        if !config.services.is_empty() && !config.host.is_empty() {
            wanted.push((Owner::Host, None, config.host.clone()));
            for s in &config.services {
                wanted.push((Owner::Instance, Some(s.kind.clone()), config.host.clone()));
            }
        }
        if let Some(alias) = &config.alias {
            if let Some((label, _)) = alias.split_first() {
                wanted.push((Owner::Alias, None, label.to_vec()));
            }
        }
        let old = std::mem::take(&mut self.claims);
        // Names new at the same time are probed together, in one packet.
        let first_probe = self.probe_phase(now, 0);
        for (owner, kind, base) in wanted {
            let kept = old
                .iter()
                .find(|c| c.owner == owner && c.kind == kind && c.base == base);
            if let Some(c) = kept {
                self.claims.push(c.clone());
                continue;
            }
            let name = match self.name_for(owner, kind.as_ref(), &base, 0, &config) {
                Some(n) => n,
                None => continue,
            };
            let phase = if owner == Owner::Alias {
                self.events.push(Event::AliasClaiming);
                Phase::Lookup {
                    until: now.saturating_add_ms(LOOKUP),
                    next: Some(now),
                    found: BTreeSet::new(),
                }
            } else {
                first_probe.clone()
            };
            self.claims.push(Claim {
                owner,
                kind,
                base,
                name,
                renames: 0,
                conflicts: 0,
                phase,
                negative_sent: None,
            });
        }
        self.config = config;
        self.sync(now);
    }

    fn name_for(
        &self,
        owner: Owner,
        kind: Option<&Name>,
        base: &[u8],
        n: u32,
        config: &Config,
    ) -> Option<Name> {
        let label = renamed(owner, base, n);
        match owner {
            Owner::Host => self.local.prefixed(&label).ok(),
            Owner::Instance => kind?.prefixed(&label).ok(),
            Owner::Alias => {
                let (_, parent) = config.alias.as_ref()?.split_first()?;
                parent.prefixed(&label).ok()
            }
        }
    }

    fn probe_phase(&mut self, now: Millis, delay: u64) -> Phase {
        Phase::Probing {
            sent: 0,
            next: now.saturating_add_ms(delay + self.jitter.between(0, PROBE_GAP)),
        }
    }

    fn host_name(&self) -> Option<&Name> {
        self.claims
            .iter()
            .find(|c| c.owner == Owner::Host)
            .map(|c| &c.name)
    }

    fn address_records(&self, name: &Name) -> Vec<Record> {
        self.config
            .addrs
            .iter()
            .map(|a| match a {
                IpAddr::V4(v4) => record(name, Data::A(*v4), true),
                IpAddr::V6(v6) => record(name, Data::Aaaa(*v6), true),
            })
            .collect()
    }

    /// The records of one claim, whatever its phase (what a probe
    /// proposes, what publishing it adds).
    fn records_of(&self, c: &Claim) -> Vec<Record> {
        match c.owner {
            Owner::Host | Owner::Alias => self.address_records(&c.name),
            Owner::Instance => {
                let Some(kind) = &c.kind else {
                    return Vec::new();
                };
                let Some(s) = self.config.services.iter().find(|s| &s.kind == kind) else {
                    return Vec::new();
                };
                let Some(host) = self.host_name() else {
                    return Vec::new();
                };
                vec![
                    record(
                        &c.name,
                        Data::Srv {
                            priority: 0,
                            weight: 0,
                            port: s.port,
                            target: host.clone(),
                        },
                        true,
                    ),
                    record(&c.name, Data::Txt(s.txt.clone()), true),
                ]
            }
        }
    }

    /// What we publish now: the records of every claimed name, with the
    /// PTRs of claimed instances and of their service types.
    fn wanted(&self) -> Vec<(Record, bool)> {
        let mut out: Vec<(Record, bool)> = Vec::new();
        let host_claimed = self
            .claims
            .iter()
            .any(|c| c.owner == Owner::Host && c.phase == Phase::Claimed);
        for c in self.claims.iter().filter(|c| c.phase == Phase::Claimed) {
            // An instance is published with its host only.
            if c.owner == Owner::Instance && !host_claimed {
                continue;
            }
            out.extend(self.records_of(c).into_iter().map(|r| (r, true)));
            if let (Owner::Instance, Some(kind)) = (c.owner, &c.kind) {
                out.push((record(kind, Data::Ptr(c.name.clone()), false), false));
                let types = record(&self.services_name, Data::Ptr(kind.clone()), false);
                if !out.iter().any(|(r, _)| same(r, &types)) {
                    out.push((types, false));
                }
            }
        }
        out
    }

    /// Brings what we published in line with what we want: goodbyes
    /// for what left, two announcements for what came.
    pub fn sync(&mut self, now: Millis) {
        let wanted = self.wanted();
        let mut gone = Vec::new();
        self.published.retain(|p| {
            let keep = wanted.iter().any(|(w, _)| same(w, &p.record));
            if !keep {
                let mut r = p.record.clone();
                r.ttl = 0;
                gone.push(r);
            }
            keep
        });
        let mut fresh = Vec::new();
        for (r, unique) in wanted {
            if !self.published.iter().any(|p| same(&p.record, &r)) {
                fresh.push(r.clone());
                self.published.push(Published {
                    record: r,
                    unique,
                    last: Some(now),
                });
            }
        }
        if !gone.is_empty() {
            self.respond(None, gone, Vec::new());
        }
        if !fresh.is_empty() {
            self.respond(None, fresh.clone(), Vec::new());
            match &mut self.reannounce {
                Some((_, list)) => list.extend(fresh),
                None => self.reannounce = Some((now.saturating_add_ms(ANNOUNCE_GAP), fresh)),
            }
        }
    }

    fn respond(&mut self, to: Option<SocketAddr>, answers: Vec<Record>, additional: Vec<Record>) {
        self.out.push(Transmit {
            to,
            packet: Packet {
                id: 0,
                flags: FLAG_RESPONSE | FLAG_AUTHORITATIVE,
                questions: Vec::new(),
                answers,
                authority: Vec::new(),
                additional,
            },
        });
    }

    /// Every published record with TTL 0 (the daemon stops or leaves
    /// the interface); nothing is published afterwards until the next
    /// [`Responder::configure`].
    pub fn goodbye(&mut self) -> Option<Transmit> {
        self.claims.clear();
        self.reannounce = None;
        self.delayed = None;
        let gone: Vec<Record> = std::mem::take(&mut self.published)
            .into_iter()
            .map(|p| Record { ttl: 0, ..p.record })
            .collect();
        (!gone.is_empty()).then(|| Transmit {
            to: None,
            packet: Packet {
                id: 0,
                flags: FLAG_RESPONSE | FLAG_AUTHORITATIVE,
                answers: gone,
                ..Packet::default()
            },
        })
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        (!self.out.is_empty()).then(|| self.out.remove(0))
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        (!self.events.is_empty()).then(|| self.events.remove(0))
    }

    pub fn poll_timeout(&self) -> Option<Millis> {
        let phases = self.claims.iter().filter_map(|c| match &c.phase {
            Phase::Lookup { until, next, .. } => Some(next.map_or(*until, |n| n.min(*until))),
            Phase::Probing { next, .. } => Some(*next),
            _ => None,
        });
        phases
            .chain(self.reannounce.as_ref().map(|(t, _)| *t))
            .chain(self.delayed.as_ref().map(|(t, _, _)| *t))
            .min()
    }
}

mod negative;
mod step;

#[cfg(test)]
mod tests;

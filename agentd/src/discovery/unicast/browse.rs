//! Browsing search domains with unicast DNS-SD (RFC 6763), sans-IO:
//! time is an argument, questions go out as [`Event::Ask`] and answers
//! come back through [`Browser::answered`]; the daemon's driver only
//! moves bytes.
//!
//! Each search domain is looked up in *rounds*: PTR
//! `_arpx._tcp.<domain>` gives the instances (§4), each instance's SRV
//! and TXT give port, target host and record (§5, §6), the target's
//! AAAA and A give the addresses. Records the resolver puts in the
//! additional section (§12) are used and save the questions they answer.
//! A round ends when every question it asked is answered or failed;
//! the next one starts after the smallest TTL seen, kept between
//! `refresh_min` and `refresh_max` (after a failed PTR lookup: after
//! `refresh_min`).
//!
//! An instance found complete is [`Event::Found`] (every round: the
//! table tells a new record version from a refresh). It is
//! [`Event::Lost`] when a successful PTR answer no longer lists it, or
//! when its refresh time and one retry have passed without a successful
//! lookup (the resolver is down, answers stopped validating): only then
//! does its candidate lifetime start, as after an mDNS goodbye.
//!
//! Bounds: [`MAX_INSTANCES`] per domain (more PTR targets are ignored
//! and said in the domain's status), one round per domain at a time,
//! and a round that has not ended after [`ROUND_LIMIT_MS`] is abandoned
//! (an answer that never came back must not stop the refreshes).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::answer::{Answer, Data, DnsError, Kind, Question};
use crate::discovery::record::Record;
use crate::time::Millis;

/// The DNS-SD service type of ARPX.
pub const SERVICE: &str = "_arpx._tcp";
/// Most instances looked at per domain.
pub const MAX_INSTANCES: usize = 32;
/// Most addresses kept per instance.
pub const MAX_ADDRESSES: usize = 8;
/// CNAMEs followed for an address.
const MAX_CNAMES: usize = 8;
/// A round not ended by then is abandoned.
pub const ROUND_LIMIT_MS: u64 = 60_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowseSettings {
    /// Lower case, no trailing dot.
    pub domains: Vec<String>,
    pub require_dnssec: bool,
    pub refresh_min_ms: u64,
    pub refresh_max_ms: u64,
}

/// Identifies one question of one round (stale answers are dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub round: u64,
    pub question: Question,
    /// Ask the resolver for the AD bit and refuse answers without it.
    pub require_ad: bool,
}

/// An instance found complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub domain: String,
    /// The full instance name (`router-b._arpx._tcp.lab.example`).
    pub instance: String,
    pub record: Record,
    pub port: u16,
    pub addresses: Vec<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Ask(Ask),
    Found(Found),
    /// The instance is no longer published (or no longer confirmed).
    Lost {
        instance: String,
    },
}

/// What `agentctl candidates` shows per search domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainStatus {
    pub domain: String,
    pub last_success: Option<Millis>,
    /// When and what: the PTR lookup's failure, or the first instance
    /// that could not be resolved in the last round.
    pub last_error: Option<(Millis, String)>,
    /// Instances found complete in the last successful round.
    pub instances: usize,
    pub next_lookup: Option<Millis>,
}

#[derive(Debug, Clone, Default)]
struct Partial {
    srv: Option<(u16, String)>,
    txt: Option<Result<Record, String>>,
    addresses: Vec<IpAddr>,
    error: Option<String>,
}

#[derive(Debug)]
struct Round {
    serial: u64,
    started: Millis,
    asked: BTreeSet<Question>,
    pending: BTreeSet<Question>,
    /// `None` until the PTR answer; then the instances it listed.
    listed: Option<Vec<String>>,
    ptr_error: Option<String>,
    instances: BTreeMap<String, Partial>,
    cnames: BTreeMap<String, String>,
    /// Addresses by host name (from any answer of the round).
    hosts: BTreeMap<String, Vec<IpAddr>>,
    min_ttl: Option<u32>,
    skipped: usize,
}

#[derive(Debug)]
struct Known {
    valid_until: Millis,
}

#[derive(Debug)]
struct Domain {
    name: String,
    /// `_arpx._tcp.<name>`.
    service: String,
    round: Option<Round>,
    next_round: Millis,
    known: BTreeMap<String, Known>,
    status: DomainStatus,
}

#[derive(Debug)]
pub struct Browser {
    settings: BrowseSettings,
    domains: Vec<Domain>,
    serial: u64,
}

impl Browser {
    pub fn new(settings: BrowseSettings, now: Millis) -> Browser {
        let domains = settings
            .domains
            .iter()
            .map(|d| Domain {
                name: d.clone(),
                service: format!("{SERVICE}.{d}"),
                round: None,
                next_round: now,
                known: BTreeMap::new(),
                status: DomainStatus {
                    domain: d.clone(),
                    next_lookup: Some(now),
                    ..DomainStatus::default()
                },
            })
            .collect();
        Browser {
            settings,
            domains,
            serial: 0,
        }
    }

    pub fn settings(&self) -> &BrowseSettings {
        &self.settings
    }

    /// Every instance currently found, to be told `Lost` when browsing
    /// stops.
    pub fn known(&self) -> impl Iterator<Item = &str> {
        self.domains
            .iter()
            .flat_map(|d| d.known.keys().map(String::as_str))
    }

    pub fn status(&self) -> Vec<DomainStatus> {
        self.domains.iter().map(|d| d.status.clone()).collect()
    }

    /// When [`Browser::tick`] has something to do.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.domains
            .iter()
            .flat_map(|d| {
                let round = match &d.round {
                    Some(r) => Millis(r.started.0.saturating_add(ROUND_LIMIT_MS)),
                    None => d.next_round,
                };
                std::iter::once(round).chain(d.known.values().map(|k| k.valid_until))
            })
            .min()
    }

    /// Starts the rounds that are due, abandons overdue ones and loses
    /// instances whose TTL ran out.
    pub fn tick(&mut self, now: Millis) -> Vec<Event> {
        let mut out = Vec::new();
        for i in 0..self.domains.len() {
            let overdue = self.domains[i]
                .round
                .as_ref()
                .is_some_and(|r| now.0 >= r.started.0.saturating_add(ROUND_LIMIT_MS));
            if overdue {
                let d = &mut self.domains[i];
                d.round = None;
                d.status.last_error = Some((now, "lookup round did not finish in time".into()));
                d.next_round = Millis(now.0.saturating_add(self.settings.refresh_min_ms));
                d.status.next_lookup = Some(d.next_round);
            }
            let d = &mut self.domains[i];
            let lost: Vec<String> = d
                .known
                .iter()
                .filter(|(_, k)| k.valid_until <= now)
                .map(|(n, _)| n.clone())
                .collect();
            for instance in lost {
                d.known.remove(&instance);
                out.push(Event::Lost { instance });
            }
            if d.round.is_none() && d.next_round <= now {
                self.serial += 1;
                let q = Question {
                    name: d.service.clone(),
                    kind: Kind::Ptr,
                };
                let mut r = Round {
                    serial: self.serial,
                    started: now,
                    asked: BTreeSet::new(),
                    pending: BTreeSet::new(),
                    listed: None,
                    ptr_error: None,
                    instances: BTreeMap::new(),
                    cnames: BTreeMap::new(),
                    hosts: BTreeMap::new(),
                    min_ttl: None,
                    skipped: 0,
                };
                r.asked.insert(q.clone());
                r.pending.insert(q.clone());
                d.round = Some(r);
                d.status.next_lookup = None;
                out.push(Event::Ask(Ask {
                    round: self.serial,
                    question: q,
                    require_ad: self.settings.require_dnssec,
                }));
            }
        }
        out
    }

    /// The answer (or failure) of `ask`.
    pub fn answered(
        &mut self,
        ask: &Ask,
        result: Result<Answer, DnsError>,
        now: Millis,
    ) -> Vec<Event> {
        let mut out = Vec::new();
        let settings = self.settings.clone();
        let Some(d) = self.domains.iter_mut().find(|d| {
            d.round
                .as_ref()
                .is_some_and(|r| r.serial == ask.round && r.pending.contains(&ask.question))
        }) else {
            return out;
        };
        let Some(r) = d.round.as_mut() else {
            return out;
        };
        let q = &ask.question;
        r.pending.remove(q);
        match result {
            Ok(answer) => {
                absorb(r, &d.service, &answer);
                // What the answer was meant to give and did not.
                if q.kind == Kind::Ptr && r.listed.is_none() {
                    r.listed = Some(Vec::new());
                }
                if let Some(p) = r.instances.get_mut(&q.name) {
                    if q.kind == Kind::Srv && p.srv.is_none() {
                        p.error.get_or_insert_with(|| "no SRV record".into());
                    }
                    if q.kind == Kind::Txt && p.txt.is_none() {
                        p.error.get_or_insert_with(|| "no TXT record".into());
                    }
                }
            }
            Err(e) => match q.kind {
                Kind::Ptr => r.ptr_error = Some(format!("{q}: {e}")),
                Kind::Srv | Kind::Txt => {
                    if let Some(p) = r.instances.get_mut(&q.name) {
                        p.error.get_or_insert_with(|| format!("{q}: {e}"));
                    }
                }
                Kind::A | Kind::Aaaa => {
                    for p in r.instances.values_mut() {
                        let host = p.srv.as_ref().map(|(_, t)| t.as_str());
                        if host == Some(q.name.as_str()) && p.addresses.is_empty() {
                            p.error.get_or_insert_with(|| format!("{q}: {e}"));
                        }
                    }
                }
            },
        }
        advance(r, &settings, &mut out);
        if r.pending.is_empty() {
            finish(d, &settings, now, &mut out);
        }
        out
    }
}

/// Takes every record of `a` the round can use: PTR targets of the
/// service first, then SRV/TXT of known instances, then addresses.
fn absorb(r: &mut Round, service: &str, a: &Answer) {
    let mut ttl = |t: u32| r.min_ttl = Some(r.min_ttl.map_or(t, |m| m.min(t)));
    for rr in &a.records {
        if let (Data::Ptr(target), true) = (&rr.data, rr.name == service) {
            // Only `<instance>.<service>`: a PTR elsewhere is not ours.
            let ok = target
                .strip_suffix(service)
                .and_then(|l| l.strip_suffix('.'))
                .is_some_and(|label| !label.is_empty());
            let listed = r.listed.get_or_insert_with(Vec::new);
            if !ok || listed.contains(target) {
                continue;
            }
            if listed.len() >= MAX_INSTANCES {
                r.skipped += 1;
                continue;
            }
            listed.push(target.clone());
            r.instances.entry(target.clone()).or_default();
            ttl(rr.ttl);
        }
    }
    for rr in &a.records {
        let Some(p) = r.instances.get_mut(&rr.name) else {
            continue;
        };
        match &rr.data {
            // RFC 2782: a target of "." says the service is not offered.
            Data::Srv { target, .. } if p.srv.is_none() && target == "." => {
                p.error
                    .get_or_insert_with(|| "SRV target is \".\" (service not offered)".into());
            }
            Data::Srv { port, target } if p.srv.is_none() => {
                p.srv = Some((*port, target.clone()));
                ttl(rr.ttl);
            }
            Data::Txt(rdata) if p.txt.is_none() => {
                p.txt = Some(Record::from_rdata(rdata).map_err(|e| e.to_string()));
                ttl(rr.ttl);
            }
            _ => {}
        }
    }
    for rr in &a.records {
        match &rr.data {
            Data::Cname(to) => {
                r.cnames
                    .entry(rr.name.clone())
                    .or_insert_with(|| to.clone());
            }
            Data::A(v4) => add_host(r, &rr.name, IpAddr::V4(*v4), rr.ttl),
            Data::Aaaa(v6) => add_host(r, &rr.name, IpAddr::V6(*v6), rr.ttl),
            _ => {}
        }
    }
    // Addresses of targets, through CNAMEs.
    let hosts = &r.hosts;
    let cnames = &r.cnames;
    for p in r.instances.values_mut() {
        let Some((_, target)) = &p.srv else { continue };
        let mut name = target.as_str();
        for _ in 0..=MAX_CNAMES {
            if let Some(addrs) = hosts.get(name) {
                for a in addrs {
                    if !p.addresses.contains(a) && p.addresses.len() < MAX_ADDRESSES {
                        p.addresses.push(*a);
                    }
                }
            }
            match cnames.get(name) {
                Some(next) => name = next,
                None => break,
            }
        }
    }
}

fn add_host(r: &mut Round, name: &str, a: IpAddr, ttl: u32) {
    let v = r.hosts.entry(name.to_string()).or_default();
    if !v.contains(&a) && v.len() < MAX_ADDRESSES {
        v.push(a);
        r.min_ttl = Some(r.min_ttl.map_or(ttl, |m| m.min(ttl)));
    }
}

/// Asks what the round still needs (and has not asked).
fn advance(r: &mut Round, s: &BrowseSettings, out: &mut Vec<Event>) {
    let mut want = Vec::new();
    for (name, p) in &r.instances {
        if p.error.is_some() {
            continue;
        }
        if p.srv.is_none() {
            want.push(Question {
                name: name.clone(),
                kind: Kind::Srv,
            });
        }
        if p.txt.is_none() {
            want.push(Question {
                name: name.clone(),
                kind: Kind::Txt,
            });
        }
        if let Some((_, target)) = &p.srv {
            if p.addresses.is_empty() {
                for kind in [Kind::Aaaa, Kind::A] {
                    want.push(Question {
                        name: target.clone(),
                        kind,
                    });
                }
            }
        }
    }
    for q in want {
        if r.asked.insert(q.clone()) {
            r.pending.insert(q.clone());
            out.push(Event::Ask(Ask {
                round: r.serial,
                question: q,
                require_ad: s.require_dnssec,
            }));
        }
    }
}

/// The round is over: found, lost, status, next round.
fn finish(d: &mut Domain, s: &BrowseSettings, now: Millis, out: &mut Vec<Event>) {
    let Some(r) = d.round.take() else { return };
    let after = |ms: u64| Millis(now.0.saturating_add(ms));
    if let Some(e) = r.ptr_error {
        d.status.last_error = Some((now, e));
        d.next_round = after(s.refresh_min_ms);
        d.status.next_lookup = Some(d.next_round);
        return;
    }
    let ttl_ms = u64::from(r.min_ttl.unwrap_or(u32::MAX)).saturating_mul(1000);
    let refresh = ttl_ms.clamp(s.refresh_min_ms, s.refresh_max_ms.max(s.refresh_min_ms));
    let listed = r.listed.unwrap_or_default();
    let mut first_error = None;
    let mut found = 0;
    for name in &listed {
        let Some(p) = r.instances.get(name) else {
            continue;
        };
        let outcome = match (&p.error, &p.srv, &p.txt) {
            (Some(e), _, _) => Err(e.clone()),
            (None, Some((port, _)), Some(Ok(record))) if !p.addresses.is_empty() => Ok(Found {
                domain: d.name.clone(),
                instance: name.clone(),
                record: record.clone(),
                port: *port,
                addresses: p.addresses.clone(),
            }),
            (None, _, Some(Err(e))) => Err(format!("TXT record: {e}")),
            (None, Some((_, t)), _) if p.addresses.is_empty() => Err(format!("no address for {t}")),
            _ => Err("incomplete answers".to_string()),
        };
        match outcome {
            Ok(f) => {
                found += 1;
                d.known.insert(
                    name.clone(),
                    Known {
                        // One retry past the refresh: a lookup that
                        // fails once (a lost packet) loses nothing.
                        valid_until: after(refresh.saturating_add(s.refresh_min_ms)),
                    },
                );
                out.push(Event::Found(f));
            }
            Err(e) => {
                first_error.get_or_insert(format!("{name}: {e}"));
            }
        }
    }
    if r.skipped > 0 {
        first_error.get_or_insert(format!(
            "{} more instances ignored (at most {MAX_INSTANCES})",
            r.skipped
        ));
    }
    let gone: Vec<String> = d
        .known
        .keys()
        .filter(|k| !listed.contains(k))
        .cloned()
        .collect();
    for instance in gone {
        d.known.remove(&instance);
        out.push(Event::Lost { instance });
    }
    d.status.last_success = Some(now);
    d.status.instances = found;
    if let Some(e) = first_error {
        d.status.last_error = Some((now, e));
    }
    d.next_round = after(refresh);
    d.status.next_lookup = Some(d.next_round);
}

#[cfg(test)]
mod tests;

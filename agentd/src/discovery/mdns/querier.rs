//! Browsing one DNS-SD service type over mDNS (RFC 6762 §5, §10; RFC
//! 6763 §4): continuous PTR queries with known answers, a bounded cache
//! of what the answers carry, resolution of each instance to its SRV,
//! TXT and addresses, refresh before records expire, and verification
//! of an instance we have reason to doubt (§10.4). Sans-IO: the caller
//! feeds packets and time, and sends what [`Querier::poll_transmit`]
//! gives it to the mDNS group of the interface this querier serves.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::net::IpAddr;

use super::packet::{
    Data, Name, Packet, Question, Record, TYPE_A, TYPE_AAAA, TYPE_PTR, TYPE_SRV, TYPE_TXT,
};
use super::Jitter;
use crate::time::Millis;

/// One instance, resolved: its SRV port, the addresses of the SRV's
/// target, and its TXT strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The instance's full name (`router-b._arpx._tcp.local`).
    pub instance: Name,
    pub port: u16,
    /// IPv4 first, then IPv6, each in ascending order.
    pub addresses: Vec<IpAddr>,
    /// The TXT record's data as on the wire (length-prefixed strings):
    /// what it says is for the record's own bounded decoder
    /// (`discovery::record::Record::from_rdata`).
    pub txt: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An instance became resolved, or what it resolves to changed.
    Resolved(Resolved),
    /// An instance reported before is gone: its PTR was withdrawn
    /// (goodbye), expired, or failed verification.
    Removed(Name),
}

const SECOND: u64 = 1000;
/// §5.2: the gap between browse queries doubles up to an hour.
const BROWSE_MAX_INTERVAL: u64 = 3_600_000;
/// Asking again for a missing SRV/TXT/address backs off to a minute:
/// a peer that answers the PTR but not the rest should not be hammered.
const MISSING_MAX_INTERVAL: u64 = 60_000;
/// §10.4: the second query of a verification, and the wait before the
/// doubted records are dropped.
const VERIFY_REPEAT: u64 = 2 * SECOND;
const VERIFY_WAIT: u64 = 10 * SECOND;
/// The bounds that keep a flood of answers (or a busy LAN) from growing
/// memory: new records beyond them are dropped.
pub const MAX_INSTANCES: usize = 64;
pub const MAX_RECORDS: usize = 1024;
/// One name and type holding more records than this is not a router
/// we want to talk to; the cap keeps one sender from taking the cache.
const MAX_RRSET: usize = 32;
/// Known answers in one query (§7.1): past this the packet nears the
/// 9000-byte limit, and a few more answers from responders cost less.
pub const MAX_KNOWN_ANSWERS: usize = 32;
/// Uncompressed size estimate a query may reach: even without name
/// compression the packet stays well under §17's 9000 bytes.
const PACKET_BUDGET: usize = 6000;
/// Queries waiting for the driver; if it falls behind, the oldest go
/// first since newer ones ask the same or more.
const MAX_QUEUE: usize = 32;
const MAX_EVENTS: usize = 256;

/// A fixed hasher keeps iteration (and so the order of questions and
/// the jitter each record draws) reproducible for a given seed; the
/// maps are small and bounded, so flooding cannot hurt them.
type Map<K, V> = HashMap<K, V, BuildHasherDefault<DefaultHasher>>;

/// One cached record; its name and type are the key of the set it is in.
#[derive(Debug, Clone)]
struct Entry {
    data: Data,
    /// The TTL it arrived with, in seconds (the base of the half-TTL
    /// known-answer rule and of the refresh points).
    ttl: u32,
    received: Millis,
    expires: Millis,
    /// Withdrawn by a goodbye or flushed (§10.1, §10.2): it lives out
    /// its last second but is neither refreshed nor offered as known.
    doomed: bool,
    /// Which of the 80/85/90/95 % refresh points is next (4: none left).
    refresh_step: u8,
    refresh_at: Option<Millis>,
}

impl Entry {
    fn ttl_ms(&self) -> u64 {
        u64::from(self.ttl) * SECOND
    }

    fn renew(&mut self, now: Millis, ttl: u32, jitter: &mut Jitter) {
        self.ttl = ttl;
        self.received = now;
        self.expires = now.saturating_add_ms(self.ttl_ms());
        self.doomed = false;
        self.refresh_step = 0;
        self.schedule_refresh(jitter);
    }

    fn schedule_refresh(&mut self, jitter: &mut Jitter) {
        self.refresh_at = (self.refresh_step < 4).then(|| {
            let ttl = self.ttl_ms();
            let percent = 80 + 5 * u64::from(self.refresh_step);
            let extra = jitter.between(0, ttl / 50);
            self.received
                .saturating_add_ms(ttl / 100 * percent + ttl % 100 * percent / 100)
                .saturating_add_ms(extra)
        });
    }

    fn doom(&mut self, now: Millis) {
        self.expires = self.expires.min(now.saturating_add_ms(SECOND));
        self.doomed = true;
        self.refresh_at = None;
    }

    /// Remaining TTL, if more than half the original is left (§7.1).
    fn known_ttl(&self, now: Millis) -> Option<u32> {
        let left = self.expires.saturating_sub(now);
        let secs = u32::try_from(left / SECOND).ok()?;
        (!self.doomed && left.saturating_mul(2) > self.ttl_ms() && secs > 0).then_some(secs)
    }
}

#[derive(Debug, Default)]
struct Instance {
    /// What was last reported, so only changes are reported again.
    reported: Option<Resolved>,
    /// When to ask again for whatever keeps it unresolved.
    missing_at: Option<Millis>,
    missing_interval: u64,
    /// A doubt (§10.4): when to ask the second time, and when to give up.
    verify_repeat: Option<Millis>,
    verify_deadline: Option<Millis>,
}

#[derive(Debug)]
pub struct Querier {
    service: Name,
    jitter: Jitter,
    cache: Map<(Name, u16), Vec<Entry>>,
    /// Instances we hold a PTR for.
    instances: Map<Name, Instance>,
    next_browse: Millis,
    browse_interval: u64,
    outgoing: VecDeque<Packet>,
    events: VecDeque<Event>,
}

impl Querier {
    /// Browses `service` (e.g. `_arpx._tcp.local`); queries start with
    /// the first [`Querier::handle_timeout`] at or after `now`.
    pub fn new(service: Name, now: Millis, seed: u64) -> Querier {
        let mut jitter = Jitter::new(seed);
        // §5.2: a random 20–120 ms first, so hosts that start together
        // (a power cut ending) do not query in lockstep.
        let first = now.saturating_add_ms(jitter.between(20, 120));
        Querier {
            service,
            jitter,
            cache: Map::default(),
            instances: Map::default(),
            next_browse: first,
            browse_interval: SECOND,
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// A packet received on this interface (queries are ignored).
    pub fn receive(&mut self, now: Millis, packet: &Packet) {
        if !packet.is_response() {
            return;
        }
        // What ran out before this packet must not be renewed by it or
        // count towards a resolution.
        self.expire(now);
        let records = || packet.answers.iter().chain(&packet.additional);
        // Whether anything relevant came: a packet of strangers costs
        // no recomputation.
        let mut touched = false;
        // PTRs first: they make the SRV and TXT beside them relevant,
        // and those the addresses beside them.
        for record in records().filter(|r| r.rtype == TYPE_PTR) {
            touched |= self.receive_ptr(now, record);
        }
        for record in records().filter(|r| matches!(r.rtype, TYPE_SRV | TYPE_TXT)) {
            if self.instances.contains_key(&record.name) {
                touched = true;
                if self.store(now, record) {
                    self.answered(&record.name);
                }
            }
        }
        let targets = self.targets();
        for record in records().filter(|r| matches!(r.rtype, TYPE_A | TYPE_AAAA)) {
            if targets.contains(&record.name) {
                touched = true;
                self.store(now, record);
            }
        }
        if touched {
            // Records refused by the bounds may leave an empty set.
            self.cache.retain(|_, set| !set.is_empty());
            self.update(now);
        }
    }

    /// Doubts `instance`: asks for it again, and drops it (with
    /// [`Event::Removed`]) unless an answer comes within ten seconds.
    pub fn verify(&mut self, now: Millis, instance: &Name) {
        let Some(state) = self.instances.get_mut(instance) else {
            return;
        };
        // A doubt already pending keeps its deadline: repeated doubts
        // must not postpone the removal forever.
        if state.verify_deadline.is_some() {
            return;
        }
        state.verify_repeat = Some(now.saturating_add_ms(VERIFY_REPEAT));
        state.verify_deadline = Some(now.saturating_add_ms(VERIFY_WAIT));
        self.send_verify(now, instance);
    }

    pub fn handle_timeout(&mut self, now: Millis) {
        self.expire(now);
        let failed: Vec<Name> = self
            .instances
            .iter()
            .filter(|(_, s)| s.verify_deadline.is_some_and(|t| t <= now))
            .map(|(name, _)| name.clone())
            .collect();
        for instance in &failed {
            self.drop_instance(instance);
        }
        self.update(now);

        let mut questions: Vec<(Name, u16)> = Vec::new();
        if self.next_browse <= now {
            questions.push((self.service.clone(), TYPE_PTR));
            self.next_browse = now.saturating_add_ms(self.browse_interval);
            self.browse_interval = (self.browse_interval * 2).min(BROWSE_MAX_INTERVAL);
        }
        let targets = self.targets();
        for ((name, rtype), set) in self.cache.iter_mut() {
            // Addresses no SRV names any more just run out.
            let wanted = !matches!(*rtype, TYPE_A | TYPE_AAAA) || targets.contains(name);
            for entry in set.iter_mut() {
                let mut due = false;
                while entry.refresh_at.is_some_and(|t| t <= now) {
                    due = true;
                    entry.refresh_step += 1;
                    entry.schedule_refresh(&mut self.jitter);
                }
                if due && wanted {
                    add_question(&mut questions, name, *rtype);
                }
            }
        }
        let names = self.names();
        for name in &names {
            let missing = self.missing(name);
            let Some(state) = self.instances.get_mut(name) else {
                continue;
            };
            if state.missing_at.is_some_and(|t| t <= now) {
                if missing.is_empty() {
                    state.missing_at = None;
                } else {
                    state.missing_at = Some(now.saturating_add_ms(state.missing_interval));
                    state.missing_interval = (state.missing_interval * 2).min(MISSING_MAX_INTERVAL);
                    for (qname, qtype) in &missing {
                        add_question(&mut questions, qname, *qtype);
                    }
                }
            }
            if state.verify_repeat.take_if(|t| *t <= now).is_some() {
                self.send_verify(now, name);
            }
        }
        self.send(now, &questions);
    }

    /// When [`Querier::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let entries = self.cache.values().flatten();
        let cache = entries.flat_map(|e| [Some(e.expires), e.refresh_at]);
        let instances = (self.instances.values())
            .flat_map(|s| [s.missing_at, s.verify_repeat, s.verify_deadline]);
        std::iter::once(Some(self.next_browse))
            .chain(cache)
            .chain(instances)
            .flatten()
            .min()
    }

    /// The next query to multicast.
    pub fn poll_transmit(&mut self) -> Option<Packet> {
        self.outgoing.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// How many records the cache holds (for tests and statistics).
    pub fn cached_records(&self) -> usize {
        self.cache.values().map(Vec::len).sum()
    }

    /// How many instances we hold a PTR for.
    pub fn instance_count(&self) -> usize {
        self.instances.len()
    }

    /// True if the PTR was one of ours (cached, renewed or withdrawn).
    fn receive_ptr(&mut self, now: Millis, record: &Record) -> bool {
        let Data::Ptr(instance) = &record.data else {
            return false;
        };
        // A DNS-SD instance is one label in front of the service type
        // (RFC 6763 §4.1); anything deeper or elsewhere is not ours.
        let ours = instance
            .split_first()
            .is_some_and(|(_, up)| up == self.service);
        if record.name != self.service || !ours {
            return false;
        }
        let known = self.instances.contains_key(instance);
        if !known && (record.ttl == 0 || self.instances.len() >= MAX_INSTANCES) {
            return false;
        }
        // The service's PTRs are shared (RFC 6762 §10.2): a flush bit
        // on one would let any one responder wipe out every other.
        let record = &Record {
            cache_flush: false,
            ..record.clone()
        };
        if self.store(now, record) {
            if !known {
                // §5.2 gives the answer a second to bring the rest
                // along before we ask for it.
                let state = Instance {
                    missing_at: Some(now.saturating_add_ms(SECOND)),
                    missing_interval: SECOND,
                    ..Instance::default()
                };
                self.instances.insert(instance.clone(), state);
            }
            self.answered(instance);
        }
        true
    }

    /// An answer about `instance` arrived: any doubt about it is over.
    fn answered(&mut self, instance: &Name) {
        if let Some(state) = self.instances.get_mut(instance) {
            state.verify_repeat = None;
            state.verify_deadline = None;
        }
    }

    /// Caches `record` (or renews, withdraws or flushes what it names);
    /// true if it is now held with a live TTL.
    fn store(&mut self, now: Millis, record: &Record) -> bool {
        let typed = matches!(
            (&record.data, record.rtype),
            (Data::A(_), TYPE_A)
                | (Data::Aaaa(_), TYPE_AAAA)
                | (Data::Ptr(_), TYPE_PTR)
                | (Data::Srv { .. }, TYPE_SRV)
                | (Data::Txt(_), TYPE_TXT)
        );
        if !typed {
            return false;
        }
        let total = self.cached_records();
        let key = (record.name.clone(), record.rtype);
        if record.ttl == 0 {
            // §10.1: a goodbye leaves a second for a correction.
            if let Some(set) = self.cache.get_mut(&key) {
                if let Some(entry) = set.iter_mut().find(|e| e.data == record.data) {
                    entry.doom(now);
                }
            }
            return false;
        }
        let set = self.cache.entry(key).or_default();
        if record.cache_flush {
            // §10.2: the sender says this is the whole set; what came
            // within the last second may be the rest of the same burst.
            for entry in set.iter_mut() {
                if entry.data != record.data && now.saturating_sub(entry.received) > SECOND {
                    entry.doom(now);
                }
            }
        }
        if let Some(entry) = set.iter_mut().find(|e| e.data == record.data) {
            entry.renew(now, record.ttl, &mut self.jitter);
            return true;
        }
        // The service's PTRs are bounded by MAX_INSTANCES instead.
        let crowded = record.rtype != TYPE_PTR && set.len() >= MAX_RRSET;
        if total >= MAX_RECORDS || crowded {
            return false;
        }
        let mut entry = Entry {
            data: record.data.clone(),
            ttl: 0,
            received: now,
            expires: now,
            doomed: false,
            refresh_step: 0,
            refresh_at: None,
        };
        entry.renew(now, record.ttl, &mut self.jitter);
        set.push(entry);
        true
    }

    /// Drops expired records; an expired PTR takes its instance along.
    fn expire(&mut self, now: Millis) {
        let mut gone = Vec::new();
        for ((_, rtype), set) in self.cache.iter_mut() {
            set.retain(|entry| {
                let live = entry.expires > now;
                if let (false, TYPE_PTR, Data::Ptr(instance)) = (live, *rtype, &entry.data) {
                    gone.push(instance.clone());
                }
                live
            });
        }
        self.cache.retain(|_, set| !set.is_empty());
        // An address outlives a lost SRV (which may come back with the
        // same target); only a dropped instance takes addresses along.
        for instance in &gone {
            self.drop_instance(instance);
        }
    }

    /// Forgets `instance` and its records, reporting it gone if it was
    /// reported.
    fn drop_instance(&mut self, instance: &Name) {
        if let Some(state) = self.instances.remove(instance) {
            if state.reported.is_some() {
                self.push_event(Event::Removed(instance.clone()));
            }
        }
        self.cache.remove(&(instance.clone(), TYPE_SRV));
        self.cache.remove(&(instance.clone(), TYPE_TXT));
        if let Some(set) = self.cache.get_mut(&(self.service.clone(), TYPE_PTR)) {
            set.retain(|e| !matches!(&e.data, Data::Ptr(i) if i == instance));
        }
        self.cache.retain(|_, set| !set.is_empty());
        self.prune();
    }

    /// Drops records nothing relies on any more: addresses of a target
    /// no SRV names, and SRV/TXT of instances without a PTR.
    fn prune(&mut self) {
        let targets = self.targets();
        let instances = &self.instances;
        self.cache.retain(|(name, rtype), _| match *rtype {
            TYPE_A | TYPE_AAAA => targets.contains(name),
            TYPE_SRV | TYPE_TXT => instances.contains_key(name),
            _ => true,
        });
    }

    /// The instances in a fixed order, for reproducible output.
    fn names(&self) -> Vec<Name> {
        let mut names: Vec<Name> = self.instances.keys().cloned().collect();
        names.sort_by(|a, b| a.wire().cmp(b.wire()));
        names
    }

    /// The SRV targets of the instances we hold.
    fn targets(&self) -> Vec<Name> {
        let srvs = self.instances.keys().flat_map(|i| self.rrset(i, TYPE_SRV));
        srvs.filter_map(|entry| match &entry.data {
            Data::Srv { target, .. } => Some(target.clone()),
            _ => None,
        })
        .collect()
    }

    fn rrset(&self, name: &Name, rtype: u16) -> &[Entry] {
        self.cache
            .get(&(name.clone(), rtype))
            .map_or(&[], Vec::as_slice)
    }

    /// The SRV to use (RFC 2782: lowest priority, then highest weight,
    /// then the newest), as port and target.
    fn best_srv(&self, instance: &Name) -> Option<(u16, &Name)> {
        self.rrset(instance, TYPE_SRV)
            .iter()
            .filter_map(|e| match &e.data {
                Data::Srv {
                    priority,
                    weight,
                    port,
                    target,
                } => Some((
                    (*priority, u16::MAX - weight, u64::MAX - e.received.0),
                    *port,
                    target,
                )),
                _ => None,
            })
            .min_by_key(|(rank, _, _)| *rank)
            .map(|(_, port, target)| (port, target))
    }

    fn addresses(&self, target: &Name) -> Vec<IpAddr> {
        let entries = self.rrset(target, TYPE_A).iter();
        let mut out: Vec<IpAddr> = (entries.chain(self.rrset(target, TYPE_AAAA)))
            .filter_map(|entry| match entry.data {
                Data::A(a) => Some(a.into()),
                Data::Aaaa(a) => Some(a.into()),
                _ => None,
            })
            .collect();
        // `IpAddr` orders every IPv4 address before any IPv6 one.
        out.sort();
        out.dedup();
        out
    }

    /// The newest TXT of `instance`, as wire bytes.
    fn txt(&self, instance: &Name) -> Option<&[u8]> {
        self.rrset(instance, TYPE_TXT)
            .iter()
            .filter_map(|e| match &e.data {
                Data::Txt(raw) => Some((e.received, raw.as_slice())),
                _ => None,
            })
            .max_by_key(|(received, _)| *received)
            .map(|(_, raw)| raw)
    }

    fn resolution(&self, instance: &Name) -> Option<Resolved> {
        let (port, target) = self.best_srv(instance)?;
        let txt = self.txt(instance)?.to_vec();
        let addresses = self.addresses(target);
        (!addresses.is_empty()).then(|| Resolved {
            instance: instance.clone(),
            port,
            addresses,
            txt,
        })
    }

    /// The questions that would complete `instance`.
    fn missing(&self, instance: &Name) -> Vec<(Name, u16)> {
        let mut out = Vec::new();
        match self.best_srv(instance) {
            None => out.push((instance.clone(), TYPE_SRV)),
            Some((_, target)) if self.addresses(target).is_empty() => {
                out.push((target.clone(), TYPE_A));
                out.push((target.clone(), TYPE_AAAA));
            }
            Some(_) => {}
        }
        if self.txt(instance).is_none() {
            out.push((instance.clone(), TYPE_TXT));
        }
        out
    }

    /// Reports what changed, and schedules questions for instances that
    /// lost part of what resolved them.
    fn update(&mut self, now: Millis) {
        let names = self.names();
        for name in names {
            let resolution = self.resolution(&name);
            let Some(state) = self.instances.get_mut(&name) else {
                continue;
            };
            match resolution {
                Some(resolved) => {
                    state.missing_at = None;
                    state.missing_interval = SECOND;
                    if state.reported.as_ref() != Some(&resolved) {
                        state.reported = Some(resolved.clone());
                        self.push_event(Event::Resolved(resolved));
                    }
                }
                None if state.missing_at.is_none() => {
                    state.missing_at = Some(now);
                    state.missing_interval = SECOND;
                }
                None => {}
            }
        }
    }

    /// §10.4: ask for the instance as if we knew nothing of it.
    fn send_verify(&mut self, now: Millis, instance: &Name) {
        let questions = [
            (instance.clone(), TYPE_SRV),
            (self.service.clone(), TYPE_PTR),
        ];
        self.send(now, &questions);
    }

    /// Queues `questions` in as few packets as fit, each with its known
    /// answers.
    fn send(&mut self, now: Millis, questions: &[(Name, u16)]) {
        let mut rest = questions;
        while !rest.is_empty() {
            let mut size = 12;
            let mut asked = Vec::new();
            while let Some(((name, qtype), tail)) = rest.split_first() {
                let len = name.wire().len() + 4;
                if !asked.is_empty() && size + len > PACKET_BUDGET {
                    break;
                }
                size += len;
                asked.push(Question {
                    name: name.clone(),
                    qtype: *qtype,
                    unicast: false,
                });
                rest = tail;
            }
            let answers = self.known_answers(now, &asked, PACKET_BUDGET.saturating_sub(size));
            self.push_packet(Packet {
                questions: asked,
                answers,
                ..Packet::default()
            });
        }
    }

    /// §7.1: what we hold for these questions with more than half its
    /// TTL left, so responders need not repeat it. Nothing about an
    /// instance in doubt (§10.4): its answer is what we want to hear.
    fn known_answers(&self, now: Millis, questions: &[Question], mut budget: usize) -> Vec<Record> {
        let doubted = |name: &Name| {
            self.instances
                .get(name)
                .is_some_and(|state| state.verify_deadline.is_some())
        };
        let mut out = Vec::new();
        for question in questions {
            for entry in self.rrset(&question.name, question.qtype) {
                let excluded = doubted(&question.name)
                    || matches!(&entry.data, Data::Ptr(instance) if doubted(instance));
                let Some(ttl) = entry.known_ttl(now).filter(|_| !excluded) else {
                    continue;
                };
                let len = question.name.wire().len() + 10 + data_len(&entry.data);
                if out.len() >= MAX_KNOWN_ANSWERS || len > budget {
                    return out;
                }
                budget -= len;
                out.push(Record {
                    name: question.name.clone(),
                    rtype: question.qtype,
                    cache_flush: false,
                    ttl,
                    data: entry.data.clone(),
                });
            }
        }
        out
    }

    fn push_packet(&mut self, packet: Packet) {
        if self.outgoing.len() >= MAX_QUEUE {
            self.outgoing.pop_front();
        }
        self.outgoing.push_back(packet);
    }

    fn push_event(&mut self, event: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }
}

fn add_question(questions: &mut Vec<(Name, u16)>, name: &Name, qtype: u16) {
    if !questions.iter().any(|(n, t)| n == name && *t == qtype) {
        questions.push((name.clone(), qtype));
    }
}

/// Uncompressed RDATA length, for the packet size estimate.
fn data_len(data: &Data) -> usize {
    match data {
        Data::A(_) => 4,
        Data::Aaaa(_) => 16,
        Data::Ptr(name) => name.wire().len(),
        Data::Srv { target, .. } => 6 + target.wire().len(),
        Data::Txt(raw) | Data::Other(raw) => raw.len(),
    }
}

#[cfg(test)]
mod tests;

//! The responder's reactions: to time (lookups, probes, the second
//! announcement, delayed answers), to queries (answers, tie-breaks with
//! a simultaneous prober) and to responses (conflicts, holders of the
//! shared name).

use std::cmp::Ordering;

use super::*;
use crate::discovery::mdns::packet::CLASS_IN;

/// The mDNS port: responses from any other are not mDNS (§11), and
/// queries from any other come from a legacy resolver (§6.7).
const PORT: u16 = 5353;

/// RFC 6762 §8.2: records compared by class, type, then data bytes.
fn tie_key(r: &Record) -> (u16, u16, Vec<u8>) {
    (CLASS_IN, r.rtype, r.data.rdata())
}

/// Our proposed records against theirs, both sorted; the first
/// difference decides, and a set that runs out first is the smaller.
fn tie_break(ours: &[Record], theirs: &[&Record]) -> Ordering {
    let mut a: Vec<_> = ours.iter().map(tie_key).collect();
    let mut b: Vec<_> = theirs.iter().map(|r| tie_key(r)).collect();
    a.sort();
    b.sort();
    a.cmp(&b)
}

impl Responder {
    pub fn handle_timeout(&mut self, now: Millis) {
        let mut probe = Packet::default();
        let mut lookup = Packet::default();
        let mut changed = false;
        for i in 0..self.claims.len() {
            let phase = self.claims[i].phase.clone();
            let name = self.claims[i].name.clone();
            match phase {
                Phase::Lookup { until, next, found } => {
                    let mut next = next;
                    if let Some(t) = next.filter(|t| *t <= now) {
                        for qtype in [TYPE_A, TYPE_AAAA] {
                            lookup.questions.push(Question {
                                name: name.clone(),
                                qtype,
                                unicast: false,
                            });
                        }
                        next = Some(t.saturating_add_ms(LOOKUP_GAP)).filter(|n| *n < until);
                    }
                    self.claims[i].phase = if until <= now {
                        if found.is_empty() {
                            self.probe_phase(now, 0)
                        } else {
                            self.events
                                .push(Event::AliasHeld(found.into_iter().collect()));
                            Phase::Given
                        }
                    } else {
                        Phase::Lookup { until, next, found }
                    };
                }
                Phase::Probing { sent, next } if next <= now => {
                    if sent < PROBES {
                        probe.questions.push(Question {
                            name,
                            qtype: TYPE_ANY,
                            unicast: true,
                        });
                        let records = self.records_of(&self.claims[i]);
                        probe.authority.extend(records);
                        self.claims[i].phase = Phase::Probing {
                            sent: sent + 1,
                            next: now.saturating_add_ms(PROBE_GAP),
                        };
                    } else {
                        let c = &mut self.claims[i];
                        c.phase = Phase::Claimed;
                        c.conflicts = 0;
                        if c.owner == Owner::Alias {
                            self.events.push(Event::AliasAnswering);
                        }
                        changed = true;
                    }
                }
                _ => {}
            }
        }
        for packet in [lookup, probe] {
            if !packet.questions.is_empty() {
                self.out.push(Transmit { to: None, packet });
            }
        }
        if changed {
            self.sync(now);
        }
        if self.reannounce.as_ref().is_some_and(|(t, _)| *t <= now) {
            let (_, list) = self.reannounce.take().unwrap_or_default();
            let still: Vec<Record> = list
                .into_iter()
                .filter(|r| self.published.iter().any(|p| same(&p.record, r)))
                .collect();
            if !still.is_empty() {
                self.multicast(now, still, Vec::new());
            }
        }
        if self.delayed.as_ref().is_some_and(|(t, _, _)| *t <= now) {
            if let Some((_, answers, additional)) = self.delayed.take() {
                self.multicast(now, answers, additional);
            }
        }
    }

    /// When `r` (one of ours, or the NSEC of a name of ours) was last
    /// multicast.
    fn last_multicast(&self, r: &Record) -> Option<Millis> {
        if r.rtype == TYPE_NSEC {
            self.claims
                .iter()
                .find(|c| c.name == r.name)
                .and_then(|c| c.negative_sent)
        } else {
            self.published
                .iter()
                .find(|p| same(&p.record, r))
                .and_then(|p| p.last)
        }
    }

    /// Whether `r` was multicast within the last quarter of its TTL, so
    /// that every cache on the link holds it fresh (§5.4).
    fn heard_recently(&self, r: &Record, now: Millis) -> bool {
        self.last_multicast(r)
            .is_some_and(|t| now.saturating_sub(t) < u64::from(r.ttl) * 1000 / 4)
    }

    /// A response multicast now: its answers count for the rate limit.
    fn multicast(&mut self, now: Millis, answers: Vec<Record>, additional: Vec<Record>) {
        for p in self.published.iter_mut() {
            if answers.iter().any(|r| same(r, &p.record)) {
                p.last = Some(now);
            }
        }
        for r in answers.iter().filter(|r| r.rtype == TYPE_NSEC) {
            self.negative_sent(&r.name, now);
        }
        self.respond(None, answers, additional);
    }

    /// A packet that arrived on this interface from `from`.
    pub fn receive(&mut self, now: Millis, from: SocketAddr, packet: &Packet) {
        if packet.is_response() {
            if from.port() == PORT {
                self.on_response(now, packet);
            }
        } else {
            self.on_query(now, from, packet);
        }
    }

    fn on_response(&mut self, now: Millis, packet: &Packet) {
        let mut conflicts = Vec::new();
        for r in packet.answers.iter().chain(&packet.additional) {
            if r.ttl == 0 {
                continue;
            }
            for i in 0..self.claims.len() {
                if self.claims[i].name != r.name {
                    continue;
                }
                let ours = self.records_of(&self.claims[i]);
                let identical = ours.iter().any(|o| same(o, r));
                match &mut self.claims[i].phase {
                    Phase::Lookup { found, .. } => {
                        let addr = match r.data {
                            Data::A(a) => IpAddr::V4(a),
                            Data::Aaaa(a) => IpAddr::V6(a),
                            _ => continue,
                        };
                        if !self.config.own.contains(&addr) && found.len() < 16 {
                            found.insert(addr);
                        }
                    }
                    // §8.1: any other record of the name is a conflict.
                    Phase::Probing { .. } if !identical => conflicts.push(i),
                    // §9: a unique record of a type we publish under
                    // the name, with other data.
                    Phase::Claimed
                        if !identical
                            && r.cache_flush
                            && ours.iter().any(|o| o.rtype == r.rtype) =>
                    {
                        conflicts.push(i)
                    }
                    _ => {}
                }
            }
        }
        conflicts.dedup();
        for i in conflicts {
            self.conflict(now, i);
        }
    }

    /// Another device holds one of our names (§9): the shared name is
    /// given up; our own names are renamed and probed again.
    fn conflict(&mut self, now: Millis, i: usize) {
        let c = self.claims[i].clone();
        if c.owner == Owner::Alias {
            if c.phase != Phase::Given {
                self.claims[i].phase = Phase::Given;
                self.events.push(Event::AliasConflict);
            }
        } else if c.renames + 1 > MAX_RENAMES {
            self.claims[i].phase = Phase::Given;
            self.events.push(Event::GaveUp(c.name));
        } else {
            match self.name_for(
                c.owner,
                c.kind.as_ref(),
                &c.base,
                c.renames + 1,
                &self.config,
            ) {
                Some(to) => {
                    self.events.push(Event::Renamed {
                        from: c.name.clone(),
                        to: to.clone(),
                    });
                    let delay = if c.conflicts + 1 >= SLOW_AFTER {
                        PROBE_RETRY_SLOW
                    } else {
                        0
                    };
                    let phase = self.probe_phase(now, delay);
                    let claim = &mut self.claims[i];
                    claim.name = to;
                    claim.renames += 1;
                    claim.conflicts += 1;
                    claim.phase = phase;
                }
                None => {
                    self.claims[i].phase = Phase::Given;
                    self.events.push(Event::GaveUp(c.name));
                }
            }
        }
        self.sync(now);
    }

    fn on_query(&mut self, now: Millis, from: SocketAddr, packet: &Packet) {
        let probe = !packet.authority.is_empty();
        if probe {
            self.tie_breaks(now, packet);
        }
        // A known answer with at least half its TTL left is not repeated
        // (§7.1).
        let known = |r: &Record| {
            packet
                .answers
                .iter()
                .any(|k| same(k, r) && k.ttl >= r.ttl / 2)
        };
        let mut answers: Vec<Record> = Vec::new();
        let mut negatives: Vec<Record> = Vec::new();
        let mut unique_only = true;
        for q in &packet.questions {
            for p in &self.published {
                let r = &p.record;
                if r.name != q.name || (q.qtype != TYPE_ANY && q.qtype != r.rtype) {
                    continue;
                }
                if known(r) || answers.iter().any(|a| same(a, r)) {
                    continue;
                }
                unique_only &= p.unique;
                answers.push(r.clone());
            }
            if let Some(n) = self.negative(q) {
                if !known(&n) && !negatives.iter().any(|x| same(x, &n)) {
                    negatives.push(n);
                }
            }
        }
        if answers.is_empty() && negatives.is_empty() {
            return;
        }
        let mut additional = self.additional(&answers);
        let carried: Vec<&Record> = answers
            .iter()
            .chain(&negatives)
            .chain(&additional)
            .collect();
        let missing = self.missing_families(&carried);
        additional.extend(missing);
        if from.port() != PORT {
            self.legacy(from, packet, answers, negatives, additional);
            return;
        }
        answers.extend(negatives);
        if !probe && packet.questions.iter().all(|q| q.unicast) {
            // §5.4: a QU question is answered straight to the asker with
            // what the link heard from us within a quarter of its TTL;
            // the rest is multicast, to refresh every cache on the link.
            let (direct, rest): (Vec<Record>, Vec<Record>) = answers
                .into_iter()
                .partition(|r| self.heard_recently(r, now));
            answers = rest;
            if !direct.is_empty() {
                self.respond(Some(from), direct, additional.clone());
            }
        }
        let rate = if probe { RATE_PROBE } else { RATE };
        answers.retain(|r| match self.last_multicast(r) {
            Some(t) => now.saturating_sub(t) >= rate,
            None => true,
        });
        if answers.is_empty() {
            return;
        }
        let truncated = packet.flags & FLAG_TRUNCATED != 0;
        if unique_only && !truncated {
            self.multicast(now, answers, additional);
            return;
        }
        let (lo, hi) = if truncated { (400, 500) } else { (20, 120) };
        let due = now.saturating_add_ms(self.jitter.between(lo, hi));
        match &mut self.delayed {
            Some((t, list, extra)) => {
                *t = (*t).min(due);
                for r in answers {
                    if !list.iter().any(|x| same(x, &r)) {
                        list.push(r);
                    }
                }
                for r in additional {
                    if !extra.iter().any(|x| same(x, &r)) {
                        extra.push(r);
                    }
                }
            }
            None => self.delayed = Some((due, answers, additional)),
        }
    }

    /// §8.2: a probe for a name we are probing too. The side whose
    /// records sort later wins; the loser probes again a second later.
    /// Identical records are our own probe, heard back.
    fn tie_breaks(&mut self, now: Millis, packet: &Packet) {
        for i in 0..self.claims.len() {
            if !matches!(self.claims[i].phase, Phase::Probing { .. }) {
                continue;
            }
            let theirs: Vec<&Record> = packet
                .authority
                .iter()
                .filter(|r| r.name == self.claims[i].name)
                .collect();
            if theirs.is_empty() {
                continue;
            }
            let ours = self.records_of(&self.claims[i]);
            if tie_break(&ours, &theirs) == Ordering::Less {
                self.claims[i].phase = self.probe_phase(now, PROBE_RETRY);
            }
        }
    }

    /// Records that save the asker a query (RFC 6763 §12): for a PTR
    /// the instance's SRV and TXT and the host's addresses, for an SRV
    /// the addresses, for one address the others of the name (§6.2).
    fn additional(&self, answers: &[Record]) -> Vec<Record> {
        let mut names: Vec<(Name, bool)> = Vec::new();
        for a in answers {
            match &a.data {
                Data::Ptr(target) => names.push((target.clone(), true)),
                Data::Srv { target, .. } => names.push((target.clone(), false)),
                Data::A(_) | Data::Aaaa(_) => names.push((a.name.clone(), false)),
                _ => {}
            }
        }
        let mut out: Vec<Record> = Vec::new();
        let add = |r: &Record, out: &mut Vec<Record>| {
            if !answers.iter().chain(out.iter()).any(|x| same(x, r)) {
                out.push(r.clone());
            }
        };
        let mut i = 0;
        while i < names.len() {
            let (name, instance) = names[i].clone();
            for p in self.published.iter().filter(|p| p.record.name == name) {
                let r = &p.record;
                let wanted = if instance {
                    matches!(r.rtype, TYPE_SRV | TYPE_TXT)
                } else {
                    matches!(r.rtype, TYPE_A | TYPE_AAAA)
                };
                if wanted {
                    add(r, &mut out);
                    if let Data::Srv { target, .. } = &r.data {
                        names.push((target.clone(), false));
                    }
                }
            }
            i += 1;
        }
        out
    }

    /// §6.7: a resolver that is not mDNS (source port other than 5353)
    /// gets a unicast answer that looks like a unicast DNS one: its id,
    /// its questions, no cache-flush bits, TTLs of at most ten seconds.
    /// A type our name lacks is a NODATA answer as in unicast DNS: no
    /// answer, the NSEC in the authority section (RFC 4035 §3.1.3.1), so
    /// the resolver stops there instead of timing out.
    fn legacy(
        &mut self,
        to: SocketAddr,
        query: &Packet,
        answers: Vec<Record>,
        negatives: Vec<Record>,
        extra: Vec<Record>,
    ) {
        let plain = |r: Record| Record {
            cache_flush: false,
            ttl: r.ttl.min(TTL_LEGACY),
            ..r
        };
        self.out.push(Transmit {
            to: Some(to),
            packet: Packet {
                id: query.id,
                flags: FLAG_RESPONSE | FLAG_AUTHORITATIVE,
                questions: query
                    .questions
                    .iter()
                    .map(|q| Question {
                        unicast: false,
                        ..q.clone()
                    })
                    .collect(),
                answers: answers.into_iter().map(plain).collect(),
                authority: negatives.into_iter().map(plain).collect(),
                additional: extra.into_iter().map(plain).collect(),
            },
        });
    }
}

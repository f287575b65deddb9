//! Negative answers (RFC 6762 §6.1): for a name we hold, an NSEC record
//! listing the types the name has tells the asker that no other type
//! exists, so it stops asking instead of retrying until it times out (a
//! AAAA lookup of our host on an IPv4-only link, a TXT lookup of the
//! host name).
//!
//! mDNS uses NSEC in a restricted form: the next name is the record's own
//! name, and the type bitmap covers only the first 256 types (window 0).
//! It is a unique record (cache-flush set), answered for every type of a
//! name we hold that the name lacks, and added as an additional record
//! when a response carries one address family of a host but not the
//! other (§6.2, RFC 6763 §12.2). Names shared with others (service types
//! and the enumeration name) never get one: another device may hold
//! records there.

use super::*;

/// NSEC saying `name` has exactly `types` (each below 256; mDNS never
/// uses a later window).
pub fn nsec(name: &Name, types: &[u16], ttl: u32) -> Record {
    let mut bitmap = [0u8; 32];
    let mut len = 0;
    for &t in types.iter().filter(|t| **t < 256) {
        let byte = usize::from(t / 8);
        bitmap[byte] |= 0x80 >> (t % 8);
        len = len.max(byte + 1);
    }
    // Uncompressed next name: the encoder writes other types' data as
    // it is, and an uncompressed name reads the same in any message.
    let mut rdata = Vec::with_capacity(name.wire().len() + 2 + len);
    rdata.extend_from_slice(name.wire());
    rdata.push(0);
    rdata.push(len as u8);
    rdata.extend_from_slice(&bitmap[..len]);
    Record {
        name: name.clone(),
        rtype: TYPE_NSEC,
        cache_flush: true,
        ttl,
        data: Data::Other(rdata),
    }
}

impl Responder {
    /// The types we publish under `name` when it is one of our claimed
    /// (probed, unique) names and has any record; `None` otherwise.
    fn held_types(&self, name: &Name) -> Option<Vec<u16>> {
        let held = self
            .claims
            .iter()
            .any(|c| c.phase == Phase::Claimed && c.name == *name);
        if !held {
            return None;
        }
        let mut types: Vec<u16> = self
            .published
            .iter()
            .filter(|p| p.unique && p.record.name == *name)
            .map(|p| p.record.rtype)
            .collect();
        types.sort_unstable();
        types.dedup();
        (!types.is_empty()).then_some(types)
    }

    /// The answer to a question for a name we hold and a type it does
    /// not have. The TTL is the one the record would have had (§6.1).
    pub(super) fn negative(&self, q: &Question) -> Option<Record> {
        if q.qtype == TYPE_ANY {
            return None;
        }
        let types = self.held_types(&q.name)?;
        (!types.contains(&q.qtype)).then(|| nsec(&q.name, &types, ttl_of(q.qtype)))
    }

    /// NSEC for each of our host names whose addresses of one family are
    /// in `records` while it has none of the other: the asker then knows
    /// there is nothing more to look up (§6.2).
    pub(super) fn missing_families(&self, records: &[&Record]) -> Vec<Record> {
        let mut out: Vec<Record> = Vec::new();
        for r in records
            .iter()
            .filter(|r| matches!(r.rtype, TYPE_A | TYPE_AAAA))
        {
            if out
                .iter()
                .chain(records.iter().copied())
                .any(|x| x.rtype == TYPE_NSEC && x.name == r.name)
            {
                continue;
            }
            let Some(types) = self.held_types(&r.name) else {
                continue;
            };
            if !(types.contains(&TYPE_A) && types.contains(&TYPE_AAAA)) {
                out.push(nsec(&r.name, &types, TTL_HOST));
            }
        }
        out
    }

    /// Notes that the NSEC of `name` went out at `now`.
    pub(super) fn negative_sent(&mut self, name: &Name, now: Millis) {
        if let Some(c) = self.claims.iter_mut().find(|c| c.name == *name) {
            c.negative_sent = Some(now);
        }
    }
}

/// The types an NSEC record's window-0 bitmap lists (tests read our own
/// records back with it).
#[cfg(test)]
pub fn nsec_types(rdata: &[u8]) -> Option<(Name, Vec<u16>)> {
    let mut labels: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    loop {
        let len = usize::from(*rdata.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(rdata.get(at..at + len)?);
        at += len;
    }
    let name = Name::from_labels(&labels).ok()?;
    let (window, len) = (*rdata.get(at)?, usize::from(*rdata.get(at + 1)?));
    let bitmap = rdata.get(at + 2..at + 2 + len)?;
    if window != 0 || at + 2 + len != rdata.len() {
        return None;
    }
    let types = (0..len * 8)
        .filter(|bit| bitmap[bit / 8] & (0x80 >> (bit % 8)) != 0)
        .map(|bit| bit as u16)
        .collect();
    Some((name, types))
}

//! mDNS messages (RFC 6762 §18) as typed values: a bounded decoder for
//! what arrives on port 5353 and an encoder with name compression for
//! what we send. Names keep their labels as bytes (a DNS-SD instance
//! label is free UTF-8 text: spaces, dots, parentheses) and compare
//! without regard to ASCII case, as RFC 6762 §16 asks.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::discovery::unicast::wire::{read_name_wire, Part, Reader};

pub use crate::discovery::unicast::wire::{
    WireError, CLASS_IN, MAX_LABEL, MAX_NAME, TYPE_A, TYPE_AAAA, TYPE_PTR, TYPE_SRV, TYPE_TXT,
};

/// NSEC (RFC 4034 §4), which mDNS uses for negative answers (§6.1).
pub const TYPE_NSEC: u16 = 47;
/// The ANY question type / class.
pub const TYPE_ANY: u16 = 255;
pub const CLASS_ANY: u16 = 255;
/// The top bit of a question's class: a unicast answer is asked (QU, §5.4).
pub const CLASS_UNICAST: u16 = 0x8000;
/// The top bit of a record's class: cache flush (§10.2).
pub const CLASS_FLUSH: u16 = 0x8000;
/// The header's QR bit: a response.
pub const FLAG_RESPONSE: u16 = 0x8000;
/// The header's AA bit, set on every mDNS response (§18.4).
pub const FLAG_AUTHORITATIVE: u16 = 0x0400;
/// The header's TC bit: more known answers follow (§7.2).
pub const FLAG_TRUNCATED: u16 = 0x0200;

/// The largest message we read or write (§17: 9000 bytes).
pub const MAX_MESSAGE: usize = 9000;
/// The most questions plus records one message may carry before the
/// decoder refuses it: bounds the work and memory one packet costs.
pub const MAX_ENTRIES: usize = 256;

/// A domain name in uncompressed wire form (length-prefixed labels and
/// the root's zero byte), case as received. Equality and hashing ignore
/// ASCII case (length bytes are below 64, so folding the whole form is
/// safe).
#[derive(Clone)]
pub struct Name(Box<[u8]>);

/// Why a name cannot be built from labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    EmptyLabel,
    LabelTooLong(usize),
    NameTooLong(usize),
}

/// Record data of the types mDNS discovery reads; any other type is
/// kept as its raw bytes (compressed names in it are not expanded, so
/// such data as received is only compared, never re-sent). What we send
/// of another type (our NSEC) is built with its names uncompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Ptr(Name),
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: Name,
    },
    /// As on the wire: length-prefixed strings (checked to fit).
    Txt(Vec<u8>),
    Other(Vec<u8>),
}

/// One resource record of class IN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub name: Name,
    pub rtype: u16,
    /// The class's top bit (§10.2).
    pub cache_flush: bool,
    pub ttl: u32,
    pub data: Data,
}

/// One question of class IN or ANY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub name: Name,
    pub qtype: u16,
    /// The class's top bit (QU, §5.4).
    pub unicast: bool,
}

/// A whole message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packet {
    pub id: u16,
    pub flags: u16,
    pub questions: Vec<Question>,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    pub additional: Vec<Record>,
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketError {
    /// Over [`MAX_MESSAGE`] bytes.
    TooLarge(usize),
    /// More questions and records than [`MAX_ENTRIES`].
    TooManyEntries(usize),
    /// OPCODE other than 0 (§18.3: silently ignored).
    Opcode(u16),
    Wire(WireError),
}

impl Name {
    /// From labels, each 1..=63 bytes, 255 bytes in all on the wire.
    pub fn from_labels<L: AsRef<[u8]>>(labels: &[L]) -> Result<Name, NameError> {
        let mut out =
            Vec::with_capacity(labels.iter().map(|l| l.as_ref().len() + 1).sum::<usize>() + 1);
        for label in labels {
            push_label(&mut out, label.as_ref())?;
        }
        out.push(0);
        check_len(out)
    }

    /// From dotted text whose labels hold no dot or backslash (the
    /// service types and host names we build; an instance label goes
    /// through [`Name::from_labels`] or [`Name::prefixed`]).
    pub fn dotted(text: &str) -> Result<Name, NameError> {
        let text = text.strip_suffix('.').unwrap_or(text);
        if text.is_empty() {
            return Ok(Name(Box::new([0])));
        }
        let labels: Vec<&str> = text.split('.').collect();
        Name::from_labels(&labels)
    }

    /// `label` put in front of `self` (an instance in front of its
    /// service type).
    pub fn prefixed(&self, label: &[u8]) -> Result<Name, NameError> {
        let mut out = Vec::with_capacity(1 + label.len() + self.0.len());
        push_label(&mut out, label)?;
        out.extend_from_slice(&self.0);
        check_len(out)
    }

    /// The labels, first to last (the root excluded).
    pub fn labels(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest: &[u8] = &self.0;
        std::iter::from_fn(move || {
            let (&len, tail) = rest.split_first()?;
            if len == 0 {
                return None;
            }
            let (label, after) = tail.split_at(usize::from(len));
            rest = after;
            Some(label)
        })
    }

    /// The first label, and the rest as a name (`None` for the root).
    pub fn split_first(&self) -> Option<(&[u8], Name)> {
        let len = usize::from(*self.0.first()?);
        if len == 0 {
            return None;
        }
        Some((&self.0[1..1 + len], Name(self.0[1 + len..].into())))
    }

    /// Whether `self` ends with `suffix` (label-wise, ignoring case).
    pub fn ends_with(&self, suffix: &Name) -> bool {
        let (a, b) = (&self.0, &suffix.0);
        if b.len() > a.len() {
            return false;
        }
        // Only a label boundary of `self` may start the suffix.
        let start = a.len() - b.len();
        let mut at = 0;
        while at < start {
            at += 1 + usize::from(a[at]);
        }
        at == start && a[start..].eq_ignore_ascii_case(b)
    }

    /// The uncompressed wire form (case as given).
    pub fn wire(&self) -> &[u8] {
        &self.0
    }
}

fn push_label(out: &mut Vec<u8>, label: &[u8]) -> Result<(), NameError> {
    match label.len() {
        0 => Err(NameError::EmptyLabel),
        n if n > MAX_LABEL => Err(NameError::LabelTooLong(n)),
        n => {
            out.push(n as u8);
            out.extend_from_slice(label);
            Ok(())
        }
    }
}

fn check_len(out: Vec<u8>) -> Result<Name, NameError> {
    if out.len() > MAX_NAME {
        return Err(NameError::NameTooLong(out.len()));
    }
    Ok(Name(out.into_boxed_slice()))
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::EmptyLabel => f.write_str("a name has an empty label"),
            NameError::LabelTooLong(n) => write!(f, "a label of {n} bytes (at most {MAX_LABEL})"),
            NameError::NameTooLong(n) => write!(f, "a name of {n} bytes (at most {MAX_NAME})"),
        }
    }
}

impl std::error::Error for NameError {}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.0.eq_ignore_ascii_case(&other.0)
    }
}
impl Eq for Name {}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for b in self.0.iter() {
            h.write_u8(b.to_ascii_lowercase());
        }
    }
}

/// Dotted text, labels as UTF-8 (lossy), a trailing dot; dots and
/// backslashes inside a label escaped with a backslash.
impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut any = false;
        for label in self.labels() {
            any = true;
            for part in String::from_utf8_lossy(label).split_inclusive(['.', '\\']) {
                match part.strip_suffix(['.', '\\']) {
                    Some(head) => write!(f, "{head}\\{}", &part[head.len()..])?,
                    None => f.write_str(part)?,
                }
            }
            f.write_str(".")?;
        }
        if !any {
            f.write_str(".")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

impl Data {
    /// The record data in canonical, uncompressed wire form: what RFC
    /// 6762 §8.2's tie-break and §9's conflict test compare.
    pub fn rdata(&self) -> Vec<u8> {
        match self {
            Data::A(a) => a.octets().to_vec(),
            Data::Aaaa(a) => a.octets().to_vec(),
            Data::Ptr(name) => name.wire().to_vec(),
            Data::Srv {
                priority,
                weight,
                port,
                target,
            } => {
                let mut out = Vec::with_capacity(6 + target.wire().len());
                for word in [priority, weight, port] {
                    out.extend_from_slice(&word.to_be_bytes());
                }
                out.extend_from_slice(target.wire());
                out
            }
            Data::Txt(bytes) | Data::Other(bytes) => bytes.clone(),
        }
    }
}

impl Packet {
    /// Reads a whole message; bounded (see [`PacketError`]). Questions
    /// and records of other classes are dropped, not refused.
    pub fn decode(buf: &[u8]) -> Result<Packet, PacketError> {
        if buf.len() > MAX_MESSAGE {
            return Err(PacketError::TooLarge(buf.len()));
        }
        let header = Reader::new(buf).header()?;
        if header.opcode() != 0 {
            return Err(PacketError::Opcode(header.opcode()));
        }
        let counts = [
            header.qdcount,
            header.ancount,
            header.nscount,
            header.arcount,
        ];
        let entries: usize = counts.iter().map(|&n| usize::from(n)).sum();
        if entries > MAX_ENTRIES {
            return Err(PacketError::TooManyEntries(entries));
        }
        let mut packet = Packet {
            id: header.id,
            flags: header.flags,
            ..Packet::default()
        };
        let mut pos = HEADER_LEN;
        for _ in 0..header.qdcount {
            let (question, next) = read_question(buf, pos)?;
            packet.questions.extend(question);
            pos = next;
        }
        let sections = [
            (header.ancount, &mut packet.answers),
            (header.nscount, &mut packet.authority),
            (header.arcount, &mut packet.additional),
        ];
        for (count, section) in sections {
            for _ in 0..count {
                let (record, next) = read_record(buf, pos)?;
                section.extend(record);
                pos = next;
            }
        }
        Ok(packet)
    }

    /// Writes the message with names compressed (RFC 1035 §4.1.4);
    /// records whose data is `Other` are written as their raw bytes.
    /// The caller keeps the message within [`MAX_MESSAGE`] (responders
    /// split what does not fit, §7.2), so the counts and every record's
    /// data fit their 16-bit fields; a larger one would not be read back.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer {
            out: Vec::with_capacity(512),
            suffixes: Vec::new(),
        };
        w.u16(self.id);
        w.u16(self.flags);
        let sections = [&self.answers, &self.authority, &self.additional];
        for n in std::iter::once(self.questions.len()).chain(sections.map(Vec::len)) {
            w.u16(u16::try_from(n).unwrap_or(u16::MAX));
        }
        for q in &self.questions {
            w.name(&q.name);
            w.u16(q.qtype);
            w.u16(CLASS_IN | if q.unicast { CLASS_UNICAST } else { 0 });
        }
        for r in sections.into_iter().flatten() {
            w.record(r);
        }
        w.out
    }

    pub fn is_response(&self) -> bool {
        self.flags & FLAG_RESPONSE != 0
    }
}

const HEADER_LEN: usize = 12;
/// A compression pointer holds 14 bits of offset.
const MAX_POINTER: usize = 0x3fff;

fn u16_at(buf: &[u8], at: usize, part: Part) -> Result<u16, WireError> {
    match buf.get(at..at.saturating_add(2)) {
        Some(&[a, b]) => Ok(u16::from_be_bytes([a, b])),
        _ => Err(WireError::Truncated { part, at }),
    }
}

fn u32_at(buf: &[u8], at: usize, part: Part) -> Result<u32, WireError> {
    match buf.get(at..at.saturating_add(4)) {
        Some(&[a, b, c, d]) => Ok(u32::from_be_bytes([a, b, c, d])),
        _ => Err(WireError::Truncated { part, at }),
    }
}

/// The raw name at `at` in `buf` and where it ends in place.
fn name_at(buf: &[u8], at: usize) -> Result<(Name, usize), WireError> {
    let mut wire = Vec::new();
    let end = read_name_wire(buf, at, &mut wire)?;
    Ok((Name(wire.into_boxed_slice()), end))
}

/// One question (`None` when of a class we drop) and where the next
/// entry starts.
fn read_question(buf: &[u8], at: usize) -> Result<(Option<Question>, usize), WireError> {
    let (name, end) = name_at(buf, at)?;
    let qtype = u16_at(buf, end, Part::Question)?;
    let class = u16_at(buf, end + 2, Part::Question)?;
    let base = class & !CLASS_UNICAST;
    let question = (base == CLASS_IN || base == CLASS_ANY).then_some(Question {
        name,
        qtype,
        unicast: class & CLASS_UNICAST != 0,
    });
    Ok((question, end + 4))
}

/// One record (`None` when of a class we drop) and where the next entry
/// starts. A dropped record's data is not read: only IN data has the
/// forms we check.
fn read_record(buf: &[u8], at: usize) -> Result<(Option<Record>, usize), WireError> {
    let (name, end) = name_at(buf, at)?;
    let rtype = u16_at(buf, end, Part::Record)?;
    let class = u16_at(buf, end + 2, Part::Record)?;
    let ttl = u32_at(buf, end + 4, Part::Record)?;
    let len = usize::from(u16_at(buf, end + 8, Part::Record)?);
    let rdata_at = end + 10;
    let next = rdata_at + len;
    if next > buf.len() {
        return Err(WireError::RdataPastEnd { at: rdata_at, len });
    }
    if class & !CLASS_FLUSH != CLASS_IN {
        return Ok((None, next));
    }
    let data = read_data(buf, rtype, rdata_at, next)?;
    let record = Record {
        name,
        rtype,
        cache_flush: class & CLASS_FLUSH != 0,
        ttl,
        data,
    };
    Ok((Some(record), next))
}

/// The data of a record of type `rtype` at `at..end` (`end` is within
/// `buf`, checked by the caller).
fn read_data(buf: &[u8], rtype: u16, at: usize, end: usize) -> Result<Data, WireError> {
    let bad = |reason| WireError::BadRdata { rtype, at, reason };
    let bytes = buf.get(at..end).ok_or(WireError::RdataPastEnd {
        at,
        len: end.saturating_sub(at),
    })?;
    // A name inside the data may point back anywhere before it, but
    // must not read past the data: cut the buffer at its end.
    let inner = buf.get(..end).unwrap_or(buf);
    let name_filling = |from: usize| -> Result<Name, WireError> {
        let (name, name_end) = name_at(inner, from)?;
        if name_end != end {
            return Err(bad("data continues after the name"));
        }
        Ok(name)
    };
    Ok(match rtype {
        TYPE_A => Data::A(Ipv4Addr::from(
            <[u8; 4]>::try_from(bytes).map_err(|_| bad("an A record has 4 bytes"))?,
        )),
        TYPE_AAAA => Data::Aaaa(Ipv6Addr::from(
            <[u8; 16]>::try_from(bytes).map_err(|_| bad("an AAAA record has 16 bytes"))?,
        )),
        TYPE_PTR => Data::Ptr(name_filling(at)?),
        TYPE_SRV => match bytes {
            [p0, p1, w0, w1, o0, o1, _, ..] => Data::Srv {
                priority: u16::from_be_bytes([*p0, *p1]),
                weight: u16::from_be_bytes([*w0, *w1]),
                port: u16::from_be_bytes([*o0, *o1]),
                target: name_filling(at + 6)?,
            },
            _ => return Err(bad("an SRV record has 6 bytes and a name")),
        },
        TYPE_TXT => {
            let mut i = 0;
            while let Some(&n) = bytes.get(i) {
                i += 1 + usize::from(n);
            }
            if i != bytes.len() {
                return Err(bad("a TXT string runs past the record data"));
            }
            Data::Txt(bytes.to_vec())
        }
        _ => Data::Other(bytes.to_vec()),
    })
}

/// The message being written and where each name suffix already in it
/// starts (lower-cased wire form, so "Foo.local" and "foo.local" share
/// one copy, as §16 lets them). A list, searched in full: a message we
/// write holds a few dozen suffixes, and a map type of its own would
/// cost the router binary more code than the search costs time.
struct Writer {
    out: Vec<u8>,
    suffixes: Vec<(Box<[u8]>, u16)>,
}

impl Writer {
    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    /// `name`, its longest suffix already written replaced by a pointer;
    /// the suffixes it adds become pointer targets while their offset
    /// fits a pointer.
    fn name(&mut self, name: &Name) {
        let wire = name.wire();
        let lower = wire.to_ascii_lowercase();
        let mut at = 0;
        while let Some(&len) = wire.get(at) {
            if len == 0 {
                break;
            }
            if let Some((_, to)) = self.suffixes.iter().find(|(s, _)| **s == lower[at..]) {
                self.u16(0xc000 | *to);
                return;
            }
            let offset = self.out.len();
            if let Ok(offset) = u16::try_from(offset) {
                if usize::from(offset) <= MAX_POINTER {
                    self.suffixes.push((lower[at..].into(), offset));
                }
            }
            let next = (at + 1 + usize::from(len)).min(wire.len());
            self.out.extend_from_slice(&wire[at..next]);
            at = next;
        }
        self.out.push(0);
    }

    fn record(&mut self, r: &Record) {
        self.name(&r.name);
        self.u16(r.rtype);
        self.u16(CLASS_IN | if r.cache_flush { CLASS_FLUSH } else { 0 });
        self.out.extend_from_slice(&r.ttl.to_be_bytes());
        let len_at = self.out.len();
        self.u16(0);
        match &r.data {
            Data::Ptr(name) => self.name(name),
            Data::Srv {
                priority,
                weight,
                port,
                target,
            } => {
                for word in [*priority, *weight, *port] {
                    self.u16(word);
                }
                self.name(target);
            }
            data => self.out.extend_from_slice(&data.rdata()),
        }
        let len = self.out.len() - len_at - 2;
        let len = u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes();
        self.out[len_at..len_at + 2].copy_from_slice(&len);
    }
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::TooLarge(n) => {
                write!(f, "mDNS message of {n} bytes (at most {MAX_MESSAGE})")
            }
            PacketError::TooManyEntries(n) => write!(
                f,
                "mDNS message header counts {n} questions and records (at most {MAX_ENTRIES})"
            ),
            PacketError::Opcode(op) => {
                write!(f, "mDNS message header has OPCODE {op} (only 0 is read)")
            }
            PacketError::Wire(e) => write!(f, "mDNS message: {e}"),
        }
    }
}

impl std::error::Error for PacketError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PacketError::Wire(e) => Some(e),
            _ => None,
        }
    }
}

impl From<WireError> for PacketError {
    fn from(e: WireError) -> PacketError {
        PacketError::Wire(e)
    }
}

#[cfg(test)]
mod tests;

//! DNS messages on the wire (RFC 1035 §4, RFC 6891), only as far as
//! unicast DNS-SD needs them: one query out, one answer in.
//!
//! Our own codec instead of a general DNS library: agentd reads a
//! handful of record types, and a general codec (with IDNA and Unicode
//! normalisation tables behind its name type) cost the router binary
//! over 100 KB. The answer is untrusted input, so every read is checked
//! against the buffer, a compressed name may only point backwards, to
//! before the part of the name already read (no loop can form), with a
//! bounded number of jumps and at most 255 bytes in all, and every
//! refusal is a typed [`WireError`]; nothing here panics or recurses.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Record types (RFC 1035 §3.2.2, RFC 3596, RFC 2782, RFC 6891).
pub const TYPE_A: u16 = 1;
pub const TYPE_CNAME: u16 = 5;
pub const TYPE_PTR: u16 = 12;
pub const TYPE_TXT: u16 = 16;
pub const TYPE_AAAA: u16 = 28;
pub const TYPE_SRV: u16 = 33;
pub const TYPE_OPT: u16 = 41;
pub const CLASS_IN: u16 = 1;

/// Header flag bits (RFC 1035 §4.1.1, RFC 4035 §3.2.3 for AD).
pub const FLAG_QR: u16 = 0x8000;
pub const FLAG_TC: u16 = 0x0200;
pub const FLAG_RD: u16 = 0x0100;
pub const FLAG_AD: u16 = 0x0020;
/// RFC 2136 §1.
pub const OPCODE_UPDATE: u16 = 5;

const HEADER_LEN: usize = 12;
/// A name's limits on the wire, length bytes and the root's zero
/// included (RFC 1035 §2.3.4).
pub const MAX_NAME: usize = 255;
pub const MAX_LABEL: usize = 63;
/// A name of 255 bytes has at most 127 labels, so a name needing more
/// jumps than that only chains pointers to pointers: refused.
const MAX_JUMPS: usize = 127;

/// Where in the message a read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    Question,
    Record,
    Rdata,
    Name,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Header => "header",
            Part::Question => "question",
            Part::Record => "record",
            Part::Rdata => "record data",
            Part::Name => "name",
        })
    }
}

/// Why a message could not be read. Offsets are from the message start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The message ends inside `part`.
    Truncated { part: Part, at: usize },
    /// RDLENGTH reaches past the message end.
    RdataPastEnd { at: usize, len: usize },
    /// A label length byte over 63 that is not a pointer (the reserved
    /// 0x40 and 0x80 label types).
    LabelTooLong { at: usize, len: u8 },
    /// A name over 255 bytes once decompressed.
    NameTooLong { at: usize },
    /// A compression pointer to itself or further on.
    ForwardPointer { at: usize, to: usize },
    /// A compression pointer into the part of the name already read.
    PointerLoop { at: usize, to: usize },
    /// After a compression jump, the name runs on into the bytes where
    /// the pointing part began: overlapping names are refused, as other
    /// decoders refuse them.
    Overlap { at: usize, limit: usize },
    /// More compression jumps than a name can need.
    TooManyJumps { at: usize },
    /// RDATA of a type we read that does not have that type's form.
    BadRdata {
        rtype: u16,
        at: usize,
        reason: &'static str,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated { part, at } => {
                write!(f, "{part} at byte {at}: message ends inside it")
            }
            WireError::RdataPastEnd { at, len } => {
                write!(
                    f,
                    "record data at byte {at}: length {len} runs past the message end"
                )
            }
            WireError::LabelTooLong { at, len } => {
                write!(
                    f,
                    "name at byte {at}: label length {len} (at most {MAX_LABEL})"
                )
            }
            WireError::NameTooLong { at } => {
                write!(f, "name at byte {at}: longer than {MAX_NAME} bytes")
            }
            WireError::ForwardPointer { at, to } => {
                write!(
                    f,
                    "name at byte {at}: compression pointer forward to byte {to}"
                )
            }
            WireError::PointerLoop { at, to } => write!(
                f,
                "name at byte {at}: compression pointer to byte {to} loops back into the name"
            ),
            WireError::Overlap { at, limit } => write!(
                f,
                "name at byte {at}: runs into byte {limit}, where the part pointing to it began"
            ),
            WireError::TooManyJumps { at } => write!(
                f,
                "name at byte {at}: more than {MAX_JUMPS} compression pointers"
            ),
            WireError::BadRdata { rtype, at, reason } => {
                write!(f, "type {rtype} record data at byte {at}: {reason}")
            }
        }
    }
}

impl std::error::Error for WireError {}

/// The fixed 12-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub id: u16,
    pub flags: u16,
    pub qdcount: u16,
    pub ancount: u16,
    pub nscount: u16,
    pub arcount: u16,
}

impl Header {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    pub fn opcode(&self) -> u16 {
        (self.flags >> 11) & 0x000f
    }

    /// The header's four RCODE bits (EDNS adds eight above them).
    pub fn rcode_low(&self) -> u16 {
        self.flags & 0x000f
    }
}

/// One entry of the question section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireQuestion {
    /// Lower case, no trailing dot ([`read_name`]).
    pub name: String,
    pub qtype: u16,
    pub qclass: u16,
}

/// One resource record, its data not yet interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord {
    /// Where the owner name starts (read it with [`read_name`] only for
    /// the records kept: most are skipped).
    pub owner_at: usize,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    pub rdata_at: usize,
    pub rdata_len: usize,
}

/// The data of the record types unicast DNS-SD reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rdata<'a> {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Ptr(String),
    Cname(String),
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: String,
    },
    /// As on the wire: length-prefixed strings, checked to fit.
    Txt(&'a [u8]),
    /// Any other type, skipped by its RDLENGTH.
    Other,
}

fn u16_at(buf: &[u8], at: usize, part: Part) -> Result<u16, WireError> {
    match buf.get(at..at + 2) {
        Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
        None => Err(WireError::Truncated { part, at }),
    }
}

fn u32_at(buf: &[u8], at: usize, part: Part) -> Result<u32, WireError> {
    match buf.get(at..at + 4) {
        Some(b) => Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(WireError::Truncated { part, at }),
    }
}

/// Where [`walk_name`] puts the labels it reads: one walk with one set
/// of checks serves the lossy text unicast DNS-SD compares and the raw
/// labels mDNS keeps (an instance label's case and bytes matter there).
enum Sink<'o> {
    Skip,
    Text(&'o mut String),
    Wire(&'o mut Vec<u8>),
}

/// Reads the name at `start`: returns where the name ends in place (after
/// its root label or first pointer) and appends what it read to `out`
/// (text as [`read_name`] writes it, or the uncompressed wire form
/// without the root's zero byte).
fn walk_name(buf: &[u8], start: usize, mut out: Sink<'_>) -> Result<usize, WireError> {
    let mut pos = start;
    // Where the current run of labels began: a pointer must go below
    // it, so the positions read strictly decrease from jump to jump.
    let mut run_start = start;
    // After a jump, the run must end before the previous run began.
    let mut limit = usize::MAX;
    let mut end = None;
    let mut jumps = 0;
    let mut wire_len = 1; // the root label
    loop {
        if pos >= limit {
            return Err(WireError::Overlap { at: start, limit });
        }
        let len = *buf.get(pos).ok_or(WireError::Truncated {
            part: Part::Name,
            at: pos,
        })?;
        match len {
            0 => {
                return Ok(end.unwrap_or(pos + 1));
            }
            1..=63 => {
                let len = usize::from(len);
                wire_len += 1 + len;
                if wire_len > MAX_NAME {
                    return Err(WireError::NameTooLong { at: start });
                }
                let label = buf
                    .get(pos + 1..pos + 1 + len)
                    .ok_or(WireError::Truncated {
                        part: Part::Name,
                        at: pos,
                    })?;
                match &mut out {
                    Sink::Skip => {}
                    Sink::Text(s) => {
                        if !s.is_empty() {
                            s.push('.');
                        }
                        push_label(s, label);
                    }
                    Sink::Wire(w) => {
                        w.push(len as u8);
                        w.extend_from_slice(label);
                    }
                }
                pos += 1 + len;
            }
            0xc0..=0xff => {
                let to = usize::from(u16_at(buf, pos, Part::Name)? & 0x3fff);
                if to >= pos {
                    return Err(WireError::ForwardPointer { at: pos, to });
                }
                if to >= run_start {
                    return Err(WireError::PointerLoop { at: pos, to });
                }
                jumps += 1;
                if jumps > MAX_JUMPS {
                    return Err(WireError::TooManyJumps { at: start });
                }
                end.get_or_insert(pos + 2);
                limit = run_start;
                pos = to;
                run_start = to;
            }
            _ => return Err(WireError::LabelTooLong { at: pos, len }),
        }
    }
}

/// A label as text, in lower case: the bytes of a hostname-like label
/// as they are, any other byte escaped the way master files (and the
/// DNS library agentd used before) write it: `\c` for printable ASCII,
/// `\ooo` in octal otherwise. Answers are compared with our questions
/// as text, so this form must stay what `query::encode` parses.
fn push_label(s: &mut String, label: &[u8]) {
    for (i, &b) in label.iter().enumerate() {
        let c = char::from(b.to_ascii_lowercase());
        let plain =
            c.is_ascii_alphanumeric() || c == '_' || (i > 0 && c == '-') || (i == 0 && c == '*');
        if plain {
            s.push(c);
        } else if (0x21..0x7f).contains(&b) {
            s.push('\\');
            s.push(c);
        } else {
            s.push_str(&format!("\\{b:03o}"));
        }
    }
}

/// The name at `at`, lower case, without the trailing dot (the root is
/// "."), and where it ends in place.
pub fn read_name(buf: &[u8], at: usize) -> Result<(String, usize), WireError> {
    let mut s = String::new();
    let end = walk_name(buf, at, Sink::Text(&mut s))?;
    if s.is_empty() {
        s.push('.');
    }
    Ok((s, end))
}

/// The name at `at` in uncompressed wire form, labels as received (case
/// and every byte kept), root's zero byte included, appended to `out`;
/// returns where the name ends in place. The same checks as
/// [`read_name`], so the result is at most [`MAX_NAME`] bytes. On error
/// `out` may hold part of the name.
pub fn read_name_wire(buf: &[u8], at: usize, out: &mut Vec<u8>) -> Result<usize, WireError> {
    let end = walk_name(buf, at, Sink::Wire(out))?;
    out.push(0);
    Ok(end)
}

/// Reads a message from its start, section by section.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn header(&mut self) -> Result<Header, WireError> {
        if self.buf.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                part: Part::Header,
                at: 0,
            });
        }
        let w = |i: usize| u16::from_be_bytes([self.buf[2 * i], self.buf[2 * i + 1]]);
        self.pos = HEADER_LEN;
        Ok(Header {
            id: w(0),
            flags: w(1),
            qdcount: w(2),
            ancount: w(3),
            nscount: w(4),
            arcount: w(5),
        })
    }

    pub fn question(&mut self) -> Result<WireQuestion, WireError> {
        let (name, end) = read_name(self.buf, self.pos)?;
        let qtype = u16_at(self.buf, end, Part::Question)?;
        let qclass = u16_at(self.buf, end + 2, Part::Question)?;
        self.pos = end + 4;
        Ok(WireQuestion {
            name,
            qtype,
            qclass,
        })
    }

    pub fn record(&mut self) -> Result<RawRecord, WireError> {
        let owner_at = self.pos;
        let end = walk_name(self.buf, owner_at, Sink::Skip)?;
        let rtype = u16_at(self.buf, end, Part::Record)?;
        let class = u16_at(self.buf, end + 2, Part::Record)?;
        let ttl = u32_at(self.buf, end + 4, Part::Record)?;
        let rdata_len = usize::from(u16_at(self.buf, end + 8, Part::Record)?);
        let rdata_at = end + 10;
        if rdata_at + rdata_len > self.buf.len() {
            return Err(WireError::RdataPastEnd {
                at: rdata_at,
                len: rdata_len,
            });
        }
        self.pos = rdata_at + rdata_len;
        Ok(RawRecord {
            owner_at,
            rtype,
            class,
            ttl,
            rdata_at,
            rdata_len,
        })
    }

    /// The data of `r` for the types we read. Names inside PTR, CNAME
    /// and SRV data may be compressed (RFC 3597 §4 allows it for these
    /// RFC 1035-era types, and servers do it) and must end exactly at
    /// the RDATA's end.
    pub fn rdata(&self, r: &RawRecord) -> Result<Rdata<'a>, WireError> {
        let at = r.rdata_at;
        let past_end = WireError::RdataPastEnd {
            at,
            len: r.rdata_len,
        };
        let end = at.checked_add(r.rdata_len).ok_or(past_end.clone())?;
        let data = self.buf.get(at..end).ok_or(past_end)?;
        if data.is_empty() {
            // RFC 2136's "any data" in updates: nothing to use.
            return Ok(Rdata::Other);
        }
        let bad = |reason| WireError::BadRdata {
            rtype: r.rtype,
            at,
            reason,
        };
        let name_at = |from: usize| -> Result<String, WireError> {
            // A name inside RDATA must not read beyond it: cut the buffer
            // there (pointers still reach the message before it).
            let (name, name_end) = read_name(&self.buf[..end], from)?;
            if name_end != end {
                return Err(bad("data continues after the name"));
            }
            Ok(name)
        };
        Ok(match r.rtype {
            TYPE_A => Rdata::A(Ipv4Addr::from(
                <[u8; 4]>::try_from(data).map_err(|_| bad("an A record has 4 bytes"))?,
            )),
            TYPE_AAAA => Rdata::Aaaa(Ipv6Addr::from(
                <[u8; 16]>::try_from(data).map_err(|_| bad("an AAAA record has 16 bytes"))?,
            )),
            TYPE_PTR => Rdata::Ptr(name_at(at)?),
            TYPE_CNAME => Rdata::Cname(name_at(at)?),
            TYPE_SRV => {
                if data.len() < 7 {
                    return Err(bad("an SRV record has 6 bytes and a name"));
                }
                Rdata::Srv {
                    priority: u16::from_be_bytes([data[0], data[1]]),
                    weight: u16::from_be_bytes([data[2], data[3]]),
                    port: u16::from_be_bytes([data[4], data[5]]),
                    target: name_at(at + 6)?,
                }
            }
            TYPE_TXT => {
                let mut i = 0;
                while i < data.len() {
                    i += 1 + usize::from(data[i]);
                }
                if i != data.len() {
                    return Err(bad("a TXT string runs past the record data"));
                }
                Rdata::Txt(data)
            }
            _ => Rdata::Other,
        })
    }
}

/// Why a name cannot be put in a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    Empty,
    EmptyLabel,
    NonAscii,
    /// A character outside letters, digits, `_`, `-` (not first) and `*`
    /// (first only).
    BadChar(char),
    BadEscape,
    LabelTooLong(usize),
    NameTooLong(usize),
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => f.write_str("empty name"),
            NameError::EmptyLabel => {
                f.write_str("empty label (two dots in a row, or a leading dot)")
            }
            NameError::NonAscii => f.write_str("non-ASCII character (DNS names are ASCII here)"),
            NameError::BadChar(c) => write!(f, "character {c:?} not allowed in a label"),
            NameError::BadEscape => f.write_str("bad escape (\\c or three octal digits)"),
            NameError::LabelTooLong(n) => {
                write!(f, "label of {n} bytes (at most {MAX_LABEL})")
            }
            NameError::NameTooLong(n) => {
                write!(f, "name of {n} bytes on the wire (at most {MAX_NAME})")
            }
        }
    }
}

impl std::error::Error for NameError {}

/// Appends `name` (text as [`read_name`] writes it, one trailing dot
/// allowed) in wire form, uncompressed. The characters accepted are the
/// ones the library agentd used before accepted, so a question it could
/// ask is one we can ask.
pub fn write_name(out: &mut Vec<u8>, name: &str) -> Result<(), NameError> {
    if !name.is_ascii() {
        return Err(NameError::NonAscii);
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    let start = out.len();
    let mut label: Vec<u8> = Vec::with_capacity(MAX_LABEL);
    let mut chars = name.bytes();
    let mut done = false;
    while !done {
        let c = chars.next();
        let byte = match c {
            None | Some(b'.') => {
                push_wire_label(out, &label)?;
                label.clear();
                done = c.is_none();
                continue;
            }
            Some(b'\\') => match chars.next() {
                Some(d) if d.is_ascii_digit() => {
                    let mut v = 0u32;
                    for digit in [Some(d), chars.next(), chars.next()] {
                        match digit {
                            Some(x @ b'0'..=b'7') => v = v * 8 + u32::from(x - b'0'),
                            _ => return Err(NameError::BadEscape),
                        }
                    }
                    u8::try_from(v).map_err(|_| NameError::BadEscape)?
                }
                Some(x) => x,
                None => return Err(NameError::BadEscape),
            },
            Some(x) => x,
        };
        label.push(byte);
    }
    out.push(0);
    let wire = out.len() - start;
    if wire > MAX_NAME {
        return Err(NameError::NameTooLong(wire));
    }
    Ok(())
}

fn push_wire_label(out: &mut Vec<u8>, label: &[u8]) -> Result<(), NameError> {
    if label.is_empty() {
        return Err(NameError::EmptyLabel);
    }
    if label.len() > MAX_LABEL {
        return Err(NameError::LabelTooLong(label.len()));
    }
    for (i, &b) in label.iter().enumerate() {
        let c = char::from(b);
        let ok = c.is_ascii_alphanumeric()
            || c == '_'
            || c == '.'
            || (i > 0 && c == '-')
            || (i == 0 && c == '*');
        if !ok {
            return Err(NameError::BadChar(c));
        }
    }
    out.push(label.len() as u8);
    out.extend_from_slice(label);
    Ok(())
}

/// A query: `flags` in the header, one question of class IN, and an
/// EDNS(0) OPT record advertising `udp_payload` (RFC 6891 §6.1.2:
/// owner the root, CLASS the payload size, TTL zero — extended RCODE 0,
/// version 0, DO clear — and no options).
pub fn write_query(
    id: u16,
    flags: u16,
    name: &str,
    qtype: u16,
    udp_payload: u16,
) -> Result<Vec<u8>, NameError> {
    let mut out = Vec::with_capacity(HEADER_LEN + name.len() + 2 + 4 + 11);
    for word in [id, flags, 1, 0, 0, 1] {
        out.extend_from_slice(&word.to_be_bytes());
    }
    write_name(&mut out, name)?;
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out.push(0);
    out.extend_from_slice(&TYPE_OPT.to_be_bytes());
    out.extend_from_slice(&udp_payload.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests;

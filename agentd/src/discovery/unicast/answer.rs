//! A resolver's answer to one of our DNS-SD questions, decoded by
//! [`super::wire`] and reduced to the records browsing uses.
//!
//! Everything here is untrusted (a resolver relays what any zone's
//! server said, and anyone on the path may forge a packet): the message
//! is bounded in size before it is parsed and in record count after;
//! a message that is not the answer to our question (another id, another
//! question, a query) is [`DnsError::NotOurs`], which the exchange
//! ignores and keeps waiting; every other refusal is a typed error naming
//! the reason. With `require_ad`, an answer without the AD bit is
//! refused: agentd does no DNSSEC validation itself, it believes a
//! validating resolver on a trusted path (RFC 4035 §3.2.3, RFC 6840 §5.7).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::wire::{self, Header, Rdata, Reader, WireError};

/// Largest message accepted (over TCP; UDP answers are smaller: we
/// advertise [`super::query::UDP_PAYLOAD`]).
pub const MAX_MESSAGE: usize = 16 * 1024;
/// Most records (all sections) in one answer.
pub const MAX_RECORDS: usize = 64;

/// The record types browsing asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Ptr,
    Srv,
    Txt,
    A,
    Aaaa,
}

impl Kind {
    /// The TYPE value on the wire.
    pub fn record_type(self) -> u16 {
        match self {
            Kind::Ptr => wire::TYPE_PTR,
            Kind::Srv => wire::TYPE_SRV,
            Kind::Txt => wire::TYPE_TXT,
            Kind::A => wire::TYPE_A,
            Kind::Aaaa => wire::TYPE_AAAA,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Ptr => "PTR",
            Kind::Srv => "SRV",
            Kind::Txt => "TXT",
            Kind::A => "A",
            Kind::Aaaa => "AAAA",
        }
    }
}

/// One question: a name (lower case, no trailing dot) and a type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Question {
    pub name: String,
    pub kind: Kind,
}

impl fmt::Display for Question {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.name)
    }
}

/// The data of a record browsing uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    Ptr(String),
    Srv {
        port: u16,
        target: String,
    },
    /// The TXT RDATA as on the wire (length-prefixed strings).
    Txt(Vec<u8>),
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Cname(String),
}

/// One record: owner name (lower case, no trailing dot), TTL, data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rr {
    pub name: String,
    pub ttl: u32,
    pub data: Data,
}

/// A decoded answer to our question.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    /// The resolver's AD bit.
    pub authentic: bool,
    /// NXDOMAIN: the name does not exist (no records).
    pub nxdomain: bool,
    /// Answer section, then additional section (RFC 6763 §12), IN
    /// class and the types of [`Data`] only.
    pub records: Vec<Rr>,
}

/// Why an answer was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsError {
    /// Another id or question, or not a response: not the answer we wait
    /// for (ignored by the exchange).
    NotOurs,
    TooLarge {
        len: usize,
    },
    Malformed {
        reason: String,
    },
    /// TC set (over UDP the exchange retries over TCP).
    Truncated,
    /// An error RCODE other than NXDOMAIN.
    Rcode {
        code: String,
    },
    TooManyRecords {
        count: usize,
    },
    /// `require_dnssec` and the resolver did not set AD.
    NotAuthenticated,
    /// No answer in time (every try).
    Timeout {
        tries: u32,
    },
    /// A socket error.
    Io {
        reason: String,
    },
    /// The question cannot be encoded (a name DNS refuses).
    BadQuestion {
        reason: String,
    },
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsError::NotOurs => f.write_str("not the answer to our question"),
            DnsError::TooLarge { len } => {
                write!(f, "answer of {len} bytes (at most {MAX_MESSAGE})")
            }
            DnsError::Malformed { reason } => write!(f, "malformed answer: {reason}"),
            DnsError::Truncated => f.write_str("answer truncated (TC) even over TCP"),
            DnsError::Rcode { code } => write!(f, "resolver answered {code}"),
            DnsError::TooManyRecords { count } => {
                write!(f, "answer with {count} records (at most {MAX_RECORDS})")
            }
            DnsError::NotAuthenticated => f.write_str(
                "answer not authenticated (no AD bit) and discovery.require_dnssec is 1",
            ),
            DnsError::Timeout { tries } => write!(f, "no answer after {tries} tries"),
            DnsError::Io { reason } => write!(f, "socket error: {reason}"),
            DnsError::BadQuestion { reason } => f.write_str(reason),
        }
    }
}

impl std::error::Error for DnsError {}

/// What hickory-proto (the decoder before this one) called each RCODE:
/// the text ends up in status output and logs.
fn rcode_text(code: u16) -> &'static str {
    match code {
        0 => "No Error",
        1 => "Form Error",
        2 => "Server Failure",
        3 => "Non-Existent Domain",
        4 => "Not Implemented",
        5 => "Query Refused",
        6 => "Name should not exist",
        7 => "RR Set should not exist",
        8 => "RR Set does not exist",
        9 => "Not authorized",
        10 => "Name not in zone",
        // BADVERS and BADSIG share 16; hickory named it for TSIG.
        16 => "TSIG Failure",
        17 => "Key not recognized",
        18 => "Signature out of time window",
        19 => "Bad TKEY mode",
        20 => "Duplicate key name",
        21 => "Algorithm not supported",
        22 => "Bad truncation",
        23 => "Bad server cookie",
        _ => "Unknown response code",
    }
}

const RCODE_NXDOMAIN: u16 = 3;
/// Types only the additional section may carry (RFC 6891 §6.1.1,
/// RFC 2931, RFC 8945).
const TYPE_SIG: u16 = 24;
const TYPE_TSIG: u16 = 250;

fn malformed(e: WireError) -> DnsError {
    DnsError::Malformed {
        reason: e.to_string(),
    }
}

/// The whole message read: the header, the one question, the records
/// browsing uses (at most one more than [`MAX_RECORDS`]: beyond that
/// the answer is refused anyway) and the record count. Every record is
/// read, kept or not, so that a malformed one anywhere makes the answer
/// malformed.
struct Parsed {
    header: Header,
    question: Option<wire::WireQuestion>,
    /// The RCODE, EDNS's upper bits included.
    rcode: u16,
    records: Vec<Rr>,
    count: usize,
}

fn parse(bytes: &[u8]) -> Result<Parsed, WireError> {
    let mut r = Reader::new(bytes);
    let header = r.header()?;
    let mut question = None;
    for _ in 0..header.qdcount {
        let q = r.question()?;
        question.get_or_insert(q);
    }
    let mut rcode = header.rcode_low();
    let mut seen_opt = false;
    let mut records = Vec::new();
    let mut count = 0;
    let sections = [
        (header.ancount, true, false),
        (header.nscount, false, false),
        (header.arcount, true, true),
    ];
    for (n, keep, additional) in sections {
        for _ in 0..n {
            let raw = r.record()?;
            let only_additional = matches!(raw.rtype, wire::TYPE_OPT | TYPE_SIG | TYPE_TSIG);
            if only_additional && !additional {
                return Err(WireError::BadRdata {
                    rtype: raw.rtype,
                    at: raw.rdata_at,
                    reason: "only the additional section carries this type",
                });
            }
            if raw.rtype == wire::TYPE_OPT {
                if seen_opt {
                    return Err(WireError::BadRdata {
                        rtype: raw.rtype,
                        at: raw.rdata_at,
                        reason: "a second OPT record",
                    });
                }
                if bytes.get(raw.owner_at) != Some(&0) {
                    return Err(WireError::BadRdata {
                        rtype: raw.rtype,
                        at: raw.owner_at,
                        reason: "an OPT record's owner is the root",
                    });
                }
                seen_opt = true;
                // The extended RCODE's upper eight bits (RFC 6891 §6.1.3).
                rcode |= ((raw.ttl >> 24) as u16) << 4;
                continue;
            }
            // Empty data means "any" in an UPDATE (RFC 2136 §2.4) and
            // nothing elsewhere: refused, as the decoder before ours did.
            if raw.rdata_len == 0 && header.opcode() != wire::OPCODE_UPDATE {
                return Err(WireError::BadRdata {
                    rtype: raw.rtype,
                    at: raw.rdata_at,
                    reason: "empty record data outside an UPDATE",
                });
            }
            count += 1;
            let data = match r.rdata(&raw)? {
                Rdata::Ptr(n) => Data::Ptr(n),
                Rdata::Srv { port, target, .. } => Data::Srv { port, target },
                Rdata::Txt(t) => Data::Txt(t.to_vec()),
                Rdata::A(a) => Data::A(a),
                Rdata::Aaaa(a) => Data::Aaaa(a),
                Rdata::Cname(c) => Data::Cname(c),
                Rdata::Other => continue,
            };
            if keep && raw.class == wire::CLASS_IN && records.len() <= MAX_RECORDS {
                records.push(Rr {
                    name: wire::read_name(bytes, raw.owner_at)?.0,
                    ttl: raw.ttl,
                    data,
                });
            }
        }
    }
    Ok(Parsed {
        header,
        question,
        rcode,
        records,
        count,
    })
}

/// Decodes `bytes` as the answer to question `q` sent with `id`.
pub fn decode(bytes: &[u8], id: u16, q: &Question, require_ad: bool) -> Result<Answer, DnsError> {
    if bytes.len() >= 2 && u16::from_be_bytes([bytes[0], bytes[1]]) != id {
        return Err(DnsError::NotOurs);
    }
    if bytes.len() > MAX_MESSAGE {
        return Err(DnsError::TooLarge { len: bytes.len() });
    }
    let m = parse(bytes).map_err(malformed)?;
    if m.header.id != id || !m.header.has(wire::FLAG_QR) {
        return Err(DnsError::NotOurs);
    }
    let asked = match (&m.question, m.header.qdcount) {
        (Some(one), 1) => one,
        _ => return Err(DnsError::NotOurs),
    };
    if asked.name != q.name || asked.qtype != q.kind.record_type() || asked.qclass != wire::CLASS_IN
    {
        return Err(DnsError::NotOurs);
    }
    if m.header.has(wire::FLAG_TC) {
        return Err(DnsError::Truncated);
    }
    let nxdomain = match m.rcode {
        0 => false,
        RCODE_NXDOMAIN => true,
        other => {
            return Err(DnsError::Rcode {
                code: rcode_text(other).to_string(),
            })
        }
    };
    let authentic = m.header.has(wire::FLAG_AD);
    if require_ad && !authentic {
        return Err(DnsError::NotAuthenticated);
    }
    if m.count > MAX_RECORDS {
        return Err(DnsError::TooManyRecords { count: m.count });
    }
    Ok(Answer {
        authentic,
        nxdomain,
        records: m.records,
    })
}

#[cfg(test)]
mod tests;

//! A resolver's answer to one of our DNS-SD questions, decoded with
//! `hickory-proto` and reduced to the records browsing uses.
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

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};

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
    pub fn record_type(self) -> RecordType {
        match self {
            Kind::Ptr => RecordType::PTR,
            Kind::Srv => RecordType::SRV,
            Kind::Txt => RecordType::TXT,
            Kind::A => RecordType::A,
            Kind::Aaaa => RecordType::AAAA,
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

/// Lower case, without the trailing dot.
pub fn name_text(n: &Name) -> String {
    let mut s = n.to_lowercase().to_ascii();
    if s.len() > 1 && s.ends_with('.') {
        s.pop();
    }
    s
}

/// Decodes `bytes` as the answer to question `q` sent with `id`.
pub fn decode(bytes: &[u8], id: u16, q: &Question, require_ad: bool) -> Result<Answer, DnsError> {
    if bytes.len() >= 2 && u16::from_be_bytes([bytes[0], bytes[1]]) != id {
        return Err(DnsError::NotOurs);
    }
    if bytes.len() > MAX_MESSAGE {
        return Err(DnsError::TooLarge { len: bytes.len() });
    }
    let m = Message::from_vec(bytes).map_err(|e| DnsError::Malformed {
        reason: e.to_string().chars().take(120).collect(),
    })?;
    if m.metadata.id != id || m.metadata.message_type != MessageType::Response {
        return Err(DnsError::NotOurs);
    }
    let asked = match m.queries.as_slice() {
        [one] => one,
        _ => return Err(DnsError::NotOurs),
    };
    if name_text(asked.name()) != q.name
        || asked.query_type() != q.kind.record_type()
        || asked.query_class() != DNSClass::IN
    {
        return Err(DnsError::NotOurs);
    }
    if m.metadata.truncation {
        return Err(DnsError::Truncated);
    }
    let nxdomain = match m.metadata.response_code {
        ResponseCode::NoError => false,
        ResponseCode::NXDomain => true,
        other => {
            return Err(DnsError::Rcode {
                code: other.to_str().to_string(),
            })
        }
    };
    if require_ad && !m.metadata.authentic_data {
        return Err(DnsError::NotAuthenticated);
    }
    let count = m.answers.len() + m.authorities.len() + m.additionals.len();
    if count > MAX_RECORDS {
        return Err(DnsError::TooManyRecords { count });
    }
    let records = m
        .answers
        .iter()
        .chain(m.additionals.iter())
        .filter(|r| r.dns_class == DNSClass::IN)
        .filter_map(|r| {
            let data = match &r.data {
                RData::PTR(p) => Data::Ptr(name_text(&p.0)),
                RData::SRV(s) => Data::Srv {
                    port: s.port,
                    target: name_text(&s.target),
                },
                RData::TXT(t) => Data::Txt(txt_rdata(&t.txt_data)?),
                RData::A(a) => Data::A(a.0),
                RData::AAAA(a) => Data::Aaaa(a.0),
                RData::CNAME(c) => Data::Cname(name_text(&c.0)),
                _ => return None,
            };
            Some(Rr {
                name: name_text(&r.name),
                ttl: r.ttl,
                data,
            })
        })
        .collect();
    Ok(Answer {
        authentic: m.metadata.authentic_data,
        nxdomain,
        records,
    })
}

/// The TXT strings back in wire form (each under 256 bytes, as parsed).
fn txt_rdata(strings: &[Box<[u8]>]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for s in strings {
        out.push(u8::try_from(s.len()).ok()?);
        out.extend_from_slice(s);
    }
    Some(out)
}

#[cfg(test)]
mod tests;

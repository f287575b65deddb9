//! The `_arpx._tcp` TXT record (DESIGN §6): what a router announces about
//! itself, and the bounded decoder for what other routers announce.
//!
//! `v=1 rid=<router_id> dom=<domain> fp=<key fingerprint> rv=<record
//! version> gw=<data-plane port>`, one DNS-SD key/value string each
//! (RFC 6763 §6). The ARPX port is the SRV port and the address comes from
//! the A/AAAA records, so neither is in the TXT record.
//!
//! The record version is derived from what the record says (router_id,
//! domain, key, ARPX port, data-plane port), so a router that restarts
//! with the same settings keeps its version (an approval stays valid) and
//! any change of endpoint or key gives a new one (an approval binds to a
//! version, so a changed router needs a new approval).
//!
//! Everything received is untrusted: the decoder bounds the record's size,
//! its entry count and every value, takes the first of duplicate keys
//! (RFC 6763 §6.4), ignores keys it does not know (a later record format
//! may add some) and names the first bad field in a typed error.

use std::fmt;

use edkey::Sha256;
use router_pki::Fingerprint;
use uci_schema::schema::{check_value, Kind};

/// The record format this code reads and writes.
pub const FORMAT: &str = "1";
/// Largest TXT RDATA accepted: what fits a single mDNS packet's answer
/// comfortably (RFC 6763 §6.2 recommends under 1300 bytes).
pub const MAX_RDATA: usize = 1300;
/// Most key/value strings looked at.
pub const MAX_ENTRIES: usize = 32;
/// Longest domain accepted (a DNS name).
pub const MAX_DOMAIN: usize = 253;

/// One router's announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub router_id: String,
    /// `agentd.domain`; empty: none.
    pub domain: String,
    /// The router's identity key (what a peer section pins).
    pub fingerprint: Fingerprint,
    /// Never 0.
    pub version: u32,
    /// The gateway's peer data-plane port.
    pub data_port: u16,
}

/// Why a received TXT record was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// The RDATA is longer than [`MAX_RDATA`].
    TooLarge { len: usize },
    /// More than [`MAX_ENTRIES`] strings.
    TooManyEntries,
    /// A string's length byte runs past the end of the RDATA.
    Truncated { at: usize },
    /// A string that is empty or starts with `=` (no key).
    EmptyKey { index: usize },
    /// A key we need is absent.
    Missing { key: &'static str },
    /// `v` is not a format we read.
    UnsupportedFormat { found: String },
    /// A value is malformed.
    Invalid {
        key: &'static str,
        reason: &'static str,
    },
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::TooLarge { len } => {
                write!(f, "TXT record of {len} bytes (at most {MAX_RDATA})")
            }
            RecordError::TooManyEntries => write!(f, "more than {MAX_ENTRIES} TXT strings"),
            RecordError::Truncated { at } => write!(f, "TXT string at byte {at} is truncated"),
            RecordError::EmptyKey { index } => write!(f, "TXT string {index} has no key"),
            RecordError::Missing { key } => write!(f, "TXT key {key:?} is missing"),
            RecordError::UnsupportedFormat { found } => {
                write!(
                    f,
                    "record format v={found:?} (this agentd reads v={FORMAT})"
                )
            }
            RecordError::Invalid { key, reason } => write!(f, "TXT key {key:?}: {reason}"),
        }
    }
}

impl std::error::Error for RecordError {}

impl Record {
    /// Our own record: the version is derived from everything announced
    /// (`arpx_port` is the SRV port, not in the TXT).
    pub fn ours(
        router_id: &str,
        domain: &str,
        fingerprint: Fingerprint,
        arpx_port: u16,
        data_port: u16,
    ) -> Record {
        let mut h = Sha256::new();
        for part in [router_id.as_bytes(), b"\0", domain.as_bytes(), b"\0"] {
            h.update(part);
        }
        h.update(fingerprint.0);
        h.update(arpx_port.to_be_bytes());
        h.update(data_port.to_be_bytes());
        let d = h.finalize();
        // 31 bits, never 0: fits every JSON number and rpcd's int32.
        let v = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) & 0x7fff_ffff;
        Record {
            router_id: router_id.to_string(),
            domain: domain.to_string(),
            fingerprint,
            version: v.max(1),
            data_port,
        }
    }

    /// The key/value pairs, in announcement order.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("v", FORMAT.to_string()),
            ("rid", self.router_id.clone()),
            ("dom", self.domain.clone()),
            ("fp", self.fingerprint.to_string()),
            ("rv", self.version.to_string()),
            ("gw", self.data_port.to_string()),
        ]
    }

    /// The TXT RDATA (length-prefixed strings), as on the wire.
    pub fn to_rdata(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, v) in self.pairs() {
            let s = format!("{k}={v}");
            // Every value is bounded far below 255 (a DNS label, a domain
            // of ≤ 253, a fingerprint of 71, two numbers).
            let len = u8::try_from(s.len()).unwrap_or(u8::MAX);
            out.push(len);
            out.extend_from_slice(&s.as_bytes()[..usize::from(len)]);
        }
        out
    }

    /// Decodes TXT RDATA.
    pub fn from_rdata(rdata: &[u8]) -> Result<Record, RecordError> {
        if rdata.len() > MAX_RDATA {
            return Err(RecordError::TooLarge { len: rdata.len() });
        }
        let mut strings = Vec::new();
        let mut at = 0;
        while at < rdata.len() {
            if strings.len() == MAX_ENTRIES {
                return Err(RecordError::TooManyEntries);
            }
            let len = usize::from(rdata[at]);
            let body = rdata
                .get(at + 1..at + 1 + len)
                .ok_or(RecordError::Truncated { at })?;
            strings.push(body);
            at += 1 + len;
        }
        let mut pairs = Vec::with_capacity(strings.len());
        for (index, s) in strings.into_iter().enumerate() {
            // RFC 6763 §6.1: an empty string is allowed (an empty record).
            if s.is_empty() {
                continue;
            }
            let (key, value) = match s.iter().position(|b| *b == b'=') {
                Some(0) => return Err(RecordError::EmptyKey { index }),
                Some(i) => (&s[..i], Some(&s[i + 1..])),
                None => (s, None),
            };
            pairs.push((key, value));
        }
        Record::from_pairs(pairs)
    }

    /// Decodes already split key/value strings (what an mDNS library
    /// hands over). Keys compare case-insensitively (RFC 6763 §6.4).
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<Record, RecordError> {
        const KEYS: [&str; 6] = ["v", "rid", "dom", "fp", "rv", "gw"];
        let mut found: [Option<Option<&[u8]>>; 6] = [None; 6];
        for (n, (key, value)) in pairs.into_iter().enumerate() {
            if n == MAX_ENTRIES {
                return Err(RecordError::TooManyEntries);
            }
            if let Some(i) = KEYS
                .iter()
                .position(|k| key.eq_ignore_ascii_case(k.as_bytes()))
            {
                // The first occurrence wins.
                found[i].get_or_insert(value);
            }
        }
        let text = |i: usize| -> Result<&str, RecordError> {
            let key = KEYS[i];
            let value =
                found[i]
                    .ok_or(RecordError::Missing { key })?
                    .ok_or(RecordError::Invalid {
                        key,
                        reason: "has no value",
                    })?;
            std::str::from_utf8(value).map_err(|_| RecordError::Invalid {
                key,
                reason: "is not UTF-8",
            })
        };
        let format = text(0)?;
        if format != FORMAT {
            return Err(RecordError::UnsupportedFormat {
                found: format.chars().take(16).collect(),
            });
        }
        let router_id = text(1)?;
        if !check_value(Kind::DnsLabel, router_id) {
            return Err(RecordError::Invalid {
                key: "rid",
                reason: "is not a DNS label",
            });
        }
        let domain = text(2)?;
        if !domain.is_empty()
            && (domain.len() > MAX_DOMAIN || !check_value(Kind::DomainName, domain))
        {
            return Err(RecordError::Invalid {
                key: "dom",
                reason: "is not a domain name",
            });
        }
        let fingerprint: Fingerprint = text(3)?.parse().map_err(|_| RecordError::Invalid {
            key: "fp",
            reason: "is not sha256: and 64 hex digits",
        })?;
        let version = number(text(4)?)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .ok_or(RecordError::Invalid {
                key: "rv",
                reason: "is not a number from 1 to 4294967295",
            })?;
        let data_port = number(text(5)?)
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n >= 1)
            .ok_or(RecordError::Invalid {
                key: "gw",
                reason: "is not a port from 1 to 65535",
            })?;
        Ok(Record {
            router_id: router_id.to_string(),
            domain: domain.to_string(),
            fingerprint,
            version,
            data_port,
        })
    }
}

/// A plain decimal number of at most 10 digits (no sign, no spaces).
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(b: u8) -> Fingerprint {
        Fingerprint([b; 32])
    }

    fn sample() -> Record {
        Record::ours("router-b", "lab.example", fp(7), 7444, 7447)
    }

    #[test]
    fn a_record_survives_the_wire() {
        let r = sample();
        assert_eq!(Record::from_rdata(&r.to_rdata()), Ok(r.clone()));
        let text = String::from_utf8_lossy(&r.to_rdata()).into_owned();
        assert!(text.contains("rid=router-b"), "{text}");
        assert!(text.contains(&format!("fp={}", fp(7))), "{text}");
    }

    #[test]
    fn the_version_follows_what_is_announced() {
        let a = sample();
        assert_eq!(a.version, sample().version, "stable across restarts");
        assert!(a.version >= 1 && a.version <= 0x7fff_ffff);
        for other in [
            Record::ours("router-b", "lab.example", fp(8), 7444, 7447),
            Record::ours("router-b", "lab.example", fp(7), 7445, 7447),
            Record::ours("router-b", "lab.example", fp(7), 7444, 7448),
            Record::ours("router-b", "other.example", fp(7), 7444, 7447),
        ] {
            assert_ne!(other.version, a.version, "{other:?}");
        }
    }

    fn txt(strings: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for s in strings {
            out.push(s.len() as u8);
            out.extend_from_slice(s.as_bytes());
        }
        out
    }

    fn good() -> Vec<String> {
        sample()
            .pairs()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    fn with(key: &str, value: Option<&str>) -> Vec<u8> {
        let mut s = good();
        s.retain(|e| !e.starts_with(&format!("{key}=")));
        if let Some(v) = value {
            s.insert(0, format!("{key}={v}"));
        }
        txt(&s.iter().map(String::as_str).collect::<Vec<_>>())
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases: &[(&str, Option<&str>, RecordError)] = &[
            ("v", None, RecordError::Missing { key: "v" }),
            (
                "v",
                Some("2"),
                RecordError::UnsupportedFormat { found: "2".into() },
            ),
            ("rid", None, RecordError::Missing { key: "rid" }),
            (
                "rid",
                Some("bad id"),
                RecordError::Invalid {
                    key: "rid",
                    reason: "is not a DNS label",
                },
            ),
            (
                "dom",
                Some("-x-"),
                RecordError::Invalid {
                    key: "dom",
                    reason: "is not a domain name",
                },
            ),
            (
                "fp",
                Some("md5:00"),
                RecordError::Invalid {
                    key: "fp",
                    reason: "is not sha256: and 64 hex digits",
                },
            ),
            (
                "rv",
                Some("0"),
                RecordError::Invalid {
                    key: "rv",
                    reason: "is not a number from 1 to 4294967295",
                },
            ),
            (
                "rv",
                Some("+5"),
                RecordError::Invalid {
                    key: "rv",
                    reason: "is not a number from 1 to 4294967295",
                },
            ),
            (
                "gw",
                Some("65536"),
                RecordError::Invalid {
                    key: "gw",
                    reason: "is not a port from 1 to 65535",
                },
            ),
        ];
        for (key, value, want) in cases {
            assert_eq!(
                Record::from_rdata(&with(key, *value)).as_ref(),
                Err(want),
                "{key}={value:?}"
            );
        }
        // No value at all ("gw" without '=').
        let mut s = good();
        s.retain(|e| !e.starts_with("gw="));
        s.push("gw".into());
        let rdata = txt(&s.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            Record::from_rdata(&rdata),
            Err(RecordError::Invalid {
                key: "gw",
                reason: "has no value"
            })
        );
    }

    #[test]
    fn an_empty_domain_is_none_and_unknown_keys_are_ignored() {
        let r = Record::from_rdata(&with("dom", Some(""))).unwrap();
        assert_eq!(r.domain, "");
        let mut s = good();
        s.push("future=1".into());
        s.push("flag".into());
        let rdata = txt(&s.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(Record::from_rdata(&rdata), Ok(sample()));
    }

    #[test]
    fn the_first_of_duplicate_keys_wins() {
        let mut s = good();
        s.insert(0, "RID=router-z".into());
        let rdata = txt(&s.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(Record::from_rdata(&rdata).unwrap().router_id, "router-z");
    }

    #[test]
    fn the_wire_form_is_bounded() {
        assert_eq!(
            Record::from_rdata(&vec![0u8; MAX_RDATA + 1]),
            Err(RecordError::TooLarge { len: MAX_RDATA + 1 })
        );
        assert_eq!(
            Record::from_rdata(&[0u8; MAX_ENTRIES + 1]),
            Err(RecordError::TooManyEntries)
        );
        let mut r = sample().to_rdata();
        r.push(9);
        r.push(b'x');
        let at = r.len() - 2;
        assert_eq!(Record::from_rdata(&r), Err(RecordError::Truncated { at }));
        assert_eq!(
            Record::from_rdata(&txt(&["=x"])),
            Err(RecordError::EmptyKey { index: 0 })
        );
        assert_eq!(
            Record::from_rdata(&[]),
            Err(RecordError::Missing { key: "v" })
        );
    }
}

//! A bounded DER reader: just what [`crate::x509`] needs to show a
//! certificate (single-byte tags, definite minimal lengths, no recursion
//! beyond what the caller does explicitly).
//!
//! Every read checks the remaining input first, so truncated or hostile
//! bytes end in a [`DerError`], never a panic or an over-read.

use std::fmt;

pub mod write;

/// Why DER bytes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DerError {
    /// The input ended inside a tag, length or value.
    Truncated,
    /// Indefinite, over-long or non-minimal length encoding.
    BadLength,
    /// A multi-byte (high-number) tag: none occurs in what we read.
    LongTag,
    /// A different element than the structure requires.
    Unexpected { expected: u8, found: u8 },
    /// Bytes left over after a complete structure.
    Trailing,
    /// A value that does not decode as its type (OID, time, boolean, ...).
    BadValue(&'static str),
}

impl fmt::Display for DerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DerError::Truncated => f.write_str("truncated DER"),
            DerError::BadLength => f.write_str("invalid DER length"),
            DerError::LongTag => f.write_str("unsupported multi-byte DER tag"),
            DerError::Unexpected { expected, found } => {
                write!(f, "expected DER tag 0x{expected:02x}, found 0x{found:02x}")
            }
            DerError::Trailing => f.write_str("trailing bytes after DER value"),
            DerError::BadValue(what) => write!(f, "invalid DER {what}"),
        }
    }
}

impl std::error::Error for DerError {}

pub const SEQUENCE: u8 = 0x30;
pub const SET: u8 = 0x31;
pub const INTEGER: u8 = 0x02;
pub const BIT_STRING: u8 = 0x03;
pub const OCTET_STRING: u8 = 0x04;
pub const OID: u8 = 0x06;
pub const BOOLEAN: u8 = 0x01;
pub const UTC_TIME: u8 = 0x17;
pub const GENERALIZED_TIME: u8 = 0x18;

/// One element: its tag and its value bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    pub tag: u8,
    pub value: &'a [u8],
}

/// Reads consecutive elements from a byte slice.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(input: &'a [u8]) -> Reader<'a> {
        Reader { rest: input }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The tag of the next element, if any.
    pub fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next element, whatever its tag.
    pub fn read(&mut self) -> Result<Tlv<'a>, DerError> {
        let (&tag, after) = self.rest.split_first().ok_or(DerError::Truncated)?;
        if tag & 0x1f == 0x1f {
            return Err(DerError::LongTag);
        }
        let (&first, mut after) = after.split_first().ok_or(DerError::Truncated)?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            // 0x80 is BER's indefinite form; more than 3 length bytes is
            // beyond anything we read (16 MiB).
            if n == 0 || n > 3 || after.len() < n {
                return Err(if after.len() < n {
                    DerError::Truncated
                } else {
                    DerError::BadLength
                });
            }
            let (bytes, rest) = after.split_at(n);
            after = rest;
            let len = bytes
                .iter()
                .fold(0usize, |acc, &b| acc << 8 | usize::from(b));
            if bytes[0] == 0 || len < 0x80 {
                return Err(DerError::BadLength);
            }
            len
        };
        if after.len() < len {
            return Err(DerError::Truncated);
        }
        let (value, rest) = after.split_at(len);
        self.rest = rest;
        Ok(Tlv { tag, value })
    }

    /// The next element's value, which must have tag `tag`.
    pub fn expect(&mut self, tag: u8) -> Result<&'a [u8], DerError> {
        let tlv = self.read()?;
        if tlv.tag != tag {
            return Err(DerError::Unexpected {
                expected: tag,
                found: tlv.tag,
            });
        }
        Ok(tlv.value)
    }

    /// The next element whole (tag and length too), which must have tag
    /// `tag`: what is copied into another structure byte for byte.
    pub fn expect_whole(&mut self, tag: u8) -> Result<&'a [u8], DerError> {
        let before = self.rest;
        self.expect(tag)?;
        Ok(&before[..before.len() - self.rest.len()])
    }

    /// The next element's value if it has tag `tag`; nothing consumed otherwise.
    pub fn optional(&mut self, tag: u8) -> Result<Option<&'a [u8]>, DerError> {
        if self.peek_tag() == Some(tag) {
            self.expect(tag).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<(), DerError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DerError::Trailing)
        }
    }
}

/// An OBJECT IDENTIFIER's arcs (at most 16, each fitting a u64).
pub fn oid_arcs(value: &[u8]) -> Result<Vec<u64>, DerError> {
    const BAD: DerError = DerError::BadValue("object identifier");
    if value.is_empty() || value.last().is_some_and(|&b| b & 0x80 != 0) {
        return Err(BAD);
    }
    let mut arcs = Vec::new();
    let mut acc: u64 = 0;
    let mut started = false;
    for &b in value {
        if !started && b == 0x80 {
            return Err(BAD); // non-minimal arc
        }
        acc = acc.checked_mul(128).ok_or(BAD)? | u64::from(b & 0x7f);
        started = true;
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (acc / 40).min(2);
                arcs.push(first);
                arcs.push(acc - first * 40);
            } else {
                arcs.push(acc);
            }
            if arcs.len() > 16 {
                return Err(BAD);
            }
            acc = 0;
            started = false;
        }
    }
    Ok(arcs)
}

/// Dotted form of an OID (for names we do not know).
pub fn oid_text(arcs: &[u64]) -> String {
    arcs.iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

/// A UTCTime or GeneralizedTime (`…Z`, whole seconds, as RFC 5280
/// requires) as seconds since the Unix epoch.
pub fn time(tlv: Tlv<'_>) -> Result<i64, DerError> {
    const BAD: DerError = DerError::BadValue("time");
    let text = tlv.value;
    let (year, rest) = match tlv.tag {
        UTC_TIME if text.len() == 13 => {
            let yy = digits(&text[..2]).ok_or(BAD)?;
            // RFC 5280 §4.1.2.5.1: YY >= 50 is 19YY.
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        GENERALIZED_TIME if text.len() == 15 => (digits(&text[..4]).ok_or(BAD)?, &text[4..]),
        _ => return Err(BAD),
    };
    if rest[10] != b'Z' {
        return Err(BAD);
    }
    let field = |i: usize| digits(&rest[i..i + 2]).ok_or(BAD);
    let (month, day, hour, min, sec) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return Err(BAD);
    }
    let days = days_from_civil(year, month, day);
    Ok(days * 86400 + hour * 3600 + min * 60 + sec)
}

fn digits(b: &[u8]) -> Option<i64> {
    b.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_short_and_long_lengths_and_refuses_non_minimal_ones() {
        let mut r = Reader::new(&[0x04, 0x02, 1, 2, 0x30, 0x81, 0x80]);
        assert_eq!(r.expect(OCTET_STRING), Ok(&[1u8, 2][..]));
        assert_eq!(r.read(), Err(DerError::Truncated));
        assert_eq!(
            Reader::new(&[0x04, 0x81, 0x05, 0, 0, 0, 0, 0]).read(),
            Err(DerError::BadLength)
        );
        assert_eq!(
            Reader::new(&[0x04, 0x80, 0, 0]).read(),
            Err(DerError::BadLength)
        );
        assert_eq!(Reader::new(&[0x1f, 0x01, 0]).read(), Err(DerError::LongTag));
        assert_eq!(
            Reader::new(&[0x02, 0x01, 0]).expect(SEQUENCE),
            Err(DerError::Unexpected {
                expected: SEQUENCE,
                found: INTEGER
            })
        );
    }

    #[test]
    fn decodes_oids() {
        // 1.3.101.112 (id-Ed25519), 2.5.29.17 (subjectAltName)
        assert_eq!(oid_arcs(&[0x2b, 0x65, 0x70]), Ok(vec![1, 3, 101, 112]));
        assert_eq!(oid_arcs(&[0x55, 0x1d, 0x11]), Ok(vec![2, 5, 29, 17]));
        assert_eq!(
            oid_arcs(&[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19]),
            Ok(vec![0, 9, 2342, 19200300, 100, 1, 25])
        );
        assert!(oid_arcs(&[0x2b, 0x80, 0x01]).is_err());
        assert!(oid_arcs(&[0x2b, 0x81]).is_err());
        assert!(oid_arcs(&[0xff; 12]).is_err());
    }

    #[test]
    fn converts_both_time_forms() {
        let utc = Tlv {
            tag: UTC_TIME,
            value: b"261201111418Z",
        };
        // date -u -d 2026-12-01T11:14:18Z +%s
        assert_eq!(time(utc), Ok(1_796_123_658));
        let gen = Tlv {
            tag: GENERALIZED_TIME,
            value: b"20500101000000Z",
        };
        assert_eq!(time(gen), Ok(2_524_608_000));
        let old = Tlv {
            tag: UTC_TIME,
            value: b"500101000000Z",
        };
        assert_eq!(time(old), Ok(-631_152_000));
        let local = Tlv {
            tag: UTC_TIME,
            value: b"2612011114180",
        };
        assert!(time(local).is_err());
    }
}

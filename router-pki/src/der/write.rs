//! A DER writer for the few certificates router-pki makes (the reader's
//! counterpart, [`crate::der`]): every element is written with its
//! minimal length, constructed ones by a closure that fills their value,
//! so no length is ever patched afterwards. Only strings and times can be
//! refused; callers write those first, so the closures cannot fail.
//!
//! Only what [`crate::cert`] needs: it replaced rcgen (and yasna and
//! time under it), about 26 KiB of the router binary.

use super::UTC_TIME;
use super::{BIT_STRING, BOOLEAN, GENERALIZED_TIME, INTEGER, OCTET_STRING, OID, SEQUENCE, SET};

pub const UTF8_STRING: u8 = 0x0c;
pub const PRINTABLE_STRING: u8 = 0x13;
pub const IA5_STRING: u8 = 0x16;

/// 9999-12-31T23:59:59Z: GeneralizedTime has four year digits.
pub const MAX_TIME: u64 = 253_402_300_799;

/// Why a value cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// A time after [`MAX_TIME`] (Unix seconds).
    TimeOutOfRange(u64),
    /// A string with a character its ASN.1 type cannot carry.
    BadString { tag: u8 },
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::TimeOutOfRange(t) => write!(
                f,
                "time {t} (Unix seconds) is after 9999-12-31, the last date a certificate can carry"
            ),
            WriteError::BadString { tag } => {
                write!(
                    f,
                    "string has a character DER string type 0x{tag:02x} cannot carry"
                )
            }
        }
    }
}

impl std::error::Error for WriteError {}

/// The length octets: short form below 128, else the fewest big-endian
/// bytes after 0x80|count (what the reader insists on).
pub fn length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let bytes = len.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count();
    out.push(0x80 | (bytes.len() - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// One element from its value bytes.
pub fn tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    length(out, value.len());
    out.extend_from_slice(value);
}

/// A constructed element whose value `fill` writes.
pub fn nested(out: &mut Vec<u8>, tag: u8, fill: impl FnOnce(&mut Vec<u8>)) {
    let mut value = Vec::new();
    fill(&mut value);
    tlv(out, tag, &value);
}

/// A SEQUENCE whose elements `fill` writes.
pub fn sequence(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) {
    nested(out, SEQUENCE, fill);
}

/// A SET; the caller writes its elements in DER order (ours hold one).
pub fn set(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) {
    nested(out, SET, fill);
}

/// `[n] EXPLICIT` (context-specific, constructed), n < 31.
pub fn explicit(out: &mut Vec<u8>, n: u8, fill: impl FnOnce(&mut Vec<u8>)) {
    nested(out, 0xa0 | (n & 0x1f), fill);
}

/// A non-negative INTEGER from big-endian bytes: leading zeros dropped,
/// one 0x00 added where the top bit would make it negative.
pub fn unsigned(out: &mut Vec<u8>, be: &[u8]) {
    let be = &be[be.iter().take_while(|&&b| b == 0).count()..];
    match be.first() {
        None => tlv(out, INTEGER, &[0]),
        Some(&b) if b & 0x80 != 0 => {
            out.push(INTEGER);
            length(out, be.len() + 1);
            out.push(0);
            out.extend_from_slice(be);
        }
        Some(_) => tlv(out, INTEGER, be),
    }
}

/// An OBJECT IDENTIFIER from its pre-encoded content octets (constants
/// are kept encoded: no arc arithmetic in the binary).
pub fn oid(out: &mut Vec<u8>, encoded: &[u8]) {
    tlv(out, OID, encoded);
}

/// A BIT STRING of whole bytes whose last `unused` bits (0..=7) are not
/// part of it; those bits are cleared, as DER requires.
pub fn bit_string(out: &mut Vec<u8>, unused: u8, bytes: &[u8]) {
    let unused = if bytes.is_empty() { 0 } else { unused & 7 };
    out.push(BIT_STRING);
    length(out, bytes.len() + 1);
    out.push(unused);
    if let Some((last, head)) = bytes.split_last() {
        out.extend_from_slice(head);
        out.push(last & (0xffu8 << unused));
    }
}

pub fn octet_string(out: &mut Vec<u8>, bytes: &[u8]) {
    tlv(out, OCTET_STRING, bytes);
}

/// DER's TRUE is 0xff.
pub fn boolean(out: &mut Vec<u8>, value: bool) {
    tlv(out, BOOLEAN, &[if value { 0xff } else { 0 }]);
}

pub fn utf8_string(out: &mut Vec<u8>, s: &str) {
    tlv(out, UTF8_STRING, s.as_bytes());
}

/// A PrintableString; refused if `s` has a character outside its set.
pub fn printable_string(out: &mut Vec<u8>, s: &str) -> Result<(), WriteError> {
    let printable = |c: u8| c.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&c);
    if !s.bytes().all(printable) {
        return Err(WriteError::BadString {
            tag: PRINTABLE_STRING,
        });
    }
    tlv(out, PRINTABLE_STRING, s.as_bytes());
    Ok(())
}

/// An IA5String (ASCII) under `tag`: IA5_STRING, or an IMPLICIT context
/// tag such as a GeneralName's dNSName `[2]` (0x82).
pub fn ia5_string(out: &mut Vec<u8>, tag: u8, s: &str) -> Result<(), WriteError> {
    if !s.is_ascii() {
        return Err(WriteError::BadString { tag });
    }
    tlv(out, tag, s.as_bytes());
    Ok(())
}

/// A certificate time (RFC 5280 §4.1.2.5): UTCTime for 1950 to 2049,
/// GeneralizedTime from 2050; whole seconds, `Z`.
pub fn time(out: &mut Vec<u8>, unix: u64) -> Result<(), WriteError> {
    if unix > MAX_TIME {
        return Err(WriteError::TimeOutOfRange(unix));
    }
    // In range, so no conversion below can fail or overflow.
    let secs = unix as i64;
    let (year, month, day) = civil_from_days(secs.div_euclid(86400));
    let sod = secs.rem_euclid(86400);
    let fields = [month, day, sod / 3600, sod / 60 % 60, sod % 60];
    let mut text = Vec::with_capacity(15);
    let tag = if year < 2050 {
        two_digits(&mut text, year % 100);
        UTC_TIME
    } else {
        two_digits(&mut text, year / 100);
        two_digits(&mut text, year % 100);
        GENERALIZED_TIME
    };
    for f in fields {
        two_digits(&mut text, f);
    }
    text.push(b'Z');
    tlv(out, tag, &text);
    Ok(())
}

fn two_digits(out: &mut Vec<u8>, n: i64) {
    out.push(b'0' + (n / 10 % 10) as u8);
    out.push(b'0' + (n % 10) as u8);
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (the
/// inverse of [`super::days_from_civil`], H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365], from March 1
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::super::{days_from_civil, oid_arcs, time as read_time, Reader, Tlv};
    use super::*;

    fn written(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    fn time_der(unix: u64) -> Vec<u8> {
        written(|o| time(o, unix).unwrap())
    }

    #[test]
    fn lengths_are_minimal_and_read_back() {
        for len in [0usize, 1, 127, 128, 255, 256, 65_535, 65_536] {
            let der = written(|o| octet_string(o, &vec![7; len]));
            let head = match len {
                0..=127 => 2,
                128..=255 => 3,
                256..=65_535 => 4,
                _ => 5,
            };
            assert_eq!(der.len(), head + len, "{len}");
            let mut r = Reader::new(&der);
            assert_eq!(r.expect(OCTET_STRING).map(<[u8]>::len), Ok(len));
            assert!(r.finish().is_ok());
        }
    }

    #[test]
    fn integers_are_positive_and_minimal() {
        assert_eq!(written(|o| unsigned(o, &[])), [2, 1, 0]);
        assert_eq!(written(|o| unsigned(o, &[0, 0])), [2, 1, 0]);
        assert_eq!(written(|o| unsigned(o, &[0, 0x7f])), [2, 1, 0x7f]);
        assert_eq!(written(|o| unsigned(o, &[0x80])), [2, 2, 0, 0x80]);
        assert_eq!(written(|o| unsigned(o, &[0, 1, 2, 3])), [2, 3, 1, 2, 3]);
    }

    #[test]
    fn small_values_have_their_der_form() {
        assert_eq!(written(|o| boolean(o, true)), [1, 1, 0xff]);
        assert_eq!(written(|o| boolean(o, false)), [1, 1, 0]);
        // keyUsage digitalSignature: 7 unused bits, the rest cleared.
        assert_eq!(written(|o| bit_string(o, 7, &[0xff])), [3, 2, 7, 0x80]);
        assert_eq!(written(|o| bit_string(o, 0, &[])), [3, 1, 0]);
        assert_eq!(
            written(|o| oid(o, &[0x2b, 0x65, 0x70])),
            [6, 3, 0x2b, 0x65, 0x70]
        );
        assert_eq!(oid_arcs(&[0x2b, 0x65, 0x70]), Ok(vec![1, 3, 101, 112]));
        assert_eq!(
            written(|o| explicit(o, 3, |o| sequence(o, |_| {}))),
            [0xa3, 2, 0x30, 0]
        );
        assert_eq!(
            written(|o| set(o, |o| utf8_string(o, "é"))),
            [0x31, 4, 0x0c, 2, 0xc3, 0xa9]
        );
        assert_eq!(
            written(|o| printable_string(o, "DE").unwrap()),
            [0x13, 2, b'D', b'E']
        );
        assert!(printable_string(&mut Vec::new(), "a@b").is_err());
        assert_eq!(
            written(|o| ia5_string(o, 0x82, "r").unwrap()),
            [0x82, 1, b'r']
        );
        assert_eq!(
            ia5_string(&mut Vec::new(), IA5_STRING, "ü"),
            Err(WriteError::BadString { tag: IA5_STRING })
        );
    }

    #[test]
    fn times_switch_to_generalized_in_2050() {
        let utc = |s: &[u8]| [&[UTC_TIME, 13][..], s].concat();
        let gen = |s: &[u8]| [&[GENERALIZED_TIME, 15][..], s].concat();
        assert_eq!(time_der(0), utc(b"700101000000Z"));
        // date -u -d 2049-12-31T23:59:59Z +%s
        assert_eq!(time_der(2_524_607_999), utc(b"491231235959Z"));
        assert_eq!(time_der(2_524_608_000), gen(b"20500101000000Z"));
        // A leap day, and the day after it.
        assert_eq!(time_der(1_709_164_800), utc(b"240229000000Z"));
        assert_eq!(time_der(1_709_251_199), utc(b"240229235959Z"));
        assert_eq!(time_der(1_709_251_200), utc(b"240301000000Z"));
        // What self_signed uses (rcgen's default, kept): 1975-01-01 and
        // 4096-01-01.
        assert_eq!(time_der(157_766_400), utc(b"750101000000Z"));
        assert_eq!(time_der(67_090_118_400), gen(b"40960101000000Z"));
        assert_eq!(time_der(MAX_TIME), gen(b"99991231235959Z"));
        assert_eq!(
            time(&mut Vec::new(), MAX_TIME + 1),
            Err(WriteError::TimeOutOfRange(MAX_TIME + 1))
        );
    }

    #[test]
    fn times_read_back_as_written() {
        // Every 17th day or so from 1970 to 9999, at varying times of day.
        let mut unix = 0u64;
        while unix <= MAX_TIME {
            let der = time_der(unix);
            let tlv = Reader::new(&der).read().unwrap();
            assert_eq!(read_time(tlv), Ok(unix as i64), "{unix}");
            unix += 17 * 86_400 + 4_321;
        }
        let tlv = Tlv {
            tag: GENERALIZED_TIME,
            value: b"99991231235959Z",
        };
        assert_eq!(read_time(tlv), Ok(MAX_TIME as i64));
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in (-800_000..3_000_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert!((1..=12).contains(&m) && (1..=31).contains(&d));
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}

//! The strict JSON rules of `api::json` (one object at the top, unique
//! keys at every depth, nesting bounded by `MAX_DEPTH`, serde_json's
//! grammar and number range), checked by a scanner that builds nothing:
//! it answers whether a body passes and where the top-level members (and,
//! when asked, the members of their object values) begin and end.
//!
//! Why a second implementation of the same rules: an invocation body is
//! validated on every call, and most of it is payload the gateway never
//! reads. serde_json's visitor walks each string eight bytes at a time
//! and builds every kept member as a `Value`; this scanner jumps between
//! quotes and backslashes with SIMD memchr, checks a run's control bytes
//! 64 at a time (SSE2 on x86_64, words elsewhere), and in the same pass
//! whether it is all ASCII; only a run that is not has its UTF-8 checked,
//! with the standard library. It answers
//! only yes or no: on "no" the caller asks serde_json's strict decoder,
//! which gives the precise error and has the last word. A differential
//! fuzz target (`gw_envelope`) holds the two to the same verdict.

use std::borrow::Cow;
use std::ops::Range;

use crate::api::json::{Seen, MAX_DEPTH};

/// One member of an object: its key as written (quotes included) and its
/// value's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub key: Range<usize>,
    pub value: Range<usize>,
    /// The key had escapes (decode it with [`key_name`]).
    pub escaped: bool,
    /// The top-level member this one is a member of; `None` at the top.
    pub parent: Option<usize>,
    /// What the caller's [`Wanted`] said of it (a slot of its own, say),
    /// so that the caller need not look the name up again.
    pub tag: u8,
}

/// A member's name, escapes resolved, as UTF-8 bytes.
pub fn key_name<'a>(bytes: &'a [u8], m: &Member) -> Cow<'a, [u8]> {
    decode_key(&bytes[m.key.clone()], m.escaped).unwrap_or(Cow::Borrowed(b""))
}

/// Which members [`object`] writes down: `wanted(None, name)` for a
/// top-level member, `wanted(Some(parent), name)` for a member of the
/// object value of a top-level member written down; `Some(tag)` writes
/// it down with that tag. Only these are kept, so a body of many members
/// costs no more than the ones asked for.
pub type Wanted<'f> = &'f dyn Fn(Option<&[u8]>, &[u8]) -> Option<u8>;

/// Validates `bytes` as one JSON object under the strict rules. On
/// success, the members `wanted` names, in order, each top-level one
/// followed by those of its own that are written down. `None` means the
/// rules refuse something (the caller asks serde_json which rule).
pub fn object(bytes: &[u8], wanted: Wanted<'_>) -> Option<Vec<Member>> {
    let mut s = Scanner {
        b: bytes,
        i: 0,
        out: Vec::with_capacity(16),
    };
    s.ws();
    if s.peek()? != b'{' {
        return None;
    }
    s.object(1, Record::Top(wanted))?;
    s.ws();
    (s.i == bytes.len()).then_some(s.out)
}

/// Which members of an object the scanner writes down.
#[derive(Clone, Copy)]
enum Record<'f> {
    None,
    /// The top-level object's.
    Top(Wanted<'f>),
    /// Those of the value of the top-level member at `parent`, `name`.
    Under {
        wanted: Wanted<'f>,
        parent: usize,
        name: &'f [u8],
    },
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    out: Vec<Member>,
}

/// A key's UTF-8 bytes: as written when it has no escapes (`string`
/// checked them), else decoded. Equal names have equal bytes.
fn decode_key(token: &[u8], escaped: bool) -> Option<Cow<'_, [u8]>> {
    if escaped {
        // The token passed `string`: serde_json decodes it without fault.
        serde_json::from_slice::<String>(token)
            .ok()
            .map(|k| Cow::Owned(k.into_bytes()))
    } else {
        token.get(1..token.len() - 1).map(Cow::Borrowed)
    }
}

/// Bytes of a string run checked one at a time before memchr takes over.
const SHORT_RUN: usize = 32;

const ONES: u64 = u64::MAX / 255;
const HIGHS: u64 = ONES << 7;

/// Whether any of the eight bytes of `x` is below 0x20 (a control byte,
/// which a JSON string may not hold raw).
fn has_control(x: u64) -> bool {
    x.wrapping_sub(ONES * 0x20) & !x & HIGHS != 0
}

/// What a run of string bytes holds that its scan cares about: a control
/// byte (refused), or a byte at or above 0x80 (then its UTF-8 must be
/// checked; a run of ASCII is UTF-8 as it stands, and most payloads are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunClass {
    Control,
    Ascii,
    NonAscii,
}

/// Whether any of the eight bytes of `x` has its high bit set.
fn has_high(x: u64) -> bool {
    x & HIGHS != 0
}

/// Classifies a run of string bytes: sixteen bytes at a time, with SSE2
/// on x86_64 (part of its baseline) and two words elsewhere (MIPS and
/// ARM routers); the control and high-bit tests share each load.
fn run_class(run: &[u8]) -> RunClass {
    let mut high = false;
    let mut blocks = run.chunks_exact(64);
    for b in &mut blocks {
        let (control, h) = block_class(b);
        if control {
            return RunClass::Control;
        }
        high |= h;
    }
    let mut chunks = blocks.remainder().chunks_exact(16);
    for c in &mut chunks {
        let (control, h) = chunk_class(c);
        if control {
            return RunClass::Control;
        }
        high |= h;
    }
    for &c in chunks.remainder() {
        if c < 0x20 {
            return RunClass::Control;
        }
        high |= c >= 0x80;
    }
    if high {
        RunClass::NonAscii
    } else {
        RunClass::Ascii
    }
}

/// Four chunks at once: one test and one branch for 64 bytes. Whether
/// they hold a control byte, and a byte with its high bit set.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn block_class(b: &[u8]) -> (bool, bool) {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    debug_assert_eq!(b.len(), 64);
    // SAFETY: SSE2 is part of every x86_64 CPU, and `b` holds the 64
    // bytes the four unaligned loads read.
    unsafe {
        let limit = _mm_set1_epi8(0x1f);
        let load = |at: usize| _mm_loadu_si128(b.as_ptr().add(at).cast());
        let (v0, v1, v2, v3) = (load(0), load(16), load(32), load(48));
        let low = |v| _mm_cmpeq_epi8(_mm_min_epu8(v, limit), v);
        let control = _mm_or_si128(
            _mm_or_si128(low(v0), low(v1)),
            _mm_or_si128(low(v2), low(v3)),
        );
        // A byte's high bit is its sign: movemask reads it directly.
        let high = _mm_or_si128(_mm_or_si128(v0, v1), _mm_or_si128(v2, v3));
        (
            _mm_movemask_epi8(control) != 0,
            _mm_movemask_epi8(high) != 0,
        )
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn block_class(b: &[u8]) -> (bool, bool) {
    block_class_words(b)
}

/// [`block_class`] in words, compiled (and tested) everywhere.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn block_class_words(b: &[u8]) -> (bool, bool) {
    b.chunks_exact(16)
        .map(chunk_class_words)
        .fold((false, false), |(c, h), (c2, h2)| (c | c2, h | h2))
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn chunk_class(c: &[u8]) -> (bool, bool) {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_set1_epi8,
    };
    debug_assert_eq!(c.len(), 16);
    // SAFETY: SSE2 is part of every x86_64 CPU, and `c` holds the
    // sixteen bytes the unaligned load reads.
    unsafe {
        let v = _mm_loadu_si128(c.as_ptr().cast());
        // A byte is at most 0x1f exactly when min(byte, 0x1f) is itself.
        let low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
        (_mm_movemask_epi8(low) != 0, _mm_movemask_epi8(v) != 0)
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn chunk_class(c: &[u8]) -> (bool, bool) {
    chunk_class_words(c)
}

/// [`chunk_class`] in two 64-bit words: what routers without SSE2 run,
/// compiled (and tested against SSE2) everywhere.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn chunk_class_words(c: &[u8]) -> (bool, bool) {
    let (a, b) = c.split_at(8);
    let a = u64::from_le_bytes(a.try_into().unwrap_or_default());
    let b = u64::from_le_bytes(b.try_into().unwrap_or_default());
    (has_control(a) | has_control(b), has_high(a | b))
}

impl<'a> Scanner<'a> {
    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A value inside a container at `depth`.
    fn value(&mut self, depth: usize, record: Record<'_>) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(depth + 1, record),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i.checked_add(word.len())?;
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    #[inline(always)]
    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Option<()> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let whole = match self.peek()? {
            b'0' => {
                self.i += 1;
                1
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        };
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        let mut exponent = false;
        if let Some(b'e' | b'E') = self.peek() {
            exponent = true;
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        // serde_json refuses a number that is infinite as an f64. Without
        // an exponent, 300 digits are far below f64::MAX; anything else
        // is asked of serde_json itself, the way the strict decoder reads
        // a number (rare in an envelope, so its cost does not matter).
        if exponent || whole > 300 {
            serde_json::from_slice::<serde_json::Value>(&self.b[start..self.i]).ok()?;
        }
        Some(())
    }

    /// A string at `self.i`; whether it held escapes.
    fn string(&mut self) -> Option<bool> {
        self.i += 1;
        let mut escaped = false;
        loop {
            // Names and most values are short: their bytes are checked
            // one by one, with no call to set up; a run longer than that
            // is finished by memchr, and its control bytes and UTF-8 are
            // checked in bulk.
            let start = self.i;
            let short = self.b.len().min(start.saturating_add(SHORT_RUN));
            let mut ascii = true;
            while self.i < short {
                let c = self.b[self.i];
                if c == b'"' || c == b'\\' {
                    break;
                }
                if c < 0x20 {
                    return None;
                }
                ascii &= c < 0x80;
                self.i += 1;
            }
            if self.i == short {
                let rest = self.b.get(self.i..)?;
                let at = memchr::memchr2(b'"', b'\\', rest)?;
                match run_class(&rest[..at]) {
                    RunClass::Control => return None,
                    RunClass::Ascii => {}
                    RunClass::NonAscii => ascii = false,
                }
                self.i += at;
            }
            // A quote or backslash is ASCII, so a run ends on a character
            // boundary and its UTF-8 can be checked on its own.
            if !ascii && std::str::from_utf8(&self.b[start..self.i]).is_err() {
                return None;
            }
            if self.next()? == b'"' {
                return Some(escaped);
            }
            escaped = true;
            self.escape()?;
        }
    }

    /// The escape after a backslash, as serde_json accepts it into a
    /// string: one of `"\/bfnrt`, or `\u` with four hex digits, where a
    /// leading surrogate must be followed at once by `\u` and a trailing
    /// one, and a trailing surrogate may not stand alone.
    fn escape(&mut self) -> Option<()> {
        match self.next()? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(()),
            b'u' => {
                let n = self.hex4()?;
                if (0xDC00..=0xDFFF).contains(&n) {
                    return None;
                }
                if (0xD800..=0xDBFF).contains(&n) {
                    if self.next()? != b'\\' || self.next()? != b'u' {
                        return None;
                    }
                    if !(0xDC00..=0xDFFF).contains(&self.hex4()?) {
                        return None;
                    }
                }
                Some(())
            }
            _ => None,
        }
    }

    fn hex4(&mut self) -> Option<u16> {
        let end = self.i.checked_add(4)?;
        let digits = self.b.get(self.i..end)?;
        let mut n = 0u16;
        for &c in digits {
            let d = (c as char).to_digit(16)?;
            n = (n << 4) | d as u16;
        }
        self.i = end;
        Some(n)
    }

    /// Enters an array or object at `depth`; whether it is empty (and
    /// so already closed by `close`).
    fn open(&mut self, depth: usize, close: u8) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        let empty = self.peek()? == close;
        if empty {
            self.i += 1;
        }
        Some(empty)
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if self.open(depth, b']')? {
            return Some(());
        }
        loop {
            self.ws();
            self.value(depth, Record::None)?;
            self.ws();
            match self.next()? {
                b',' => {}
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    fn object(&mut self, depth: usize, record: Record<'_>) -> Option<()> {
        if self.open(depth, b'}')? {
            return Some(());
        }
        let mut seen = Seen::new();
        loop {
            self.ws();
            if self.peek()? != b'"' {
                return None;
            }
            let key_start = self.i;
            let escaped = self.string()?;
            let key = key_start..self.i;
            let name = decode_key(&self.b[key.clone()], escaped)?;
            self.ws();
            if self.next()? != b':' {
                return None;
            }
            self.ws();
            if !seen.insert(name.clone()) {
                return None;
            }
            let (recorded, under) = match record {
                Record::Top(wanted) => match wanted(None, &name) {
                    Some(tag) => (
                        Some((None, tag)),
                        Record::Under {
                            wanted,
                            parent: self.out.len(),
                            name: &name,
                        },
                    ),
                    None => (None, Record::None),
                },
                Record::Under {
                    wanted,
                    parent,
                    name: of,
                } => match wanted(Some(of), &name) {
                    Some(tag) => (Some((Some(parent), tag)), Record::None),
                    None => (None, Record::None),
                },
                Record::None => (None, Record::None),
            };
            let slot = recorded.map(|(parent, tag)| {
                self.out.push(Member {
                    key,
                    value: self.i..self.i,
                    escaped,
                    parent,
                    tag,
                });
                self.out.len() - 1
            });
            let value_start = self.i;
            self.value(depth, under)?;
            if let Some(at) = slot {
                self.out[at].value = value_start..self.i;
            }
            self.ws();
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::json::parse_object;

    fn agrees(doc: &[u8]) -> bool {
        let fast = object(doc, &|_, _| Some(0)).is_some();
        assert_eq!(
            fast,
            parse_object(doc).is_ok(),
            "the scanner and serde_json disagree on {:?}",
            String::from_utf8_lossy(doc)
        );
        fast
    }

    #[test]
    fn accepts_and_refuses_exactly_what_the_strict_decoder_does() {
        let accepted: &[&[u8]] = &[
            br#"{}"#,
            br#" {"a" : [ 1 , -0.5e+3 , true , false , null , "x" , { } , [ ] ] } "#,
            br#"{"s":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}"#,
            "{\"k\":\"café 😀\"}".as_bytes(),
            br#"{"a":{"a":{"a":1}},"b":{"a":2}}"#,
            br#"{"n":123456789012345678901234567890,"f":1.7976931348623157e308,"z":1e-400}"#,
            br#"{"t\u0061":1,"ta2":2}"#,
        ];
        for d in accepted {
            assert!(agrees(d), "{:?}", String::from_utf8_lossy(d));
        }
        let refused: &[&[u8]] = &[
            b"",
            b"[1]",
            b"1",
            br#"{"a":1,"a":2}"#,
            br#"{"a":1,"\u0061":2}"#,
            br#"{"p":[{"y":1,"y":2}]}"#,
            br#"{"a":01}"#,
            br#"{"a":1.}"#,
            br#"{"a":.5}"#,
            br#"{"a":+1}"#,
            br#"{"a":1e}"#,
            br#"{"a":-}"#,
            br#"{"a":1e400}"#,
            br#"{"a":-1e309}"#,
            br#"{"a":tru}"#,
            br#"{"a":nul}"#,
            br#"{"a":"x}"#,
            b"{\"a\":\"tab\there\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\xc3\":1}",
            br#"{"a":"\x"}"#,
            br#"{"a":"\u12"}"#,
            br#"{"a":"\ud800"}"#,
            br#"{"a":"\ud800x"}"#,
            br#"{"a":"\ud800\u0041"}"#,
            br#"{"a":"\udc00"}"#,
            br#"{"a":1,}"#,
            br#"{"a":[1,]}"#,
            br#"{,}"#,
            br#"{"a" 1}"#,
            br#"{"a":1} x"#,
            br#"{"a":1}}"#,
            b"\xef\xbb\xbf{}",
            br#"{a:1}"#,
        ];
        for d in refused {
            assert!(!agrees(d), "{:?}", String::from_utf8_lossy(d));
        }
        // The number just past 300 digits is asked of serde_json; 310 is
        // infinite as an f64.
        let big = format!(r#"{{"n":{}}}"#, "9".repeat(310));
        assert!(!agrees(big.as_bytes()));
        let fine = format!(r#"{{"n":{}}}"#, "9".repeat(300));
        assert!(agrees(fine.as_bytes()));
    }

    #[test]
    fn both_chunk_checks_class_every_byte_in_every_lane() {
        // The word check (routers without SSE2) is compiled and tested on
        // every machine, against the chunk check this machine runs.
        for lane in 0..16 {
            for byte in 0..=255u8 {
                let mut c = [b'a'; 16];
                c[lane] = byte;
                let want = (byte < 0x20, byte >= 0x80);
                assert_eq!(chunk_class_words(&c), want, "{byte:#x} in lane {lane}");
                assert_eq!(chunk_class(&c), want, "{byte:#x} in lane {lane}");
            }
        }
        for at in 0..64 {
            for byte in [0x00u8, 0x1f, 0x20, 0x7f, 0x80, 0xff] {
                let mut b = [b'a'; 64];
                b[at] = byte;
                let want = (byte < 0x20, byte >= 0x80);
                assert_eq!(block_class_words(&b), want, "{byte:#x} at {at}");
                assert_eq!(block_class(&b), want, "{byte:#x} at {at}");
            }
        }
    }

    #[test]
    fn a_run_is_classed_by_its_worst_byte_wherever_it_sits() {
        for len in [0usize, 1, 15, 16, 17, 63, 64, 65, 100, 200] {
            let run = vec![b'a'; len];
            assert_eq!(run_class(&run), RunClass::Ascii, "{len}");
            for at in 0..len {
                for (byte, class) in [
                    (0x1fu8, RunClass::Control),
                    (0x80, RunClass::NonAscii),
                    (0xff, RunClass::NonAscii),
                    (0x7f, RunClass::Ascii),
                ] {
                    let mut r = run.clone();
                    r[at] = byte;
                    assert_eq!(run_class(&r), class, "{byte:#x} at {at} of {len}");
                }
                // A control byte wins over a high byte before or after it.
                let mut r = run.clone();
                r[at] = 0x01;
                r[len - 1 - at] = 0xc3;
                if at != len - 1 - at {
                    assert_eq!(run_class(&r), RunClass::Control, "{at} of {len}");
                }
            }
        }
    }

    #[test]
    fn long_runs_that_are_not_utf8_are_refused_and_ascii_ones_taken() {
        for len in [40usize, 64, 100, 300] {
            for at in [0, len / 2, len - 1] {
                for (bad, ok) in [(0xffu8, false), (0xc3, false), (b'A', true)] {
                    let mut s = vec![b'x'; len];
                    s[at] = bad;
                    let doc = [&br#"{"s":""#[..], &s, br#""}"#].concat();
                    assert_eq!(agrees(&doc), ok, "{bad:#x} at {at} of {len}");
                }
                // A whole character is UTF-8 wherever it sits.
                let mut s = vec![b'x'; len];
                s.splice(at..at + 1, "é".bytes());
                let doc = [&br#"{"s":""#[..], &s, br#""}"#].concat();
                assert!(agrees(&doc), "é at {at} of {len}");
            }
        }
    }

    #[test]
    fn control_bytes_are_found_at_every_offset_of_a_long_run() {
        for at in 0..40 {
            let mut s = vec![b'a'; 40];
            s[at] = 0x1f;
            let doc = [&br#"{"s":""#[..], &s, br#""}"#].concat();
            assert!(!agrees(&doc), "control byte at {at}");
            s[at] = 0x20;
            let doc = [&br#"{"s":""#[..], &s, br#""}"#].concat();
            assert!(agrees(&doc));
        }
        // Bytes with the high bit set are not control bytes.
        assert!(agrees("{\"s\":\"ééééééééééééééééé\"}".as_bytes()));
    }

    #[test]
    fn strings_on_both_sides_of_the_short_run_are_checked_alike() {
        for len in [0usize, 1, 31, 32, 33, 64, 100] {
            // A control byte, a byte that is not UTF-8, a quote that ends
            // the string early (what follows is then not JSON).
            for bad in [0x01u8, 0xff, b'"'] {
                for at in [0, len / 2, len.saturating_sub(1)] {
                    let mut s = "é".repeat(len / 2).into_bytes();
                    s.resize(len, b'x');
                    if len > 0 {
                        s[at] = bad;
                    }
                    let doc = [&br#"{"s":""#[..], &s, br#"","t":"\n\u00e9"}"#].concat();
                    agrees(&doc);
                }
            }
        }
    }

    #[test]
    fn depth_is_bounded_as_the_strict_decoder_bounds_it() {
        for n in [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 5] {
            let doc = format!(r#"{{"d":{}{}}}"#, "[".repeat(n), "]".repeat(n));
            agrees(doc.as_bytes());
            let doc = format!(r#"{{"d":{}1{}}}"#, r#"{"k":"#.repeat(n), "}".repeat(n));
            agrees(doc.as_bytes());
        }
    }

    #[test]
    fn only_the_wanted_members_are_recorded_with_their_spans() {
        let doc = br#"{"a":1, "p":{"x":[1],"y":"z"},"q":{"w":2}}"#;
        // Each recorded member carries the tag its caller gave it.
        let m = object(doc, &|parent, k| match parent {
            None => (k != b"q").then_some(k[0]),
            Some(p) => (p == b"p" && k != b"y").then_some(k[0].to_ascii_uppercase()),
        })
        .unwrap();
        let text = |r: &Range<usize>| std::str::from_utf8(&doc[r.clone()]).unwrap();
        let got: Vec<_> = m
            .iter()
            .map(|m| (text(&m.key), text(&m.value), m.parent, m.tag))
            .collect();
        assert_eq!(
            got,
            [
                (r#""a""#, "1", None, b'a'),
                (r#""p""#, r#"{"x":[1],"y":"z"}"#, None, b'p'),
                (r#""x""#, "[1]", Some(1), b'X'),
            ]
        );
        let esc = br#"{"\u0061b":1}"#;
        let m = object(esc, &|_, _| Some(0)).unwrap();
        assert_eq!(key_name(esc, &m[0]), &b"ab"[..]);
    }
}

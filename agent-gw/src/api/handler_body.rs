//! The exact body a handler receives (docs/sdk-api.md "What the handler
//! endpoint receives"): the envelope members of the Nexus protocol and
//! nothing else, in the caller's order, with the values the gateway owns
//! written over the caller's (`tenant`/`source_agent` under auth, the
//! decremented `hop_limit` always).
//!
//! Built by splicing the caller's bytes, not by re-encoding a `Value`: the
//! payload reaches the handler byte for byte (numbers beyond f64, key
//! order, escapes), while members the protocol does not define — which
//! a caller could use to smuggle instructions to a handler that trusts
//! the gateway — are dropped. The input has already passed the strict
//! decoder (`api::json`), so this scanner only has to find member
//! boundaries of valid JSON; on anything unexpected it returns `None`
//! and the caller falls back to re-encoding the decoded document.

use std::fmt::Write as _;

/// Top-level members relayed to handlers (the nexilume envelope).
pub const HANDLER_MEMBERS: [&str; 11] = [
    "version",
    "intent",
    "intent_version",
    "task_id",
    "source_agent",
    "tenant",
    "hop_limit",
    "constraints",
    "payload",
    "target_agent",
    "resume_from_event_id",
];

/// Values the gateway writes over the caller's.
#[derive(Clone, Copy, Debug)]
pub struct Overrides<'a> {
    pub tenant: &'a str,
    pub source_agent: &'a str,
    pub hop_limit: u8,
}

/// The handler body from the caller's validated envelope `src`.
pub fn build(src: &[u8], o: Overrides<'_>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(src.len());
    out.push(b'{');
    let mut seen_hop = false;
    let mut s = Scanner { b: src, i: 0 };
    s.ws();
    s.eat(b'{')?;
    s.ws();
    if s.peek()? == b'}' {
        return None; // an envelope is never empty
    }
    loop {
        s.ws();
        let key_start = s.i;
        s.string()?;
        let key_raw = &src[key_start..s.i];
        let key = decode_key(key_raw)?;
        s.ws();
        s.eat(b':')?;
        s.ws();
        let v_start = s.i;
        s.value(0)?;
        let value = &src[v_start..s.i];
        if let Some(name) = HANDLER_MEMBERS.iter().find(|m| **m == key) {
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(key_raw);
            out.push(b':');
            match *name {
                "tenant" => push_json_str(&mut out, o.tenant),
                "source_agent" => push_json_str(&mut out, o.source_agent),
                "hop_limit" => {
                    seen_hop = true;
                    let mut n = String::new();
                    let _ = write!(n, "{}", o.hop_limit);
                    out.extend_from_slice(n.as_bytes());
                }
                _ => out.extend_from_slice(value),
            }
        }
        s.ws();
        match s.next()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    s.ws();
    if s.i != src.len() || !seen_hop {
        return None;
    }
    out.push(b'}');
    Some(out)
}

fn push_json_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(serde_json::Value::from(s).to_string().as_bytes());
}

/// A key as the strict decoder saw it (escapes resolved).
fn decode_key(raw: &[u8]) -> Option<String> {
    if raw.contains(&b'\\') {
        serde_json::from_slice::<String>(raw).ok()
    } else {
        std::str::from_utf8(&raw[1..raw.len() - 1])
            .ok()
            .map(str::to_owned)
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

/// Deeper than the strict decoder allows means something is off.
const MAX_DEPTH: usize = crate::api::json::MAX_DEPTH + 1;

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        // Payload strings are the bulk of a large body: jump from one
        // quote or backslash to the next (SIMD memchr) instead of
        // stepping byte by byte.
        loop {
            let rest = self.b.get(self.i..)?;
            let at = memchr::memchr2(b'"', b'\\', rest)?;
            self.i += at + 1;
            if rest[at] == b'"' {
                return Some(());
            }
            // The escaped byte (an escaped quote does not end the string).
            self.next()?;
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string(),
            b'{' | b'[' => {
                let close = if self.next()? == b'{' { b'}' } else { b']' };
                self.ws();
                if self.peek()? == close {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.ws();
                    if close == b'}' {
                        self.string()?;
                        self.ws();
                        self.eat(b':')?;
                        self.ws();
                    }
                    self.value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => continue,
                        c if c == close => return Some(()),
                        _ => return None,
                    }
                }
            }
            _ => {
                // number, true, false, null
                let start = self.i;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'))
                {
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const O: Overrides<'static> = Overrides {
        tenant: "lab",
        source_agent: "agent://lab/caller",
        hop_limit: 7,
    };

    fn body(s: &str) -> String {
        String::from_utf8(build(s.as_bytes(), O).unwrap()).unwrap()
    }

    #[test]
    fn unknown_top_level_members_are_dropped_and_the_payload_kept_byte_for_byte() {
        let src = r#"{"version":"1.0","intent":"demo.echo","intent_version":1,"task_id":"t",
            "source_agent":"agent://lab/caller","tenant":"lab","hop_limit":8,
            "admin":true,"constraints":{"timeout_ms":5},
            "payload":{"n":123456789012345678901234567890,"s":"a\"b}","e":1.0e5,"k":[{},[]]},
            "x-nexus-route-id":"evil"}"#;
        let out = body(src);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "constraints",
                "hop_limit",
                "intent",
                "intent_version",
                "payload",
                "source_agent",
                "task_id",
                "tenant",
                "version"
            ]
        );
        assert!(
            out.starts_with(r#"{"version":"1.0","intent":"demo.echo","#),
            "caller's order: {out}"
        );
        assert!(
            out.contains(r#""payload":{"n":123456789012345678901234567890,"s":"a\"b}","e":1.0e5,"k":[{},[]]}"#),
            "{out}"
        );
        assert_eq!(v["hop_limit"], 7);
    }

    #[test]
    fn long_strings_with_escapes_end_at_their_real_closing_quote() {
        // Escaped quotes and backslashes at every distance from a chunk
        // edge, a backslash right before the closing quote, and text that
        // looks like members inside the string.
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&"x".repeat(i % 37));
            text.push_str(if i % 3 == 0 { r#"\""# } else { r#"\\"# });
        }
        text.push_str(r#" \", \"tenant\": \"evil\""#);
        text.push_str(r#"\\"#);
        let src = format!(
            r#"{{"version":"1.0","intent":"demo.echo","intent_version":1,"task_id":"t","hop_limit":8,"payload":{{"s":"{text}","t":"\\"}},"tenant":"x"}}"#
        );
        let want: serde_json::Value = serde_json::from_str(&src).expect("the test's JSON is valid");
        let out = body(&src);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["payload"], want["payload"], "payload byte for byte");
        assert_eq!(
            v["tenant"], "lab",
            "the owned member after the string was found"
        );
        assert!(out.contains(&format!(r#""s":"{text}""#)));
    }

    #[test]
    fn owned_values_are_written_over_the_callers() {
        let out = body(
            r#"{"tenant":"other","source_agent":"agent://other/evil","hop_limit":200,"payload":1}"#,
        );
        assert_eq!(
            out,
            r#"{"tenant":"lab","source_agent":"agent://lab/caller","hop_limit":7,"payload":1}"#
        );
    }

    #[test]
    fn escaped_member_names_are_recognised_like_the_decoder_does() {
        let out = body(r#"{"p\u0061yload":{"a":1},"hop_limit":8,"\u0061dmin":1}"#);
        assert_eq!(out, r#"{"p\u0061yload":{"a":1},"hop_limit":7}"#);
    }

    #[test]
    fn unexpected_input_falls_back() {
        assert!(build(b"{}", O).is_none());
        assert!(build(br#"{"payload":1}"#, O).is_none(), "no hop_limit");
        assert!(build(br#"{"hop_limit":8} x"#, O).is_none());
        assert!(build(br#"{"hop_limit":8,"payload":[1,}"#, O).is_none());
    }
}

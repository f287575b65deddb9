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
//! the gateway — are dropped. The member boundaries are those the strict
//! scanner (`api::scan`) found while validating the body, so nothing is
//! scanned twice; on anything unexpected the caller falls back to
//! re-encoding the decoded document.

use crate::api::scan::{self, Member};

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

/// The handler body from the caller's validated envelope `src`; `None`
/// when `src` is not a strict JSON object or has no `hop_limit` (the
/// caller then re-encodes the decoded document).
pub fn build(src: &[u8], o: Overrides<'_>) -> Option<Vec<u8>> {
    let members = scan::object(src, &|parent, name| {
        (parent.is_none() && HANDLER_MEMBERS.iter().any(|h| h.as_bytes() == name)).then_some(0)
    })?;
    splice(src, &members, o)
}

/// The handler body from the caller's envelope `src`, whose top-level
/// members `api::scan` found: the same body as [`build`], spliced from
/// those spans without scanning `src` again.
pub fn splice(src: &[u8], members: &[Member], o: Overrides<'_>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(src.len());
    out.push(b'{');
    let mut seen_hop = false;
    for m in members.iter().filter(|m| m.parent.is_none()) {
        let name = scan::key_name(src, m);
        let Some(member) = HANDLER_MEMBERS.iter().find(|h| h.as_bytes() == &*name) else {
            continue;
        };
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(src.get(m.key.clone())?);
        out.push(b':');
        match *member {
            "tenant" => push_json_str(&mut out, o.tenant),
            "source_agent" => push_json_str(&mut out, o.source_agent),
            "hop_limit" => {
                seen_hop = true;
                push_decimal(&mut out, o.hop_limit);
            }
            _ => out.extend_from_slice(src.get(m.value.clone())?),
        }
    }
    if !seen_hop {
        return None;
    }
    out.push(b'}');
    Some(out)
}

/// `s` as a JSON string, escaped as serde_json escapes it, written
/// straight into `out` (no intermediate `Value` or `String`: this runs
/// on every call).
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn push_decimal(out: &mut Vec<u8>, n: u8) {
    if n >= 100 {
        out.push(b'0' + n / 100);
    }
    if n >= 10 {
        out.push(b'0' + n / 10 % 10);
    }
    out.push(b'0' + n % 10);
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
    fn owned_values_are_written_as_serde_json_writes_them() {
        for n in [1u8, 9, 10, 99, 100, 255] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
        for s in ["lab", "a\"b\\c", "\u{1}\n\u{7f}", "ünï\u{2028}"] {
            let mut out = Vec::new();
            push_json_str(&mut out, s);
            assert_eq!(out, serde_json::Value::from(s).to_string().as_bytes());
        }
    }

    #[test]
    fn unexpected_input_falls_back() {
        assert!(build(b"{}", O).is_none());
        assert!(build(br#"{"payload":1}"#, O).is_none(), "no hop_limit");
        assert!(build(br#"{"hop_limit":8} x"#, O).is_none());
        assert!(build(br#"{"hop_limit":8,"payload":[1,}"#, O).is_none());
    }
}

//! Request identity for stream resume: which stream a reconnect names, and
//! whether it asks for the same thing as the original request.
//!
//! A Nexus SDK reconnect re-POSTs the original envelope with the same
//! `task_id`, plus `resume_from_event_id` and a `Last-Event-ID` header. The
//! stream is found by (tenant, source, capability, task_id) — tenant and
//! source being the verified identity — and the reconnect must carry the
//! same request: the SHA-256 of its canonical JSON, without the cursor
//! field, must equal the original's. Canonical means object keys sorted
//! and no insignificant whitespace, so key order on the wire is irrelevant.

use edkey::Sha256;
use serde_json::Value;

/// Envelope field carrying the resume cursor (excluded from the digest).
pub const RESUME_FIELD: &str = "resume_from_event_id";

/// Top-level fields that are not the request's content: the cursor, and
/// the hops left, which each gateway on the path lowers (a resume that
/// arrives over a longer or shorter path asks for the same thing).
const NOT_CONTENT: [&str; 2] = [RESUME_FIELD, "hop_limit"];

/// Identifies one resumable stream within a router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamKey([u8; 32]);

impl StreamKey {
    pub fn new(tenant: &str, subject: &str, capability: &str, client_task_id: &str) -> StreamKey {
        let mut h = Sha256::new();
        for part in [tenant, subject, capability, client_task_id] {
            // Length-prefixed so ("ab","c") and ("a","bc") differ.
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        StreamKey(h.finalize())
    }
}

/// SHA-256 of the canonical form of `envelope` without [`RESUME_FIELD`].
pub fn request_digest(envelope: &Value) -> [u8; 32] {
    let mut h = Sha256::new();
    write_canonical(&mut h, envelope, &NOT_CONTENT);
    h.finalize()
}

/// [`request_digest`] of an already decoded JSON object.
pub fn object_digest(map: &serde_json::Map<String, Value>) -> [u8; 32] {
    let mut h = Sha256::new();
    write_object(&mut h, map, &NOT_CONTENT);
    h.finalize()
}

fn write_object(h: &mut Sha256, map: &serde_json::Map<String, Value>, skip: &[&str]) {
    let mut keys: Vec<&String> = map.keys().filter(|k| !skip.contains(&k.as_str())).collect();
    keys.sort();
    h.update(b"{");
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            h.update(b",");
        }
        h.update(Value::String(k.clone()).to_string().as_bytes());
        h.update(b":");
        write_canonical(h, &map[k], &[]);
    }
    h.update(b"}");
}

/// Feeds the canonical text of `v` to `h`, leaving out top-level keys `skip`.
fn write_canonical(h: &mut Sha256, v: &Value, skip: &[&str]) {
    match v {
        Value::Object(map) => write_object(h, map, skip),
        Value::Array(items) => {
            h.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                write_canonical(h, item, &[]);
            }
            h.update(b"]");
        }
        // Scalars: serde_json's compact rendering (same value, same text).
        scalar => h.update(scalar.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_ignores_key_order_and_the_resume_cursor() {
        let a = json!({"intent":"demo.echo","task_id":"t1","payload":{"x":1,"y":[1,2]}});
        let b: Value =
            serde_json::from_str(r#"{"payload":{"y":[1,2],"x":1},"resume_from_event_id":7,"task_id":"t1","intent":"demo.echo"}"#)
                .unwrap();
        assert_eq!(request_digest(&a), request_digest(&b));
    }

    #[test]
    fn digest_ignores_the_hops_left_at_the_top_level_only() {
        // A resume over a path of another length arrives with another
        // hop_limit: still the same request.
        let a = json!({"intent":"demo.echo","hop_limit":5,"payload":{"hop_limit":1}});
        let b = json!({"intent":"demo.echo","hop_limit":7,"payload":{"hop_limit":1}});
        let c = json!({"intent":"demo.echo","hop_limit":5,"payload":{"hop_limit":2}});
        assert_eq!(request_digest(&a), request_digest(&b));
        assert_ne!(request_digest(&a), request_digest(&c), "payload is content");
    }

    #[test]
    fn digest_changes_with_content() {
        let a = json!({"intent":"demo.echo","payload":{"x":1}});
        let b = json!({"intent":"demo.echo","payload":{"x":2}});
        let c = json!({"intent":"demo.echo","payload":{"x":"1"}});
        assert_ne!(request_digest(&a), request_digest(&b));
        assert_ne!(request_digest(&a), request_digest(&c));
    }

    #[test]
    fn stream_keys_are_unambiguous() {
        assert_ne!(
            StreamKey::new("ab", "c", "x", "t"),
            StreamKey::new("a", "bc", "x", "t")
        );
        assert_eq!(
            StreamKey::new("a", "b", "c", "d"),
            StreamKey::new("a", "b", "c", "d")
        );
    }
}

//! Arbitrary JSON-RPC params on `/a2a`: the A2A decoders (messages and
//! their parts, task queries), the payload and artifact mappings, the
//! version check, the method table and the task-id parser must return
//! typed errors, never panic, and keep their bounds.
#![no_main]

use agent_gw::front::a2a::{check_version, handle, part, wire, Method};
use agent_gw::api::json;
use agent_gw::task::TaskResult;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = check_version(Some(data));
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = Method::parse(s);
        if let Some((_, token)) = handle::parse(s) {
            assert_eq!(token.len(), 64);
        }
    }
    let r = TaskResult {
        status: 200,
        content_type: data.first().map(|b| if b % 2 == 0 { "application/json" } else { "text/plain" }.to_string()),
        body: data.to_vec(),
    };
    assert_eq!(part::result_parts(&r).len(), 1);
    let Ok(v) = json::parse_value(data) else {
        return;
    };
    if let Ok(s) = wire::SendMessage::decode(Some(&v)) {
        assert!(!s.message.parts.is_empty() && s.message.parts.len() <= wire::MAX_PARTS);
        assert!(s.message.message_id.len() <= wire::MAX_ID);
        assert!(s.skill().is_none_or(|k| k.len() <= wire::MAX_SKILL));
        let p = part::payload(&s.message.parts);
        assert!(p.is_object());
    }
    if let Ok(q) = wire::TaskQuery::decode(Some(&v)) {
        assert!(!q.id.is_empty() && q.id.len() <= wire::MAX_ID);
    }
});

//! Arbitrary requests on /mcp: headers (before the first NUL byte, one
//! `name: value` per line) and a body. The JSON-RPC decoder, the
//! 2026-07-28 header ladder, `Mcp-Name` decoding, the Host/Origin guard,
//! `tools/call` params, `Last-Event-ID` and tools/list cursors must give
//! typed answers and never panic; cursors round-trip.
#![no_main]

use agent_gw::catalog::{decode_cursor, encode_cursor};
use agent_gw::jsonrpc::{self, Message};
use agent_gw::front::mcp::{parse_event_id, tools, wire};
use agent_gw::origin;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (head, body) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&data[..0], data),
    };
    let mut headers = HeaderMap::new();
    for line in head.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        headers.append(n, v);
    }
    let names: Vec<Box<str>> = vec!["router.lan".into()];
    let addrs = ["192.0.2.1".parse().unwrap()];
    let allowed = origin::Allowed { names: &names, addrs: &addrs };
    if let Err(r) = origin::check(&headers, allowed) {
        assert!(r.status().is_client_error());
    }
    let _ = wire::accepts(&headers);
    if let Ok(Message::Request { method, params, .. }) = jsonrpc::decode(body) {
        if let Err(r) = wire::modern_ladder(&headers, &method, params.as_ref()) {
            assert!(wire::status_of(r.code).is_client_error(), "{r:?}");
        }
        if let Ok(c) = tools::parse_call(params.as_ref()) {
            assert!(!c.name.is_empty() && c.arguments.is_object());
        }
    }
    let text = String::from_utf8_lossy(body);
    let _ = wire::decode_header_value(&text);
    let _ = parse_event_id(&text);
    let _ = decode_cursor(&text);
    if !text.is_empty() && text.len() <= 128 {
        assert_eq!(decode_cursor(&encode_cursor(&text)).as_deref(), Ok(&*text));
    }
});

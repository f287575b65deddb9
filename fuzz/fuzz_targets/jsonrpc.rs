//! Arbitrary bodies on /mcp and /a2a: the JSON-RPC decoder returns a
//! message or a typed error with the spec's code, never panics, and every
//! error answer it builds is itself valid JSON-RPC.
#![no_main]

use agent_gw::jsonrpc::{self, Message, INVALID_REQUEST, PARSE_ERROR};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match jsonrpc::decode(data) {
        Ok(Message::Request { id, method, .. }) => {
            assert!(!method.is_empty() && method.len() <= jsonrpc::MAX_METHOD_LEN);
            // An answer to an accepted request decodes as that answer.
            let answer = jsonrpc::result(&id, serde_json::Value::Null);
            assert!(matches!(
                jsonrpc::decode(&answer),
                Ok(Message::Response { id: back, .. }) if back == id
            ));
        }
        Ok(Message::Notification { method, .. }) => {
            assert!(method.len() <= jsonrpc::MAX_METHOD_LEN)
        }
        Ok(Message::Response { .. }) => {}
        Err(e) => {
            assert!(e.code() == PARSE_ERROR || e.code() == INVALID_REQUEST);
            let answer: serde_json::Value =
                serde_json::from_slice(&e.to_answer()).expect("error answer is JSON");
            assert_eq!(answer["error"]["code"], e.code());
            assert_eq!(answer["jsonrpc"], "2.0");
        }
    }
});

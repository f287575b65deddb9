//! `gateway.hop_limit` for protocol calls: an MCP tool call or an A2A
//! message names no `hop_limit`, so it gets the hops an SDK call gets —
//! under `hop_limit 1` it reaches a local handler (with hop_limit 1),
//! exactly as `/agent/v1/invoke` does.

mod common;

use serde_json::{json, Value};

use agent_gw::catalog::Entry;
use common::{echo_gateway, invoke, lab_config, post, run};
use uci_schema::Protocol;

fn mapping(protocol: Protocol, name: &str) -> Entry {
    Entry {
        protocol,
        name: name.into(),
        title: None,
        description: None,
        capability: "demo.echo".into(),
        version: 1,
        input_schema: None,
        mapped: true,
    }
}

/// The JSON-RPC messages of an SSE answer.
fn sse_messages(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

const MCP_HEADERS: [(&str, &str); 2] = [
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
];

/// Input: a gateway with `hop_limit 1`, an echo handler behind
/// `demo.echo`, and an MCP tool and an A2A skill mapped to it.
/// Output: the SDK call, the MCP `tools/call` (handshake era) and the
/// A2A `SendMessage` all reach the handler, each with hop_limit 1.
#[test]
fn hop_limit_1_serves_mcp_and_a2a_calls_like_sdk_calls() {
    run(async {
        let mut cfg = lab_config();
        cfg.hop_limit = 1;
        cfg.protocol_tenant = "lab".into();
        cfg.mappings = vec![
            mapping(Protocol::Mcp, "echo"),
            mapping(Protocol::A2a, "echo"),
        ];
        let (backend, gw, _state) = echo_gateway(cfg).await;

        let sdk = invoke(gw, "demo.echo", &[], r#"{"via":"sdk"}"#).await;
        assert_eq!(sdk.status, 200, "{:?}", sdk.body);
        assert_eq!(sdk.json()["echo"]["hop_limit"], 1);

        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});
        let r = post(gw, "/mcp", &MCP_HEADERS, &init.to_string()).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let sid = r.headers["mcp-session-id"].to_str().unwrap().to_string();
        let mut h = MCP_HEADERS.to_vec();
        h.push(("mcp-session-id", &sid));
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"via": "mcp"}}});
        let r = post(gw, "/mcp", &h, &call.to_string()).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let answer = sse_messages(&r.body)
            .into_iter()
            .find(|m| m["id"] == 2)
            .expect("the call's answer");
        let result = &answer["result"];
        assert_ne!(result["isError"], true, "{answer}");
        assert_eq!(
            result["structuredContent"]["echo"]["hop_limit"], 1,
            "{answer}"
        );

        let send = json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"via": "a2a"}}]}}});
        let r = post(
            gw,
            "/a2a",
            &[("content-type", "application/json"), ("a2a-version", "1.0")],
            &send.to_string(),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let doc = r.json();
        let task = &doc["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{doc}");
        assert_eq!(
            task["artifacts"][0]["parts"][0]["data"]["echo"]["hop_limit"], 1,
            "{doc}"
        );
        assert_eq!(backend.count(), 3, "one handler call each");
    });
}

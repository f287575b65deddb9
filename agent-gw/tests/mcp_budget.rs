//! MCP stream histories inside `gateway.buffer_budget`: what a session
//! keeps for resumption counts against the budget (so new async, stream
//! and MCP work sees it), a call that finds no room is refused before
//! it reaches a handler, and ending the session gives the bytes back.

mod common;

use serde_json::{json, Value};

use agent_gw::catalog::Entry;
use common::{backend, gateway_with, lab_config, post, route, run, send, Mode};
use uci_schema::Protocol;

const HEADERS: [(&str, &str); 2] = [
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
];

fn mapping(name: &str, capability: &str) -> Entry {
    Entry {
        protocol: Protocol::Mcp,
        name: name.into(),
        title: None,
        description: None,
        capability: capability.into(),
        version: 1,
        input_schema: None,
        mapped: true,
    }
}

async fn session(gw: std::net::SocketAddr) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let r = post(gw, "/mcp", &HEADERS, &init.to_string()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.headers["mcp-session-id"].to_str().unwrap().to_string()
}

fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {"n": id}}})
    .to_string()
}

fn answer(body: &[u8], id: u64) -> Value {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|m| m["id"] == id)
        .expect("the call's answer")
}

/// Input: a gateway whose budget fits one running MCP call's stream
/// floor and little more; an MCP session calls a tool whose handler
/// holds the call, then a second session calls the same tool.
/// Output: the second call is refused 503 `overloaded` without reaching
/// the handler; once the first finishes, its kept history is in the
/// budget (bytes held > 0), new calls go through again, and ending the
/// session (DELETE) gives every byte back.
#[test]
fn mcp_stream_histories_are_held_in_the_buffer_budget() {
    run(async {
        let hold = backend("hold", Mode::Hold).await;
        let mut cfg = lab_config();
        cfg.protocol_tenant = "lab".into();
        cfg.mappings = vec![mapping("hold", "demo.hold")];
        cfg.buffer_budget = 400 * 1024;
        cfg.tenant_share_percent = 100;
        cfg.source_share_percent = 100;
        let (gw, state) = gateway_with(
            cfg,
            vec![route("r-h", "demo.hold", &hold.endpoint(), 1, false)],
        )
        .await;
        let used = || state.budget.ledger().used();

        let first = session(gw).await;
        let mut h1 = HEADERS.to_vec();
        h1.push(("mcp-session-id", &first));
        let h1: Vec<(String, String)> = h1
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let running = tokio::task::spawn_local(async move {
            let h: Vec<(&str, &str)> = h1.iter().map(|(k, v)| (&**k, &**v)).collect();
            post(gw, "/mcp", &h, &call(2, "hold")).await
        });
        hold.arrived.notified().await;
        assert!(
            used() >= 256 * 1024,
            "the running call holds its floor: {}",
            used()
        );

        let second = session(gw).await;
        let mut h2 = HEADERS.to_vec();
        h2.push(("mcp-session-id", &second));
        let refused = post(gw, "/mcp", &h2, &call(3, "hold")).await;
        assert_eq!(refused.status, 503, "{:?}", refused.body);
        let doc: Value = serde_json::from_slice(&refused.body).unwrap();
        assert_eq!(doc["error"]["data"]["error"]["code"], "overloaded", "{doc}");
        assert_eq!(hold.count(), 1, "nothing reached the handler");

        hold.release.notify_one();
        let done = running.await.unwrap();
        assert_ne!(answer(&done.body, 2)["result"]["isError"], true);
        let kept = used();
        assert!(
            kept > 0 && kept < 64 * 1024,
            "the finished history only: {kept}"
        );

        let mut h1 = HEADERS.to_vec();
        h1.push(("mcp-session-id", &first));
        let again = send(gw, "DELETE", "/mcp", &h1, b"").await;
        assert!(again.status.is_success(), "{:?}", again.status);
        assert_eq!(used(), 0, "ending the session gives the bytes back");
    });
}

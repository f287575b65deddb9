//! The official Rust MCP SDK's client (`rmcp`, unmodified) against
//! `/mcp`: list and call a tool in both eras it speaks — the `initialize`
//! handshake (negotiating 2025-11-25) and `server/discover` (2026-07-28).
//!
//! rmcp's hyper-based HTTP client connects over a Unix socket; a small
//! bridge here copies each connection to the gateway's TCP listener, so
//! every byte on the wire is rmcp's.

mod common;

use std::path::PathBuf;

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{json, Value};
use tokio::net::{TcpStream, UnixListener};

use agent_gw::catalog::Entry;
use common::{echo_gateway, lab_config};

/// Accepts on a fresh Unix socket and splices each connection to `to`.
fn bridge(to: std::net::SocketAddr) -> (PathBuf, tokio::task::JoinHandle<()>) {
    let path = std::env::temp_dir().join(format!(
        "gw-rmcp-{}-{}.sock",
        std::process::id(),
        rand_suffix()
    ));
    let listener = UnixListener::bind(&path).unwrap();
    let h = tokio::spawn(async move {
        loop {
            let Ok((mut unix, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if let Ok(mut tcp) = TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut unix, &mut tcp).await;
                }
            });
        }
    });
    (path, h)
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64)
}

fn mapping(name: &str, capability: &str) -> Entry {
    Entry {
        protocol: uci_schema::Protocol::Mcp,
        name: name.into(),
        title: Some("Echo".into()),
        description: Some("Echoes its arguments.".into()),
        capability: capability.into(),
        version: 1,
        input_schema: Some(r#"{"type":"object","properties":{"msg":{"type":"string"}}}"#.into()),
        mapped: true,
    }
}

async fn list_and_call(sock: &str, mode: ClientLifecycleMode, expect: ProtocolVersion) {
    let transport = StreamableHttpClientTransport::from_unix_socket(sock, "http://localhost/mcp");
    let client = ().serve_with_lifecycle(transport, mode).await.expect("connect");
    let info = client.peer_info().expect("server info");
    assert_eq!(info.protocol_version, expect);
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    assert_eq!(names, ["echo"]);
    assert_eq!(tools[0].title.as_deref(), Some("Echo"));
    let args = json!({"msg": "from rmcp"});
    let Value::Object(args) = args else {
        unreachable!()
    };
    let r = client
        .call_tool(CallToolRequestParams::new("echo").with_arguments(args))
        .await
        .expect("tools/call");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let sc = r.structured_content.expect("structured content");
    assert_eq!(sc["echo"]["payload"], json!({"msg": "from rmcp"}), "{sc}");
    let unknown = client
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .expect("unknown tool is a result");
    assert_eq!(unknown.is_error, Some(true));
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "current_thread")]
async fn rmcp_lists_and_calls_in_both_eras() {
    tokio::task::LocalSet::new()
        .run_until(async {
            let mut cfg = lab_config();
            cfg.protocol_tenant = "lab".into();
            cfg.mappings = vec![mapping("echo", "demo.echo")];
            let (backend, gw, _state) = echo_gateway(cfg).await;
            let (sock, bridge) = bridge(gw);
            let sock_s = sock.to_str().unwrap().to_string();
            list_and_call(
                &sock_s,
                ClientLifecycleMode::Initialize,
                ProtocolVersion::V_2025_11_25,
            )
            .await;
            list_and_call(
                &sock_s,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
                ProtocolVersion::V_2026_07_28,
            )
            .await;
            assert_eq!(backend.count(), 2, "one handler call per era");
            bridge.abort();
            let _ = std::fs::remove_file(sock);
        })
        .await;
}

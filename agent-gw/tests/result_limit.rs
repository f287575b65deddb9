//! `gateway.max_result_bytes` through a real gateway on loopback: it is
//! what a running async task reserves from the buffer budget (so a lower
//! value admits more concurrent async tasks from one client address), and
//! it bounds the answer kept as a result (a larger one fails the task with
//! a typed error).

mod common;

use std::net::SocketAddr;

use common::*;

use agent_gw::config::GatewayConfig;

/// Most async calls one test makes against a held handler.
const MOST_CALLS: usize = 40;

/// Starts async calls to `demo.hold` (a handler that never answers) until
/// the gateway refuses one or `MOST_CALLS` were admitted; returns how many
/// were admitted and the refusal's error code.
async fn admit_until_refused(gw: SocketAddr) -> (usize, Option<String>) {
    for admitted in 0..MOST_CALLS {
        let r = invoke(gw, "demo.hold", &[("prefer", "respond-async")], "{}").await;
        if r.status != 202 {
            return (admitted, Some(r.error_code()));
        }
    }
    (MOST_CALLS, None)
}

async fn held_gateway(cfg: GatewayConfig) -> (SocketAddr, Backend) {
    let h = backend("h", Mode::Hold).await;
    let (gw, _state) = gateway_with(
        cfg,
        vec![route("r-hold", "demo.hold", &h.endpoint(), 1, false)],
    )
    .await;
    (gw, h)
}

#[test]
fn a_lower_max_result_bytes_admits_more_concurrent_async_tasks_from_one_source() {
    run(async {
        // Defaults: each running task reserves 1 MiB of the 4 MiB that one
        // address may hold (25% of 16 MiB), so only 3 run at once.
        let (gw, _h) = held_gateway(lab_config()).await;
        let (admitted, refusal) = admit_until_refused(gw).await;
        assert_eq!(admitted, 3, "with the default 1 MiB reserve");
        assert_eq!(refusal.as_deref(), Some("share_exceeded"));

        // 64 KiB per task: the same share holds far more of them.
        let (gw, _h) = held_gateway(GatewayConfig {
            max_result_bytes: 64 * 1024,
            ..lab_config()
        })
        .await;
        let (admitted, refusal) = admit_until_refused(gw).await;
        assert_eq!(
            (admitted, refusal),
            (MOST_CALLS, None),
            "a 64 KiB result reserve admits {MOST_CALLS} concurrent tasks"
        );
    });
}

#[test]
fn an_answer_larger_than_max_result_bytes_fails_the_task_typed() {
    run(async {
        let (_b, gw, _state) = echo_gateway(GatewayConfig {
            max_result_bytes: 2048,
            ..lab_config()
        })
        .await;
        // Under the limit: kept as the result.
        let small = invoke(gw, "demo.echo", &[("prefer", "respond-async")], "\"hi\"").await;
        let (id, token) = task_handle(&small);
        let doc = settle(gw, &id, &token, &[]).await;
        assert_eq!(doc["status"], "completed", "{doc}");
        assert_eq!(doc["result"]["echo"]["payload"], "hi");

        // The echo of a 4 KiB payload exceeds 2048 bytes.
        let big = format!("\"{}\"", "x".repeat(4096));
        let r = invoke(gw, "demo.echo", &[("prefer", "respond-async")], &big).await;
        let (id, token) = task_handle(&r);
        let doc = settle(gw, &id, &token, &[]).await;
        assert_eq!(doc["status"], "failed", "{doc}");
        assert_eq!(doc["error"]["code"], "upstream_error", "{doc}");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("max_result_bytes") && message.contains("2048"),
            "{message}"
        );
        assert!(doc.get("result").is_none(), "{doc}");
    });
}

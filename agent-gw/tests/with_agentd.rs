//! The gateway against a real agentd process (`target/debug/agentd`, built
//! by `make test` / `cargo build --workspace`): registration over IPC, the
//! FIB replica following agentd, invocation without IPC, and agentd dying
//! and coming back.
//!
//! Input: a UCI file shared by both daemons (auth 'none'), an echo handler.
//! Output: register/renew/unregister answers that the gateway's FIB
//! already reflects, invocations that keep working on the last FIB while
//! agentd is down, typed 503s for registrations meanwhile, and a resync
//! that hands the live routes back when agentd returns empty.

mod common;

use std::rc::Rc;

use agent_gw::config::GatewayConfig;
use agent_gw::core::Core;
use common::daemon::{wait_for, Daemon, TempDir};
use common::*;

fn registration(endpoint: &str, route_id: Option<&str>) -> String {
    let rid = route_id
        .map(|r| format!(r#","route_id":"{r}""#))
        .unwrap_or_default();
    format!(
        r#"{{"intent":"demo.echo","origin":"agent://lab/echo","endpoint":"{endpoint}","tenant":"lab","version":1,
        "region":"local","cost_microunits":0,"latency_ms":1,"trust":50,"load_permille":0,"hop_count":0,
        "lease_seconds":300,"public_ipv6":"auto"{rid}}}"#
    )
}

#[test]
fn registers_through_agentd_and_keeps_forwarding_while_agentd_is_down() {
    run(async {
        let dir = TempDir::new("e2e");
        let socket = dir.0.join("agentd.sock");
        let config = dir.0.join("agentd");
        std::fs::write(
            &config,
            format!(
                "config agentd 'main'\n\toption router_id 'router-t'\n\toption ipc_socket '{}'\n\
                 \toption state_dir '{}'\n\toption identity '{}/identity.key'\n\
                 \toption health_check 'off'\n\toption allow_loopback_endpoints '1'\n\
                 config gateway 'gateway'\n\toption sdk_listen '127.0.0.1:0'\n\toption auth 'none'\n",
                socket.display(),
                dir.0.display(),
                dir.0.display()
            ),
        )
        .unwrap();
        let uci = uci_schema::Config::load(&config).unwrap();
        let cfg = GatewayConfig::from_uci(&uci).unwrap();
        assert_eq!(cfg.ipc_socket, socket);

        let mut agentd = Daemon::start(&config, &socket);
        wait_for("agentd socket", 10, || socket.exists()).await;

        let state: Rc<Core> = Core::new(cfg);
        let listener = agent_gw::serve::http::bind(state.cfg.sdk_listen)
            .await
            .unwrap();
        let gw = listener.local_addr().unwrap();
        tokio::task::spawn_local(agent_gw::serve::serve_lan(
            listener,
            agent_gw::serve::Gateway::new(state.clone()),
        ));
        tokio::task::spawn_local(agent_gw::core::fib_follow::run(state.clone()));
        wait_for("FIB snapshot", 10, || {
            state.fib.borrow().generation().is_some()
        })
        .await;
        assert!(state.control.is_up());

        let b = backend("echo", Mode::Echo).await;
        let r = post(
            gw,
            "/agent/v1/register",
            &[],
            &registration(&b.endpoint(), None),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let lease = r.json();
        let route_id = lease["route_id"].as_str().unwrap().to_string();
        assert!(lease["generation"].as_u64().is_some());
        assert_eq!(lease["lease_seconds"], 300);
        // nexilume asks for an address by default; with ipv6.mode off the
        // registration stands and the reply says why none was bound,
        // offering no endpoint the SDK would read.
        assert!(lease.get("ignored").is_none(), "{lease}");
        let v6 = &lease["public_ipv6_status"];
        assert!(v6["address"].is_null() && v6["served"] == false, "{lease}");
        assert!(
            v6["reason"].as_str().unwrap().contains("ipv6.mode 'off'"),
            "{lease}"
        );
        assert!(lease.get("public_ipv6").is_none() && lease.get("public_endpoint").is_none());
        // Read-your-writes: the answer comes once the gateway can route.
        assert_eq!(state.fib.borrow().routes(), 1);

        let r = invoke(gw, "demo.echo", &[], r#"{"n":1}"#).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.headers["x-agentd-route-id"], route_id.as_str());

        // Renew: known → new lease; unknown → 404 so SDKs re-register.
        let r = post(
            gw,
            "/agent/v1/renew",
            &[],
            &format!(r#"{{"route_id":"{route_id}","lease_seconds":120}}"#),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.json()["lease_seconds"], 120);
        let r = post(gw, "/agent/v1/renew", &[], r#"{"route_id":"r-unknown"}"#).await;
        assert_eq!(
            (r.status.as_u16(), r.error_code().as_str()),
            (404, "not_found")
        );
        // Register with the same route_id is an upsert, not a second route.
        let r = post(
            gw,
            "/agent/v1/register",
            &[],
            &registration(&b.endpoint(), Some(&route_id)),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.json()["route_id"], route_id.as_str());

        // agentd dies: invocations go on from the last FIB, registrations
        // get a typed 503.
        agentd.kill();
        wait_for("control plane down", 10, || !state.control.is_up()).await;
        for i in 0..5 {
            let r = invoke(gw, "demo.echo", &[], &i.to_string()).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
        }
        let r = post(
            gw,
            "/agent/v1/register",
            &[],
            &registration(&b.endpoint(), None),
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.error_code().as_str()),
            (503, "control_plane_unavailable")
        );
        let health = send(gw, "GET", "/healthz", &[], b"").await.json();
        assert_eq!(health["control_plane"], "down");

        // agentd returns as a new process with an empty table: the gateway
        // hands it the live routes of its last FIB (same route ids), so
        // calls keep working and the agent's renewals still find its route.
        // agentd keeps a lease file, written about once a second; drop it
        // to stand for a crash that lost the latest registrations.
        let _ = std::fs::remove_file(dir.0.join("leases"));
        let _agentd2 = Daemon::start(&config, &socket);
        wait_for("resync with the new agentd", 15, || {
            state.control.is_up() && state.fib.borrow().replica().in_sync()
        })
        .await;
        assert_eq!(state.fib.borrow().routes(), 1);
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let r = post(
            gw,
            "/agent/v1/renew",
            &[],
            &format!(r#"{{"route_id":"{route_id}"}}"#),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);

        // Withdrawal removes eligibility.
        let r = post(
            gw,
            "/agent/v1/unregister",
            &[],
            &format!(r#"{{"route_id":"{route_id}"}}"#),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.json()["removed"], true);
        // Acknowledged withdrawal: gone from the gateway's FIB already,
        // and the reply names the generation that removed it.
        assert_eq!(state.fib.borrow().routes(), 0);
        let fib_generation = state.fib.borrow().generation();
        assert!(fib_generation.is_some_and(|g| g > 0));
        assert_eq!(r.json()["generation"].as_u64(), fib_generation);
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.error_code(), "no_route");
        assert_eq!(b.count(), 7);
    });
}

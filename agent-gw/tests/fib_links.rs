//! The peer links the gateway learns from a real agentd (`target/debug/
//! agentd`, built by `cargo build --workspace`): router A's agentd holds
//! an ARPX session with router B's; the gateway following A's FIB sees
//! B's link with the key B's handshake proved and B's `address:data_port`,
//! `links_changed` holds a permit exactly when the link set changed, and
//! the link goes when B does.

mod common;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use agent_gw::config::GatewayConfig;
use agent_gw::core::Core;
use common::daemon::{wait_for, Daemon, TempDir};
use common::*;
use edkey::SigningKey;
use router_pki::Fingerprint;

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One router: its key file, ARPX port, socket and config path.
struct Router {
    id: &'static str,
    key: SigningKey,
    dir: PathBuf,
    port: u16,
}

impl Router {
    fn new(root: &Path, id: &'static str, seed: u8) -> Router {
        let dir = root.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let key = SigningKey::from_bytes(&[seed; 32]);
        router_pki::identity::create_key_file(&dir.join("identity.key"), &key).unwrap();
        Router {
            id,
            key,
            dir,
            port: free_port(),
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("agentd.sock")
    }

    /// Writes the config with `peer` pinned, its data plane at `data_port`.
    fn write_config(&self, peer: &Router, data_port: u16) -> PathBuf {
        let path = self.dir.join("agentd");
        let fp = Fingerprint::of(&peer.key.verifying_key()).to_string();
        std::fs::write(
            &path,
            format!(
                "config agentd 'main'\n\toption router_id '{id}'\n\toption ipc_socket '{sock}'\n\
                 \toption state_dir '{dir}/state'\n\toption identity '{dir}/identity.key'\n\
                 \toption health_check 'off'\n\toption allow_loopback_endpoints '1'\n\
                 config arpx 'arpx'\n\toption listen '127.0.0.1:{port}'\n\
                 \toption heartbeat_ms '200'\n\toption graceful_s '1'\n\
                 config peer 'p'\n\toption router_id '{pid}'\n\toption address '127.0.0.1'\n\
                 \toption port '{pport}'\n\toption data_port '{data_port}'\n\
                 \toption key_fingerprint '{fp}'\n\
                 config gateway 'gateway'\n\toption sdk_listen '127.0.0.1:0'\n\toption auth 'none'\n",
                id = self.id,
                sock = self.socket().display(),
                dir = self.dir.display(),
                port = self.port,
                pid = peer.id,
                pport = peer.port,
            ),
        )
        .unwrap();
        path
    }
}

/// Whether `links_changed` holds a permit now (polled once, no waiting).
async fn permit(state: &Core) -> bool {
    tokio::time::timeout(Duration::ZERO, state.links_changed.notified())
        .await
        .is_ok()
}

#[test]
fn the_gateway_learns_the_peer_link_and_is_notified_when_it_changes() {
    run(async {
        let root = TempDir::new("links");
        let a = Router::new(&root.0, "router-a", 41);
        let b = Router::new(&root.0, "router-b", 42);
        let config_a = a.write_config(&b, 9447);
        let config_b = b.write_config(&a, 7447);
        let _da = Daemon::start(&config_a, &a.socket());
        wait_for("agentd A's socket", 10, || a.socket().exists()).await;

        let uci = uci_schema::Config::load(&config_a).unwrap();
        let state: Rc<Core> = Core::new(GatewayConfig::from_uci(&uci).unwrap());
        tokio::task::spawn_local(agent_gw::core::fib_follow::run(state.clone()));
        wait_for("A's FIB snapshot", 10, || {
            state.fib.borrow().generation().is_some()
        })
        .await;
        assert_eq!(state.fib.borrow().links().count(), 0);
        assert!(!permit(&state).await, "no link yet, nothing changed");

        let db = Daemon::start(&config_b, &b.socket());
        wait_for("B's link at the gateway", 30, || {
            state.fib.borrow().link("router-b").is_some()
        })
        .await;
        {
            let fib = state.fib.borrow();
            let l = fib.link("router-b").unwrap();
            assert_eq!(l.key, b.key.verifying_key().to_bytes(), "the key B proved");
            assert_eq!(&*l.data, "127.0.0.1:9447", "A's peer section for B");
            let all: Vec<_> = fib.links().map(|l| l.router_id.to_string()).collect();
            assert_eq!(all, ["router-b"]);
        }
        assert!(permit(&state).await, "the new link was notified");
        assert!(!permit(&state).await, "one permit, taken");

        // A FIB change that is no link change: no permit.
        let client = agentd::ipc::client::Client::connect(&a.socket(), "links-test")
            .await
            .unwrap();
        client
            .register(agentd::ipc::message::Registration {
                route_id: None,
                capability: "demo.echo".into(),
                version: 1,
                origin: "agent://lab/echo".into(),
                endpoint: "http://192.0.2.20:9/invoke".into(),
                tenant: "lab".into(),
                region: "local".into(),
                attrs: Default::default(),
                access: Default::default(),
                contract: None,
                lease_seconds: Some(300),
                caller: None,
                owner: None,
                public_ipv6: false,
            })
            .await
            .unwrap();
        wait_for("the route at the gateway", 10, || {
            state.fib.borrow().routes() == 1
        })
        .await;
        assert!(!permit(&state).await, "a route change is no link change");

        // B goes away: its session ends and so does its link.
        drop(db);
        wait_for("B's link gone", 30, || {
            state.fib.borrow().link("router-b").is_none()
        })
        .await;
        assert!(permit(&state).await, "the unlink was notified");
        assert_eq!(state.fib.borrow().links().count(), 0);
    });
}

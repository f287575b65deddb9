//! FIB links from real ARPX sessions: two agentd processes on loopback,
//! and a FIB subscriber on one of them that follows the stream the way
//! agent-gw does (IPC socket, `FibReplica`). The link must carry the key
//! the peer's TLS handshake proved and the peer section's
//! `address:data_port`, and go away when the session does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use agentd::fib::replica::FibReplica;
use agentd::fib::{FibChange, FibEvent, PeerLink};
use agentd::time::Millis;

use super::harness::{Daemon, TempDir};
use super::sessions::{config_with, established, Router, Trust};

/// What the subscriber has seen so far.
#[derive(Default)]
struct Seen {
    replica: Option<FibReplica>,
    /// Every link change, snapshot or delta, in stream order.
    changes: Vec<FibChange>,
    error: Option<String>,
}

/// A FIB subscriber on its own thread; stops (bounded) on drop.
struct Follower {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Follower {
    fn start(d: &Daemon) -> Follower {
        let seen = Arc::new(Mutex::new(Seen {
            replica: Some(FibReplica::new(1000)),
            ..Seen::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let socket = d.socket.clone();
        let (s, st) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = agentd::ipc::client::Client::connect(&socket, "links-test")
                    .await
                    .unwrap();
                let mut stream = client.subscribe_fib().await.unwrap();
                while !st.load(Ordering::Relaxed) {
                    let next = tokio::time::timeout(Duration::from_millis(50), stream.next()).await;
                    let ev = match next {
                        Err(_) => continue,
                        Ok(Some(Ok(ev))) => ev,
                        Ok(Some(Err(e))) => {
                            s.lock().unwrap().error = Some(e.to_string());
                            return;
                        }
                        Ok(None) => return,
                    };
                    let mut seen = s.lock().unwrap();
                    match &ev {
                        FibEvent::SnapshotEnd { links, .. } => seen
                            .changes
                            .extend(links.iter().cloned().map(FibChange::Link)),
                        FibEvent::Delta { changes, .. } => {
                            seen.changes.extend(changes.iter().cloned())
                        }
                        _ => {}
                    }
                    let applied = seen.replica.as_mut().unwrap().apply(ev, Millis::now());
                    if let Err(e) = applied {
                        seen.error = Some(e.to_string());
                        return;
                    }
                }
            });
        });
        Follower {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn link(&self, id: &str) -> Option<PeerLink> {
        let seen = self.seen.lock().unwrap();
        assert_eq!(seen.error, None, "the FIB stream broke");
        seen.replica.as_ref().unwrap().link(id).cloned()
    }

    fn links(&self) -> usize {
        self.seen
            .lock()
            .unwrap()
            .replica
            .as_ref()
            .unwrap()
            .links()
            .count()
    }

    /// The link and peer changes of `id` seen so far (`PeerUp` as
    /// `Peer(up)`), in order.
    fn history(&self, id: &str) -> Vec<Ev> {
        let seen = self.seen.lock().unwrap();
        seen.changes
            .iter()
            .filter_map(|c| match c {
                FibChange::Link(l) if &*l.router_id == id => Some(Ev::Link(l.data.to_string())),
                FibChange::Unlink(r) if &**r == id => Some(Ev::Unlink),
                FibChange::PeerUp { router_id, up } if &**router_id == id => Some(Ev::Peer(*up)),
                _ => None,
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Link(String),
    Unlink,
    Peer(bool),
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `me`'s config with the one peer `peer` at data port `data_port`.
fn conf(me: &Router, peer: &Router, data_port: u16) -> String {
    config_with(
        me,
        vec![(peer, Trust::Pin(peer.fingerprint()), peer.port)],
        false,
    )
    .replace(
        "\toption data_port '7447'\n",
        &format!("\toption data_port '{data_port}'\n"),
    )
}

/// Whether `ev` has an `Unlink` after the last `Link`, and no
/// `PeerUp{up: false}` between that link and the unlink.
fn unlinked_in_order(ev: &[Ev]) -> bool {
    let Some(last_link) = ev.iter().rposition(|e| matches!(e, Ev::Link(_))) else {
        return false;
    };
    let after = &ev[last_link + 1..];
    match after.iter().position(|e| *e == Ev::Unlink) {
        Some(u) => !after[..u].contains(&Ev::Peer(false)),
        None => false,
    }
}

#[test]
fn an_established_session_publishes_its_verified_key_and_data_address_until_it_closes() {
    let keys = TempDir::new("links-up");
    let a = Router::new(keys.path(), "router-a", 31);
    let b = Router::new(keys.path(), "router-b", 32);
    let mut da = Daemon::start("links-a", &conf(&a, &b, 9447));
    let f = Follower::start(&da);
    let db = Daemon::start("links-b", &conf(&b, &a, 7447));
    da.wait_until("A's session with B is up", |d| established(d, "router-b"));
    da.wait_until("A publishes B's link", |_| f.link("router-b").is_some());
    let l = f.link("router-b").unwrap();
    assert_eq!(l.key, b.key.verifying_key().to_bytes(), "the key B proved");
    assert_eq!(&*l.data, "127.0.0.1:9447", "B's address and data_port");
    assert_eq!(f.links(), 1);
    let counters = da.ctl_json(&["stats"])["counters"].clone();
    assert_eq!(counters["arpx.links"], 1, "{counters}");

    // A reload moves B's data port: the session reconnects and the link
    // ends up with the new address.
    da.write_config(&conf(&a, &b, 9448));
    da.signal(libc::SIGHUP);
    da.wait_until("A publishes B's new data address", |_| {
        f.link("router-b")
            .is_some_and(|l| &*l.data == "127.0.0.1:9448")
    });
    let h = f.history("router-b");
    let first = h
        .iter()
        .position(|e| *e == Ev::Link("127.0.0.1:9447".into()));
    let moved = h
        .iter()
        .position(|e| *e == Ev::Link("127.0.0.1:9448".into()));
    assert!(first < moved, "{h:?}");

    // B stops: its session closes and its link goes, no later than its
    // paths become ineligible.
    assert!(db.stop().success());
    da.wait_until("A unlinks B", |_| f.link("router-b").is_none());
    let h = f.history("router-b");
    assert!(unlinked_in_order(&h), "{h:?}");
    assert_eq!(f.links(), 0);
    drop(f);
    drop(da);
}

#[test]
fn a_new_subscriber_gets_the_links_in_its_snapshot_and_a_removed_peer_is_unlinked() {
    let keys = TempDir::new("links-snap");
    let a = Router::new(keys.path(), "router-a", 33);
    let b = Router::new(keys.path(), "router-b", 34);
    let mut da = Daemon::start("links-snap-a", &conf(&a, &b, 7447));
    let _db = Daemon::start("links-snap-b", &conf(&b, &a, 7447));
    da.wait_until("A's session with B is up", |d| established(d, "router-b"));
    // Subscribing after the fact: the snapshot carries the link.
    let f = Follower::start(&da);
    da.wait_until("the snapshot carries B's link", |_| {
        f.link("router-b").is_some()
    });
    assert_eq!(
        f.link("router-b").unwrap().key,
        b.key.verifying_key().to_bytes()
    );
    assert_eq!(f.history("router-b"), [Ev::Link("127.0.0.1:7447".into())]);

    // A reload without B's peer section: B is unlinked.
    da.write_config(&config_with(&a, vec![], false));
    da.signal(libc::SIGHUP);
    da.wait_until("A unlinks the removed peer", |_| {
        f.link("router-b").is_none()
    });
    let h = f.history("router-b");
    assert!(unlinked_in_order(&h), "{h:?}");
}

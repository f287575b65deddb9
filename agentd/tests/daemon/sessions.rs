//! ARPX sessions between two real agentd processes on loopback: TLS 1.3
//! with keys and certificates generated here (pinned keys, and a domain
//! CA), real UCI files, observed through `agentctl peers` and `agentctl
//! routes` only. Every wait polls a condition under the harness deadline.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use edkey::SigningKey;
use router_pki::cert::{self, Validity};
use router_pki::Fingerprint;
use serde_json::Value;

use super::harness::{Daemon, TempDir};

/// One router of a test mesh: its key (written before the daemon starts,
/// so the other side can pin it) and its listener port.
pub(super) struct Router {
    pub(super) id: &'static str,
    pub(super) key: SigningKey,
    key_path: PathBuf,
    cert_path: Option<PathBuf>,
    pub(super) port: u16,
}

impl Router {
    pub(super) fn new(dir: &Path, id: &'static str, seed: u8) -> Router {
        let key = SigningKey::from_bytes(&[seed; 32]);
        let key_path = dir.join(format!("{id}.key"));
        router_pki::identity::create_key_file(&key_path, &key).expect("write identity key");
        Router {
            id,
            key,
            key_path,
            cert_path: None,
            port: free_port(),
        }
    }

    pub(super) fn fingerprint(&self) -> String {
        Fingerprint::of(&self.key.verifying_key()).to_string()
    }
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// How `me` is configured to see `peer`.
pub(super) enum Trust<'a> {
    Pin(String),
    Ca(&'a Path),
}

pub(super) fn config(me: &Router, peer: Option<(&Router, Trust<'_>)>, route: bool) -> String {
    let peers: Vec<(&Router, Trust<'_>, u16)> =
        peer.into_iter().map(|(p, t)| (p, t, p.port)).collect();
    config_with(me, peers, route)
}

/// `me` with any number of peers, each at the given port.
pub(super) fn config_with(
    me: &Router,
    peers: Vec<(&Router, Trust<'_>, u16)>,
    route: bool,
) -> String {
    let mut c = format!(
        "config agentd 'main'\n\toption router_id '{}'\n\toption identity '{}'\n\
         \toption health_check 'off'\n\toption allow_loopback_endpoints '1'\n",
        me.id,
        me.key_path.display()
    );
    if let Some(path) = &me.cert_path {
        c.push_str(&format!(
            "\toption domain 'lab.example'\n\toption router_cert '{}'\n",
            path.display()
        ));
    }
    if let Some((_, Trust::Ca(ca), _)) = peers.first() {
        c.push_str(&format!("\toption domain_ca '{}'\n", ca.display()));
    }
    c.push_str(&format!(
        "\nconfig arpx 'arpx'\n\toption listen '127.0.0.1:{}'\n\toption heartbeat_ms '200'\n\
         \toption graceful_s '1'\n",
        me.port
    ));
    for (p, trust, port) in peers {
        c.push_str(&format!(
            "\nconfig peer '{}'\n\toption router_id '{}'\n\toption address '127.0.0.1'\n\
             \toption port '{port}'\n\toption data_port '7447'\n",
            p.id.replace('-', "_"),
            p.id
        ));
        if let Trust::Pin(fp) = trust {
            c.push_str(&format!("\toption key_fingerprint '{fp}'\n"));
        }
    }
    c.push_str(
        "\nconfig rule 'allow_lab'\n\toption id '20-allow-lab'\n\toption priority '50'\n\
         \toption tenant 'lab'\n\toption capability '*'\n",
    );
    if route {
        c.push_str(
            "\nconfig route 'printer'\n\toption capability 'office.print'\n\toption version '1'\n\
             \toption origin 'agent://lab/printer'\n\toption tenant 'lab'\n\
             \toption endpoint 'http://192.0.2.10:8080/invoke'\n\toption latency_ms '5'\n",
        );
    }
    c
}

fn peer<'a>(view: &'a Value, id: &str) -> Option<&'a Value> {
    view["peers"]
        .as_array()?
        .iter()
        .find(|p| p["router_id"] == id)
}

pub(super) fn established(d: &Daemon, id: &str) -> bool {
    peer(&d.ctl_json(&["peers"]), id).is_some_and(|p| p["established"] == true)
}

/// Peer paths (`source` peer) as (path id `<route_id>@<next_hop>`,
/// path, next_hop).
fn peer_routes(d: &Daemon) -> Vec<(String, Vec<String>, String)> {
    d.ctl_json(&["routes"])["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["source"] == "peer")
        .map(|r| {
            (
                r["path_id"].as_str().unwrap().to_string(),
                r["path"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h.as_str().unwrap().to_string())
                    .collect(),
                r["next_hop"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn register(d: &Daemon, port: u16) -> String {
    register_for(d, port, 600)
}

fn register_for(d: &Daemon, port: u16, lease_seconds: u32) -> String {
    super::harness::register_ipc(d, "agent://lab/echo", port, lease_seconds, None)
}

#[test]
fn pinned_routers_exchange_routes_and_a_removed_peer_takes_its_routes_along() {
    let keys = TempDir::new("mesh-pin");
    let a = Router::new(keys.path(), "router-a", 1);
    let b = Router::new(keys.path(), "router-b", 2);
    let mut da = Daemon::start(
        "pin-a",
        &config(&a, Some((&b, Trust::Pin(b.fingerprint()))), true),
    );
    let mut db = Daemon::start(
        "pin-b",
        &config(&b, Some((&a, Trust::Pin(a.fingerprint()))), false),
    );
    da.wait_until("A's session with B is up", |d| established(d, "router-b"));
    db.wait_until("B's session with A is up", |d| established(d, "router-a"));

    let view = da.ctl_json(&["peers"]);
    assert_eq!(view["router_id"], "router-a");
    assert_eq!(view["sessions"], "on");
    assert_eq!(view["fingerprint"], a.fingerprint().as_str());
    assert_eq!(view["listen"], format!("127.0.0.1:{}", a.port).as_str());

    // A's static route is at B, as a path via A.
    db.wait_until("A's static route reaches B", |d| {
        peer_routes(d).iter().any(|(id, path, hop)| {
            id == "static:printer@router-a" && path == &["router-a"] && hop == "router-a"
        })
    });
    // A local registration at A appears at B with path [A].
    let id = register(&da, 9001);
    let via = format!("{id}@router-a");
    db.wait_until("the registration reaches B", |d| {
        peer_routes(d)
            .iter()
            .any(|(rid, path, _)| *rid == via && path == &["router-a"])
    });
    let lookup = db.ctl_json(&["lookup", "demo.echo", "--tenant", "lab"]);
    assert_eq!(lookup["winner"], via.as_str(), "{lookup}");
    let pb = peer(&db.ctl_json(&["peers"]), "router-a").cloned().unwrap();
    assert_eq!(pb["routes_in"], 2, "{pb}");
    let stats = db.ctl_json(&["stats"]);
    assert!(
        stats["counters"]["arpx.routes_in"].as_u64().unwrap() >= 2,
        "{stats}"
    );
    assert!(
        stats["counters"]["arpx.sessions_established"]
            .as_u64()
            .unwrap()
            >= 1,
        "{stats}"
    );

    // Unregister at A: gone at B.
    let out = da.ctl(&["unregister", &id]);
    assert!(out.status.success());
    db.wait_until("the withdraw reaches B", |d| {
        !peer_routes(d).iter().any(|(rid, ..)| *rid == via)
    });
    assert!(
        peer_routes(&db)
            .iter()
            .any(|(rid, ..)| rid == "static:printer@router-a"),
        "the other route stays"
    );

    // A drops B from its configuration: the session closes with
    // peer_removed and B loses A's routes.
    da.write_config(&config(&a, None, true));
    da.signal(libc::SIGHUP);
    db.wait_until("B hears peer_removed", |d| {
        peer(&d.ctl_json(&["peers"]), "router-a").is_some_and(|p| {
            p["last_close"]["code"] == "peer_removed" && p["last_close"]["by_us"] == false
        })
    });
    db.wait_until("A's routes are gone at B", |d| peer_routes(d).is_empty());
    da.wait_until("A lists no peer", |d| {
        d.ctl_json(&["peers"])["peers"] == serde_json::json!([])
    });
    let stats = da.ctl_json(&["stats"]);
    assert!(
        stats["counters"]["arpx.closes_sent.peer_removed"].as_u64() >= Some(1),
        "{stats}"
    );
}

#[test]
fn routers_of_one_domain_ca_peer_without_pins() {
    let keys = TempDir::new("mesh-ca");
    let ca_key = SigningKey::from_bytes(&[9; 32]);
    let validity = Validity::days_from(SystemTime::now() - Duration::from_secs(3600), 30);
    let ca = cert::init_domain("lab.example", &ca_key, validity).unwrap();
    let ca_path = keys.path().join("domain-ca.pem");
    std::fs::write(&ca_path, cert::cert_pem(&ca)).unwrap();
    let mut routers = [
        Router::new(keys.path(), "router-a", 3),
        Router::new(keys.path(), "router-b", 4),
    ];
    for r in &mut routers {
        let der = cert::issue_router(
            &ca_key,
            &ca,
            r.id,
            Some("lab.example"),
            &r.key.verifying_key(),
            validity,
        )
        .unwrap();
        let path = keys.path().join(format!("{}.pem", r.id));
        std::fs::write(&path, cert::cert_pem(&der)).unwrap();
        r.cert_path = Some(path);
    }
    let [a, b] = &routers;
    let da = Daemon::start("ca-a", &config(a, Some((b, Trust::Ca(&ca_path))), true));
    let mut db = Daemon::start("ca-b", &config(b, Some((a, Trust::Ca(&ca_path))), false));
    db.wait_until(
        "A's static route reaches B over a CA-verified session",
        |d| {
            peer_routes(d)
                .iter()
                .any(|(id, ..)| id == "static:printer@router-a")
        },
    );
    assert!(established(&da, "router-b"));
}

#[test]
fn an_unpinned_key_gets_no_session_and_a_clear_last_error() {
    let keys = TempDir::new("mesh-unpinned");
    let a = Router::new(keys.path(), "router-a", 5);
    let b = Router::new(keys.path(), "router-b", 6);
    let stranger = SigningKey::from_bytes(&[7; 32]);
    let wrong = Fingerprint::of(&stranger.verifying_key()).to_string();
    // B pins A correctly; A pins someone else's key for B.
    let mut da = Daemon::start("unpin-a", &config(&a, Some((&b, Trust::Pin(wrong))), false));
    let mut db = Daemon::start(
        "unpin-b",
        &config(&b, Some((&a, Trust::Pin(a.fingerprint()))), true),
    );
    let error = |d: &Daemon, id: &str| -> Option<String> {
        peer(&d.ctl_json(&["peers"]), id).and_then(|p| p["last_error"].as_str().map(str::to_string))
    };
    da.wait_until("A reports B's key as not pinned", |d| {
        error(d, "router-b")
            .is_some_and(|e| e.contains("handshake") && e.contains(&b.fingerprint()))
    });
    db.wait_until("B reports the refused handshake", |d| {
        error(d, "router-a").is_some_and(|e| e.contains("handshake"))
    });
    // Both dialers have tried and failed (and both listeners refused):
    // no session, nothing learned. The refusals ended in the handshake,
    // so no session ever started.
    for d in [&mut da, &mut db] {
        d.wait_until("its dial failed", |d| counter(d, "arpx.dial_failures") >= 1);
    }
    assert!(!established(&da, "router-b"));
    assert!(!established(&db, "router-a"));
    for d in [&da, &db] {
        assert_eq!(counter(d, "arpx.sessions_established"), 0);
    }
    assert!(peer_routes(&da).is_empty(), "{:?}", peer_routes(&da));
    let text = super::harness::text(&da.ctl(&["peers"]));
    assert!(
        text.contains("router-b") && text.contains("handshake"),
        "{text}"
    );
}

#[test]
fn without_a_router_id_sessions_are_off_and_say_why() {
    let keys = TempDir::new("mesh-off");
    let a = Router::new(keys.path(), "router-a", 8);
    let b = Router::new(keys.path(), "router-b", 9);
    let text = config(&a, Some((&b, Trust::Pin(b.fingerprint()))), false)
        .replace("\toption router_id 'router-a'\n", "");
    let d = Daemon::start("mesh-off", &text);
    let v = d.ctl_json(&["peers"]);
    assert_eq!(v["sessions"], "off");
    assert!(
        v["off_reason"].as_str().unwrap().contains("router_id"),
        "{v}"
    );
    assert_eq!(v["peers"][0]["router_id"], "router-b");
    assert_eq!(v["peers"][0]["established"], false);
    let t = super::harness::text(&d.ctl(&["peers"]));
    assert!(t.contains("OFF: agentd.router_id is not set"), "{t}");
}

fn counter(d: &Daemon, name: &str) -> u64 {
    d.ctl_json(&["stats"])["counters"][name]
        .as_u64()
        .unwrap_or(0)
}

fn state_ms(d: &Daemon, id: &str) -> u64 {
    peer(&d.ctl_json(&["peers"]), id).map_or(0, |p| p["state_ms"].as_u64().unwrap_or(0))
}

#[test]
fn a_lease_that_ends_at_the_origin_is_withdrawn_from_its_peer() {
    let keys = TempDir::new("mesh-lease");
    let a = Router::new(keys.path(), "router-a", 10);
    let b = Router::new(keys.path(), "router-b", 11);
    let short = |c: String| {
        c.replace(
            "\toption health_check 'off'\n",
            "\toption health_check 'off'\n\toption min_lease '1'\n",
        )
    };
    let mut da = Daemon::start(
        "lease-a",
        &short(config(&a, Some((&b, Trust::Pin(b.fingerprint()))), false)),
    );
    let mut db = Daemon::start(
        "lease-b",
        &config(&b, Some((&a, Trust::Pin(a.fingerprint()))), false),
    );
    db.wait_until("the session is up", |d| established(d, "router-a"));
    // Long enough to be seen at B on a loaded machine, short for the test.
    let id = register_for(&da, 9002, 3);
    let via = format!("{id}@router-a");
    db.wait_until("the route reaches B", |d| {
        peer_routes(d).iter().any(|(rid, ..)| *rid == via)
    });
    // Nobody renews or unregisters: the lease ends at A, and A's
    // withdraw takes the path away at B.
    db.wait_until("the path is gone at B", |d| {
        !peer_routes(d).iter().any(|(rid, ..)| *rid == via)
    });
    da.wait_until("A counts the expiry", |d| counter(d, "leases.expired") >= 1);
    assert!(counter(&da, "arpx.withdraws_out") >= 1);
    assert!(counter(&db, "arpx.withdrawn_in") >= 1);
    assert!(established(&db, "router-a"), "the session stays up");
}

#[test]
fn sighup_adds_and_reconnects_peers_and_leaves_the_others_alone() {
    let keys = TempDir::new("mesh-hup");
    let a = Router::new(keys.path(), "router-a", 12);
    let b = Router::new(keys.path(), "router-b", 13);
    let c = Router::new(keys.path(), "router-c", 14);
    let pin = |r: &Router| Trust::Pin(r.fingerprint());
    let mut da = Daemon::start("hup-a", &config(&a, Some((&b, pin(&b))), true));
    let mut db = Daemon::start("hup-b", &config(&b, Some((&a, pin(&a))), false));
    let mut dc = Daemon::start("hup-c", &config(&c, Some((&a, pin(&a))), false));
    db.wait_until("A-B is up for a second", |d| {
        established(d, "router-a") && state_ms(d, "router-a") >= 1000
    });
    // C knows A, but A does not know C yet: refused.
    dc.wait_until("C is refused by A", |d| {
        peer(&d.ctl_json(&["peers"]), "router-a").is_some_and(|p| {
            p["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("handshake"))
        })
    });
    assert!(!established(&dc, "router-a"));
    let b_sessions = counter(&db, "arpx.sessions_established");

    // Reload 1: A adds C. C comes up; B's session is untouched.
    da.write_config(&config_with(
        &a,
        vec![(&b, pin(&b), b.port), (&c, pin(&c), c.port)],
        true,
    ));
    da.signal(libc::SIGHUP);
    dc.wait_until("A-C is up", |d| established(d, "router-a"));
    dc.wait_until("A's route reaches C", |d| {
        peer_routes(d)
            .iter()
            .any(|(id, ..)| id == "static:printer@router-a")
    });
    assert!(established(&db, "router-a"));
    assert_eq!(
        counter(&db, "arpx.sessions_established"),
        b_sessions,
        "A-B never reopened"
    );
    assert!(state_ms(&db, "router-a") >= 1000, "the same A-B session");
    dc.wait_until("A-C is up for a second", |d| {
        state_ms(d, "router-a") >= 1000
    });
    let c_sessions = counter(&dc, "arpx.sessions_established");

    // Reload 2: B's port changes (to one nobody listens on): A closes B
    // with peer_removed and dials the new port in vain, but B still
    // knows A and dials it: the session is back, a new one. C's session
    // is untouched.
    let nowhere = free_port();
    da.write_config(&config_with(
        &a,
        vec![(&b, pin(&b), nowhere), (&c, pin(&c), c.port)],
        true,
    ));
    da.signal(libc::SIGHUP);
    db.wait_until("B hears peer_removed and reconnects", |d| {
        counter(d, "arpx.closes_received.peer_removed") >= 1
            && counter(d, "arpx.sessions_established") > b_sessions
            && established(d, "router-a")
    });
    db.wait_until("A's route is back at B", |d| {
        peer_routes(d)
            .iter()
            .any(|(id, ..)| id == "static:printer@router-a")
    });
    let pa = peer(&da.ctl_json(&["peers"]), "router-b").cloned().unwrap();
    assert_eq!(pa["port"], nowhere, "{pa}");
    assert!(established(&dc, "router-a"));
    assert_eq!(
        counter(&dc, "arpx.sessions_established"),
        c_sessions,
        "A-C never reopened"
    );
    assert!(state_ms(&dc, "router-a") >= 1000, "the same A-C session");

    // C stops: A hears admin_shutdown.
    assert!(dc.stop().success());
    da.wait_until("A hears C's admin_shutdown", |d| {
        peer(&d.ctl_json(&["peers"]), "router-c").is_some_and(|p| {
            p["last_close"]["code"] == "admin_shutdown" && p["last_close"]["by_us"] == false
        })
    });
}

/// A malformed pin is a typed value the schema refuses: the daemon
/// starts on the rest, that peer section is skipped (no session is
/// tried with a pin that can match nothing) and status says why.
#[test]
fn a_malformed_pin_skips_that_peer_and_status_names_it() {
    let keys = TempDir::new("mesh-badpin");
    let a = Router::new(keys.path(), "router-a", 15);
    let b = Router::new(keys.path(), "router-b", 16);
    let text = config(&a, Some((&b, Trust::Pin("sha256:0123".into()))), false);
    let d = Daemon::start("badpin", &text);
    let status = d.ctl_json(&["status"]);
    let problems = status["config"]["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p["option"] == "key_fingerprint"
            && p["section"] == "peer 'router_b'"
            && p["action"] == "section_skipped"),
        "{status}"
    );
    assert!(peer(&d.ctl_json(&["peers"]), "router-b").is_none());
    assert_eq!(counter(&d, "arpx.sessions_established"), 0);
}

#[test]
fn a_silent_peer_is_closed_at_its_hold_time_and_its_routes_go_after_the_grace() {
    let keys = TempDir::new("mesh-hold");
    let a = Router::new(keys.path(), "router-a", 17);
    let b = Router::new(keys.path(), "router-b", 18);
    let mut da = Daemon::start(
        "hold-a",
        &config(&a, Some((&b, Trust::Pin(b.fingerprint()))), false),
    );
    let db = Daemon::start(
        "hold-b",
        &config(&b, Some((&a, Trust::Pin(a.fingerprint()))), true),
    );
    da.wait_until("B's route reaches A", |d| {
        peer_routes(d)
            .iter()
            .any(|(id, ..)| id == "static:printer@router-b")
    });
    // B freezes: no heartbeats. A's hold timer (200 ms x 3) closes the
    // session; B's paths are retained ineligible for graceful_s (1 s),
    // then removed.
    db.signal(libc::SIGSTOP);
    da.wait_until("A closes the silent session", |d| {
        peer(&d.ctl_json(&["peers"]), "router-b").is_some_and(|p| {
            p["last_close"]["code"] == "hold_expired" && p["last_close"]["by_us"] == true
        })
    });
    da.wait_until("B's paths are gone after the grace", |d| {
        peer_routes(d).is_empty()
    });
    // B wakes up: the session comes back and so does the route.
    db.signal(libc::SIGCONT);
    da.wait_until("the session is back", |d| established(d, "router-b"));
    da.wait_until("B's route is back at A", |d| {
        peer_routes(d)
            .iter()
            .any(|(id, ..)| id == "static:printer@router-b")
    });
    assert!(counter(&da, "arpx.closes_sent.hold_expired") >= 1);
}

#[test]
fn an_unreadable_domain_ca_turns_sessions_off_until_a_reload_finds_it() {
    let keys = TempDir::new("mesh-noca");
    let a = Router::new(keys.path(), "router-a", 19);
    let b = Router::new(keys.path(), "router-b", 20);
    let ca_path = keys.path().join("domain-ca.pem");
    let text = config(&a, Some((&b, Trust::Ca(&ca_path))), false);
    let mut d = Daemon::start("noca", &text);
    let v = d.ctl_json(&["peers"]);
    assert_eq!(v["sessions"], "off", "{v}");
    let why = v["off_reason"].as_str().unwrap();
    assert!(why.contains("domain-ca.pem"), "{why}");

    let ca_key = SigningKey::from_bytes(&[21; 32]);
    let validity = Validity::days_from(SystemTime::now() - Duration::from_secs(3600), 30);
    let ca = cert::init_domain("lab.example", &ca_key, validity).unwrap();
    std::fs::write(&ca_path, cert::cert_pem(&ca)).unwrap();
    // The same configuration: the reload tries the files again.
    d.signal(libc::SIGHUP);
    d.wait_until("sessions are on", |d| {
        d.ctl_json(&["peers"])["sessions"] == "on"
    });
    assert_eq!(d.ctl_json(&["peers"])["off_reason"], Value::Null);
}

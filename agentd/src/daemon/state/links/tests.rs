//! The RIB's link set, sans-IO: links in, FIB changes out, and what a
//! subscriber's snapshot says.

use super::*;
use crate::config::load_str;
use crate::fib::export::{FibExporter, FibSink};
use crate::fib::replica::FibReplica;
use crate::fib::FibEvent;
use crate::time::Millis;

const NOW: Millis = Millis(1_000);

fn conf(peers: &[&str]) -> String {
    let mut c = String::from("config agentd 'main'\n\toption router_id 'router-a'\n");
    for p in peers {
        c.push_str(&format!(
            "\nconfig peer '{}'\n\toption router_id '{p}'\n\toption address '198.51.100.2'\n",
            p.replace('-', "_")
        ));
    }
    c
}

fn state(peers: &[&str]) -> State {
    let rt = load_str(&conf(peers), "test.conf");
    assert!(rt.is_ok(), "{:?}", rt.err());
    State::start(rt, "test.conf", "agentd test", NOW)
}

fn link(id: &str, key: u8) -> PeerLink {
    PeerLink {
        router_id: id.into(),
        key: [key; 32],
        data: "198.51.100.2:7447".into(),
        signed: true,
        relay: Default::default(),
    }
}

fn counter(s: &mut State, name: &str) -> u64 {
    s.stats_at(NOW).counters.get(name).copied().unwrap_or(0)
}

#[test]
fn links_of_configured_peers_are_kept_sorted_and_published_on_change_only() {
    let mut s = state(&["router-c", "router-b"]);
    assert_eq!(
        s.set_link(link("router-c", 3)),
        [FibChange::Link(link("router-c", 3))]
    );
    assert_eq!(
        s.set_link(link("router-b", 2)),
        [FibChange::Link(link("router-b", 2))]
    );
    let ids: Vec<&str> = s.links().iter().map(|l| &*l.router_id).collect();
    assert_eq!(ids, ["router-b", "router-c"]);
    // The same link again publishes nothing; a new key replaces it.
    assert!(s.set_link(link("router-b", 2)).is_empty());
    assert_eq!(
        s.set_link(link("router-b", 9)),
        [FibChange::Link(link("router-b", 9))]
    );
    assert_eq!(s.links().len(), 2);
    assert_eq!(s.links()[0], link("router-b", 9));
    assert_eq!(counter(&mut s, "links.up"), 3);
    // Unlink once.
    assert_eq!(s.unlink("router-c"), [FibChange::Unlink("router-c".into())]);
    assert!(s.unlink("router-c").is_empty());
    assert_eq!(s.links(), [link("router-b", 9)]);
    assert_eq!(counter(&mut s, "links.down"), 1);
}

#[test]
fn a_link_for_a_router_that_is_no_configured_peer_or_malformed_is_refused() {
    let mut s = state(&["router-b"]);
    assert!(s.set_link(link("router-x", 1)).is_empty());
    let mut bad = link("router-b", 1);
    bad.data = "".into();
    assert!(s.set_link(bad).is_empty());
    assert!(s.links().is_empty());
    assert_eq!(counter(&mut s, "links.refused"), 2);
}

#[test]
fn a_reload_that_removes_a_peer_drops_its_link_and_keeps_the_others() {
    let mut s = state(&["router-b", "router-c"]);
    s.set_link(link("router-b", 2));
    s.set_link(link("router-c", 3));
    let (_, changes) = s
        .reload(load_str(&conf(&["router-c"]), "test.conf"))
        .unwrap();
    assert_eq!(changes, [FibChange::Unlink("router-b".into())]);
    assert_eq!(s.links(), [link("router-c", 3)]);
    // A reload that keeps both peers keeps both links.
    let (_, changes) = s
        .reload(load_str(&conf(&["router-c"]), "test.conf"))
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(s.links().len(), 1);
}

/// Events an exporter queued.
#[derive(Debug, Default)]
struct Queue(Vec<FibEvent>);

impl FibSink for Queue {
    fn offer(&mut self, event: FibEvent) -> bool {
        self.0.push(event);
        true
    }
}

#[test]
fn a_subscriber_gets_the_current_links_in_its_snapshot_and_then_the_changes() {
    let mut s = state(&["router-b", "router-c"]);
    s.set_link(link("router-c", 3));
    s.set_link(link("router-b", 2));
    let mut ex: FibExporter<Queue> = FibExporter::new();
    let sub = ex
        .subscribe(Queue::default(), s.table(), s.policy(), s.links(), &[])
        .unwrap();
    // The session with B ends and comes back with another key.
    let mut changes = s.unlink("router-b");
    changes.extend(s.set_link(link("router-b", 7)));
    changes.extend(s.unlink("router-c"));
    ex.publish(s.generation(), changes);
    let events = ex.unsubscribe(sub).unwrap().0;
    let Some(FibEvent::SnapshotEnd { links, .. }) = events.get(1) else {
        panic!("{events:?}")
    };
    assert_eq!(links, &[link("router-b", 2), link("router-c", 3)]);
    let mut r = FibReplica::new(10);
    for ev in events {
        r.apply(ev, NOW).unwrap();
    }
    assert_eq!(r.links().cloned().collect::<Vec<_>>(), s.links());
    assert_eq!(r.link("router-b"), Some(&link("router-b", 7)));
}

#[test]
fn a_links_data_address_is_host_and_port_with_ipv6_in_brackets() {
    use crate::daemon::state::data_plane_authority;
    assert_eq!(
        data_plane_authority("2001:db8::2", 7447).unwrap(),
        "[2001:db8::2]:7447"
    );
    assert_eq!(
        data_plane_authority("198.51.100.2", 9447).unwrap(),
        "198.51.100.2:9447"
    );
    assert_eq!(
        data_plane_authority("gw-b.lab.example", 7447).unwrap(),
        "gw-b.lab.example:7447"
    );
    assert!(data_plane_authority("", 7447).is_err());
    assert!(data_plane_authority("198.51.100.2", 0).is_err());
    assert!(data_plane_authority("a b", 1).is_err());
}

#[test]
fn routers_admitted_by_discovery_may_have_links_while_admitted() {
    let mut s = state(&["router-b"]);
    assert!(s.set_link(link("router-d", 4)).is_empty(), "not a peer");
    assert_eq!(counter(&mut s, "links.refused"), 1);
    s.set_admitted(["router-d".into()]);
    assert_eq!(
        s.set_link(link("router-d", 4)),
        [FibChange::Link(link("router-d", 4))]
    );
    // A reload keeps the link while discovery still admits the router.
    let (_, changes) = s
        .reload(load_str(&conf(&["router-b"]), "test.conf"))
        .unwrap();
    assert!(
        !changes.contains(&FibChange::Unlink("router-d".into())),
        "{changes:?}"
    );
    s.set_admitted([]);
    let (_, changes) = s
        .reload(load_str(&conf(&["router-b"]), "test.conf"))
        .unwrap();
    assert!(
        changes.contains(&FibChange::Unlink("router-d".into())),
        "{changes:?}"
    );
}

use super::*;

fn fp(b: u8) -> Fingerprint {
    Fingerprint([b; 32])
}

fn policy(mode: Admission) -> Policy {
    Policy {
        mode,
        own_router_id: Some("router-a".into()),
        own_fingerprint: Some(fp(1)),
        domain: "lab.example".into(),
        domain_ca: false,
        allow: Vec::new(),
        lifetime_ms: 5000,
        approved: BTreeMap::new(),
        configured: BTreeSet::new(),
    }
}

fn seen(id: &str, key: u8, port: u16) -> Sighting {
    Sighting {
        record: Record::ours(id, "lab.example", fp(key), port, 7447),
        address: "192.0.2.2".parse().unwrap(),
        port,
    }
}

#[test]
fn a_candidate_lives_its_lifetime_after_its_announcement_ends() {
    let mut t = Table::new(policy(Admission::Manual));
    assert_eq!(
        t.announced(seen("router-b", 2, 7444), Millis(1000)),
        Seen::New
    );
    // While announced it never expires, and no timer is needed.
    assert_eq!(t.next_deadline(), None);
    assert!(t.expire(Millis(1_000_000)).is_empty());
    assert!(t.withdrawn("router-b", Millis(2000)));
    assert_eq!(t.next_deadline(), Some(Millis(7000)));
    let c = t.get("router-b").unwrap().clone();
    assert_eq!(t.expires_in_ms(&c, Millis(3000)), 4000);
    assert!(t.expire(Millis(6999)).is_empty());
    // Announced again in time: it lives on.
    assert_eq!(
        t.announced(seen("router-b", 2, 7444), Millis(6000)),
        Seen::Refreshed
    );
    assert_eq!(t.next_deadline(), None);
    assert!(t.withdrawn("router-b", Millis(8000)));
    assert_eq!(t.expire(Millis(13_000)), vec!["router-b".to_string()]);
    assert!(t.is_empty());
    assert_eq!(t.counters().expired, 1);
    assert!(!t.withdrawn("router-b", Millis(14_000)), "unknown now");
}

#[test]
fn our_own_announcements_are_ignored() {
    let mut t = Table::new(policy(Admission::Manual));
    assert_eq!(t.announced(seen("router-a", 9, 7444), Millis(0)), Seen::Own);
    // Another name, our key: still us (a renamed router's old record).
    assert_eq!(t.announced(seen("router-x", 1, 7444), Millis(0)), Seen::Own);
    assert!(t.is_empty());
    assert_eq!(t.counters().own_ignored, 2);
}

#[test]
fn manual_mode_approves_exactly_one_record_version() {
    let mut t = Table::new(policy(Admission::Manual));
    t.announced(seen("router-b", 2, 7444), Millis(0));
    let v = t.get("router-b").unwrap().seen.record.version;
    let state = |t: &Table| t.state(t.get("router-b").unwrap());
    assert_eq!(state(&t), State::Pending);
    assert!(t.admitted().is_empty(), "manual never admits by itself");
    assert_eq!(
        t.check_approve("router-b", v + 1).unwrap_err(),
        Refusal::VersionMismatch {
            router_id: "router-b".into(),
            asked: v + 1,
            current: v
        }
    );
    assert_eq!(
        t.check_approve("router-c", v).unwrap_err(),
        Refusal::NotFound {
            router_id: "router-c".into()
        }
    );
    assert!(t.check_approve("router-b", v).is_ok());
    // The approval (a discovered peer section) is in the file now.
    let mut p = policy(Admission::Manual);
    p.approved.insert("router-b".into(), v);
    t.set_policy(p);
    assert_eq!(state(&t), State::Approved);
    // A new key: a new version, and the approval no longer applies.
    let now = t.announced(seen("router-b", 3, 7444), Millis(10));
    assert_eq!(now, Seen::NewVersion { old: v });
    assert_eq!(state(&t), State::Pending);
    assert_eq!(t.counters().version_changes, 1);
}

#[test]
fn same_domain_admits_our_domain_only() {
    let mut t = Table::new(policy(Admission::SameDomain));
    t.announced(seen("router-b", 2, 7444), Millis(0));
    let mut foreign = seen("router-c", 3, 7444);
    foreign.record = Record::ours("router-c", "other.example", fp(3), 7444, 7447);
    t.announced(foreign, Millis(0));
    assert_eq!(t.state(t.get("router-b").unwrap()), State::Admitted);
    assert_eq!(t.state(t.get("router-c").unwrap()), State::Rejected);
    let admitted = t.admitted();
    assert_eq!(admitted.len(), 1);
    assert_eq!(admitted[0].router_id, "router-b");
    assert_eq!(admitted[0].pin, Some(fp(2)), "no CA: the key is pinned");
    // With a domain CA the handshake decides (no pin).
    let mut p = policy(Admission::SameDomain);
    p.domain_ca = true;
    t.set_policy(p);
    assert_eq!(t.admitted()[0].pin, None);
    // No domain of our own: nobody is "same".
    let mut p = policy(Admission::SameDomain);
    p.domain.clear();
    t.set_policy(p);
    assert!(t.admitted().is_empty());
}

#[test]
fn allowlist_admits_listed_fingerprints_only() {
    let mut p = policy(Admission::Allowlist);
    p.allow.push(fp(2));
    let mut t = Table::new(p);
    t.announced(seen("router-b", 2, 7444), Millis(0));
    t.announced(seen("router-c", 3, 7444), Millis(0));
    let ids: Vec<String> = t.admitted().into_iter().map(|a| a.router_id).collect();
    assert_eq!(ids, vec!["router-b".to_string()]);
    assert_eq!(t.state(t.get("router-c").unwrap()), State::Rejected);
    // An admitted candidate is a peer only while it lives.
    t.withdrawn("router-b", Millis(100));
    assert_eq!(t.admitted().len(), 1);
    t.expire(Millis(5100));
    assert!(t.admitted().is_empty());
}

#[test]
fn off_observes_and_refuses_approval() {
    let mut t = Table::new(policy(Admission::Off));
    t.announced(seen("router-b", 2, 7444), Millis(0));
    let v = t.get("router-b").unwrap().seen.record.version;
    assert_eq!(t.state(t.get("router-b").unwrap()), State::Rejected);
    assert_eq!(
        t.check_approve("router-b", v).unwrap_err(),
        Refusal::AdmissionOff
    );
    assert!(t.admitted().is_empty());
}

#[test]
fn a_static_peer_is_not_approved_again_nor_admitted() {
    let mut p = policy(Admission::SameDomain);
    p.configured.insert("router-b".into());
    let mut t = Table::new(p);
    t.announced(seen("router-b", 2, 7444), Millis(0));
    let v = t.get("router-b").unwrap().seen.record.version;
    assert_eq!(t.state(t.get("router-b").unwrap()), State::Approved);
    assert!(t.admitted().is_empty(), "the configured section rules");
    assert_eq!(
        t.check_approve("router-b", v).unwrap_err(),
        Refusal::StaticPeer {
            router_id: "router-b".into()
        }
    );
}

#[test]
fn the_table_is_bounded_and_keeps_what_it_has() {
    let mut t = Table::new(policy(Admission::Manual));
    for i in 0..MAX_CANDIDATES {
        let id = format!("r{i}");
        assert_eq!(t.announced(seen(&id, 2, 7444), Millis(0)), Seen::New);
    }
    assert_eq!(t.announced(seen("late", 2, 7444), Millis(0)), Seen::Refused);
    assert_eq!(t.len(), MAX_CANDIDATES);
    assert_eq!(t.counters().refused_full, 1);
    // A known one still refreshes; after one expires there is room.
    assert_eq!(t.announced(seen("r0", 2, 7444), Millis(1)), Seen::Refreshed);
    t.withdrawn("r1", Millis(1));
    t.expire(Millis(5001));
    assert_eq!(t.announced(seen("late", 2, 7444), Millis(5002)), Seen::New);
}

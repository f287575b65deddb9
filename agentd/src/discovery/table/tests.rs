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
        configured: BTreeMap::new(),
    }
}

fn seen(id: &str, key: u8, port: u16) -> Sighting {
    Sighting {
        source: Source::Mdns,
        instance: id.into(),
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
    assert!(t.withdrawn(Source::Mdns, "router-b", Millis(2000)));
    assert_eq!(t.next_deadline(), Some(Millis(7000)));
    let c = t.get(Source::Mdns, "router-b").unwrap().clone();
    assert_eq!(t.expires_in_ms(&c, Millis(3000)), 4000);
    assert!(t.expire(Millis(6999)).is_empty());
    // Announced again in time: it lives on.
    assert_eq!(
        t.announced(seen("router-b", 2, 7444), Millis(6000)),
        Seen::Refreshed
    );
    assert_eq!(t.next_deadline(), None);
    assert!(t.withdrawn(Source::Mdns, "router-b", Millis(8000)));
    assert_eq!(
        t.expire(Millis(13_000)),
        vec![(Source::Mdns, "router-b".to_string())]
    );
    assert!(t.is_empty());
    assert_eq!(t.counters().expired, 1);
    assert!(
        !t.withdrawn(Source::Mdns, "router-b", Millis(14_000)),
        "unknown now"
    );
}

#[test]
fn our_own_announcements_are_ignored() {
    let mut t = Table::new(policy(Admission::Manual));
    assert_eq!(t.announced(seen("router-a", 1, 7444), Millis(0)), Seen::Own);
    // Another name, our key: still us (a renamed router's old record).
    assert_eq!(t.announced(seen("router-x", 1, 7444), Millis(0)), Seen::Own);
    assert!(t.is_empty());
    assert_eq!(t.counters().own_ignored, 2);
}

#[test]
fn manual_mode_approves_exactly_one_record_version() {
    let mut t = Table::new(policy(Admission::Manual));
    t.announced(seen("router-b", 2, 7444), Millis(0));
    let v = t.get(Source::Mdns, "router-b").unwrap().seen.record.version;
    let state = |t: &Table| t.state(t.get(Source::Mdns, "router-b").unwrap());
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
    p.approved.insert(
        "router-b".into(),
        Approval {
            version: v,
            pin: Some(fp(2)),
        },
    );
    t.set_policy(p);
    assert_eq!(state(&t), State::Approved);
    // The same key on a new port: a new version, and the approval no
    // longer applies.
    let now = t.announced(seen("router-b", 2, 7445), Millis(10));
    assert!(matches!(now, Seen::NewVersion { old } if old == v));
    assert_eq!(state(&t), State::Pending);
    assert_eq!(t.counters().version_changes, 1);
}

/// Issue 20, item 9: an approved router_id announced with another key
/// is a visible conflict naming both keys, never admitted, until that
/// very record is approved (which moves the pin, and the conflict to
/// the other key).
#[test]
fn an_approved_router_id_with_another_key_is_a_conflict_until_approved_afresh() {
    for mode in [
        Admission::Manual,
        Admission::SameDomain,
        Admission::Allowlist,
    ] {
        let genuine = seen("router-b", 2, 7444);
        let v = genuine.record.version;
        let mut p = policy(mode);
        p.allow = vec![fp(2), fp(3)];
        p.approved.insert(
            "router-b".into(),
            Approval {
                version: v,
                pin: Some(fp(2)),
            },
        );
        let mut t = Table::new(p.clone());
        t.announced(genuine, Millis(0));
        // mDNS renamed the second host's instance: both are kept.
        let mut impostor = seen("router-b", 3, 7444);
        impostor.instance = "router-b (2)".into();
        let v2 = impostor.record.version;
        assert_eq!(t.announced(impostor, Millis(1)), Seen::New);
        assert_eq!(t.len(), 2);
        let real = t.get(Source::Mdns, "router-b").unwrap();
        let fake = t.get(Source::Mdns, "router-b (2)").unwrap();
        assert_eq!(t.state(real), State::Approved, "{mode:?}");
        assert_eq!(t.state(fake), State::Conflict, "{mode:?}");
        assert_eq!(
            t.conflict(fake).unwrap().to_string(),
            format!(
                "router-b is approved with key {} (record version {v}); this announcement carries key {} (approve this record version to replace the pin)",
                fp(2),
                fp(3)
            )
        );
        assert!(
            t.admitted().is_empty(),
            "{mode:?}: a conflict is never admitted"
        );
        // Its withdrawal touches only its own instance.
        assert!(t.withdrawn(Source::Mdns, "router-b (2)", Millis(2)));
        assert!(t.get(Source::Mdns, "router-b").unwrap().announced);
        // A fresh approval of exactly that record is possible...
        assert_eq!(
            t.check_approve("router-b", v2).unwrap().seen.instance,
            "router-b (2)"
        );
        // ...and once written, the conflict is the other key's.
        let mut p2 = p.clone();
        p2.approved.insert(
            "router-b".into(),
            Approval {
                version: v2,
                pin: Some(fp(3)),
            },
        );
        t.set_policy(p2);
        assert_eq!(
            t.state(t.get(Source::Mdns, "router-b (2)").unwrap()),
            State::Approved
        );
        assert_eq!(
            t.state(t.get(Source::Mdns, "router-b").unwrap()),
            State::Conflict
        );
    }
}

#[test]
fn a_pinned_peer_section_and_our_own_id_are_known_keys_too() {
    let mut p = policy(Admission::Manual);
    p.configured.insert("router-c".into(), Some(fp(4)));
    p.configured.insert("router-d".into(), None);
    let mut t = Table::new(p);
    t.announced(seen("router-c", 5, 7444), Millis(0));
    t.announced(seen("router-d", 6, 7444), Millis(0));
    // Our router_id with another key is not us: a conflict to show.
    assert_eq!(t.announced(seen("router-a", 7, 7444), Millis(0)), Seen::New);
    let state = |id: &str| t.state(t.get(Source::Mdns, id).unwrap());
    assert_eq!(state("router-c"), State::Conflict);
    assert!(t
        .conflict(t.get(Source::Mdns, "router-c").unwrap())
        .unwrap()
        .to_string()
        .starts_with(&format!(
            "router-c is a configured peer pinned to key {}",
            fp(4)
        )));
    assert_eq!(state("router-d"), State::Approved, "no pin: the CA decides");
    assert_eq!(state("router-a"), State::Conflict);
    assert_eq!(
        t.conflict(t.get(Source::Mdns, "router-a").unwrap()).unwrap().to_string(),
        format!(
            "router-a is this router's own router_id, with key {}; this announcement carries key {}",
            fp(1),
            fp(7)
        )
    );
    // Before our key is known, our router_id is taken for us.
    let mut p = policy(Admission::Manual);
    p.own_fingerprint = None;
    let mut t = Table::new(p);
    assert_eq!(t.announced(seen("router-a", 7, 7444), Millis(0)), Seen::Own);
}

/// Two unapproved announcements of one router_id with different keys:
/// an automatic mode would have to pick one by chance, so neither is
/// admitted and both say why.
#[test]
fn contested_router_ids_are_not_admitted_automatically() {
    let mut t = Table::new(policy(Admission::SameDomain));
    t.announced(seen("router-b", 2, 7444), Millis(0));
    assert_eq!(t.admitted().len(), 1, "alone, it is admitted");
    let mut other = seen("router-b", 3, 7444);
    other.instance = "router-b (2)".into();
    t.announced(other, Millis(0));
    assert!(t.admitted().is_empty());
    let first = t.get(Source::Mdns, "router-b").unwrap();
    assert_eq!(t.state(first), State::Conflict);
    assert!(
        t.conflict(first).unwrap().to_string().contains(&format!(
            "router-b is also announced with key {} (mDNS instance 'router-b (2)')",
            fp(3)
        )),
        "{}",
        t.conflict(first).unwrap()
    );
    // Manual mode: both wait for an operator, as any candidate does.
    let mut p = policy(Admission::Manual);
    p.mode = Admission::Manual;
    t.set_policy(p);
    assert!(t.iter().all(|(_, s)| s == State::Pending));
    // Gone again: the remaining one is admitted.
    t.set_policy(policy(Admission::SameDomain));
    t.withdrawn(Source::Mdns, "router-b (2)", Millis(10));
    t.expire(Millis(5010));
    assert_eq!(t.admitted().len(), 1);
}

#[test]
fn same_domain_admits_our_domain_only() {
    let mut t = Table::new(policy(Admission::SameDomain));
    t.announced(seen("router-b", 2, 7444), Millis(0));
    let mut foreign = seen("router-c", 3, 7444);
    foreign.record = Record::ours("router-c", "other.example", fp(3), 7444, 7447);
    t.announced(foreign, Millis(0));
    assert_eq!(
        t.state(t.get(Source::Mdns, "router-b").unwrap()),
        State::Admitted
    );
    assert_eq!(
        t.state(t.get(Source::Mdns, "router-c").unwrap()),
        State::Rejected
    );
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
    assert_eq!(
        t.state(t.get(Source::Mdns, "router-c").unwrap()),
        State::Rejected
    );
    // An admitted candidate is a peer only while it lives.
    t.withdrawn(Source::Mdns, "router-b", Millis(100));
    assert_eq!(t.admitted().len(), 1);
    t.expire(Millis(5100));
    assert!(t.admitted().is_empty());
}

#[test]
fn off_observes_and_refuses_approval() {
    let mut t = Table::new(policy(Admission::Off));
    t.announced(seen("router-b", 2, 7444), Millis(0));
    let v = t.get(Source::Mdns, "router-b").unwrap().seen.record.version;
    assert_eq!(
        t.state(t.get(Source::Mdns, "router-b").unwrap()),
        State::Rejected
    );
    assert_eq!(
        t.check_approve("router-b", v).unwrap_err(),
        Refusal::AdmissionOff
    );
    assert!(t.admitted().is_empty());
}

#[test]
fn a_static_peer_is_not_approved_again_nor_admitted() {
    let mut p = policy(Admission::SameDomain);
    p.configured.insert("router-b".into(), None);
    let mut t = Table::new(p);
    t.announced(seen("router-b", 2, 7444), Millis(0));
    let v = t.get(Source::Mdns, "router-b").unwrap().seen.record.version;
    assert_eq!(
        t.state(t.get(Source::Mdns, "router-b").unwrap()),
        State::Approved
    );
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
    t.withdrawn(Source::Mdns, "r1", Millis(1));
    t.expire(Millis(5001));
    assert_eq!(t.announced(seen("late", 2, 7444), Millis(5002)), Seen::New);
}

fn unicast(id: &str, key: u8, port: u16) -> Sighting {
    Sighting {
        source: Source::Unicast,
        instance: format!("{id}._arpx._tcp.lab.example"),
        ..seen(id, key, port)
    }
}

/// Input: router-b found in a zone, approved at its record version,
/// then found with a new record (another ARPX port). Output: approved,
/// then pending again with the new version (the same rule as mDNS);
/// an mDNS label spelling the unicast instance name is another
/// candidate, never the unicast one.
#[test]
fn a_unicast_candidate_follows_the_same_admission() {
    let mut t = Table::new(policy(Admission::Manual));
    assert_eq!(
        t.announced(unicast("router-b", 2, 7444), Millis(0)),
        Seen::New
    );
    let inst = "router-b._arpx._tcp.lab.example";
    let v1 = t.get(Source::Unicast, inst).unwrap().seen.record.version;
    assert_eq!(
        t.state(t.get(Source::Unicast, inst).unwrap()),
        State::Pending
    );
    assert!(t.check_approve("router-b", v1).is_ok());
    let mut p = policy(Admission::Manual);
    p.approved.insert(
        "router-b".into(),
        Approval {
            version: v1,
            pin: Some(fp(2)),
        },
    );
    t.set_policy(p);
    assert_eq!(
        t.state(t.get(Source::Unicast, inst).unwrap()),
        State::Approved
    );
    assert_eq!(
        t.announced(unicast("router-b", 2, 7555), Millis(1)),
        Seen::NewVersion { old: v1 }
    );
    assert_eq!(
        t.state(t.get(Source::Unicast, inst).unwrap()),
        State::Pending
    );

    let mut spoof = seen("router-b", 2, 7444);
    spoof.instance = inst.into();
    assert_eq!(t.announced(spoof, Millis(2)), Seen::New);
    assert_eq!(t.len(), 2);
    assert_eq!(t.get(Source::Unicast, inst).unwrap().seen.port, 7555);
    // Withdrawn by its source only.
    assert!(t.withdrawn(Source::Unicast, inst, Millis(3)));
    assert!(t.get(Source::Mdns, inst).unwrap().announced);
}

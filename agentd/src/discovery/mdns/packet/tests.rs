//! The mDNS codec: our own round trip, agreement with hickory-proto in
//! both directions (a dev-dependency only), every refusal by hand-built
//! bytes, and the name helpers the responder and querier build on.

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::{A, AAAA, PTR, SRV, TXT};
use hickory_proto::rr::{Name as HName, RData, Record as HRecord, RecordType};

use super::*;

const INSTANCE: &[u8] = b"Living Room (2.4 GHz) v1.2";

fn name(text: &str) -> Name {
    Name::dotted(text).unwrap()
}

fn service() -> Name {
    name("_arpx._tcp.local")
}

fn instance() -> Name {
    service().prefixed(INSTANCE).unwrap()
}

fn host() -> Name {
    name("Router-B.local")
}

fn txt() -> Vec<u8> {
    b"\x03v=1\x05id=ab".to_vec()
}

fn record(name: Name, rtype: u16, cache_flush: bool, data: Data) -> Record {
    Record {
        name,
        rtype,
        cache_flush,
        ttl: 120,
        data,
    }
}

/// A response as a responder announces itself: the shared PTR, then
/// the unique SRV, TXT, A and AAAA (cache flush set), with the QU
/// questions it answers.
fn sample() -> Packet {
    let srv = Data::Srv {
        priority: 1,
        weight: 2,
        port: 7444,
        target: host(),
    };
    Packet {
        id: 0,
        flags: FLAG_RESPONSE | FLAG_AUTHORITATIVE,
        questions: vec![
            Question {
                name: service(),
                qtype: TYPE_PTR,
                unicast: true,
            },
            Question {
                name: host(),
                qtype: TYPE_A,
                unicast: false,
            },
        ],
        answers: vec![record(service(), TYPE_PTR, false, Data::Ptr(instance()))],
        authority: vec![record(instance(), TYPE_SRV, true, srv.clone())],
        additional: vec![
            record(instance(), TYPE_TXT, true, Data::Txt(txt())),
            record(host(), TYPE_A, true, Data::A(Ipv4Addr::new(192, 0, 2, 2))),
            record(
                host(),
                TYPE_AAAA,
                true,
                Data::Aaaa("2001:db8::2".parse().unwrap()),
            ),
        ],
    }
}

/// Every name `p` writes, uncompressed.
fn uncompressed_name_bytes(p: &Packet) -> usize {
    let records = p.answers.iter().chain(&p.authority).chain(&p.additional);
    let questions: usize = p.questions.iter().map(|q| q.name.wire().len()).sum();
    let records: usize = records
        .map(|r| {
            r.name.wire().len()
                + match &r.data {
                    Data::Ptr(n) | Data::Srv { target: n, .. } => n.wire().len(),
                    _ => 0,
                }
        })
        .sum();
    questions + records
}

#[test]
fn a_response_round_trips_with_its_bits_and_the_case_of_its_labels() {
    let p = sample();
    let bytes = p.encode();
    let back = Packet::decode(&bytes).unwrap();
    assert_eq!(back, p);
    assert!(back.is_response());
    assert!(back.questions[0].unicast && !back.questions[1].unicast);
    assert!(!back.answers[0].cache_flush && back.authority[0].cache_flush);
    // Equality ignores case; the wire form keeps it.
    let Data::Ptr(inst) = &back.answers[0].data else {
        panic!("not a PTR: {:?}", back.answers[0].data)
    };
    assert_eq!(inst.wire(), instance().wire());
    assert_eq!(inst.split_first().unwrap().0, INSTANCE);
    assert_eq!(back.additional[1].name.wire(), b"\x08Router-B\x05local\x00");
    assert_eq!(
        inst.to_string(),
        "Living Room (2\\.4 GHz) v1\\.2._arpx._tcp.local."
    );
}

#[test]
fn names_are_compressed_against_what_was_written_ignoring_case() {
    let p = sample();
    let bytes = p.encode();
    let fixed = 12 + 4 * p.questions.len() + 10 * 6 + 6 + txt().len() + 4 + 16;
    assert!(
        bytes.len() + 60 < fixed + uncompressed_name_bytes(&p),
        "{} bytes: names not compressed",
        bytes.len()
    );
    // The lower-case host in a later record still points to the first.
    let mut q = p.clone();
    q.additional.push(record(
        name("router-b.LOCAL"),
        TYPE_A,
        true,
        Data::A(Ipv4Addr::new(192, 0, 2, 3)),
    ));
    let more = q.encode();
    assert_eq!(more.len(), bytes.len() + 2 + 10 + 4, "owner not a pointer");
    // Written twice, the same name costs one pointer the second time.
    let back = Packet::decode(&more).unwrap();
    assert_eq!(back.additional[3].name.wire(), b"\x08Router-B\x05local\x00");
}

#[test]
fn hickory_reads_our_encoding() {
    let p = sample();
    let m = Message::from_vec(&p.encode()).unwrap();
    assert_eq!(m.metadata.message_type, MessageType::Response);
    assert!(m.metadata.authoritative);
    let qs: Vec<(String, RecordType, u16)> = m
        .queries
        .iter()
        .map(|q| {
            (
                q.name().to_ascii(),
                q.query_type(),
                u16::from(q.query_class()),
            )
        })
        .collect();
    assert_eq!(
        qs,
        vec![
            ("_arpx._tcp.local.".into(), RecordType::PTR, 0x8001),
            ("Router-B.local.".into(), RecordType::A, 1),
        ]
    );
    let records: Vec<&HRecord> = m
        .answers
        .iter()
        .chain(&m.authorities)
        .chain(&m.additionals)
        .collect();
    let ours: Vec<&Record> = p
        .answers
        .iter()
        .chain(&p.authority)
        .chain(&p.additional)
        .collect();
    assert_eq!(records.len(), ours.len());
    for (h, o) in records.iter().zip(ours) {
        let labels: Vec<&[u8]> = h.name.iter().collect();
        assert_eq!(labels, o.name.labels().collect::<Vec<_>>());
        assert_eq!(u16::from(h.record_type()), o.rtype);
        let class = if o.cache_flush { 0x8001 } else { 1 };
        assert_eq!(u16::from(h.dns_class), class);
        assert_eq!(h.ttl, o.ttl);
        let hickory_wire = |n: &HName| -> Vec<u8> {
            let mut w: Vec<u8> = Vec::new();
            for l in n.iter() {
                w.push(l.len() as u8);
                w.extend_from_slice(l);
            }
            w.push(0);
            w
        };
        match (&h.data, &o.data) {
            (RData::PTR(PTR(n)), Data::Ptr(ours)) => assert_eq!(hickory_wire(n), ours.wire()),
            (
                RData::SRV(s),
                Data::Srv {
                    priority,
                    weight,
                    port,
                    target,
                },
            ) => {
                assert_eq!((s.priority, s.weight, s.port), (*priority, *weight, *port));
                assert_eq!(hickory_wire(&s.target), target.wire());
            }
            (RData::TXT(t), Data::Txt(ours)) => {
                let strings: Vec<&[u8]> = t.txt_data.iter().map(|s| &s[..]).collect();
                assert_eq!(strings, vec![&b"v=1"[..], b"id=ab"]);
                assert_eq!(t.txt_data.len(), 2, "{ours:?}");
            }
            (RData::A(A(a)), Data::A(ours)) => assert_eq!(a, ours),
            (RData::AAAA(AAAA(a)), Data::Aaaa(ours)) => assert_eq!(a, ours),
            (h, o) => panic!("hickory read {h:?}, we wrote {o:?}"),
        }
    }
}

#[test]
fn we_read_hickorys_encoding_with_its_compression() {
    let hname = |labels: &[&[u8]]| HName::from_labels(labels.iter().copied()).unwrap();
    let inst = hname(&[INSTANCE, b"_arpx", b"_tcp", b"local"]);
    let svc = hname(&[b"_arpx", b"_tcp", b"local"]);
    let target = hname(&[b"Router-B", b"local"]);
    let mut m = Message::new(0, MessageType::Response, OpCode::Query);
    m.metadata.authoritative = true;
    m.add_query(Query::query(svc.clone(), RecordType::PTR));
    m.add_answer(HRecord::from_rdata(
        svc,
        4500,
        RData::PTR(PTR(inst.clone())),
    ));
    m.add_additionals([
        HRecord::from_rdata(
            inst.clone(),
            120,
            RData::SRV(SRV::new(0, 0, 7444, target.clone())),
        ),
        HRecord::from_rdata(inst, 4500, RData::TXT(TXT::new(vec!["v=1".into()]))),
        HRecord::from_rdata(target, 120, RData::A(A(Ipv4Addr::new(192, 0, 2, 7)))),
    ]);
    let bytes = m.to_vec().unwrap();
    let p = Packet::decode(&bytes).unwrap();
    assert_eq!(p.flags, FLAG_RESPONSE | FLAG_AUTHORITATIVE);
    assert_eq!(
        p.questions,
        vec![Question {
            name: service(),
            qtype: TYPE_PTR,
            unicast: false,
        }]
    );
    let answer = &p.answers[0];
    assert_eq!((answer.rtype, answer.ttl), (TYPE_PTR, 4500));
    let Data::Ptr(got) = &answer.data else {
        panic!("not a PTR: {:?}", answer.data)
    };
    assert_eq!(got.wire(), instance().wire());
    assert_eq!(
        p.additional
            .iter()
            .map(|r| r.data.clone())
            .collect::<Vec<_>>(),
        vec![
            Data::Srv {
                priority: 0,
                weight: 0,
                port: 7444,
                target: host(),
            },
            Data::Txt(b"\x03v=1".to_vec()),
            Data::A(Ipv4Addr::new(192, 0, 2, 7)),
        ]
    );
    assert_eq!(p.additional[2].name.wire(), host().wire());
    // And what we read, we write back to the same records.
    assert_eq!(Packet::decode(&p.encode()).unwrap(), p);
}

/// A header with `qd` questions and `an` answers, then `body`.
fn message(qd: u16, an: u16, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for w in [0, FLAG_RESPONSE, qd, an, 0, 0] {
        out.extend_from_slice(&w.to_be_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// One answer record `local.` of `rtype` and `class` with `rdata`.
fn one_record(rtype: u16, class: u16, rdata: &[u8]) -> Vec<u8> {
    let mut body = b"\x05local\x00".to_vec();
    body.extend_from_slice(&rtype.to_be_bytes());
    body.extend_from_slice(&class.to_be_bytes());
    body.extend_from_slice(&120u32.to_be_bytes());
    body.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    body.extend_from_slice(rdata);
    message(0, 1, &body)
}

fn wire_err(bytes: &[u8]) -> WireError {
    match Packet::decode(bytes) {
        Err(PacketError::Wire(e)) => e,
        other => panic!("not a wire error: {other:?}"),
    }
}

#[test]
fn a_forward_pointer_is_refused() {
    // The question's name points to itself + 2: forward.
    let bytes = message(1, 0, b"\xc0\x0e\x00\x01\x00\x01");
    assert_eq!(
        wire_err(&bytes),
        WireError::ForwardPointer { at: 12, to: 14 }
    );
}

#[test]
fn a_pointer_loop_is_refused() {
    // `local` then a pointer back to its own first label.
    let bytes = message(1, 0, b"\x05local\xc0\x0c\x00\x01\x00\x01");
    assert_eq!(wire_err(&bytes), WireError::PointerLoop { at: 18, to: 12 });
}

#[test]
fn a_truncated_record_is_refused() {
    let whole = one_record(TYPE_A, CLASS_IN, &[192, 0, 2, 1]);
    assert!(Packet::decode(&whole).is_ok());
    // Cut inside the fixed fields after the owner name.
    assert_eq!(
        wire_err(&whole[..22]),
        WireError::Truncated {
            part: Part::Record,
            at: 21
        }
    );
    // Cut inside the data.
    assert_eq!(
        wire_err(&whole[..whole.len() - 1]),
        WireError::RdataPastEnd { at: 29, len: 4 }
    );
    // A header promising an answer that is not there.
    assert_eq!(
        wire_err(&message(0, 1, b"")),
        WireError::Truncated {
            part: Part::Name,
            at: 12
        }
    );
}

#[test]
fn a_txt_string_past_the_data_is_refused_and_empty_txt_is_accepted() {
    let e = wire_err(&one_record(TYPE_TXT, CLASS_IN, b"\x03v=1\x05ab"));
    assert!(
        matches!(
            e,
            WireError::BadRdata {
                rtype: TYPE_TXT,
                ..
            }
        ),
        "{e:?}"
    );
    let p = Packet::decode(&one_record(TYPE_TXT, CLASS_IN, b"")).unwrap();
    assert_eq!(p.answers[0].data, Data::Txt(Vec::new()));
}

#[test]
fn address_data_of_the_wrong_size_is_refused() {
    let e = wire_err(&one_record(TYPE_A, CLASS_IN, &[192, 0, 2, 1, 9]));
    assert_eq!(
        e,
        WireError::BadRdata {
            rtype: TYPE_A,
            at: 29,
            reason: "an A record has 4 bytes"
        }
    );
    let e = wire_err(&one_record(TYPE_AAAA, CLASS_IN, &[0; 4]));
    assert!(
        matches!(
            e,
            WireError::BadRdata {
                rtype: TYPE_AAAA,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn names_in_data_must_fill_it_and_may_point_before_it() {
    // PTR data: a pointer to the owner name `local` at 12.
    let p = Packet::decode(&one_record(TYPE_PTR, CLASS_IN, b"\xc0\x0c")).unwrap();
    assert_eq!(p.answers[0].data, Data::Ptr(name("local")));
    // A byte after the name: refused.
    let e = wire_err(&one_record(TYPE_PTR, CLASS_IN, b"\xc0\x0c\x00"));
    assert!(
        matches!(
            e,
            WireError::BadRdata {
                rtype: TYPE_PTR,
                ..
            }
        ),
        "{e:?}"
    );
    // A name that runs past the data's end, into the next bytes.
    let mut bytes = one_record(TYPE_PTR, CLASS_IN, b"\x02ab");
    bytes.push(0);
    assert!(matches!(wire_err(&bytes), WireError::Truncated { .. }));
    // SRV: six bytes and a compressed target.
    let p = Packet::decode(&one_record(
        TYPE_SRV,
        CLASS_IN,
        b"\x00\x01\x00\x02\x1d\x14\xc0\x0c",
    ))
    .unwrap();
    assert_eq!(
        p.answers[0].data,
        Data::Srv {
            priority: 1,
            weight: 2,
            port: 7444,
            target: name("local"),
        }
    );
    let e = wire_err(&one_record(TYPE_SRV, CLASS_IN, b"\x00\x01\x00\x02\x1d\x14"));
    assert!(
        matches!(
            e,
            WireError::BadRdata {
                rtype: TYPE_SRV,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn other_types_keep_their_raw_bytes() {
    let raw = b"\xc0\x0c\x00\x04\x40\x00\x00\x08";
    let bytes = one_record(TYPE_NSEC, CLASS_IN | CLASS_FLUSH, raw);
    let p = Packet::decode(&bytes).unwrap();
    assert_eq!(p.answers[0].data, Data::Other(raw.to_vec()));
    assert!(p.answers[0].cache_flush);
    assert_eq!(Packet::decode(&p.encode()).unwrap(), p);
}

#[test]
fn too_many_entries_too_large_and_other_opcodes_are_refused_first() {
    // Counts alone: no entries follow, yet the count is what refuses.
    let bytes = message(200, 57, b"");
    assert_eq!(
        Packet::decode(&bytes),
        Err(PacketError::TooManyEntries(257))
    );
    assert!(matches!(
        Packet::decode(&message(200, 56, b"")),
        Err(PacketError::Wire(WireError::Truncated { .. }))
    ));
    let mut big = one_record(TYPE_TXT, CLASS_IN, b"");
    big.resize(MAX_MESSAGE + 1, 0);
    assert_eq!(
        Packet::decode(&big),
        Err(PacketError::TooLarge(MAX_MESSAGE + 1))
    );
    // Trailing bytes are ignored up to the limit.
    big.truncate(MAX_MESSAGE);
    assert_eq!(Packet::decode(&big).unwrap().answers.len(), 1);
    let mut update = message(0, 1, b"");
    update[2] |= 5 << 3; // OPCODE 5 (UPDATE), bits 11..14 of the flags
    assert_eq!(Packet::decode(&update), Err(PacketError::Opcode(5)));
    let e = Packet::decode(&update).unwrap_err();
    assert_eq!(
        e.to_string(),
        "mDNS message header has OPCODE 5 (only 0 is read)"
    );
}

#[test]
fn other_classes_are_dropped_not_refused() {
    let mut body = Vec::new();
    for (qclass, qtype) in [
        (3u16, TYPE_A),
        (CLASS_ANY | CLASS_UNICAST, TYPE_ANY),
        (CLASS_IN, TYPE_SRV),
    ] {
        body.extend_from_slice(b"\x05local\x00");
        body.extend_from_slice(&qtype.to_be_bytes());
        body.extend_from_slice(&qclass.to_be_bytes());
    }
    // A CHAOS record whose data would not pass as an A: not even read.
    for (class, rdata) in [(3u16, &[1u8, 2, 3][..]), (CLASS_IN, &[10, 0, 0, 1][..])] {
        body.extend_from_slice(b"\xc0\x0c\x00\x01");
        body.extend_from_slice(&class.to_be_bytes());
        body.extend_from_slice(&[0, 0, 0, 120, 0, rdata.len() as u8]);
        body.extend_from_slice(rdata);
    }
    let p = Packet::decode(&message(3, 2, &body)).unwrap();
    assert_eq!(
        p.questions,
        vec![
            Question {
                name: name("local"),
                qtype: TYPE_ANY,
                unicast: true,
            },
            Question {
                name: name("local"),
                qtype: TYPE_SRV,
                unicast: false,
            },
        ]
    );
    assert_eq!(p.answers.len(), 1);
    assert_eq!(p.answers[0].data, Data::A(Ipv4Addr::new(10, 0, 0, 1)));
}

#[test]
fn errors_name_the_thing_and_where() {
    assert_eq!(
        PacketError::TooLarge(9001).to_string(),
        "mDNS message of 9001 bytes (at most 9000)"
    );
    assert_eq!(
        PacketError::TooManyEntries(300).to_string(),
        "mDNS message header counts 300 questions and records (at most 256)"
    );
    let e = PacketError::Wire(WireError::ForwardPointer { at: 12, to: 14 });
    assert_eq!(
        e.to_string(),
        "mDNS message: name at byte 12: compression pointer forward to byte 14"
    );
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn rdata_is_the_canonical_uncompressed_form() {
    assert_eq!(Data::A(Ipv4Addr::new(192, 0, 2, 1)).rdata(), [192, 0, 2, 1]);
    let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
    assert_eq!(Data::Aaaa(v6).rdata(), v6.octets());
    assert_eq!(Data::Ptr(host()).rdata(), b"\x08Router-B\x05local\x00");
    let srv = Data::Srv {
        priority: 1,
        weight: 0x0203,
        port: 7444,
        target: host(),
    };
    assert_eq!(
        srv.rdata(),
        b"\x00\x01\x02\x03\x1d\x14\x08Router-B\x05local\x00"
    );
    assert_eq!(Data::Txt(txt()).rdata(), txt());
    assert_eq!(Data::Other(vec![9, 8]).rdata(), [9, 8]);
    // Compression in the message does not leak into rdata.
    let p = Packet::decode(&sample().encode()).unwrap();
    assert_eq!(p.authority[0].data.rdata(), srv_rdata_of_sample());
}

fn srv_rdata_of_sample() -> Vec<u8> {
    let mut v = b"\x00\x01\x00\x02\x1d\x14".to_vec();
    v.extend_from_slice(host().wire());
    v
}

#[test]
fn ends_with_compares_whole_labels_ignoring_case() {
    let inst = instance();
    assert!(inst.ends_with(&name("_TCP.local")));
    assert!(inst.ends_with(&service()));
    assert!(inst.ends_with(&name(".")));
    assert!(inst.ends_with(&inst));
    // A suffix of bytes that is not a suffix of labels.
    assert!(!name("xlocal").ends_with(&name("local")));
    assert!(!name("a.blocal").ends_with(&name("local")));
    assert!(!service().ends_with(&inst));
}

#[test]
fn split_first_gives_the_label_and_the_rest() {
    let inst = instance();
    let (label, rest) = inst.split_first().unwrap();
    assert_eq!(label, INSTANCE);
    assert_eq!(rest, service());
    let local = name("local");
    let (label, root) = local.split_first().unwrap();
    assert_eq!((label, root.wire()), (&b"local"[..], &[0u8][..]));
    assert!(root.split_first().is_none());
}

#[test]
fn display_escapes_dots_and_backslashes() {
    let n = name("local").prefixed(b"a.b\\c").unwrap();
    assert_eq!(n.to_string(), "a\\.b\\\\c.local.");
    assert_eq!(
        Name::from_labels(&[&b"a.b\\c"[..]]).unwrap().to_string(),
        "a\\.b\\\\c."
    );
    assert_eq!(name(".").to_string(), ".");
    assert_eq!(name("Router-B.local").to_string(), "Router-B.local.");
}

#[test]
fn names_are_bounded_when_built() {
    assert_eq!(Name::from_labels(&[""]), Err(NameError::EmptyLabel));
    assert_eq!(
        Name::from_labels(&[[b'a'; 64]]),
        Err(NameError::LabelTooLong(64))
    );
    let long = vec![[b'a'; 63]; 4];
    assert_eq!(Name::from_labels(&long), Err(NameError::NameTooLong(257)));
}

/// The fuzz target's property on mutations of a real message (a cheap
/// stand-in run with every `cargo test`): no panic, and whatever reads
/// reads the same after our encoder.
#[test]
fn mutated_messages_never_panic_and_reencode_to_the_same_message() {
    let base = sample().encode();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut read, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let mut bytes = base.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % bytes.len() as u64) as usize;
            bytes[at] = next() as u8;
        }
        if next() % 8 == 0 {
            bytes.truncate((next() % bytes.len() as u64) as usize);
        }
        match Packet::decode(&bytes) {
            Ok(first) => {
                read += 1;
                assert_eq!(Packet::decode(&first.encode()), Ok(first), "{bytes:02x?}");
            }
            Err(_) => refused += 1,
        }
    }
    // Both paths ran often enough to mean something.
    assert!(
        read > 1000 && refused > 1000,
        "read {read}, refused {refused}"
    );
}

//! The codec against hickory-proto (a dev-dependency only): queries we
//! write must read back in hickory, and messages hickory writes (with
//! its name compression) must read in ours; malformed messages built by
//! hand must give their typed error.

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, PTR, SRV, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::BinEncodable;

use super::*;

fn name(s: &str) -> Name {
    Name::from_ascii(format!("{s}.")).unwrap()
}

fn record(owner: &str, data: RData) -> Record {
    Record::from_rdata(name(owner), 300, data)
}

/// A record read back: owner name, the record, its data.
type Read<'a> = (String, RawRecord, Rdata<'a>);

/// All records of `bytes` with their data, read by our reader.
fn read_all(bytes: &[u8]) -> Result<(Header, Vec<Read<'_>>), WireError> {
    let mut r = Reader::new(bytes);
    let h = r.header()?;
    for _ in 0..h.qdcount {
        r.question()?;
    }
    let mut out = Vec::new();
    for _ in 0..u32::from(h.ancount) + u32::from(h.nscount) + u32::from(h.arcount) {
        let raw = r.record()?;
        let owner = read_name(bytes, raw.owner_at)?.0;
        out.push((owner, raw, r.rdata(&raw)?));
    }
    Ok((h, out))
}

#[test]
fn our_query_reads_back_in_hickory_and_in_ours() {
    let bytes = write_query(
        0xbeef,
        FLAG_RD | FLAG_AD,
        "_arpx._tcp.Lab.example",
        TYPE_PTR,
        1232,
    )
    .unwrap();
    let m = Message::from_vec(&bytes).unwrap();
    assert_eq!(m.metadata.id, 0xbeef);
    assert_eq!(m.metadata.message_type, MessageType::Query);
    assert!(m.metadata.recursion_desired && m.metadata.authentic_data);
    assert_eq!(m.queries.len(), 1);
    assert_eq!(m.queries[0].name().to_ascii(), "_arpx._tcp.Lab.example.");
    assert_eq!(m.queries[0].query_type(), RecordType::PTR);
    assert_eq!(m.queries[0].query_class(), DNSClass::IN);
    let edns = m.edns.as_ref().unwrap();
    assert_eq!(edns.max_payload(), 1232);
    assert!(!edns.flags().dnssec_ok);
    assert_eq!(edns.version(), 0);

    let mut r = Reader::new(&bytes);
    let h = r.header().unwrap();
    assert_eq!((h.qdcount, h.ancount, h.nscount, h.arcount), (1, 0, 0, 1));
    assert!(!h.has(FLAG_QR) && h.has(FLAG_RD) && h.has(FLAG_AD));
    let q = r.question().unwrap();
    assert_eq!(
        q,
        WireQuestion {
            name: "_arpx._tcp.lab.example".into(),
            qtype: TYPE_PTR,
            qclass: CLASS_IN,
        }
    );
    let opt = r.record().unwrap();
    assert_eq!(
        (opt.rtype, opt.class, opt.ttl, opt.rdata_len),
        (TYPE_OPT, 1232, 0, 0)
    );
    assert_eq!(opt.rdata_at + opt.rdata_len, bytes.len());
}

/// A browse answer as hickory writes it (compressed): the PTR to one
/// instance (mixed case, as servers may send it) and in the additional
/// section its SRV and TXT, the target's A and AAAA, and a CNAME.
fn sample_answer() -> Vec<u8> {
    let mut m = Message::new(7, MessageType::Response, OpCode::Query);
    m.add_query(Query::query(
        name("_arpx._tcp.lab.example"),
        RecordType::PTR,
    ));
    let inst = "Router-B._arpx._tcp.lab.example";
    m.add_answer(record(
        "_arpx._tcp.lab.example",
        RData::PTR(PTR(name(inst))),
    ));
    m.add_additionals([
        record(
            inst,
            RData::SRV(SRV::new(1, 2, 7444, name("router-b.lab.example"))),
        ),
        record(
            inst,
            RData::TXT(TXT::new(vec!["v=1".into(), "id=ab".into()])),
        ),
        record(
            "router-b.lab.example",
            RData::A(A("192.0.2.2".parse().unwrap())),
        ),
        record(
            "router-b.lab.example",
            RData::AAAA(AAAA("2001:db8::2".parse().unwrap())),
        ),
        record(
            "alias.lab.example",
            RData::CNAME(CNAME(name("router-b.lab.example"))),
        ),
    ]);
    m.to_vec().unwrap()
}

#[test]
fn every_record_type_we_read_decodes_from_hickory_with_compression() {
    let bytes = sample_answer();
    // hickory compressed the repeated suffixes.
    assert!(bytes.len() < 200, "{} bytes: not compressed", bytes.len());
    let (h, recs) = read_all(&bytes).unwrap();
    assert_eq!(h.id, 7);
    assert!(h.has(FLAG_QR));
    let got: Vec<(&str, u16, u32, &Rdata)> = recs
        .iter()
        .map(|(n, raw, d)| (n.as_str(), raw.class, raw.ttl, d))
        .collect();
    let inst = "router-b._arpx._tcp.lab.example";
    assert_eq!(
        got,
        vec![
            (
                "_arpx._tcp.lab.example",
                CLASS_IN,
                300,
                &Rdata::Ptr(inst.into())
            ),
            (
                inst,
                CLASS_IN,
                300,
                &Rdata::Srv {
                    priority: 1,
                    weight: 2,
                    port: 7444,
                    target: "router-b.lab.example".into()
                }
            ),
            (inst, CLASS_IN, 300, &Rdata::Txt(b"\x03v=1\x05id=ab")),
            (
                "router-b.lab.example",
                CLASS_IN,
                300,
                &Rdata::A("192.0.2.2".parse().unwrap())
            ),
            (
                "router-b.lab.example",
                CLASS_IN,
                300,
                &Rdata::Aaaa("2001:db8::2".parse().unwrap())
            ),
            (
                "alias.lab.example",
                CLASS_IN,
                300,
                &Rdata::Cname("router-b.lab.example".into())
            ),
        ]
    );
}

#[test]
fn other_types_are_skipped_by_their_length() {
    let mut m = Message::new(1, MessageType::Response, OpCode::Query);
    m.add_answer(record(
        "lab.example",
        RData::NS(hickory_proto::rr::rdata::NS(name("ns.lab.example"))),
    ));
    m.add_answer(record(
        "lab.example",
        RData::A(A("192.0.2.9".parse().unwrap())),
    ));
    let bytes = m.to_vec().unwrap();
    let (_, recs) = read_all(&bytes).unwrap();
    assert_eq!(recs[0].2, Rdata::Other);
    assert_eq!(recs[1].2, Rdata::A("192.0.2.9".parse().unwrap()));
}

#[test]
fn names_read_the_way_hickory_writes_them_and_write_back_the_same() {
    // Bytes outside a hostname's: escaped as hickory's `to_ascii` does.
    let mut m = Message::new(1, MessageType::Response, OpCode::Query);
    let odd = Name::from_labels(vec![
        b"My Router".to_vec(),
        b"a.b".to_vec(),
        b"-x\xff".to_vec(),
        b"EX".to_vec(),
    ])
    .unwrap();
    m.add_answer(Record::from_rdata(
        odd.clone(),
        1,
        RData::A(A("192.0.2.1".parse().unwrap())),
    ));
    let bytes = m.to_vec().unwrap();
    let (_, recs) = read_all(&bytes).unwrap();
    let mut theirs = odd.to_lowercase().to_ascii();
    theirs.pop();
    assert_eq!(recs[0].0, theirs);
    assert_eq!(recs[0].0, r"my\040router.a\.b.\-x\377.ex");
    // The root is ".".
    assert_eq!(read_name(&[0], 0).unwrap(), (".".to_string(), 1));
    // What we read back from a hostname-like name, we can ask for.
    let mut out = Vec::new();
    write_name(&mut out, "router-b._arpx._tcp.lab.example").unwrap();
    assert_eq!(
        read_name(&out, 0).unwrap().0,
        "router-b._arpx._tcp.lab.example"
    );
    let mut out = Vec::new();
    let escaped = r"a\.b.\101x.";
    write_name(&mut out, escaped).unwrap();
    assert_eq!(out, b"\x03a.b\x02Ax\x00");
    assert_eq!(out, Name::from_ascii(escaped).unwrap().to_bytes().unwrap());
}

#[test]
fn names_we_cannot_ask_for_are_typed_errors() {
    let w = |n: &str| write_name(&mut Vec::new(), n);
    let long_label = "a".repeat(64);
    assert_eq!(
        w(&format!("{long_label}.example")),
        Err(NameError::LabelTooLong(64))
    );
    assert!(w(&format!("{}.example", "a".repeat(63))).is_ok());
    // 4 labels of 63 bytes: 4 * 64 + 1 = 257 bytes on the wire.
    let l63 = "b".repeat(63);
    assert_eq!(
        w(&[l63.as_str(); 4].join(".")),
        Err(NameError::NameTooLong(257))
    );
    // 3 of 63 and one of 61: 255, the most there is.
    let l61 = "c".repeat(61);
    assert!(w(&[l63.as_str(), &l63, &l63, &l61].join(".")).is_ok());
    assert_eq!(w("a..example"), Err(NameError::EmptyLabel));
    assert_eq!(w(".example"), Err(NameError::EmptyLabel));
    assert_eq!(w(""), Err(NameError::Empty));
    assert_eq!(w("."), Err(NameError::Empty));
    assert_eq!(w("räuter.example"), Err(NameError::NonAscii));
    assert_eq!(w("my router.example"), Err(NameError::BadChar(' ')));
    assert_eq!(w("-a.example"), Err(NameError::BadChar('-')));
    assert_eq!(w(r"a\9.example"), Err(NameError::BadEscape));
    assert_eq!(w("a\\"), Err(NameError::BadEscape));
    assert!(NameError::LabelTooLong(64).to_string().contains("64 bytes"));
}

/// A response header with one question (`\x01a\x00` PTR IN) and the
/// given counts after it.
fn msg(an: u16, ar: u16, body: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 1, 0x80, 0, 0, 1];
    b.extend_from_slice(&an.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&ar.to_be_bytes());
    b.extend_from_slice(b"\x01a\x00\x00\x0c\x00\x01");
    b.extend_from_slice(body);
    b
}

/// A record header after its owner name: `rtype` IN, TTL 60, `len`.
fn rr_after_name(rtype: u16, len: u16) -> Vec<u8> {
    let mut b = rtype.to_be_bytes().to_vec();
    b.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
    b.extend_from_slice(&len.to_be_bytes());
    b
}

#[test]
fn malformed_messages_are_typed_errors() {
    let header = Reader::new(&[0; 11]).header();
    assert_eq!(
        header,
        Err(WireError::Truncated {
            part: Part::Header,
            at: 0
        })
    );

    // RDLENGTH 5 with 4 bytes left.
    let mut body = b"\xc0\x0c".to_vec();
    body.extend(rr_after_name(TYPE_A, 5));
    body.extend_from_slice(&[192, 0, 2, 1]);
    assert_eq!(
        read_all(&msg(1, 0, &body)).unwrap_err(),
        WireError::RdataPastEnd { at: 31, len: 5 }
    );

    // A pointer to itself, and one forward.
    assert_eq!(
        read_all(&msg(1, 0, b"\xc0\x13")).unwrap_err(),
        WireError::ForwardPointer { at: 19, to: 19 }
    );
    assert_eq!(
        read_all(&msg(1, 0, b"\xc0\x20")).unwrap_err(),
        WireError::ForwardPointer { at: 19, to: 32 }
    );
    // Owner at 19: label "x", then a pointer to 21 (backwards from the
    // pointer, but into the name itself: a loop).
    assert_eq!(
        read_all(&msg(1, 0, b"\x01x\xc0\x13")).unwrap_err(),
        WireError::PointerLoop { at: 21, to: 19 }
    );
    // A name (21) pointing to a label (19) that runs on into it.
    assert_eq!(
        read_name(&msg(0, 0, b"\x01a\xc0\x13"), 21),
        Err(WireError::Overlap { at: 21, limit: 21 })
    );
    // Two names pointing at each other: the first (19) points to the
    // second's pointer (23) — forward; every loop needs one.
    let mut body = b"\x01x\xc0\x17".to_vec();
    body.extend(rr_after_name(TYPE_A, 0));
    body.extend_from_slice(b"\xc0\x13");
    assert_eq!(
        read_all(&msg(2, 0, &body)).unwrap_err(),
        WireError::ForwardPointer { at: 21, to: 23 }
    );

    // Label lengths 64..=191 are no label (RFC 6891 dropped 0x40).
    assert_eq!(
        read_all(&msg(1, 0, b"\x40")).unwrap_err(),
        WireError::LabelTooLong { at: 19, len: 0x40 }
    );
    // A name of 5 labels of 63 bytes (321 bytes on the wire).
    let mut body = Vec::new();
    for _ in 0..5 {
        body.push(63);
        body.extend_from_slice(&[b'a'; 63]);
    }
    body.push(0);
    body.extend(rr_after_name(TYPE_A, 0));
    assert_eq!(
        read_all(&msg(1, 0, &body)).unwrap_err(),
        WireError::NameTooLong { at: 19 }
    );
    // A name ending in the middle of a label, and in a pointer.
    assert_eq!(
        read_all(&msg(1, 0, b"\x05ab")).unwrap_err(),
        WireError::Truncated {
            part: Part::Name,
            at: 19
        }
    );
    assert_eq!(
        read_all(&msg(1, 0, b"\xc0")).unwrap_err(),
        WireError::Truncated {
            part: Part::Name,
            at: 19
        }
    );
    // A record cut inside its fixed fields.
    assert_eq!(
        read_all(&msg(1, 0, b"\x00\x00\x01\x00")).unwrap_err(),
        WireError::Truncated {
            part: Part::Record,
            at: 22
        }
    );
}

#[test]
fn pointer_chains_are_bounded() {
    // 200 pointers, each to the one before it, ending at the question
    // name at 12: the positions fall, yet a name needs no such chain.
    let mut body = Vec::new();
    let mut prev = 12u16;
    for i in 0..200u16 {
        let at = 19 + 2 * i;
        body.extend_from_slice(&(0xc000 | prev).to_be_bytes());
        prev = at;
    }
    let b = msg(0, 0, &body);
    let last = usize::from(prev);
    assert_eq!(
        read_name(&b, last),
        Err(WireError::TooManyJumps { at: last })
    );
    // 127 jumps are fine.
    let at = 19 + 2 * 126;
    assert_eq!(read_name(&b, at).unwrap().0, "a");
}

#[test]
fn record_data_of_the_wrong_form_is_refused() {
    let with = |rtype: u16, rdata: &[u8]| {
        let mut body = b"\xc0\x0c".to_vec();
        body.extend(rr_after_name(rtype, rdata.len() as u16));
        body.extend_from_slice(rdata);
        // The data's Debug text: `Rdata` borrows the message.
        read_all(&msg(1, 0, &body)).map(|(_, r)| format!("{:?}", r[0].2))
    };
    let bad = |rtype, reason| {
        Err(WireError::BadRdata {
            rtype,
            at: 31,
            reason,
        })
    };
    assert_eq!(
        with(TYPE_A, &[1, 2, 3]),
        bad(TYPE_A, "an A record has 4 bytes")
    );
    assert_eq!(
        with(TYPE_AAAA, &[1; 4]),
        bad(TYPE_AAAA, "an AAAA record has 16 bytes")
    );
    assert_eq!(
        with(TYPE_TXT, b"\x05ab"),
        bad(TYPE_TXT, "a TXT string runs past the record data")
    );
    assert_eq!(
        with(TYPE_SRV, &[0, 0, 0, 0, 0, 80]),
        bad(TYPE_SRV, "an SRV record has 6 bytes and a name")
    );
    assert_eq!(
        with(TYPE_PTR, b"\x01b\x00\x00"),
        bad(TYPE_PTR, "data continues after the name")
    );
    // A name in RDATA may not run past the RDATA: its bytes are cut there.
    assert_eq!(
        with(TYPE_PTR, b"\x05b"),
        Err(WireError::Truncated {
            part: Part::Name,
            at: 31
        })
    );
    // Compressed, to the question's name; and an empty RDATA is no data.
    assert_eq!(with(TYPE_PTR, b"\x01b\xc0\x0c"), Ok(r#"Ptr("b.a")"#.into()));
    assert_eq!(with(TYPE_A, b""), Ok("Other".into()));
}

#[test]
fn no_prefix_or_byte_change_of_an_answer_panics() {
    let bytes = sample_answer();
    assert!(read_all(&bytes).is_ok());
    for len in 0..bytes.len() {
        assert!(
            read_all(&bytes[..len]).is_err(),
            "prefix of {len} bytes read"
        );
    }
    for i in 0..bytes.len() {
        for v in [0x00, 0x01, 0x3f, 0x40, 0xc0, 0xff] {
            let mut b = bytes.clone();
            b[i] = v;
            let _ = read_all(&b);
        }
    }
}

/// What the answer decoder refuses beyond the codec's own checks, as
/// the decoder before ours (hickory-proto's `Message`) refused it.
#[test]
fn answers_with_misplaced_or_empty_records_are_malformed() {
    use crate::discovery::unicast::answer::{decode, DnsError, Kind, Question};
    let q = Question {
        name: "a".into(),
        kind: Kind::Ptr,
    };
    let malformed = |bytes: &[u8], what: &str| match decode(bytes, 1, &q, false) {
        Err(DnsError::Malformed { reason }) => assert!(reason.contains(what), "{reason}"),
        other => panic!("{other:?}, expected malformed: {what}"),
    };
    let opt = |owner: &[u8], ttl: u32| {
        let mut b = owner.to_vec();
        b.extend_from_slice(&TYPE_OPT.to_be_bytes());
        b.extend_from_slice(&1232u16.to_be_bytes());
        b.extend_from_slice(&ttl.to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        b
    };
    // An A record without data.
    let mut body = b"\xc0\x0c".to_vec();
    body.extend(rr_after_name(TYPE_A, 0));
    malformed(&msg(1, 0, &body), "empty record data");
    // OPT: in the answer section, twice, under a name other than the root.
    malformed(&msg(1, 0, &opt(b"\x00", 0)), "additional section");
    malformed(
        &msg(0, 2, &[opt(b"\x00", 0), opt(b"\x00", 0)].concat()),
        "second OPT",
    );
    malformed(&msg(0, 1, &opt(b"\xc0\x0c", 0)), "owner is the root");
    // One OPT is not a record of the answer, and its upper RCODE bits
    // count: extended RCODE 1 << 4 = 16.
    let ok = decode(&msg(0, 1, &opt(b"\x00", 0)), 1, &q, false).unwrap();
    assert!(ok.records.is_empty());
    assert_eq!(
        decode(&msg(0, 1, &opt(b"\x00", 1 << 24)), 1, &q, false),
        Err(DnsError::Rcode {
            code: "TSIG Failure".into()
        })
    );
}

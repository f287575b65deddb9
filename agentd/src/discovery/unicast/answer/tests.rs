use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, PTR, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::*;
use crate::discovery::unicast::query;

/// hickory's text of a name, as the decoder before ours produced it.
fn name_text(n: &Name) -> String {
    let mut s = n.to_lowercase().to_ascii();
    if s.len() > 1 && s.ends_with('.') {
        s.pop();
    }
    s
}

fn name(s: &str) -> Name {
    Name::from_ascii(format!("{s}.")).unwrap()
}

pub(crate) fn rr(owner: &str, ttl: u32, data: RData) -> Record {
    Record::from_rdata(name(owner), ttl, data)
}

pub(crate) fn ptr(owner: &str, to: &str) -> Record {
    rr(owner, 60, RData::PTR(PTR(name(to))))
}
pub(crate) fn srv(owner: &str, port: u16, target: &str) -> Record {
    rr(owner, 60, RData::SRV(SRV::new(0, 0, port, name(target))))
}
pub(crate) fn txt(owner: &str, rdata_strings: &[&str]) -> Record {
    rr(
        owner,
        60,
        RData::TXT(TXT::new(
            rdata_strings.iter().map(|s| s.to_string()).collect(),
        )),
    )
}
pub(crate) fn a(owner: &str, ip: &str) -> Record {
    rr(owner, 60, RData::A(A(ip.parse().unwrap())))
}
pub(crate) fn aaaa(owner: &str, ip: &str) -> Record {
    rr(owner, 60, RData::AAAA(AAAA(ip.parse().unwrap())))
}
pub(crate) fn cname(owner: &str, to: &str) -> Record {
    rr(owner, 60, RData::CNAME(CNAME(name(to))))
}

/// A response to `q` with `id`, as a resolver would send it.
pub(crate) struct Reply {
    pub answers: Vec<Record>,
    pub additionals: Vec<Record>,
    pub ad: bool,
    pub tc: bool,
    pub rcode: ResponseCode,
}

impl Default for Reply {
    fn default() -> Self {
        Reply {
            answers: Vec::new(),
            additionals: Vec::new(),
            ad: false,
            tc: false,
            rcode: ResponseCode::NoError,
        }
    }
}

impl Reply {
    pub(crate) fn bytes(self, id: u16, q: &Question) -> Vec<u8> {
        let mut m = Message::new(id, MessageType::Response, OpCode::Query);
        m.add_query(Query::query(
            name(&q.name),
            RecordType::from(q.kind.record_type()),
        ));
        m.metadata.authentic_data = self.ad;
        m.metadata.truncation = self.tc;
        m.metadata.response_code = self.rcode;
        m.add_answers(self.answers);
        m.add_additionals(self.additionals);
        m.to_vec().unwrap()
    }
}

fn q(n: &str, kind: Kind) -> Question {
    Question {
        name: n.into(),
        kind,
    }
}

#[test]
fn our_query_asks_one_question_with_rd_and_ad_when_dnssec_is_required() {
    let question = q("_arpx._tcp.lab.example", Kind::Ptr);
    let bytes = query::encode(0x1234, &question, true).unwrap();
    let m = Message::from_vec(&bytes).unwrap();
    assert_eq!(m.metadata.id, 0x1234);
    assert!(m.metadata.recursion_desired && m.metadata.authentic_data);
    assert_eq!(m.queries.len(), 1);
    assert_eq!(name_text(m.queries[0].name()), "_arpx._tcp.lab.example");
    assert_eq!(
        m.edns.as_ref().map(|e| e.max_payload()),
        Some(query::UDP_PAYLOAD)
    );
    let plain = Message::from_vec(&query::encode(1, &question, false).unwrap()).unwrap();
    assert!(!plain.metadata.authentic_data);
}

#[test]
fn an_answer_keeps_answers_and_additionals_in_order() {
    let question = q("_arpx._tcp.lab.example", Kind::Ptr);
    let inst = "router-b._arpx._tcp.lab.example";
    let bytes = Reply {
        answers: vec![ptr("_arpx._tcp.lab.example", inst)],
        additionals: vec![
            srv(inst, 7444, "router-b.lab.example"),
            txt(inst, &["v=1"]),
            a("router-b.lab.example", "192.0.2.2"),
            aaaa("router-b.lab.example", "2001:db8::2"),
        ],
        ad: true,
        ..Reply::default()
    }
    .bytes(7, &question);
    let ans = decode(&bytes, 7, &question, true).unwrap();
    assert!(ans.authentic && !ans.nxdomain);
    let kinds: Vec<&Data> = ans.records.iter().map(|r| &r.data).collect();
    assert_eq!(kinds[0], &Data::Ptr(inst.into()));
    assert_eq!(
        kinds[1],
        &Data::Srv {
            port: 7444,
            target: "router-b.lab.example".into()
        }
    );
    assert_eq!(kinds[2], &Data::Txt(b"\x03v=1".to_vec()));
    assert_eq!(kinds[3], &Data::A("192.0.2.2".parse().unwrap()));
    assert_eq!(kinds[4], &Data::Aaaa("2001:db8::2".parse().unwrap()));
    assert_eq!(ans.records[0].ttl, 60);
}

#[test]
fn names_compare_in_lower_case() {
    let question = q("_arpx._tcp.lab.example", Kind::Ptr);
    let mut m = Message::new(9, MessageType::Response, OpCode::Query);
    m.add_query(Query::query(
        name("_ARPX._tcp.LAB.example"),
        RecordType::PTR,
    ));
    m.add_answer(ptr(
        "_arpx._TCP.lab.example",
        "Router-B._arpx._tcp.lab.example",
    ));
    let ans = decode(&m.to_vec().unwrap(), 9, &question, false).unwrap();
    assert_eq!(ans.records[0].name, "_arpx._tcp.lab.example");
    assert_eq!(
        ans.records[0].data,
        Data::Ptr("router-b._arpx._tcp.lab.example".into())
    );
}

#[test]
fn what_is_not_our_answer_is_told_apart_from_a_bad_answer() {
    let question = q("_arpx._tcp.lab.example", Kind::Ptr);
    let good = Reply::default().bytes(7, &question);
    assert_eq!(decode(&good, 8, &question, false), Err(DnsError::NotOurs));
    let other = q("_arpx._tcp.evil.example", Kind::Ptr);
    assert_eq!(
        decode(&Reply::default().bytes(7, &other), 7, &question, false),
        Err(DnsError::NotOurs)
    );
    let other_type = q("_arpx._tcp.lab.example", Kind::Txt);
    assert_eq!(
        decode(&Reply::default().bytes(7, &other_type), 7, &question, false),
        Err(DnsError::NotOurs)
    );
    // Our own query echoed back is not an answer.
    let echoed = query::encode(7, &question, false).unwrap();
    assert_eq!(decode(&echoed, 7, &question, false), Err(DnsError::NotOurs));
    assert!(matches!(
        decode(&good[..good.len() - 3], 7, &question, false),
        Err(DnsError::Malformed { .. })
    ));
    let mut big = good.clone();
    big.resize(MAX_MESSAGE + 1, 0);
    assert_eq!(
        decode(&big, 7, &question, false),
        Err(DnsError::TooLarge {
            len: MAX_MESSAGE + 1
        })
    );
}

#[test]
fn flags_and_codes_are_typed_errors() {
    let question = q("_arpx._tcp.lab.example", Kind::Ptr);
    let tc = Reply {
        tc: true,
        ..Reply::default()
    };
    assert_eq!(
        decode(&tc.bytes(1, &question), 1, &question, false),
        Err(DnsError::Truncated)
    );
    let fail = Reply {
        rcode: ResponseCode::ServFail,
        ..Reply::default()
    };
    assert_eq!(
        decode(&fail.bytes(1, &question), 1, &question, false),
        Err(DnsError::Rcode {
            code: "Server Failure".into()
        })
    );
    let nx = Reply {
        rcode: ResponseCode::NXDomain,
        ..Reply::default()
    };
    let ans = decode(&nx.bytes(1, &question), 1, &question, false).unwrap();
    assert!(ans.nxdomain && ans.records.is_empty());
    // require_dnssec: no AD, no answer (an NXDOMAIN too).
    assert_eq!(
        decode(&Reply::default().bytes(1, &question), 1, &question, true),
        Err(DnsError::NotAuthenticated)
    );
    let nx = Reply {
        rcode: ResponseCode::NXDomain,
        ..Reply::default()
    };
    assert_eq!(
        decode(&nx.bytes(1, &question), 1, &question, true),
        Err(DnsError::NotAuthenticated)
    );
}

#[test]
fn the_record_count_is_bounded() {
    let question = q("_arpx._tcp.lab.example", Kind::Ptr);
    let many: Vec<Record> = (0..=MAX_RECORDS)
        .map(|i| {
            ptr(
                "_arpx._tcp.lab.example",
                &format!("r{i}._arpx._tcp.lab.example"),
            )
        })
        .collect();
    let bytes = Reply {
        answers: many,
        ..Reply::default()
    }
    .bytes(3, &question);
    assert_eq!(
        decode(&bytes, 3, &question, false),
        Err(DnsError::TooManyRecords {
            count: MAX_RECORDS + 1
        })
    );
}

#[test]
fn cnames_are_kept_other_types_dropped() {
    let question = q("router-b.lab.example", Kind::A);
    let bytes = Reply {
        answers: vec![
            cname("router-b.lab.example", "host.lab.example"),
            a("host.lab.example", "192.0.2.2"),
            rr(
                "router-b.lab.example",
                60,
                RData::NS(hickory_proto::rr::rdata::NS(name("ns.lab.example"))),
            ),
        ],
        ..Reply::default()
    }
    .bytes(4, &question);
    let ans = decode(&bytes, 4, &question, false).unwrap();
    assert_eq!(ans.records.len(), 2, "{:?}", ans.records);
    assert_eq!(ans.records[0].data, Data::Cname("host.lab.example".into()));
}

//! Our questions on the wire: one question, RD set (the resolver
//! recurses for us), EDNS(0) with a payload size that avoids IP
//! fragmentation (the DNS flag day 2020 value), and the AD bit when
//! `require_dnssec` asks the resolver to say whether it validated
//! (RFC 6840 §5.7: AD in a query asks for AD in the answer, without
//! DNSSEC records).

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::Name;

use super::answer::Question;

/// EDNS(0) UDP payload we advertise.
pub const UDP_PAYLOAD: u16 = 1232;

/// Why a question could not be put on the wire (a search domain the
/// schema accepted but DNS does not, e.g. a label over 63 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadName {
    pub name: String,
    pub reason: String,
}

impl std::fmt::Display for BadName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot ask for {:?}: {}", self.name, self.reason)
    }
}

/// The query message for `q` with `id`.
pub fn encode(id: u16, q: &Question, want_ad: bool) -> Result<Vec<u8>, BadName> {
    let bad = |e: &dyn std::fmt::Display| BadName {
        name: q.name.clone(),
        reason: e.to_string(),
    };
    let mut name = Name::from_ascii(&q.name).map_err(|e| bad(&e))?;
    name.set_fqdn(true);
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.metadata.authentic_data = want_ad;
    m.add_query(Query::query(name, q.kind.record_type()));
    let mut edns = Edns::new();
    edns.set_max_payload(UDP_PAYLOAD);
    m.set_edns(edns);
    m.to_vec().map_err(|e| bad(&e))
}

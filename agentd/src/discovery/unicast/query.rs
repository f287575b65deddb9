//! Our questions on the wire: one question, RD set (the resolver
//! recurses for us), EDNS(0) with a payload size that avoids IP
//! fragmentation (the DNS flag day 2020 value), and the AD bit when
//! `require_dnssec` asks the resolver to say whether it validated
//! (RFC 6840 §5.7: AD in a query asks for AD in the answer, without
//! DNSSEC records).

use super::answer::Question;
use super::wire;

/// EDNS(0) UDP payload we advertise.
pub const UDP_PAYLOAD: u16 = 1232;

/// Why a question could not be put on the wire (a search domain the
/// schema accepted but DNS does not, e.g. a label over 63 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadName {
    pub name: String,
    pub reason: wire::NameError,
}

impl std::fmt::Display for BadName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot ask for {:?}: {}", self.name, self.reason)
    }
}

/// The query message for `q` with `id`.
pub fn encode(id: u16, q: &Question, want_ad: bool) -> Result<Vec<u8>, BadName> {
    let flags = wire::FLAG_RD | if want_ad { wire::FLAG_AD } else { 0 };
    wire::write_query(id, flags, &q.name, q.kind.record_type(), UDP_PAYLOAD).map_err(|reason| {
        BadName {
            name: q.name.clone(),
            reason,
        }
    })
}

//! Requests answered by the client listeners, by listener, outcome and
//! HTTP status: the `agentgw_requests_total` family. Counted when the
//! response head is ready (a stream counts once, with its status).
//!
//! Cardinality is bounded by construction: two listeners, a fixed set of
//! outcomes, and status codes that are either ones HTTP names or folded
//! into their class (`5xx`): a handler answering odd codes cannot grow the
//! table.

use std::cell::RefCell;
use std::collections::BTreeMap;

use http::{HeaderMap, StatusCode};

use crate::front::Ingress;
use crate::peer::OUTCOME_HEADER;

/// How a request ended, as `x-agentd-outcome` marks it; `answered` when
/// the gateway or the handler answered without such a mark (the status
/// then says how).
pub const OUTCOMES: [&str; 6] = [
    "answered",
    "rejected",
    "not_delivered",
    "unknown",
    "error",
    "other",
];

/// The counter key: (listener, outcome, status label).
type Key = (&'static str, &'static str, StatusLabel);

/// A status code HTTP names, or its class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StatusLabel {
    Code(u16),
    Class(u8),
}

impl StatusLabel {
    pub fn of(status: StatusCode) -> StatusLabel {
        if status.canonical_reason().is_some() {
            StatusLabel::Code(status.as_u16())
        } else {
            StatusLabel::Class((status.as_u16() / 100) as u8)
        }
    }

    pub fn render(self) -> String {
        match self {
            StatusLabel::Code(c) => c.to_string(),
            StatusLabel::Class(c) => format!("{c}xx"),
        }
    }
}

#[derive(Debug, Default)]
pub struct RequestCounts {
    counts: RefCell<BTreeMap<Key, u64>>,
}

impl RequestCounts {
    /// Counts one response of `ingress` with this status and headers.
    pub fn note(&self, ingress: &Ingress, status: StatusCode, headers: &HeaderMap) {
        let listener = match ingress {
            Ingress::Lan => "lan",
            Ingress::Public => "public",
            Ingress::Peer => "peer",
            Ingress::Agent(_) => "agent",
        };
        let outcome = match headers.get(OUTCOME_HEADER) {
            None => "answered",
            Some(v) => OUTCOMES[1..]
                .iter()
                .find(|o| v.as_bytes() == o.as_bytes())
                .copied()
                .unwrap_or("other"),
        };
        let key = (listener, outcome, StatusLabel::of(status));
        *self.counts.borrow_mut().entry(key).or_insert(0) += 1;
    }

    /// Every (listener, outcome, status, count) seen so far, ordered.
    pub fn rows(&self) -> Vec<(&'static str, &'static str, String, u64)> {
        self.counts
            .borrow()
            .iter()
            .map(|((l, o, s), n)| (*l, *o, s.render(), *n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(outcome: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(OUTCOME_HEADER, http::HeaderValue::from_static(outcome));
        h
    }

    #[test]
    fn responses_count_by_listener_outcome_and_status() {
        let c = RequestCounts::default();
        c.note(&Ingress::Lan, StatusCode::OK, &HeaderMap::new());
        c.note(&Ingress::Lan, StatusCode::OK, &HeaderMap::new());
        c.note(
            &Ingress::Public,
            StatusCode::TOO_MANY_REQUESTS,
            &marked("rejected"),
        );
        c.note(
            &Ingress::Lan,
            StatusCode::BAD_GATEWAY,
            &marked("not_delivered"),
        );
        assert_eq!(
            c.rows(),
            vec![
                ("lan", "answered", "200".to_string(), 2),
                ("lan", "not_delivered", "502".to_string(), 1),
                ("public", "rejected", "429".to_string(), 1),
            ]
        );
    }

    #[test]
    fn odd_statuses_fold_into_their_class_and_odd_marks_into_other() {
        let c = RequestCounts::default();
        for code in 520..600 {
            c.note(
                &Ingress::Lan,
                StatusCode::from_u16(code).unwrap(),
                &marked("made-up"),
            );
        }
        assert_eq!(c.rows(), vec![("lan", "other", "5xx".to_string(), 80)]);
    }
}

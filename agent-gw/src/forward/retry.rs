//! When a failed attempt may move to the next candidate (DESIGN §7).
//!
//! Pure decision, so every rule is a unit test:
//! - never delivered (connect refused/unreachable, request handed back
//!   unsent) → move on, whatever the call;
//! - possibly delivered → move on only for a synchronous call that is
//!   idempotent (route contract or caller header) *and* carries an
//!   idempotency key, with no response byte received;
//! - resumed streams never move (their history lives with the producer),
//!   and async tasks never move once possibly delivered.

/// How far an attempt got before failing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Provably never reached a handler.
    NotDelivered,
    /// Bytes may have reached the handler; no response byte came back.
    MaybeDelivered,
}

/// What kind of call is being forwarded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallKind {
    /// Plain request/response (not async, not a stream).
    pub sync: bool,
    /// Resume of an existing stream (`Last-Event-ID` > 0).
    pub resumed_stream: bool,
    /// The caller asserted idempotency (`X-Agentd-Idempotent`).
    pub caller_idempotent: bool,
    /// An `Idempotency-Key` header is present.
    pub has_key: bool,
}

/// May the call try another candidate after `failure` on a route whose
/// contract says `route_idempotent`?
pub fn may_move(kind: CallKind, failure: Failure, route_idempotent: bool) -> bool {
    if kind.resumed_stream {
        return false;
    }
    match failure {
        Failure::NotDelivered => true,
        Failure::MaybeDelivered => {
            kind.sync && kind.has_key && (kind.caller_idempotent || route_idempotent)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYNC: CallKind = CallKind {
        sync: true,
        resumed_stream: false,
        caller_idempotent: false,
        has_key: false,
    };

    #[test]
    fn never_delivered_always_moves_except_resumed_streams() {
        assert!(may_move(SYNC, Failure::NotDelivered, false));
        assert!(may_move(
            CallKind {
                sync: false,
                ..SYNC
            },
            Failure::NotDelivered,
            false
        ));
        assert!(!may_move(
            CallKind {
                resumed_stream: true,
                ..SYNC
            },
            Failure::NotDelivered,
            true
        ));
    }

    #[test]
    fn possibly_delivered_needs_sync_idempotent_and_key() {
        let keyed = CallKind {
            has_key: true,
            ..SYNC
        };
        assert!(may_move(keyed, Failure::MaybeDelivered, true));
        assert!(may_move(
            CallKind {
                caller_idempotent: true,
                ..keyed
            },
            Failure::MaybeDelivered,
            false
        ));
        assert!(
            !may_move(keyed, Failure::MaybeDelivered, false),
            "not idempotent"
        );
        assert!(!may_move(SYNC, Failure::MaybeDelivered, true), "no key");
        assert!(
            !may_move(
                CallKind {
                    sync: false,
                    ..keyed
                },
                Failure::MaybeDelivered,
                true
            ),
            "async task"
        );
    }
}

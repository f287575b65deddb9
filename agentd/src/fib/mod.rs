//! The FIB: what agent-gw needs to decide on its own — every route (with
//! its absolute lease deadline), which peer sessions are down, and the
//! policy, stamped with a generation.
//!
//! agentd streams it to each subscriber as a snapshot followed by deltas:
//!
//! ```text
//! SnapshotBegin{g}  SnapshotChunk[..]*  SnapshotEnd{g}  Delta{base:g, generation:g1}  Delta{base:g1, ..} ...
//! ```
//!
//! A delta applies only on top of the generation named by `base`; a replica
//! whose generation differs has missed something and must resubscribe (it
//! then gets a fresh snapshot). Changes are whole-route upserts and
//! removals, so applying one twice is harmless: that is what lets a big
//! change set be split across several frames (the follow-up parts carry
//! `base == generation`).
//!
//! Lease deadlines travel as absolute `CLOCK_MONOTONIC` instants, which
//! mean the same in both processes, so the replica expires routes on time
//! by itself — also while agentd is down.
//!
//! [`export::FibExporter`] is the agentd side, [`replica::FibReplica`] the
//! agent-gw side; both are sans-IO.

pub mod export;
pub mod replica;

use serde::{Deserialize, Serialize};

use crate::policy::Policy;
use crate::route::{Route, RouteId};

/// One frame's worth of FIB stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FibEvent {
    /// A full copy follows; the receiver starts a fresh table.
    SnapshotBegin {
        generation: u64,
    },
    SnapshotChunk(Vec<Route>),
    /// The copy is complete and describes `generation`.
    SnapshotEnd {
        generation: u64,
        policy: Box<Policy>,
        /// Routers whose session is down: their routes are ineligible.
        peers_down: Vec<Box<str>>,
    },
    /// Changes turning generation `base` into `generation`.
    Delta {
        base: u64,
        generation: u64,
        changes: Vec<FibChange>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FibChange {
    /// Insert or replace a whole route (also for renewals and health).
    Upsert(Box<Route>),
    Remove(RouteId),
    /// A peer session went down or came back.
    PeerUp {
        router_id: Box<str>,
        up: bool,
    },
    /// The policy was replaced (reload).
    Policy(Box<Policy>),
}

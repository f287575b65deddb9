//! The FIB: what agent-gw needs to decide on its own — every route (with
//! its absolute lease deadline), which peer sessions are down, the
//! policy, and the links (the established ARPX sessions with the key each
//! one verified and the peer's data-plane address), stamped with a
//! generation.
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
//! Links follow the sessions: `Link` when a session is established (or
//! its key or data address changed), `Unlink` when it closes — never later
//! than the `PeerUp { up: false }` of the same event. The data plane
//! dials and accepts peer connections only for the routers in this set
//! and trusts exactly the key given here, so there is no second trust
//! configuration to drift from the one ARPX enforces. Like policy
//! changes, link changes do not advance the table generation (a delta
//! carrying only them has `base == generation`).
//!
//! Agent addresses follow the per-agent IPv6 service (DESIGN §7): `Bind`
//! once an agent's /128 is on its link, `Unbind` once it is released.
//! agent-gw serves exactly these addresses, each pinned to its agent.
//! Like links they do not advance the table generation.
//!
//! [`export::FibExporter`] is the agentd side, [`replica::FibReplica`] the
//! agent-gw side; both are sans-IO.

pub mod agent_addrs;
pub mod export;
pub mod replica;

use serde::{Deserialize, Serialize};

use crate::policy::Policy;
use crate::route::{Route, RouteId};

/// Most links a FIB may hold. agentd has at most one per configured peer;
/// a replica refuses a stream that would give it more (a broken or hostile
/// sender must not grow the gateway without bound).
pub const MAX_LINKS: usize = 4096;

/// Longest `data` address a link may carry: a DNS name (253) in brackets
/// plus `:65535`.
pub const MAX_LINK_DATA_LEN: usize = 253 + 2 + 6;

/// Most agent addresses a FIB may hold: the largest `ipv6.max_addresses`.
pub const MAX_AGENT_ADDRS: usize = 65536;

/// A public IPv6 address bound to one agent (DESIGN §7 "IPv6 /128"): what
/// arrives there goes to this agent's routes and nowhere else.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AgentAddr {
    pub addr: std::net::Ipv6Addr,
    pub tenant: Box<str>,
    /// The agent's URI (`agent://tenant/name`): the routes it may reach.
    pub origin: Box<str>,
    pub capability: Box<str>,
}

impl AgentAddr {
    /// Whether it is well-formed: the identifiers a route of its agent
    /// would have. agentd publishes only its own bindings; the replica
    /// checks what it receives.
    pub fn check(&self) -> Result<(), String> {
        let a = self.addr;
        crate::route::check_tenant(&self.tenant)
            .and_then(|()| crate::route::check_agent_uri(&self.origin))
            .and_then(|()| crate::route::check_capability(&self.capability))
            .map_err(|e| format!("agent address {a}: {e}"))?;
        if a.is_unspecified() || a.is_loopback() || a.is_multicast() {
            return Err(format!("agent address {a}: not a unicast address"));
        }
        Ok(())
    }
}

/// An established ARPX session's data-plane facts: the data plane trusts
/// exactly the key the ARPX handshake verified (no second trust config).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerLink {
    pub router_id: Box<str>,
    /// Raw Ed25519 public key of the peer, as its ARPX session verified it.
    pub key: [u8; 32],
    /// `host:port` to dial for its data plane: the peer section's `address`
    /// and `data_port` (an IPv6 literal in brackets).
    pub data: Box<str>,
    /// Calls over this link carry forwarding assertions: the peer is
    /// outside our domain (trusted by its pinned key) or its section sets
    /// `sign_calls`. Otherwise the domain CA vouched for it and the
    /// mutually authenticated link alone authenticates each call
    /// (DESIGN §3).
    pub signed: bool,
    /// The relay roles (DESIGN §7): how the data plane reaches the peer.
    pub relay: LinkRelay,
}

/// How the data plane reaches a linked router.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkRelay {
    /// Dial its `data` address.
    #[default]
    Direct,
    /// A client router behind NAT (we are its relay): never dialled; it
    /// opens a tunnel to our peer listener, and calls toward it ride
    /// that tunnel.
    Client,
    /// The relay we use: dial `data` as usual, and also keep a tunnel to
    /// it on which it opens calls toward us.
    Server,
}

impl PeerLink {
    /// The peer's address, when `data` names it literally (`a.b.c.d:port`
    /// or `[v6]:port`).
    pub fn ip(&self) -> Option<std::net::IpAddr> {
        self.data
            .parse::<std::net::SocketAddr>()
            .ok()
            .map(|a| a.ip().to_canonical())
    }

    /// Whether the link is well-formed: a valid router id and a non-empty
    /// printable `data` address within [`MAX_LINK_DATA_LEN`]. agentd checks
    /// what it publishes; the replica checks what it receives.
    pub fn check(&self) -> Result<(), String> {
        crate::route::check_router_id(&self.router_id).map_err(|e| e.to_string())?;
        let d = &*self.data;
        if d.is_empty() || d.len() > MAX_LINK_DATA_LEN {
            return Err(format!(
                "link of {}: data address must be 1..={MAX_LINK_DATA_LEN} bytes",
                self.router_id
            ));
        }
        if !d.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "link of {}: data address {d:?} is not host:port",
                self.router_id
            ));
        }
        Ok(())
    }
}

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
        /// The established sessions, sorted by router_id. A set too big
        /// for one frame continues in deltas right after (`base ==
        /// generation`), which the replica applies like any other.
        links: Vec<PeerLink>,
        /// The bound agent addresses, sorted; like links, a set too big
        /// for one frame continues in deltas right after.
        agent_addrs: Vec<AgentAddr>,
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
    /// A session was established, or its key or data address changed:
    /// replaces any link of the same router.
    Link(PeerLink),
    /// The session with this router closed.
    Unlink(Box<str>),
    /// An agent's address is on its link now: replaces any binding of
    /// the same address.
    Bind(AgentAddr),
    /// The address was released.
    Unbind(std::net::Ipv6Addr),
}

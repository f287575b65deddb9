//! The peer data plane: calls between routers over HTTP/2 + mTLS.
//!
//! ```text
//!  FIB links ──▶ plane::PeerPlane::sync ──▶ tls (trust = linked keys)
//!                                      └──▶ conns (one warm h2 connection per link)
//!  caller's router: forward (Dest::Peer) ─ outbound: assertion, h2 stream ─▶ next hop
//!  next hop: listener (mTLS, h2) ─▶ inbound: assertion, policy, hop ─▶ local handler
//!                                                                  └─▶ onward (re-signed)
//! ```
//!
//! * [`assertion`] — what a router signs when it forwards a call, and the
//!   receiver's checks; [`merkle`] — the batch hash tree; [`signer`] —
//!   one signature per event-loop turn and target; [`roots`] — batch
//!   roots already verified; [`replay`] — the bounded replay windows.
//! * [`tls`], [`conns`], [`listener`] — the transport ([`coalesce`]: one
//!   TLS record per turn, not per frame); [`follow`] applies
//!   the FIB's links to it ([`plane`] holds the state).
//! * [`outbound`], [`inbound`] — the two ends of one hop.
//! * [`remote`] — task handles of calls that live on another router.

pub mod assertion;
pub mod coalesce;
pub mod conns;
pub mod identity;
pub mod link;
pub mod merkle;
pub mod outbound;
pub mod plane;
pub mod remote;
pub mod replay;
pub mod roots;
pub mod signer;
pub mod tls;

use std::cell::Cell;
use std::future::Future;

pub use link::Link;
pub use plane::PeerPlane;

/// Request header: the forwarding assertion of this hop.
pub const ASSERTION_HEADER: &str = "x-agentd-assertion";
pub use crate::forward::hop::OUTCOME_HEADER;

/// Runs hyper's h2 connection and stream tasks on the current thread's
/// `LocalSet` (the gateway is single-threaded; its bodies are `!Send`).
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: Future + 'static,
{
    fn execute(&self, fut: F) {
        tokio::task::spawn_local(fut);
    }
}

/// Counters for `agentctl stats` (gateway section).
#[derive(Debug, Default)]
pub struct PeerStats {
    /// Open data connections, both directions.
    pub conns: Cell<u64>,
    pub handshakes_out: Cell<u64>,
    pub handshakes_in: Cell<u64>,
    /// Streams the listener refused or reset (oversized, refused before
    /// dispatch); their connections stay up.
    pub streams_refused: Cell<u64>,
    /// Assertions that passed every check.
    pub assertions_verified: Cell<u64>,
    /// Calls passed through unread (`pipeline::transit`), and their body
    /// bytes.
    pub transit_calls: Cell<u64>,
    pub transit_bytes: Cell<u64>,
}

impl PeerStats {
    pub fn add(c: &Cell<u64>, n: u64) {
        c.set(c.get().saturating_add(n));
    }
}

/// Sizes of the h2 connections, both ends. Windows bound what one stream
/// and one connection may have in flight unread (memory); frames and
/// header lists are bounded like the SDK listener's heads.
pub mod h2_settings {
    use crate::peer::LocalExec;

    /// Most concurrent streams a peer may open on one connection.
    pub const MAX_STREAMS: u32 = 256;
    /// Per stream: a 64 KiB body goes out without waiting for an update.
    pub const STREAM_WINDOW: u32 = 256 * 1024;
    pub const CONN_WINDOW: u32 = 2 * 1024 * 1024;
    pub const MAX_FRAME: u32 = 64 * 1024;
    pub const MAX_HEADERS: u32 = crate::http_head::MAX_HEAD_BYTES as u32;

    pub fn client(b: &mut hyper::client::conn::http2::Builder<LocalExec>) {
        b.initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONN_WINDOW)
            .max_frame_size(MAX_FRAME)
            .max_header_list_size(MAX_HEADERS)
            .max_concurrent_streams(MAX_STREAMS);
    }

    pub fn server(b: &mut hyper::server::conn::http2::Builder<LocalExec>) {
        b.initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONN_WINDOW)
            .max_frame_size(MAX_FRAME)
            .max_header_list_size(MAX_HEADERS)
            .max_concurrent_streams(MAX_STREAMS);
    }
}

//! ARPX: how agentd routers exchange routes.
//!
//! * [`message`] — the messages and their wire rules.
//! * [`frame`] — length-prefixed postcard frames, bounded, batched.
//! * [`sign`] — origin signatures over a route's stable fields.
//! * [`session`] — one connection's state machine (Open, heartbeats,
//!   sequence numbers, snapshot framing).
//! * [`instance`] — the mesh: sessions, path rules, multipath, export and
//!   reflection, graceful retention, collisions.
//! * [`bytes`] — keys, digests and signatures (raw on the wire, hex in JSON).
//!
//! Everything here is sans-IO: no sockets, no clocks. Time enters as
//! arguments, so tests replay recorded inputs.

pub mod bytes;
pub mod frame;
pub mod instance;
pub mod message;
pub mod session;
pub mod sign;
#[doc(hidden)]
pub mod testing;
pub mod wire;

pub use bytes::Bytes;
pub use message::{CloseCode, Message, RouteAd};

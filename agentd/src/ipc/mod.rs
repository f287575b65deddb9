//! The agentd IPC protocol (DESIGN §9 "IPC"): a Unix stream socket
//! carrying `u32`-length-prefixed postcard frames.
//!
//! * [`frame`] — the framing and its bounded, sans-IO decoder.
//! * [`message`] — handshake, requests, responses.
//! * [`error`] — the typed refusals.
//! * [`discovery`] — candidates, approve, revoke.
//! * [`client`] — the tokio client of agent-gw and agentctl.
//! * [`server`] — agentd's accept loop and the channel interface to its
//!   state loop; [`admission`] — who gets a connection slot.

pub mod admission;
pub mod client;
pub mod convert;
pub mod discovery;
pub mod error;
pub mod frame;
pub mod message;
pub mod server;

#[cfg(test)]
mod tests;

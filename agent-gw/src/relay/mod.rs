//! The relay roles (DESIGN §7 "Relay (NAT)"): a router behind NAT keeps
//! an outbound mutual-TLS tunnel to a relay and serves HTTP/2 on it with
//! the roles reversed, so the relay opens streams toward it.
//!
//! Which relay a client uses is agentd's choice (its ARPX session with
//! that relay, `agentd::daemon::relay`); the tunnel follows the link.
//!
//! * [`tunnel`] — HTTP/2 with the roles reversed on the client's
//!   connection: PING liveness both ways, per-client stream and byte
//!   bounds at the relay.

pub mod tunnel;

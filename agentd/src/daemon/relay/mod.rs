//! The relay roles' control plane (DESIGN §7 "Relay (NAT)").
//!
//! A client router behind NAT holds an ARPX session with one relay at a
//! time, chosen by [`failover`]; the relay advertises the client's routes
//! with itself in the path. agent-gw follows the session with a tunnel
//! (`agent_gw::relay::tunnel`) on which the relay opens calls toward the
//! client.
//!
//! * [`failover`] — which relay a client uses (preference order, backoff
//!   with jitter, make-before-break failback), sans-IO.

pub mod failover;

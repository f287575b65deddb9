//! Unicast DNS-SD across domains (DESIGN §6, RFC 6763), the parts
//! without I/O.
//!
//! * [`query`] — our questions on the wire.
//! * [`answer`] — the bounded decoder of a resolver's answers.
//! * [`wire`] — the DNS message codec both use.
//! * [`browse`] — the lookup rounds per search domain (time is an
//!   argument): questions out, found and lost instances in.
//! * [`zone`] — the zone lines that publish this router.
//!
//! The UDP/TCP exchange is `daemon::discovery::dns`.

pub mod answer;
pub mod browse;
pub mod query;
pub mod wire;
pub mod zone;

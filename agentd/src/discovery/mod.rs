//! Router discovery and admission (DESIGN §6), the parts without I/O.
//!
//! * [`record`] — the `_arpx._tcp` TXT record: our encoder and the
//!   bounded decoder for other routers' announcements.
//! * [`table`] — the candidate table: lifetime, record versions,
//!   admission modes (time is an argument).
//! * [`approval`] — `agentctl approve` / `revoke` as edits of the
//!   configuration file (a `peer` section with `discovered '1'`).
//!
//! * [`unicast`] — unicast DNS-SD across domains: questions, answers,
//!   lookup rounds, and the zone lines that publish us.
//!
//! The mDNS announce/browse driver and the DNS exchange are
//! `daemon::discovery`.

pub mod approval;
pub mod mdns;
pub mod record;
pub mod table;
pub mod unicast;

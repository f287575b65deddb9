//! Router discovery and admission (DESIGN §6), the parts without I/O.
//!
//! * [`record`] — the `_arpx._tcp` TXT record: our encoder and the
//!   bounded decoder for other routers' announcements.
//! * [`table`] — the candidate table: lifetime, record versions,
//!   admission modes (time is an argument).
//! * [`approval`] — `agentctl approve` / `revoke` as edits of the
//!   configuration file (a `peer` section with `discovered '1'`).
//!
//! The mDNS announce/browse driver is `daemon::discovery`.

pub mod approval;
pub mod record;
pub mod table;

//! agentctl: the command-line client of agentd and the backend of its
//! rpcd exec plugin (ubus object `agentd`).
//!
//! Parsing ([`command`]), transport-independent rendering ([`render`]) and
//! the rpcd protocol ([`rpcd`]) are library code so tests exercise them
//! without a process; `bin/agentctl.rs` only wires them to the socket.

pub mod args;
pub mod command;
pub mod discovery;
mod discovery_records;
pub mod ipv6;
pub mod peers;
pub mod pki;
pub mod pki_identity;
mod pki_show;
pub mod render;
pub mod rpcd;
pub mod run;
pub mod table;

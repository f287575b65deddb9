//! agentd: the routing service of the agentd suite.
//!
//! The library holds the parts both daemons share — the route model,
//! selection and the FIB/IPC contract — so that agent-gw decides on exactly
//! the same code as `agentctl lookup` explains. Daemon-only machinery sits
//! behind the `daemon` feature.

pub mod accept;
pub mod backoff;
pub mod endpoint;
pub mod fib;
pub mod health;
pub mod heap;
pub mod ipc;
pub mod lease;
pub mod log;
pub mod owner;
pub mod policy;
pub mod route;
pub mod score;
pub mod select;
pub mod table;
pub mod time;

#[cfg(feature = "daemon")]
pub mod cli;
#[cfg(feature = "daemon")]
pub mod config;
#[cfg(feature = "daemon")]
pub mod daemon;
#[cfg(feature = "daemon")]
pub mod discovery;
#[cfg(feature = "daemon")]
pub mod ipv6;

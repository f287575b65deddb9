//! Per-agent public IPv6 addresses (DESIGN §7 "IPv6 /128").
//!
//! An agent that asks for an address gets one out of the router's
//! configured prefix, derived like an RFC 7217 stable identifier from who
//! the agent is — (prefix, tenant, origin, capability) and a secret of
//! this router — so the same agent gets the same address back after a
//! restart or a re-registration, and nobody outside can guess which
//! addresses are in use. [`derive`] is that function; [`pool`] the
//! bounded table of addresses bound now. Both are pure: the kernel side
//! ([`kernel`], rtnetlink messages of [`netlink`]) applies what the pool
//! decided.

pub mod derive;
pub mod kernel;
pub mod netlink;
pub mod pool;

pub use derive::{derive, AgentKey, Prefix, PrefixError};
pub use pool::{Binding, Bound, Pool, PoolError};

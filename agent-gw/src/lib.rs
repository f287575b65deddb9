//! agent-gw: the data plane of the agentd suite.
//!
//! Terminates HTTP, authenticates callers, decides on its own FIB replica
//! (no IPC round trip per request) and forwards invocations.
//!
//! Layers, each importing only those below: `serve` (listeners, one
//! acceptor, dispatch) → `front` (SDK API, MCP, A2A, neighbour routers;
//! each builds a typed `Invocation`) → `pipeline` (`pipeline::invoke`:
//! admission, decision, placement, dispatch) → `core` (what they share)
//! → `peer` and `forward` (transports) → the base modules (`api`, `auth`,
//! limits, tasks, config, the FIB replica). docs/architecture.md draws it.

pub mod api;
pub mod auth;
pub mod body;
pub mod budget;
pub mod catalog;
pub mod config;
pub mod control;
pub mod core;
pub mod fib_sync;
pub mod forward;
pub mod front;
pub mod handshake;
pub mod hex;
pub mod http_head;
pub mod jsonrpc;
pub mod limits;
pub mod listen;
pub mod metrics;
pub mod origin;
pub mod peer;
pub mod pipeline;
pub mod program;
pub mod relay;
pub mod router;
pub mod serve;
pub mod sources;
pub mod stats;
pub mod target;
pub mod task;

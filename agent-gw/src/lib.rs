//! agent-gw: the data plane of the agentd suite.
//!
//! Terminates HTTP, authenticates callers, decides on its own FIB replica
//! (no IPC round trip per request) and forwards invocations.
//!
//! Layout: `server` (listener, dispatch) → `router` (path table) →
//! `endpoints` (one function per endpoint) using `api` (wire types,
//! strict JSON, errors), `limits` (size/rate/concurrency), `sources`
//! (per-source connection shares), `fib_sync`
//! (replica + decision), `control` (registration IPC) and `forward`
//! (pool, deadline, retry, typed outcomes); `peer` (the data plane between
//! routers: forwarding assertions so far); `metrics` (the Prometheus
//! endpoint on `admin_listen`).

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
pub mod http_head;
pub mod jsonrpc;
pub mod limits;
pub mod metrics;
pub mod origin;
pub mod peer;
pub mod pipeline;
pub mod router;
pub mod serve;
pub mod sources;
pub mod stats;
pub mod task;

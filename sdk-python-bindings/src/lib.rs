//! agentd Python SDK — the native half of `agentd_sdk`.
//!
//! Everything that must keep working while Python is busy lives here and
//! runs without the GIL: the served handler endpoint's HTTP server
//! (`server`, `endpoint`), the lease keeper thread (`keeper`, driving the
//! pure `renew` machine), the router client (`http::client`, `auth`) and
//! resumable stream reading (`sse`, `resume`). The `py` module (cargo
//! feature `python`, enabled by maturin) is thin glue; the Python package
//! (`python/agentd_sdk`) adds decorators, JSON and the exception classes.
//!
//! Plain `cargo build/test` leave the `python` feature off, so the
//! workspace never needs libpython.

pub mod auth;
pub mod browse;
pub mod call;
pub mod endpoint;
pub mod envelope;
pub mod http;
pub mod keeper;
pub mod renew;
pub mod resume;
pub mod router_url;
pub mod server;
pub mod sse;
pub mod stream;
pub mod wire;

#[cfg(feature = "python")]
mod py;

//! UCI text format and the typed schema of `/etc/config/agentd`.
//!
//! - [`uci`]: parser and writer for OpenWrt UCI files ([`uci::Package`]).
//! - [`schema`]: every section and option with kind, default, range and
//!   doc ([`schema::SECTIONS`]) — the one source of defaults.
//! - [`Config`]: the validated, typed configuration; errors name file,
//!   section and option ([`ConfigErrors`]).
//! - `defaults_doc` (feature `docs`): the reference page generated from
//!   the schema.
//! - [`demo::DEMO_CONFIG`]: a complete valid config for demos and tests.
//! - `feed::default_config` (feature `docs`): the `/etc/config/agentd`
//!   the OpenWrt feed ships.

pub mod config;
pub mod demo;
#[cfg(feature = "docs")]
mod docs;
pub mod enums;
#[cfg(feature = "docs")]
pub mod feed;
pub mod schema;
pub mod uci;

pub use config::{
    load_package, read_schema_file, Agentd, Arpx, Cloud, Config, ConfigError, ConfigErrorKind,
    ConfigErrors, Constraints, Discovery, Gateway, Ipv6, Mapping, Partial, Peer, Problem, Recovery,
    Relay, Rule, SchemaFileError, SectionRef, StaticRoute, Tenant, Weights, DEFAULT_PATH,
};
#[cfg(feature = "docs")]
pub use docs::defaults_doc;
pub use enums::{
    Action, Admission, Auth, Effect, HealthCheck, Ipv6Mode, LogLevel, ProofLevel, Protocol,
    RelayMode, RouteSource, UciEnum,
};

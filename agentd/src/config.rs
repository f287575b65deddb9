//! From `/etc/config/agentd` (as typed by `uci-schema`) to what the daemon
//! runs on.
//!
//! `uci-schema` owns syntax, defaults and ranges and reports every problem
//! with file/section/option. This module turns a valid [`uci_schema::Config`]
//! into runtime objects: static routes, the policy, lease bounds, limits,
//! the socket path and health-check settings. Conversion problems that
//! the schema cannot see (e.g. two rules with the same id) are reported
//! with the section name too; a broken policy does not fail the whole load
//! but becomes [`Policy::invalid`], which denies every request with the
//! reason until the file is repaired (DESIGN §4).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use uci_schema::{HealthCheck, LogLevel};

use crate::endpoint::{Guard, LocalAddrs};
use crate::health::Thresholds;
use crate::lease::LeasePolicy;
use crate::log::Level;
use crate::policy::{Action, Constraints, Pattern, Policy, Rule};
use crate::route::{Access, Attributes, Contract, Effect, Lease, Route, RouteId, RouteSource};
use crate::score::Weights;

/// Where the IPC socket lives unless the config or `--socket` says otherwise.
pub const DEFAULT_SOCKET: &str = "/var/run/agentd/agentd.sock";
/// Where runtime state lives unless the config says otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/run/agentd";

/// Prefix of route ids derived from `route` section names. Registrations
/// may not use it, so a static route id is never taken by an agent.
pub const STATIC_ID_PREFIX: &str = "static:";

/// Health-check driver settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthSettings {
    /// Probe every checked endpoint this often; `None` disables probing.
    pub interval: Option<Duration>,
    /// `health_check 'tcp'`: connect only, even to http:// endpoints.
    pub tcp_only: bool,
    /// One probe's time budget.
    pub timeout: Duration,
    pub thresholds: Thresholds,
    /// `health_max_probes_per_s`: global cap on probe starts.
    pub max_probes_per_s: u32,
}

impl Default for HealthSettings {
    fn default() -> Self {
        HealthSettings {
            interval: Some(Duration::from_secs(5)),
            tcp_only: true,
            timeout: Duration::from_secs(1),
            thresholds: Thresholds::default(),
            max_probes_per_s: probes_per_s(&uci_schema::Config::default().agentd),
        }
    }
}

fn probes_per_s(main: &uci_schema::config::Agentd) -> u32 {
    u32::try_from(main.health_max_probes_per_s).unwrap_or(u32::MAX)
}

/// Everything the daemon runs on, derived from one configuration file.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub router_id: Box<str>,
    pub socket: PathBuf,
    /// Runtime state (the lease file); `/var/run/agentd` by default.
    pub state_dir: PathBuf,
    pub lease: LeasePolicy,
    pub max_routes: usize,
    /// `route` sections, in file order, as `RouteSource::Static` routes
    /// with `Lease::Permanent` and id `static:<section>`.
    pub static_routes: Vec<Route>,
    pub policy: Policy,
    pub health: HealthSettings,
    pub log_level: Level,
    /// Where registrations' endpoints may point: this router's listener
    /// ports and `agentd.allow_loopback_endpoints`.
    pub endpoints: Guard,
}

impl Default for Runtime {
    /// What agentd runs on without any file: no routes, allow by default.
    fn default() -> Self {
        Runtime {
            router_id: "agentd".into(),
            socket: PathBuf::from(DEFAULT_SOCKET),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            lease: LeasePolicy::default(),
            max_routes: 10_000,
            static_routes: Vec::new(),
            policy: Policy::default(),
            health: HealthSettings::default(),
            log_level: Level::Info,
            endpoints: Guard::of_config(&uci_schema::Config::default()),
        }
    }
}

/// Why a configuration could not be used at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// The file could not be read.
    Read {
        path: PathBuf,
        kind: std::io::ErrorKind,
    },
    /// Schema or conversion errors, each already naming file, section and
    /// option; one per line.
    Invalid(Vec<String>),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Read { path, kind } => write!(f, "cannot read {}: {kind}", path.display()),
            LoadError::Invalid(errors) => f.write_str(&errors.join("; ")),
        }
    }
}

impl std::error::Error for LoadError {}

impl LoadError {
    /// One error per line, for `--check-config`.
    pub fn lines(&self) -> Vec<String> {
        match self {
            LoadError::Invalid(errors) => errors.clone(),
            other => vec![other.to_string()],
        }
    }
}

/// Reads and converts `path`.
pub fn load_file(path: &Path) -> Result<Runtime, LoadError> {
    if let Err(e) = std::fs::metadata(path) {
        return Err(LoadError::Read {
            path: path.into(),
            kind: e.kind(),
        });
    }
    let config = uci_schema::Config::load(path).map_err(invalid)?;
    from_config(&config, &path.display().to_string())
}

/// Converts configuration text; `file` names it in errors.
pub fn load_str(text: &str, file: &str) -> Result<Runtime, LoadError> {
    let config = uci_schema::Config::from_str(text, file).map_err(invalid)?;
    from_config(&config, file)
}

/// The embedded demo configuration (`agentd --demo`).
pub fn load_demo() -> Result<Runtime, LoadError> {
    load_str(uci_schema::demo::DEMO_CONFIG, "<demo config>")
}

fn invalid(errors: uci_schema::ConfigErrors) -> LoadError {
    LoadError::Invalid(errors.0.iter().map(|e| e.to_string()).collect())
}

/// How a section is named in conversion errors, like `uci-schema` does.
fn section_name(ty: &str, name: Option<&str>, index: usize) -> String {
    match name {
        Some(n) => format!("{ty} '{n}'"),
        None => format!("@{ty}[{index}]"),
    }
}

/// The running configuration from a validated file.
pub fn from_config(c: &uci_schema::Config, file: &str) -> Result<Runtime, LoadError> {
    let mut errors = Vec::new();
    let main = &c.agentd;
    let lease = LeasePolicy::new(main.min_lease, main.default_lease, main.max_lease)
        .unwrap_or_else(|e| {
            errors.push(format!("{file}: agentd 'main': {e}"));
            LeasePolicy::default()
        });
    let thresholds = Thresholds::new(
        u32::try_from(main.health_fail_threshold).unwrap_or(u32::MAX),
        u32::try_from(main.health_recover_threshold).unwrap_or(u32::MAX),
    )
    .unwrap_or_else(|e| {
        errors.push(format!("{file}: agentd 'main': {e}"));
        Thresholds::default()
    });
    let health = HealthSettings {
        interval: match main.health_check {
            HealthCheck::Off => None,
            _ => Some(Duration::from_secs(main.health_interval)),
        },
        tcp_only: main.health_check == HealthCheck::Tcp,
        timeout: Duration::from_millis(main.health_timeout_ms),
        thresholds,
        max_probes_per_s: probes_per_s(main),
    };
    let endpoints = Guard::of_config(c);
    let local = crate::endpoint::local_addrs();
    let mut static_routes = Vec::new();
    for (i, r) in c.routes.iter().enumerate().filter(|(_, r)| r.enabled) {
        match static_route(r, &endpoints, &local) {
            Ok(route) => static_routes.push(route),
            Err(e) => errors.push(format!(
                "{file}: {}: {e}",
                section_name("route", r.section.as_deref(), i)
            )),
        }
    }
    if !errors.is_empty() {
        return Err(LoadError::Invalid(errors));
    }
    let router_id: Box<str> = if main.router_id.is_empty() {
        hostname().into()
    } else {
        main.router_id.as_str().into()
    };
    let socket = if main.ipc_socket.is_empty() {
        PathBuf::from(DEFAULT_SOCKET)
    } else {
        PathBuf::from(&main.ipc_socket)
    };
    Ok(Runtime {
        router_id,
        socket,
        state_dir: if main.state_dir.is_empty() {
            PathBuf::from(DEFAULT_STATE_DIR)
        } else {
            PathBuf::from(&main.state_dir)
        },
        lease,
        max_routes: usize::try_from(main.max_routes).unwrap_or(usize::MAX),
        static_routes,
        policy: policy(c, file),
        health,
        log_level: match main.log_level {
            LogLevel::Error => Level::Error,
            LogLevel::Warn => Level::Warn,
            LogLevel::Info => Level::Info,
            LogLevel::Debug | LogLevel::Trace => Level::Debug,
        },
        endpoints,
    })
}

fn non_empty(s: &str) -> Option<Box<str>> {
    (!s.is_empty()).then(|| s.into())
}

/// A `route` section as a static route with id `static:<id>`. Its
/// endpoint passes the same checks as a registration's, with the
/// section's own `allow_loopback` instead of the global option; a host
/// name is checked by the gateway when it connects.
fn static_route(
    r: &uci_schema::StaticRoute,
    guard: &Guard,
    local: &LocalAddrs,
) -> Result<Route, String> {
    let id = RouteId::new(&format!("{STATIC_ID_PREFIX}{}", r.id))
        .map_err(|e| format!("option 'id': {e}"))?;
    crate::endpoint::check_url(&r.endpoint, &guard.with_loopback(r.allow_loopback), local)
        .map_err(|e| match e {
            crate::endpoint::Refused::Address(why) => {
                format!("option 'endpoint': {} {why} ({})", r.endpoint, why.code())
            }
            crate::endpoint::Refused::Invalid(e) => format!("option 'endpoint': {e}"),
        })?;
    let contract = r.effect.map(|effect| Contract {
        effect: match effect {
            uci_schema::Effect::Read => Effect::Read,
            uci_schema::Effect::Write => Effect::Write,
            uci_schema::Effect::External => Effect::External,
        },
        idempotent: r.idempotent,
        input_schema: non_empty(&r.input_schema),
        description: non_empty(&r.description),
    });
    Ok(Route {
        id,
        capability: r.capability.as_str().into(),
        version: r.version,
        origin: r.origin.as_str().into(),
        endpoint: r.endpoint.as_str().into(),
        tenant: r.tenant.as_str().into(),
        region: r.region.as_str().into(),
        attrs: Attributes {
            latency_ms: r.latency_ms,
            cost_micros: r.cost,
            load_permille: r.load,
            trust: r.trust,
        },
        access: Access {
            allowed_tenants: r
                .allowed_tenants
                .iter()
                .map(|t| t.as_str().into())
                .collect(),
            allowed_sources: r
                .allowed_sources
                .iter()
                .map(|t| t.as_str().into())
                .collect(),
        },
        contract,
        source: RouteSource::Static,
        path: Vec::new(),
        next_hop: None,
        lease: Lease::Permanent,
        healthy: true,
        allow_loopback: r.allow_loopback,
    })
}

/// The policy, or a policy that denies everything and says why.
fn policy(c: &uci_schema::Config, file: &str) -> Policy {
    let mut rules = Vec::new();
    for (i, r) in c.rules.iter().enumerate().filter(|(_, r)| r.enabled) {
        match rule(r) {
            Ok(rule) => rules.push(rule),
            Err(e) => {
                let at = section_name("rule", r.section.as_deref(), i);
                return Policy::invalid(&format!("{file}: {at}: {e}"));
            }
        }
    }
    let action = match c.agentd.default_action {
        uci_schema::Action::Allow => Action::Allow,
        uci_schema::Action::Deny => Action::Deny,
    };
    match Policy::new(rules, action, Weights::default()) {
        Ok(p) => p,
        Err(e) => Policy::invalid(&format!("{file}: {e}")),
    }
}

fn rule(r: &uci_schema::Rule) -> Result<Rule, String> {
    let pattern =
        |opt: &str, v: &str| Pattern::parse(v).map_err(|e| format!("option '{opt}': {e}"));
    let k = &r.constraints;
    let w = &r.weights;
    let weights = Weights::new(w.w_latency, w.d_cost, w.w_load, w.w_trust, w.w_hops)
        .map_err(|e| e.to_string())?;
    let action = match r.action {
        uci_schema::Action::Allow => Action::Allow,
        uci_schema::Action::Deny => Action::Deny,
    };
    Ok(Rule {
        tenant: pattern("tenant", &r.tenant)?,
        source: pattern("source", &r.source)?,
        capability: pattern("capability", &r.capability)?,
        constraints: Constraints {
            region: non_empty(&k.region),
            max_latency_ms: Some(k.max_latency_ms),
            max_cost: Some(k.max_cost),
            max_load: Some(k.max_load),
            min_trust: Some(k.min_trust),
            max_hops: Some(k.max_hops),
            sources: k
                .sources
                .iter()
                .map(|s| match s {
                    uci_schema::RouteSource::Local => RouteSource::Local,
                    uci_schema::RouteSource::Static => RouteSource::Static,
                    uci_schema::RouteSource::Peer => RouteSource::Peer,
                    uci_schema::RouteSource::Relay => RouteSource::Relay,
                })
                .collect(),
            required_peer: non_empty(&k.required_peer),
            denied_peer: non_empty(&k.denied_peer),
            endpoint_prefix: non_empty(&k.endpoint_prefix),
        },
        weights,
        preferred_peer: non_empty(&r.preferred_peer),
        nonpreferred_penalty: r.nonpreferred_penalty,
        ..Rule::new(&r.id, i64::from(r.priority), action)
    })
}

/// The system host name, for an empty `router_id`.
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // within it on success (we also cap at the buffer end).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "agentd".to_string();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

//! From `/etc/config/agentd` (as typed by `uci-schema`) to what the daemon
//! runs on.
//!
//! `uci-schema` owns syntax, defaults and ranges and reports every problem
//! with file/section/option. This module turns the valid part of a file
//! ([`uci_schema::Partial`]) into runtime objects: static routes, the
//! policy, lease bounds, limits, the socket path and health-check
//! settings. Conversion problems the schema cannot see are handled like
//! schema problems: the section is skipped and the problem recorded
//! ([`Runtime::problems`]). Whenever the policy is not known exactly (a
//! rule skipped, a syntax error before the end of the file, ...) it is
//! [`Policy::invalid`], which denies every request with the reason until
//! the file is repaired (DESIGN §4).
//!
//! Startup takes the partial result (a typo must not be an outage); a
//! reload and `--check-config` are strict ([`load_file`], [`load_str`]).
//! Both read the text as a router's whole file: an empty file, one
//! without `config agentd 'main'`, or peers without `router_id` are
//! problems too ([`uci_schema::Partial::whole_file`]).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use uci_schema::{ConfigError, ConfigErrorKind, HealthCheck, LogLevel, Partial, Problem, Recovery};

use crate::daemon::origins::{Quotas, TrustCaps};
use crate::endpoint::{Guard, LocalAddrs};
use crate::health::Thresholds;
use crate::lease::LeasePolicy;
use crate::log::Level;
use crate::owner::AgentPin;
use crate::policy::{Action, Constraints, Pattern, Policy, Rule};
use crate::route::{
    Access, Attributes, Contract, Effect, Lease, OriginProof, Route, RouteId, RouteSource,
};
use crate::score::Weights;

/// Prefix of route ids derived from `route` section names. Registrations
/// may not use it, so a static route id is never taken by an agent.
pub const STATIC_ID_PREFIX: &str = "static:";

/// The schema default of `agentd.ipc_socket`, for tools that cannot read
/// the file.
pub fn default_socket() -> PathBuf {
    PathBuf::from(&uci_schema::Config::defaults().agentd.ipc_socket)
}

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
    /// The schema defaults.
    fn default() -> Self {
        health_settings(
            &uci_schema::Config::defaults().agentd,
            Thresholds::default(),
        )
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
    /// What the file had wrong and what was done about each problem
    /// (skipped section, option at its default, ...); empty when valid.
    pub problems: Vec<Problem>,
    /// Route quotas of local registrations.
    pub quotas: Quotas,
    /// The trust LAN registrations are granted at most, per tenant.
    pub trust_caps: TrustCaps,
    /// `agent` sections by origin.
    pub pins: HashMap<Box<str>, AgentPin>,
    /// The ARPX driver's options: identity, `arpx`, enabled `peer`s.
    pub mesh: crate::daemon::peers::settings::MeshSettings,
    /// Discovery: the `discovery` section, announced ports, approvals.
    pub discovery: crate::daemon::discovery::settings::DiscoverySettings,
    /// Notes on options of other sections that do more than they seem
    /// to (see [`Runtime::advice`]).
    pub notes: Vec<String>,
    /// The per-agent address section (`daemon::ipv6`).
    pub ipv6: uci_schema::Ipv6,
}

impl Runtime {
    /// Warnings about options that are valid but cannot do what they
    /// say (printed by `--check-config`, logged at start and reload).
    pub fn advice(&self) -> Vec<String> {
        let d = &self.discovery;
        let admits_by_itself = d.enabled
            && matches!(
                d.mode,
                uci_schema::Admission::SameDomain | uci_schema::Admission::Allowlist
            );
        let mut out = self.notes.clone();
        out.extend(crate::daemon::peers::settings::reflection_advice(
            &self.mesh,
            admits_by_itself,
        ));
        out
    }
}

impl Default for Runtime {
    /// What agentd runs on without any file: every option at its schema
    /// default, no routes, allow by default.
    fn default() -> Self {
        convert(
            &Partial::from(uci_schema::Config::defaults().clone()),
            "<defaults>",
        )
        .0
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

/// Reads and converts `path`, refusing a file with any problem (reload,
/// `--check-config`).
pub fn load_file(path: &Path) -> Result<Runtime, LoadError> {
    strict(load_file_partial(path)?)
}

/// Reads and converts what is valid in `path` (startup). Fails only if
/// the file does not exist or cannot be opened, so the caller decides
/// between built-in defaults and refusing to start; any other problem is
/// in [`Runtime::problems`].
pub fn load_file_partial(path: &Path) -> Result<(Runtime, Vec<String>), LoadError> {
    if let Err(e) = std::fs::metadata(path) {
        return Err(LoadError::Read {
            path: path.into(),
            kind: e.kind(),
        });
    }
    let file = path.display().to_string();
    let partial = uci_schema::Config::load_partial(path).whole_file(&file);
    Ok(convert(&partial, &file))
}

/// Converts configuration text strictly; `file` names it in errors.
pub fn load_str(text: &str, file: &str) -> Result<Runtime, LoadError> {
    strict(load_str_partial(text, file))
}

/// Converts what is valid in configuration text (a whole file: see
/// [`uci_schema::Partial::whole_file`]).
pub fn load_str_partial(text: &str, file: &str) -> (Runtime, Vec<String>) {
    let partial = uci_schema::Config::from_str_partial(text, file).whole_file(file);
    convert(&partial, file)
}

/// The embedded demo configuration (`agentd --demo`).
pub fn load_demo() -> Result<Runtime, LoadError> {
    load_str(uci_schema::demo::DEMO_CONFIG, "<demo config>")
}

/// A strict result from a partial conversion and its strict error lines.
fn strict((rt, errors): (Runtime, Vec<String>)) -> Result<Runtime, LoadError> {
    if rt.problems.is_empty() {
        Ok(rt)
    } else {
        Err(LoadError::Invalid(errors))
    }
}

/// A conversion problem: the section is skipped, or (for the singleton
/// `agentd` section) its options fall back to their defaults.
fn refused(
    file: &str,
    at: &uci_schema::SectionRef,
    option: Option<&str>,
    reason: String,
) -> Problem {
    Problem {
        error: ConfigError {
            file: file.to_string(),
            section: Some(at.clone()),
            option: option.map(str::to_string),
            kind: ConfigErrorKind::Refused { reason },
        },
        recovery: Recovery::SectionSkipped,
    }
}

fn health_settings(a: &uci_schema::Agentd, thresholds: Thresholds) -> HealthSettings {
    HealthSettings {
        interval: match a.health_check {
            HealthCheck::Off => None,
            _ => Some(Duration::from_secs(a.health_interval)),
        },
        tcp_only: a.health_check == HealthCheck::Tcp,
        timeout: Duration::from_millis(a.health_timeout_ms),
        thresholds,
        max_probes_per_s: probes_per_s(a),
    }
}

/// The running configuration from the valid part of a file, and the lines
/// a strict load reports (the file's errors as written plus conversion
/// problems).
pub fn convert(p: &Partial, file: &str) -> (Runtime, Vec<String>) {
    let c = &p.config;
    let mut problems = p.problems.clone();
    let mut extra = Vec::new();
    let main = &c.agentd;
    let main_at = uci_schema::SectionRef {
        ty: "agentd".into(),
        name: Some("main".into()),
        index: 0,
        label: None,
    };
    // The schema checks ranges and order already; these only guard the
    // conversion itself.
    let lease = LeasePolicy::new(main.min_lease, main.default_lease, main.max_lease)
        .unwrap_or_else(|e| {
            extra.push(refused(file, &main_at, Some("min_lease"), e.to_string()));
            LeasePolicy::default()
        });
    let thresholds = Thresholds::new(
        u32::try_from(main.health_fail_threshold).unwrap_or(u32::MAX),
        u32::try_from(main.health_recover_threshold).unwrap_or(u32::MAX),
    )
    .unwrap_or_else(|e| {
        extra.push(refused(
            file,
            &main_at,
            Some("health_fail_threshold"),
            e.to_string(),
        ));
        Thresholds::default()
    });
    let health = health_settings(main, thresholds);
    let endpoints = Guard::of_config(c);
    let local = crate::endpoint::local_addrs();
    let mut static_routes = Vec::new();
    for r in c.routes.iter().filter(|r| r.enabled) {
        match static_route(r, &endpoints, &local) {
            Ok(route) => static_routes.push(route),
            Err((option, e)) => extra.push(refused(file, &r.at, option, e)),
        }
    }
    let (policy, rule_problems) = policy(p, file);
    extra.extend(rule_problems);
    let mut mesh = crate::daemon::peers::settings::MeshSettings::of_config(c);
    let max_peers = crate::daemon::peers::settings::MAX_PEERS;
    if let Some(over) = c.peers.iter().filter(|p| p.enabled).nth(max_peers) {
        extra.push(refused(
            file,
            &over.at,
            None,
            format!(
                "more than {max_peers} enabled peer sections (agent-gw gets the peer list whole); this one and those after it are skipped"
            ),
        ));
        mesh.peers.truncate(max_peers);
    }
    let mut errors: Vec<String> = p.errors().0.iter().map(|e| e.to_string()).collect();
    errors.extend(extra.iter().map(|x| x.error.to_string()));
    problems.extend(extra);
    let router_id: Box<str> = if main.router_id.is_empty() {
        hostname().into()
    } else {
        main.router_id.as_str().into()
    };
    let rt = Runtime {
        router_id,
        socket: PathBuf::from(&main.ipc_socket),
        state_dir: PathBuf::from(&main.state_dir),
        lease,
        max_routes: usize::try_from(main.max_routes).unwrap_or(usize::MAX),
        static_routes,
        policy,
        health,
        log_level: match main.log_level {
            LogLevel::Error => Level::Error,
            LogLevel::Warn => Level::Warn,
            LogLevel::Info => Level::Info,
            LogLevel::Debug | LogLevel::Trace => Level::Debug,
        },
        endpoints,
        problems,
        quotas: quotas(c),
        trust_caps: TrustCaps {
            per_tenant: c
                .tenants
                .iter()
                .map(|t| (t.name.as_str().into(), t.max_trust))
                .collect(),
            ..TrustCaps::default()
        },
        pins: crate::owner::pins_of(c),
        mesh,
        discovery: crate::daemon::discovery::settings::DiscoverySettings::of_config(c),
        notes: notes(c),
        ipv6: c.ipv6.clone(),
    };
    (rt, errors)
}

/// Options that silently do more than their line says.
fn notes(c: &uci_schema::Config) -> Vec<String> {
    let mut out = Vec::new();
    let defaults = &uci_schema::Config::defaults().gateway.bootstrap_networks;
    let set = &c.gateway.bootstrap_networks;
    if c.gateway.bootstrap && set != defaults {
        out.push(format!(
            "gateway.bootstrap_networks replaces the default networks: only {} may take bootstrap tokens (the defaults, {}, apply only while no bootstrap_networks line is set)",
            if set.is_empty() { "no source".to_string() } else { set.join(", ") },
            defaults.join(", ")
        ));
    }
    out
}

/// The running configuration from a validated file.
pub fn from_config(c: &uci_schema::Config, file: &str) -> Result<Runtime, LoadError> {
    strict(convert(&Partial::from(c.clone()), file))
}

/// The quotas of a configuration (schema defaults where unset).
fn quotas(c: &uci_schema::Config) -> Quotas {
    Quotas {
        per_origin: c.agentd.max_routes_per_origin,
        per_source: c.agentd.max_routes_per_source,
        per_tenant: c
            .tenants
            .iter()
            .filter(|t| t.max_routes != u64::MAX)
            .map(|t| (t.name.as_str().into(), t.max_routes))
            .collect(),
    }
}

fn non_empty(s: &str) -> Option<Box<str>> {
    (!s.is_empty()).then(|| s.into())
}

/// A `route` section as a static route with id `static:<id>`; an error
/// names the option at fault. Its endpoint passes the same checks as a
/// registration's, with the section's own `allow_loopback` instead of the
/// global option; a host name is checked by the gateway when it connects.
fn static_route(
    r: &uci_schema::StaticRoute,
    guard: &Guard,
    local: &LocalAddrs,
) -> Result<Route, (Option<&'static str>, String)> {
    let id = RouteId::new(&format!("{STATIC_ID_PREFIX}{}", r.id))
        .map_err(|e| (Some("id"), e.to_string()))?;
    crate::endpoint::check_url(&r.endpoint, &guard.with_loopback(r.allow_loopback), local)
        .map_err(|e| match e {
            crate::endpoint::Refused::Address(why) => (
                Some("endpoint"),
                format!("{} {why} ({})", r.endpoint, why.code()),
            ),
            crate::endpoint::Refused::Invalid(e) => (Some("endpoint"), e.to_string()),
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
        }
        .into(),
        contract: contract.map(Box::new),
        source: RouteSource::Static,
        path: Box::default(),
        next_hop: None,
        lease: Lease::Permanent,
        healthy: true,
        allow_loopback: r.allow_loopback,
        owner: None,
        proof: OriginProof::Static,
        disputed: false,
    })
}

/// The policy, or a policy that denies everything and says why: when the
/// schema left it unknown (see [`Partial::policy_problems`]) or a rule
/// cannot be converted (that rule is then reported as skipped too).
fn policy(p: &Partial, file: &str) -> (Policy, Vec<Problem>) {
    let c = &p.config;
    let mut problems = Vec::new();
    let mut rules = Vec::new();
    for r in c.rules.iter().filter(|r| r.enabled) {
        match rule(r) {
            Ok(rule) => rules.push(rule),
            Err(e) => problems.push(refused(file, &r.at, None, e)),
        }
    }
    let unknown: Vec<&Problem> = p.policy_problems().chain(problems.iter()).collect();
    if let Some(first) = unknown.first() {
        let more = match unknown.len() {
            1 => String::new(),
            n => format!(" (and {} more problem(s), see agentctl status)", n - 1),
        };
        return (Policy::invalid(&format!("{first}{more}")), problems);
    }
    let action = match c.agentd.default_action {
        uci_schema::Action::Allow => Action::Allow,
        uci_schema::Action::Deny => Action::Deny,
    };
    match Policy::new(rules, action, Weights::default()) {
        Ok(policy) => (policy, problems),
        Err(e) => {
            let problem = Problem {
                error: ConfigError {
                    file: file.to_string(),
                    section: None,
                    option: None,
                    kind: ConfigErrorKind::Refused {
                        reason: format!("policy: {e}"),
                    },
                },
                recovery: Recovery::SectionSkipped,
            };
            let policy = Policy::invalid(&problem.to_string());
            problems.push(problem);
            (policy, problems)
        }
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
            min_proof: match k.min_proof {
                uci_schema::ProofLevel::None => None,
                uci_schema::ProofLevel::Bootstrap => Some(OriginProof::Bootstrap),
                uci_schema::ProofLevel::Static => Some(OriginProof::Static),
                uci_schema::ProofLevel::Jwt => Some(OriginProof::Jwt),
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(n: usize) -> String {
        let mut text = String::from("config agentd 'main'\n\toption router_id 'router-a'\n");
        for i in 0..n {
            text.push_str(&format!(
                "config rule 'r{i:05}'\n\toption capability 'cap.{i:0>96}'\n"
            ));
        }
        text
    }

    /// A policy agentd could not send agent-gw whole is a configuration
    /// error, not a gateway left without a FIB: a reload or
    /// `--check-config` refuses the file naming the size, and a start
    /// runs with the deny-all policy that says why.
    #[test]
    fn a_policy_beyond_the_ipc_frame_is_refused_by_reload_and_denies_at_start() {
        assert!(load_str(&rules(50), "agentd").is_ok());
        let err = load_str(&rules(2000), "agentd").unwrap_err().to_string();
        assert!(err.contains("2000 rules encode to"), "{err}");
        let (rt, problems) = load_str_partial(&rules(2000), "agentd");
        assert!(!problems.is_empty());
        let reason = rt.policy.invalid.as_deref().expect("deny-all policy");
        assert!(reason.contains("more than the 131072"), "{reason}");
    }

    /// More peer sections than agent-gw can be sent is refused like the
    /// oversized policy: a reload refuses the file, a start runs with the
    /// first 512 and reports the rest as skipped.
    #[test]
    fn more_peers_than_the_fib_can_carry_are_refused() {
        let peers = |n: usize| {
            let mut text = String::from("config agentd 'main'\n\toption router_id 'router-a'\n");
            for i in 0..n {
                text.push_str(&format!(
                    "config peer 'p{i}'\n\toption router_id 'r{i}'\n\toption address '192.0.2.{}'\n",
                    i % 250 + 1
                ));
            }
            text
        };
        let max = crate::daemon::peers::settings::MAX_PEERS;
        assert_eq!(
            load_str(&peers(max), "agentd").unwrap().mesh.peers.len(),
            max
        );
        let err = load_str(&peers(max + 3), "agentd").unwrap_err().to_string();
        assert!(
            err.contains(&format!("more than {max} enabled peer sections")),
            "{err}"
        );
        assert!(
            err.contains("p512"),
            "names the first section skipped: {err}"
        );
        let (rt, problems) = load_str_partial(&peers(max + 3), "agentd");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(rt.mesh.peers.len(), max);
        assert_eq!(
            rt.mesh.peers.last().unwrap().router_id,
            format!("r{}", max - 1)
        );
    }

    /// Files whose every section is valid but that cannot run a router
    /// (issue 20, item 7): a reload and `--check-config` refuse them with
    /// a message that says what is missing; a start reports the same
    /// problem and runs on what it has (DESIGN §4).
    #[test]
    fn files_that_cannot_run_a_router_are_refused_and_reported_at_start() {
        const PEER: &str =
            "config peer 'b'\n\toption router_id 'router-b'\n\toption address '192.0.2.2'\n";
        let refused = |text: &str| load_str(text, "agentd").unwrap_err().to_string();
        assert!(refused("").contains("the file is empty"), "{}", refused(""));
        let no_main = format!("config arpx 'arpx'\n{PEER}");
        assert!(
            refused(&no_main).contains("no `config agentd 'main'` section"),
            "{}",
            refused(&no_main)
        );
        let no_id = format!("config agentd 'main'\n{PEER}");
        assert!(
            refused(&no_id).contains("option 'router_id': required when peer sections"),
            "{}",
            refused(&no_id)
        );
        let hex = "ab".repeat(32);
        let pin = format!("{PEER}\toption key_fingerprint 'sha257:{hex}'\n");
        let bad_pin = format!("config agentd 'main'\n\toption router_id 'router-a'\n{pin}");
        assert!(
            refused(&bad_pin).contains("option 'key_fingerprint': expected a key fingerprint"),
            "{}",
            refused(&bad_pin)
        );
        let good = bad_pin.replace("sha257", "sha256");
        assert_eq!(load_str(&good, "agentd").unwrap().mesh.peers.len(), 1);

        // At start: the empty file and the file without main run on the
        // defaults with every request denied (default_action unknown).
        for text in ["", no_main.as_str()] {
            let (rt, errors) = load_str_partial(text, "agentd");
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(rt.problems[0].recovery, Recovery::SectionDefaults);
            assert!(rt.policy.invalid.is_some(), "deny-all policy");
            assert_eq!(rt.mesh.router_id, None, "no mesh identity");
        }
        // Peers without router_id: listed, no mesh identity, the policy
        // is untouched.
        let (rt, _) = load_str_partial(&no_id, "agentd");
        assert_eq!(rt.problems[0].recovery, Recovery::PeersIdle);
        assert_eq!(rt.mesh.peers.len(), 1);
        assert_eq!(rt.mesh.router_id, None);
        assert!(rt.policy.invalid.is_none());
    }
}

//! The gateway core: what the pipeline and every front end share — the
//! config, the FIB replica, the forwarder and peer plane, the limits,
//! authentication, the task table and the budget. One per gateway,
//! shared by `Rc` (the runtime is single-threaded, so no locks:
//! `RefCell`s are borrowed only between awaits). Each front end's own
//! state (MCP sessions, A2A task contexts) is its own, held by `serve`.

use std::cell::RefCell;
use std::rc::Rc;

use agentd::time::Millis;

use crate::auth::{AuthConfig, Authenticator};
use crate::budget::{Budget, BudgetConfig};
use crate::config::{AuthMode, GatewayConfig};
use crate::control::Control;
use crate::fib_sync::Fib;
use crate::forward::pool::{Pool, PoolConfig};
use crate::forward::Forwarder;
use crate::limits::{Inflight, RateLimiter};
use crate::peer::PeerPlane;
use crate::sources::{CapLog, ConnCaps, ConnLimits};

pub mod agent_door;
pub mod fib_follow;
#[cfg(target_pointer_width = "64")]
pub mod heap;
pub mod relief;
use crate::task::{SharedTasks, TaskTable};

#[derive(Debug)]
pub struct Core {
    pub cfg: GatewayConfig,
    pub fib: RefCell<Fib>,
    /// Woken after every FIB event applied (read-your-writes waits).
    pub fib_applied: tokio::sync::Notify,
    /// Notified (`notify_one`) after a FIB event changed the peer link set;
    /// its one consumer then reads `fib.links()`.
    pub links_changed: tokio::sync::Notify,
    /// The generation of the agent addresses, sent after every FIB event
    /// that changed them: the listener driver binds and closes their
    /// listeners, and each connection to one closes when it is released.
    pub agent_addrs_changed: tokio::sync::watch::Sender<u64>,
    /// How callers reach the per-agent addresses, or why they cannot
    /// (set when the listeners start).
    pub agent_door: RefCell<agent_door::Door>,
    /// agentd's address service was ready (when last asked).
    pub ipv6_ready: std::cell::Cell<Option<(Millis, bool)>>,
    pub control: Control,
    pub forwarder: Forwarder,
    /// The data plane between routers (links, connections, assertions).
    pub peer: Rc<PeerPlane>,
    pub limiter: RefCell<RateLimiter>,
    /// register/renew/unregister/bootstrap per source address, so one
    /// host's registration storm cannot starve the others.
    pub control_limiter: RefCell<RateLimiter>,
    pub inflight: Inflight,
    /// Open client connections, in total and per source.
    pub conns: ConnLimits,
    /// Rate limit of the log lines about refusals by these caps.
    pub cap_log: RefCell<CapLog>,
    pub auth: Authenticator,
    pub tasks: SharedTasks,
    /// The one memory budget (`buffer_budget`) shared by task results,
    /// stream histories and bodies held for resending.
    pub budget: Budget,
    /// Stream follower counters for `agentctl stats`.
    pub stream_stats: std::cell::Cell<StreamStats>,
    /// MCP tools and A2A skills (mappings, exposed schemas).
    pub catalog: crate::catalog::Catalog,
}

/// Counters of stream followers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Followers detached because they took no bytes within
    /// `stream_drain_timeout_ms`.
    pub stalled_detached: u64,
}

impl Core {
    pub fn new(cfg: GatewayConfig) -> Rc<Core> {
        let limiter = RateLimiter::new(cfg.rate, cfg.tenant_rates.clone());
        let auth = authenticator(&cfg);
        let budget = Budget::new(BudgetConfig {
            limit: cfg.buffer_budget,
            tenant_share_percent: cfg.tenant_share_percent,
            source_share_percent: cfg.source_share_percent,
        });
        let peer = Rc::new(PeerPlane::new(&cfg));
        let tasks = SharedTasks::new(TaskTable::with_budget(cfg.task_config(), budget.clone()));
        Rc::new(Core {
            fib: RefCell::new(Fib::new(cfg.max_routes)),
            fib_applied: tokio::sync::Notify::new(),
            links_changed: tokio::sync::Notify::new(),
            agent_addrs_changed: tokio::sync::watch::Sender::new(0),
            agent_door: RefCell::new(agent_door::Door::starting()),
            ipv6_ready: std::cell::Cell::new(None),
            control: Control::new(cfg.lease_min_s, cfg.lease_max_s),
            forwarder: Forwarder::new(
                Pool::new(PoolConfig::default()),
                cfg.endpoints.clone(),
                &cfg.router_id,
                via_nonce(),
            )
            .with_peer(Rc::new(crate::peer::outbound::Hop {
                plane: peer.clone(),
                ttl_ms: cfg.assertion_ttl_ms,
            }))
            .with_peer_addrs(&cfg.peer_addrs),
            peer,
            limiter: RefCell::new(limiter),
            control_limiter: RefCell::new(RateLimiter::new(cfg.control_rate, Default::default())),
            inflight: Inflight::new(
                cfg.max_inflight,
                cfg.max_inflight_per_source,
                cfg.max_inflight_per_peer,
            ),
            conns: ConnLimits::new(ConnCaps {
                max_connections: cfg.max_connections,
                max_conns_per_source: cfg.max_conns_per_source,
            }),
            cap_log: RefCell::new(CapLog::default()),
            auth,
            tasks,
            budget,
            stream_stats: Default::default(),
            catalog: crate::catalog::Catalog::new(cfg.mappings.clone(), cfg.expose_schemas),
            cfg,
        })
    }
}

/// A random per-process nonce for `X-Agentd-Via` (clock-derived only if
/// the system has no entropy at all).
fn via_nonce() -> u64 {
    let mut b = [0u8; 8];
    if crate::auth::fill_random(&mut b).is_err() {
        b = Millis::now().0.to_le_bytes();
    }
    u64::from_le_bytes(b)
}

/// The authenticator of `cfg`. Without a configured issuer key a fresh one
/// is drawn (its tokens die with the process, which is what tests and lab
/// setups want); tenant keys were validated when the config was read, so
/// a refusal here (too many keys for a tenant) drops that tenant's extra
/// keys rather than the gateway.
fn authenticator(cfg: &GatewayConfig) -> Authenticator {
    let mut ac = AuthConfig::new(&cfg.router_id, &cfg.domain);
    ac.mode = match cfg.auth {
        AuthMode::Jwt => crate::auth::AuthMode::Jwt,
        AuthMode::None => crate::auth::AuthMode::None,
    };
    ac.clock_skew_s = cfg.jwt_clock_skew_s;
    ac.max_lifetime_s = cfg.jwt_max_lifetime_s;
    ac.bootstrap = cfg.bootstrap;
    ac.bootstrap_networks = cfg.bootstrap_networks.clone();
    ac.bootstrap_ttl_s = cfg.bootstrap_ttl_s;
    ac.bootstrap_tenants = cfg.bootstrap_tenants.clone();
    let key = cfg.issuer_key.clone().unwrap_or_else(|| {
        let mut seed = [0u8; 32];
        if crate::auth::fill_random(&mut seed).is_err() {
            // No entropy at all: derive from the clock rather than abort;
            // such a key only signs bootstrap tokens of this process.
            seed[..8].copy_from_slice(&Millis::now().0.to_le_bytes());
        }
        edkey::SigningKey::from_bytes(&seed)
    });
    let mut per_tenant: std::collections::HashMap<&str, usize> = Default::default();
    let keys: Vec<_> = cfg
        .tenant_keys
        .iter()
        .filter(|(t, _)| {
            let n = per_tenant.entry(t).or_default();
            *n += 1;
            *n <= crate::auth::MAX_KEYS_PER_TENANT && agentd::route::check_tenant(t).is_ok()
        })
        .map(|(t, k)| (t.to_string(), *k))
        .collect();
    match Authenticator::new(ac.clone(), key.clone(), keys) {
        Ok(a) => a,
        Err(_) => Authenticator::new(ac, key, []).expect("no tenant keys cannot be refused"),
    }
}

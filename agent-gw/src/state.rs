//! Everything a request handler can reach. One per gateway, shared by `Rc`
//! (the runtime is single-threaded, so no locks: `RefCell`s are borrowed
//! only between awaits).

use std::cell::RefCell;
use std::rc::Rc;

use crate::config::GatewayConfig;
use crate::control::Control;
use crate::fib_sync::Fib;
use crate::forward::pool::{Pool, PoolConfig};
use crate::forward::Forwarder;
use crate::limits::{Inflight, RateLimiter};

#[derive(Debug)]
pub struct AppState {
    pub cfg: GatewayConfig,
    pub fib: RefCell<Fib>,
    pub control: Control,
    pub forwarder: Forwarder,
    pub limiter: RefCell<RateLimiter>,
    pub inflight: Inflight,
}

impl AppState {
    pub fn new(cfg: GatewayConfig) -> Rc<AppState> {
        let limiter = RateLimiter::new(cfg.rate, cfg.tenant_rates.clone());
        Rc::new(AppState {
            fib: RefCell::new(Fib::new(cfg.max_routes)),
            control: Control::new(cfg.lease_min_s, cfg.lease_max_s),
            forwarder: Forwarder::new(Pool::new(PoolConfig::default())),
            limiter: RefCell::new(limiter),
            inflight: Inflight::new(cfg.max_inflight),
            cfg,
        })
    }
}

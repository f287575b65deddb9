//! Lease keeping for one registration, as a pure state machine.
//!
//! The keeper thread (`keeper.rs`) asks `poll(now)` what to send, performs
//! the HTTP call and feeds the outcome back with `on_outcome(now, ..,
//! random)`. Time and randomness are inputs, so the renewal schedule —
//! 0.6 of the granted lease with ±10 % jitter, exponential backoff on
//! failure, re-registration after a 404 — is tested without sleeping.
//!
//! Why the jitter: a router restart makes every agent on the LAN
//! re-register at once; jitter spreads the following renewals apart.

use agentd::time::Millis;

use crate::wire::LeaseReply;

/// Tunables; `Default` is what the SDK uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenewConfig {
    /// Renew after this fraction (‰) of the granted lease.
    pub fraction_permille: u64,
    /// ± this fraction (‰) of the renew delay, drawn from the random input.
    pub jitter_permille: u64,
    /// First retry delay after a failure; doubles per consecutive failure.
    pub backoff_base_ms: u64,
    /// Upper bound of a retry delay.
    pub backoff_cap_ms: u64,
    /// The lease asked for; used when a reply omits `lease_seconds`.
    pub requested_lease_ms: u64,
}

impl Default for RenewConfig {
    fn default() -> Self {
        RenewConfig {
            fraction_permille: 600,
            jitter_permille: 100,
            backoff_base_ms: 250,
            backoff_cap_ms: 5_000,
            requested_lease_ms: 30_000,
        }
    }
}

/// What the driver must send next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Register,
    Renew { route_id: String },
}

/// What happened to the last action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Register or renew answered with a lease.
    Leased(LeaseReply),
    /// Renew answered 404: the router forgot the route (restart, expiry).
    NotFound,
    /// The router could not be reached or did not answer (refused, reset,
    /// timeout): retry the same action with backoff.
    Unreachable,
    /// Any other refusal (status and error code); retried with backoff
    /// because tokens, policy and the router's state can change.
    Refused { status: u16 },
}

/// The live lease, as the router last granted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub route_id: String,
    pub generation: u64,
    pub lease_ms: u64,
    /// Local view of when the router drops the route without a renewal.
    pub expires_at: Millis,
}

#[derive(Debug)]
pub struct LeaseMachine {
    cfg: RenewConfig,
    lease: Option<Lease>,
    due: Millis,
    in_flight: bool,
    failures: u32,
    registered_once: bool,
    /// Successful register calls after the first (router forgot us).
    pub reregistrations: u64,
    pub renewals: u64,
}

impl LeaseMachine {
    /// A machine that registers at `now`.
    pub fn new(cfg: RenewConfig, now: Millis) -> Self {
        LeaseMachine {
            cfg,
            lease: None,
            due: now,
            in_flight: false,
            failures: 0,
            registered_once: false,
            reregistrations: 0,
            renewals: 0,
        }
    }

    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// When the next action is due (meaningless while one is in flight).
    pub fn due(&self) -> Millis {
        self.due
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The action to perform now, if one is due.
    pub fn poll(&mut self, now: Millis) -> Option<Action> {
        if self.in_flight || now < self.due {
            return None;
        }
        self.in_flight = true;
        Some(match &self.lease {
            Some(l) => Action::Renew {
                route_id: l.route_id.clone(),
            },
            None => Action::Register,
        })
    }

    /// Feeds the result of the action `poll` returned. `random` is any
    /// uniformly distributed value (the driver uses a xorshift generator).
    pub fn on_outcome(&mut self, now: Millis, outcome: Outcome, random: u64) {
        self.in_flight = false;
        match outcome {
            Outcome::Leased(reply) => {
                let lease_ms = if reply.lease_seconds > 0 {
                    reply.lease_seconds.saturating_mul(1000)
                } else {
                    self.cfg.requested_lease_ms
                };
                match &self.lease {
                    Some(_) => self.renewals += 1,
                    None if self.ever_leased() => self.reregistrations += 1,
                    None => {}
                }
                self.failures = 0;
                self.lease = Some(Lease {
                    route_id: reply.route_id,
                    generation: reply.generation,
                    lease_ms,
                    expires_at: now.saturating_add_ms(lease_ms),
                });
                self.due = now.saturating_add_ms(renew_delay(&self.cfg, lease_ms, random));
                self.registered_once = true;
            }
            Outcome::NotFound => {
                // Re-register at once: the route is already gone.
                self.lease = None;
                self.failures = 0;
                self.due = now;
            }
            Outcome::Unreachable | Outcome::Refused { .. } => {
                self.failures = self.failures.saturating_add(1);
                let lease_ms = self.lease.as_ref().map(|l| l.lease_ms);
                self.due = now.saturating_add_ms(backoff_delay(
                    &self.cfg,
                    self.failures,
                    lease_ms,
                    random,
                ));
            }
        }
    }

    /// Forgets the lease after a successful unregister.
    pub fn withdrawn(&mut self) {
        self.lease = None;
    }

    fn ever_leased(&self) -> bool {
        self.registered_once
    }
}

/// Delay until the renewal of a lease of `lease_ms`: the configured
/// fraction, ± jitter, never below one second.
pub fn renew_delay(cfg: &RenewConfig, lease_ms: u64, random: u64) -> u64 {
    let base = lease_ms.saturating_mul(cfg.fraction_permille) / 1000;
    jitter(base, cfg.jitter_permille, random).max(1_000.min(lease_ms / 2))
}

/// Delay before retry number `failures` (≥ 1): base·2^(failures-1), capped
/// at the configured cap and — while a lease is live — at a quarter of it
/// so several retries fit before the lease runs out; ±20 % jitter.
pub fn backoff_delay(cfg: &RenewConfig, failures: u32, lease_ms: Option<u64>, random: u64) -> u64 {
    let shift = failures.saturating_sub(1).min(32);
    let raw = cfg.backoff_base_ms.saturating_mul(1u64 << shift);
    let mut cap = cfg.backoff_cap_ms;
    if let Some(l) = lease_ms {
        cap = cap.min((l / 4).max(cfg.backoff_base_ms));
    }
    jitter(raw.min(cap), 200, random)
}

/// `value` ± `permille`‰, picked by `random`.
fn jitter(value: u64, permille: u64, random: u64) -> u64 {
    let span = value.saturating_mul(permille) / 1000;
    if span == 0 {
        return value;
    }
    let offset = random % (2 * span + 1);
    value - span + offset
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(id: &str, gen: u64, secs: u64) -> Outcome {
        Outcome::Leased(LeaseReply {
            route_id: id.into(),
            generation: gen,
            lease_seconds: secs,
            removed: false,
        })
    }

    fn cfg() -> RenewConfig {
        RenewConfig::default()
    }

    #[test]
    fn registers_immediately_then_renews_at_sixty_percent() {
        let mut m = LeaseMachine::new(cfg(), Millis(1_000));
        assert_eq!(m.poll(Millis(1_000)), Some(Action::Register));
        assert_eq!(
            m.poll(Millis(1_000)),
            None,
            "one action in flight at a time"
        );
        // random = span → zero jitter offset (value - span + span).
        m.on_outcome(Millis(1_100), reply("r1", 1, 30), 1_800);
        assert_eq!(m.due(), Millis(1_100 + 18_000));
        assert_eq!(m.poll(Millis(19_099)), None);
        assert_eq!(
            m.poll(Millis(19_100)),
            Some(Action::Renew {
                route_id: "r1".into()
            })
        );
        m.on_outcome(Millis(19_200), reply("r1", 1, 30), 1_800);
        assert_eq!(m.renewals, 1);
        assert_eq!(m.lease().unwrap().expires_at, Millis(49_200));
    }

    #[test]
    fn renew_delay_jitter_stays_within_ten_percent() {
        let c = cfg();
        let lo = renew_delay(&c, 30_000, 0);
        let hi = renew_delay(&c, 30_000, 3_600);
        assert_eq!((lo, hi), (16_200, 19_800));
        for r in [1u64, 77, 999_999, u64::MAX] {
            let d = renew_delay(&c, 30_000, r);
            assert!((16_200..=19_800).contains(&d), "{d}");
        }
        // Short leases still renew before they lapse.
        assert!(renew_delay(&c, 1_000, 0) < 1_000);
    }

    #[test]
    fn not_found_on_renew_reregisters_at_once() {
        let mut m = LeaseMachine::new(cfg(), Millis(0));
        m.poll(Millis(0));
        m.on_outcome(Millis(0), reply("r1", 1, 30), 0);
        let due = m.due();
        assert!(matches!(m.poll(due), Some(Action::Renew { .. })));
        m.on_outcome(due, Outcome::NotFound, 0);
        assert!(m.lease().is_none());
        assert_eq!(m.poll(due), Some(Action::Register));
        m.on_outcome(due, reply("r2", 7, 30), 0);
        assert_eq!(m.reregistrations, 1);
        assert_eq!(m.lease().unwrap().route_id, "r2");
    }

    #[test]
    fn unreachable_router_backs_off_exponentially_up_to_the_cap() {
        let mut m = LeaseMachine::new(cfg(), Millis(0));
        let mut now = Millis(0);
        let mut delays = Vec::new();
        for _ in 0..8 {
            assert_eq!(m.poll(now), Some(Action::Register));
            // random = span (20 % of the delay) → no offset; pick per step.
            m.on_outcome(now, Outcome::Unreachable, 0);
            let d = m.due().saturating_sub(now);
            delays.push(d);
            now = m.due();
        }
        // random 0 → the low edge: 0.8 × min(250·2^k, 5000).
        assert_eq!(
            delays,
            vec![200, 400, 800, 1_600, 3_200, 4_000, 4_000, 4_000]
        );
        assert_eq!(m.failures(), 8);
        m.poll(now);
        m.on_outcome(now, reply("r1", 1, 30), 0);
        assert_eq!(m.failures(), 0);
        assert_eq!(
            m.reregistrations, 0,
            "first success is a registration, not a re-registration"
        );
    }

    #[test]
    fn retries_while_leased_fit_inside_the_lease() {
        let c = RenewConfig {
            backoff_cap_ms: 60_000,
            ..cfg()
        };
        for failures in 1..40 {
            let d = backoff_delay(&c, failures, Some(8_000), u64::MAX);
            assert!(
                d <= 2_400,
                "retry {failures} waits {d} ms with an 8 s lease"
            );
        }
    }

    #[test]
    fn router_restart_renew_refused_then_404_then_register() {
        let mut m = LeaseMachine::new(cfg(), Millis(0));
        m.poll(Millis(0));
        m.on_outcome(Millis(0), reply("r1", 1, 10), 0);
        let mut now = m.due();
        assert!(matches!(m.poll(now), Some(Action::Renew { .. })));
        m.on_outcome(now, Outcome::Unreachable, 0);
        now = m.due();
        assert!(
            matches!(m.poll(now), Some(Action::Renew { .. })),
            "keeps the route id while unreachable"
        );
        m.on_outcome(now, Outcome::Refused { status: 503 }, 0);
        now = m.due();
        assert!(matches!(m.poll(now), Some(Action::Renew { .. })));
        m.on_outcome(now, Outcome::NotFound, 0);
        assert_eq!(m.poll(now), Some(Action::Register));
        m.on_outcome(now, reply("r9", 2, 10), 0);
        assert_eq!((m.reregistrations, m.failures()), (1, 0));
    }

    #[test]
    fn reply_without_lease_seconds_uses_the_requested_lease() {
        let c = RenewConfig {
            requested_lease_ms: 20_000,
            jitter_permille: 0,
            ..cfg()
        };
        let mut m = LeaseMachine::new(c, Millis(0));
        m.poll(Millis(0));
        m.on_outcome(Millis(0), reply("r", 1, 0), 0);
        assert_eq!(m.due(), Millis(12_000));
    }
}

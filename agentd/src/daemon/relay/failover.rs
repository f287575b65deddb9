//! Which relay a client router uses, sans-IO (time and randomness are
//! inputs, so tests replay every schedule).
//!
//! `relay.server` lists relays in preference order. The client holds a
//! session (and agent-gw a tunnel) with one relay, the most preferred
//! that works:
//!
//! * With no relay, it dials the most preferred relay that is not
//!   waiting out a backoff; one dial at a time. A relay that fails (its
//!   dial, or its session later: heartbeats missed) waits a
//!   backoff with full jitter whose ceiling doubles per failure, so the
//!   next relay in order is tried at once: failover costs one dial.
//! * On a less preferred relay, it keeps probing the better ones on their
//!   own backoff. A better relay that answers is held as a standby and
//!   takes over only after it stayed up for `prefer_hold_ms`; it is
//!   used before the old one is closed (make before break). A relay
//!   that comes and goes never gets the traffic: each loss restarts its
//!   hold and lengthens its backoff. That is "back to the first relay,
//!   without flapping".
//!
//! The driver (agentd's relay client: its ARPX sessions with the relays)
//! turns [`Step`]s into dials and closes and reports what happened with
//! [`Failover::up`] and [`Failover::lost`].

use crate::backoff::{Backoff, BackoffConfig, Rng};

/// The schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverConfig {
    /// Per relay: the reconnect backoff (`relay.reconnect_min_ms` /
    /// `reconnect_max_ms`; a session up for `stable_ms` resets it).
    pub backoff: BackoffConfig,
    /// How long a more preferred relay must stay up before it takes over.
    pub prefer_hold_ms: u64,
}

/// What the driver must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Open a session with relay `i` (report [`Failover::up`] or
    /// [`Failover::lost`]).
    Dial(usize),
    /// Relay `i` is now the one: advertise through it.
    Use(usize),
    /// Close relay `i`'s session (replaced by a preferred one).
    Close(usize),
}

/// Where one relay stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No session; tried again at `retry_at`.
    Idle,
    Dialing,
    /// Up, more preferred than the current relay, proving itself since
    /// the instant given.
    Standby(u64),
    /// The relay in use, since the instant given.
    Current(u64),
}

#[derive(Debug, Clone)]
struct Relay {
    state: State,
    backoff: Backoff,
    /// When an idle relay may be dialled again.
    retry_at: u64,
    last_error: Option<String>,
}

/// What `agentctl status` shows of one relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayView {
    pub state: State,
    /// When it is dialled next, if idle.
    pub retry_at: Option<u64>,
    pub failures: u32,
    pub last_error: Option<String>,
}

/// The choice among the configured relays.
#[derive(Debug)]
pub struct Failover {
    cfg: FailoverConfig,
    relays: Vec<Relay>,
    rng: Rng,
}

impl Failover {
    /// `n` relays in preference order; none dialled yet.
    pub fn new(n: usize, cfg: FailoverConfig, seed: u64) -> Failover {
        let relay = Relay {
            state: State::Idle,
            backoff: Backoff::new(cfg.backoff),
            retry_at: 0,
            last_error: None,
        };
        Failover {
            cfg,
            relays: vec![relay; n],
            rng: Rng::seeded(seed),
        }
    }

    /// The relay in use.
    pub fn current(&self) -> Option<usize> {
        self.relays
            .iter()
            .position(|r| matches!(r.state, State::Current(_)))
    }

    pub fn view(&self, i: usize) -> Option<RelayView> {
        let r = self.relays.get(i)?;
        Some(RelayView {
            state: r.state,
            retry_at: (r.state == State::Idle).then_some(r.retry_at),
            failures: r.backoff.failures(),
            last_error: r.last_error.clone(),
        })
    }

    /// What to do at `now`: a standby that has proven itself takes over,
    /// and the next dial starts when one is due.
    pub fn poll(&mut self, now: u64) -> Vec<Step> {
        let mut steps = Vec::new();
        let current = self.current();
        // The most preferred standby that held long enough; with no relay
        // in use, any standby at once (it is up, and better than none).
        let ready = self.relays.iter().position(|r| match r.state {
            State::Standby(since) => {
                current.is_none() || now.saturating_sub(since) >= self.cfg.prefer_hold_ms
            }
            _ => false,
        });
        if let Some(s) = ready {
            if current.is_none_or(|c| s < c) {
                self.relays[s].state = State::Current(now);
                steps.push(Step::Use(s));
                // Everything less preferred goes: the old current relay
                // and any standby between them.
                for (i, r) in self.relays.iter_mut().enumerate().skip(s + 1) {
                    if matches!(r.state, State::Current(_) | State::Standby(_)) {
                        r.state = State::Idle;
                        r.retry_at = now;
                        steps.push(Step::Close(i));
                    }
                }
            }
        }
        // One dial at a time, only to a relay better than the current one.
        let limit = self.current().unwrap_or(self.relays.len());
        let dialing = self.relays[..limit]
            .iter()
            .any(|r| r.state == State::Dialing);
        if !dialing {
            if let Some(i) = self.relays[..limit]
                .iter()
                .position(|r| r.state == State::Idle && r.retry_at <= now)
            {
                self.relays[i].state = State::Dialing;
                steps.push(Step::Dial(i));
            }
        }
        steps
    }

    /// Relay `i`'s session came up. With no relay in use it is used at
    /// once; a more preferred one than the current waits out its hold.
    pub fn up(&mut self, i: usize, now: u64) -> Vec<Step> {
        let Some(r) = self.relays.get_mut(i) else {
            return Vec::new();
        };
        if r.state != State::Dialing {
            return Vec::new();
        }
        r.backoff.session_up(now);
        r.last_error = None;
        match self.current() {
            None => {
                self.relays[i].state = State::Current(now);
                vec![Step::Use(i)]
            }
            Some(c) if i < c => {
                self.relays[i].state = State::Standby(now);
                Vec::new()
            }
            // Not dialled by us while a better one is current.
            Some(_) => {
                let r = &mut self.relays[i];
                r.state = State::Idle;
                r.retry_at = now;
                vec![Step::Close(i)]
            }
        }
    }

    /// Relay `i`'s dial failed or its session ended, for `why`: it waits
    /// out a backoff; if it was in use, the next [`Failover::poll`] dials
    /// the next relay in order.
    pub fn lost(&mut self, i: usize, now: u64, why: &str) {
        let rng = &mut self.rng;
        let Some(r) = self.relays.get_mut(i) else {
            return;
        };
        if r.state == State::Idle {
            return;
        }
        let delay = match r.state {
            State::Current(_) | State::Standby(_) => r.backoff.session_down(now, rng),
            _ => r.backoff.failed(rng),
        };
        r.state = State::Idle;
        r.retry_at = now.saturating_add(delay);
        r.last_error = Some(why.to_string());
    }

    /// When [`Failover::poll`] has something to do next (`None`: only a
    /// report can change anything).
    pub fn next_deadline(&self) -> Option<u64> {
        let limit = self.current().unwrap_or(self.relays.len());
        let dialing = self.relays[..limit]
            .iter()
            .any(|r| r.state == State::Dialing);
        let retry = self.relays[..limit]
            .iter()
            .filter(|r| !dialing && r.state == State::Idle)
            .map(|r| r.retry_at);
        let hold = self.relays.iter().filter_map(|r| match r.state {
            State::Standby(since) => Some(since.saturating_add(self.cfg.prefer_hold_ms)),
            _ => None,
        });
        retry.chain(hold).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: FailoverConfig = FailoverConfig {
        backoff: BackoffConfig {
            initial_ms: 1_000,
            max_ms: 30_000,
            stable_ms: 30_000,
        },
        prefer_hold_ms: 10_000,
    };

    fn f(n: usize) -> Failover {
        Failover::new(n, CFG, 7)
    }

    /// `n` relays; the first failed its dial at 0, the second is in use.
    fn on_relay_1(n: usize) -> Failover {
        let mut f = f(n);
        assert_eq!(f.poll(0), [Step::Dial(0)]);
        f.lost(0, 0, "down");
        assert_eq!(f.poll(0), [Step::Dial(1)]);
        assert_eq!(f.up(1, 0), [Step::Use(1)]);
        f
    }

    #[test]
    fn the_first_relay_is_dialled_and_used() {
        let mut f = f(2);
        assert_eq!(f.poll(0), [Step::Dial(0)]);
        // One dial at a time.
        assert_eq!(f.poll(0), []);
        assert_eq!(f.up(0, 5), [Step::Use(0)]);
        assert_eq!(f.current(), Some(0));
        // Nothing better to probe.
        assert_eq!(f.poll(100), []);
        assert_eq!(f.next_deadline(), None);
    }

    #[test]
    fn a_relay_that_fails_is_passed_over_at_once_and_retried_after_its_backoff() {
        let mut f = f(3);
        assert_eq!(f.poll(0), [Step::Dial(0)]);
        f.lost(0, 10, "connection refused");
        assert_eq!(f.poll(10), [Step::Dial(1)]);
        assert_eq!(f.up(1, 20), [Step::Use(1)]);
        let v = f.view(0).unwrap();
        assert_eq!(v.last_error.as_deref(), Some("connection refused"));
        let retry = v.retry_at.unwrap();
        assert!((10..=1_010).contains(&retry), "{retry}");
        // The preferred relay is probed when its backoff ends, not before.
        assert_eq!(f.next_deadline(), Some(retry));
        if retry > 10 {
            assert_eq!(f.poll(retry - 1), []);
        }
        assert_eq!(f.poll(retry), [Step::Dial(0)]);
    }

    #[test]
    fn losing_the_current_relay_fails_over_to_the_next_with_one_dial() {
        let mut f = f(2);
        f.poll(0);
        f.up(0, 0);
        f.lost(0, 60_000, "no PING answer within 5 s");
        assert_eq!(f.current(), None);
        assert_eq!(f.poll(60_000), [Step::Dial(1)]);
        assert_eq!(f.up(1, 60_050), [Step::Use(1)]);
    }

    #[test]
    fn a_preferred_relay_takes_over_only_after_its_hold_and_before_the_old_one_closes() {
        let mut f = on_relay_1(2);
        let retry = f.view(0).unwrap().retry_at.unwrap();
        assert_eq!(f.poll(retry), [Step::Dial(0)]);
        assert_eq!(f.up(0, retry), []);
        assert_eq!(f.view(0).unwrap().state, State::Standby(retry));
        assert_eq!(f.next_deadline(), Some(retry + 10_000));
        assert_eq!(f.poll(retry + 9_999), []);
        assert_eq!(f.current(), Some(1));
        assert_eq!(
            f.poll(retry + 10_000),
            [Step::Use(0), Step::Close(1)],
            "the new relay is used before the old one closes"
        );
        assert_eq!(f.current(), Some(0));
    }

    #[test]
    fn losing_the_current_relay_while_a_preferred_one_proves_itself_uses_that_one_at_once() {
        let mut f = on_relay_1(3);
        let retry = f.view(0).unwrap().retry_at.unwrap();
        f.poll(retry);
        assert_eq!(f.up(0, retry), []);
        f.lost(1, retry + 1_000, "reset");
        assert_eq!(f.poll(retry + 1_000), [Step::Use(0)]);
        assert_eq!(f.current(), Some(0));
    }

    #[test]
    fn a_flapping_preferred_relay_never_takes_over_and_is_probed_ever_less_often() {
        let mut f = on_relay_1(2);
        let mut now = 0;
        let mut gaps = Vec::new();
        for _ in 0..8 {
            let retry = f.view(0).unwrap().retry_at.unwrap();
            gaps.push(retry - now);
            now = retry;
            assert_eq!(f.poll(now), [Step::Dial(0)]);
            assert_eq!(f.up(0, now), []);
            // Up for less than the hold each time.
            now += 9_000;
            assert_eq!(f.poll(now), []);
            f.lost(0, now, "reset");
            assert_eq!(f.current(), Some(1), "relay 1 keeps the traffic");
        }
        // Ceilings double to the cap: the last gaps are bounded by it and
        // the failures keep counting.
        assert!(gaps.iter().all(|g| *g <= 30_000), "{gaps:?}");
        assert_eq!(f.view(0).unwrap().failures, 9);
    }

    #[test]
    fn with_every_relay_down_the_earliest_retry_is_the_deadline() {
        let mut f = f(2);
        f.poll(0);
        f.lost(0, 0, "a");
        // Relay 0 waits out its jitter (the seed draws more than 0 ms).
        assert_eq!(f.poll(0), [Step::Dial(1)]);
        f.lost(1, 0, "b");
        let r0 = f.view(0).unwrap().retry_at.unwrap();
        let r1 = f.view(1).unwrap().retry_at.unwrap();
        let first = r0.min(r1);
        assert_eq!(f.next_deadline(), Some(first));
        assert_eq!(f.poll(first - 1), []);
        let dialled = if r0 <= r1 { 0 } else { 1 };
        assert_eq!(f.poll(first), [Step::Dial(dialled)]);
        // While that dial runs, nothing else is due.
        assert_eq!(f.next_deadline(), None);
    }

    #[test]
    fn reports_about_relays_not_dialled_change_nothing() {
        let mut f = f(2);
        assert_eq!(f.up(1, 0), []);
        f.lost(1, 0, "x");
        assert_eq!(f.view(1).unwrap().last_error, None);
        assert_eq!(f.up(9, 0), []);
        assert_eq!(f.poll(0), [Step::Dial(0)]);
    }

    #[test]
    fn a_relay_that_stayed_up_long_starts_its_backoff_over() {
        let mut f = f(2);
        f.poll(0);
        f.lost(0, 0, "a");
        f.poll(0);
        f.lost(1, 0, "b");
        let retry = f.view(0).unwrap().retry_at.unwrap();
        f.poll(retry);
        f.up(0, retry);
        assert_eq!(f.view(0).unwrap().failures, 1);
        f.lost(0, retry + 60_000, "reset after a long while");
        // session_down after a stable session: one failure again, and a
        // retry within the first ceiling.
        let v = f.view(0).unwrap();
        assert_eq!(v.failures, 1);
        assert!(v.retry_at.unwrap() <= retry + 60_000 + 1_000);
    }
}

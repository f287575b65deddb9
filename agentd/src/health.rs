//! Health verdicts from probe results, sans-IO.
//!
//! The daemon's driver runs the probes (`GET /healthz` or a TCP connect)
//! and feeds each result here; this module only counts. An endpoint goes
//! down after `failures` consecutive failed probes and comes back after
//! `recoveries` consecutive good ones (DESIGN §4, default 3/2), so a single
//! lost probe neither removes a working endpoint nor reinstates a flapping
//! one. A transition is what the driver applies to the table with
//! [`crate::table::RouteTable::set_health`]; health never removes a route.

use std::collections::HashMap;
use std::fmt;

use crate::route::RouteId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    failures: u32,
    recoveries: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThresholdError;

impl fmt::Display for ThresholdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("health failure and recovery thresholds must be at least 1")
    }
}

impl std::error::Error for ThresholdError {}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            failures: 3,
            recoveries: 2,
        }
    }
}

impl Thresholds {
    pub fn new(failures: u32, recoveries: u32) -> Result<Thresholds, ThresholdError> {
        if failures == 0 || recoveries == 0 {
            return Err(ThresholdError);
        }
        Ok(Thresholds {
            failures,
            recoveries,
        })
    }
}

/// A change of verdict the table must learn about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    Down,
    Up,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    healthy: bool,
    /// Consecutive probe results that disagree with `healthy`.
    streak: u32,
}

/// Per-route probe verdicts. A route never probed counts as healthy: a
/// fresh registration is usable at once and only evidence takes it out.
#[derive(Debug, Default)]
pub struct HealthTracker {
    thresholds: Thresholds,
    states: HashMap<RouteId, State>,
}

impl HealthTracker {
    pub fn new(thresholds: Thresholds) -> HealthTracker {
        HealthTracker {
            thresholds,
            states: HashMap::new(),
        }
    }

    /// Records one probe result; returns the transition it caused, if any.
    pub fn observe(&mut self, route: &RouteId, ok: bool) -> Option<Transition> {
        let st = match self.states.get_mut(route) {
            Some(st) => st,
            None if ok => return None,
            None => self.states.entry(route.clone()).or_insert(State {
                healthy: true,
                streak: 0,
            }),
        };
        if ok == st.healthy {
            if ok {
                // Healthy with no failure streak is the default state.
                self.states.remove(route);
            } else {
                st.streak = 0;
            }
            return None;
        }
        st.streak += 1;
        let needed = if st.healthy {
            self.thresholds.failures
        } else {
            self.thresholds.recoveries
        };
        if st.streak < needed {
            return None;
        }
        st.healthy = ok;
        st.streak = 0;
        if ok {
            // Back to the default state: no need to remember it.
            self.states.remove(route);
            Some(Transition::Up)
        } else {
            Some(Transition::Down)
        }
    }

    pub fn is_healthy(&self, route: &RouteId) -> bool {
        self.states.get(route).is_none_or(|s| s.healthy)
    }

    /// Drops the state of a route that left the table.
    pub fn forget(&mut self, route: &RouteId) {
        self.states.remove(route);
    }

    /// Routes with state (down, or up with a failure streak).
    pub fn tracked(&self) -> usize {
        self.states.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> RouteId {
        RouteId::new("r1").unwrap()
    }

    #[test]
    fn goes_down_after_three_consecutive_failures() {
        let mut h = HealthTracker::default();
        assert_eq!(h.observe(&id(), false), None);
        assert_eq!(h.observe(&id(), false), None);
        assert_eq!(h.observe(&id(), false), Some(Transition::Down));
        assert!(!h.is_healthy(&id()));
        assert_eq!(h.observe(&id(), false), None);
    }

    #[test]
    fn a_success_resets_the_failure_streak() {
        let mut h = HealthTracker::default();
        h.observe(&id(), false);
        h.observe(&id(), false);
        assert_eq!(h.observe(&id(), true), None);
        assert_eq!(h.observe(&id(), false), None);
        assert_eq!(h.observe(&id(), false), None);
        assert!(h.is_healthy(&id()));
        assert_eq!(h.observe(&id(), false), Some(Transition::Down));
    }

    #[test]
    fn recovers_after_two_consecutive_successes() {
        let mut h = HealthTracker::new(Thresholds::new(1, 2).unwrap());
        assert_eq!(h.observe(&id(), false), Some(Transition::Down));
        assert_eq!(h.observe(&id(), true), None);
        assert_eq!(h.observe(&id(), false), None);
        assert_eq!(h.observe(&id(), true), None);
        assert_eq!(h.observe(&id(), true), Some(Transition::Up));
        assert!(h.is_healthy(&id()));
        assert_eq!(h.tracked(), 0);
    }

    #[test]
    fn healthy_routes_cost_no_state_and_forget_drops_it() {
        let mut h = HealthTracker::default();
        for _ in 0..10 {
            assert_eq!(h.observe(&id(), true), None);
        }
        assert_eq!(h.tracked(), 0);
        h.observe(&id(), false);
        assert_eq!(h.tracked(), 1);
        h.forget(&id());
        assert_eq!(h.tracked(), 0);
    }

    #[test]
    fn zero_thresholds_are_refused() {
        assert_eq!(Thresholds::new(0, 2), Err(ThresholdError));
        assert_eq!(Thresholds::new(3, 0), Err(ThresholdError));
    }
}

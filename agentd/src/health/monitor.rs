//! Endpoint health for routes, sans-IO: which routes use which endpoint,
//! the verdict of each endpoint, and its probe schedule.
//!
//! The driver tells the monitor about every local/static route that
//! appears, changes or leaves ([`Monitor::track`], [`Monitor::untrack`];
//! the daemon feeds it its FIB changes, so it never scans the table), asks
//! it which endpoint to probe ([`Monitor::poll`]) and hands back results
//! ([`Monitor::complete`]). A verdict change comes back with every route
//! on that endpoint, for the table.
//!
//! A route that joins an endpoint known to be down is down at once (the
//! evidence is about the endpoint, not the route); it comes back with the
//! endpoint, after `recoveries` good probes. Probe verdicts win over an
//! agent's own `healthy` claim on renewal whenever the endpoint changes
//! state.

use std::collections::HashMap;

use super::route_set::RouteSet;
use super::schedule::{Pacing, ProbeScheduler};
use super::target::ProbeTarget;
use super::{HealthTracker, Thresholds, Transition};
use crate::route::RouteId;
use crate::time::Millis;

/// What the monitor runs on (from `agentd` options).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MonitorConfig {
    /// `false` for `health_check 'off'`: routes are tracked, nothing is
    /// probed.
    pub enabled: bool,
    /// `health_check 'tcp'`: connect only, even to http:// endpoints.
    pub tcp_only: bool,
    pub pacing: Pacing,
    pub thresholds: Thresholds,
}

/// A changed endpoint verdict and the routes it applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub target: ProbeTarget,
    pub healthy: bool,
    /// Sorted by id.
    pub routes: Vec<RouteId>,
}

#[derive(Debug)]
pub struct Monitor {
    cfg: MonitorConfig,
    tracker: HealthTracker<ProbeTarget>,
    sched: ProbeScheduler<ProbeTarget>,
    on: HashMap<ProbeTarget, RouteSet>,
    of: HashMap<RouteId, ProbeTarget>,
    /// Probe results taken (answered / failed), for `agentctl stats` and
    /// the metrics: a flapping endpoint shows here before its verdict
    /// changes.
    results: [u64; 2],
}

impl Monitor {
    pub fn new(cfg: MonitorConfig) -> Monitor {
        Monitor {
            cfg,
            tracker: HealthTracker::new(cfg.thresholds),
            sched: ProbeScheduler::new(cfg.pacing),
            on: HashMap::new(),
            of: HashMap::new(),
            results: [0; 2],
        }
    }

    pub fn config(&self) -> MonitorConfig {
        self.cfg
    }

    /// A local or static route is in the table with `endpoint` and
    /// `healthy`. Returns `Some(false)` when it must be marked down
    /// because its endpoint is known to be down.
    pub fn track(
        &mut self,
        id: &RouteId,
        endpoint: &str,
        healthy: bool,
        now: Millis,
    ) -> Option<bool> {
        let Ok(target) = ProbeTarget::for_check(endpoint, self.cfg.tcp_only) else {
            // Not probeable (validated elsewhere); nothing to judge.
            self.untrack(id);
            return None;
        };
        // The endpoint's own target, when tracked: its routes share its
        // authority string.
        let target = match self.on.get_key_value(&target) {
            Some((known, _)) => known.clone(),
            None => target,
        };
        if self.of.get(id) != Some(&target) {
            self.untrack(id);
            let routes = self.on.entry(target.clone()).or_default();
            if routes.is_empty() {
                self.sched.add(target.clone(), now);
                if !healthy && self.tracker.is_healthy(&target) {
                    // Its first route is already down (restored state, a
                    // reload): start the endpoint down too, so it can only
                    // come back through probes and is never stuck down.
                    self.tracker.assume_down(&target);
                }
            }
            routes.insert(id.clone());
            self.of.insert(id.clone(), target.clone());
        }
        (healthy && !self.tracker.is_healthy(&target)).then_some(false)
    }

    /// A route left the table (or is no longer local/static).
    pub fn untrack(&mut self, id: &RouteId) {
        let Some(target) = self.of.remove(id) else {
            return;
        };
        let empty = self.on.get_mut(&target).is_some_and(|r| {
            r.remove(id);
            r.is_empty()
        });
        if empty {
            self.on.remove(&target);
            self.sched.remove(&target);
            self.tracker.forget(&target);
        }
    }

    /// Takes a new configuration and the complete set of local/static
    /// routes (startup, reload). Returns the routes whose health must
    /// change to match their endpoint's verdict.
    pub fn sync<'a>(
        &mut self,
        cfg: MonitorConfig,
        routes: impl IntoIterator<Item = (&'a RouteId, &'a str, bool)>,
        now: Millis,
    ) -> Vec<(RouteId, bool)> {
        if cfg.thresholds != self.cfg.thresholds {
            self.tracker = HealthTracker::new(cfg.thresholds);
        }
        self.sched.set_pacing(cfg.pacing);
        self.cfg = cfg;
        let before: Vec<ProbeTarget> = self.on.keys().cloned().collect();
        self.on.clear();
        self.of.clear();
        let mut fixes = Vec::new();
        for (id, endpoint, healthy) in routes {
            if let Some(h) = self.track(id, endpoint, healthy, now) {
                fixes.push((id.clone(), h));
            }
        }
        for t in before {
            if !self.on.contains_key(&t) {
                self.sched.remove(&t);
                self.tracker.forget(&t);
            }
        }
        fixes
    }

    /// The routes judged by `target`'s probes.
    pub fn routes_on<'a>(&'a self, target: &ProbeTarget) -> impl Iterator<Item = &'a RouteId> + 'a {
        self.on.get(target).into_iter().flat_map(RouteSet::iter)
    }

    /// The endpoint to probe now, if any (paced; see `schedule`).
    pub fn poll(&mut self, now: Millis) -> Option<ProbeTarget> {
        if !self.cfg.enabled {
            return None;
        }
        self.sched.poll(now)
    }

    /// When `poll` may next hand out a probe.
    pub fn next_wakeup(&mut self) -> Option<Millis> {
        if !self.cfg.enabled {
            return None;
        }
        self.sched.next_wakeup()
    }

    /// One probe result. Returns the endpoint's new verdict with every
    /// route on it when the result changed it.
    pub fn complete(&mut self, target: &ProbeTarget, ok: bool) -> Option<Verdict> {
        if !self.sched.complete(target) {
            return None;
        }
        self.results[usize::from(!ok)] += 1;
        let routes = self.on.get(target)?;
        let healthy = match self.tracker.observe(target, ok)? {
            Transition::Down => false,
            Transition::Up => true,
        };
        Some(Verdict {
            target: target.clone(),
            healthy,
            routes: routes.iter().cloned().collect(),
        })
    }

    /// Distinct endpoints being watched.
    pub fn endpoints(&self) -> usize {
        self.on.len()
    }

    /// Routes being watched.
    pub fn routes(&self) -> usize {
        self.of.len()
    }

    /// Endpoints currently judged down.
    pub fn endpoints_down(&self) -> usize {
        self.on
            .keys()
            .filter(|t| !self.tracker.is_healthy(t))
            .count()
    }

    /// Probes handed out so far.
    pub fn probes_started(&self) -> u64 {
        self.sched.started()
    }

    /// Probe results taken so far: (answered, failed). Results of probes
    /// no longer scheduled (the endpoint went away) are not counted.
    pub fn probe_results(&self) -> (u64, u64) {
        (self.results[0], self.results[1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(interval_ms: u64, max_per_s: u32) -> MonitorConfig {
        MonitorConfig {
            enabled: true,
            tcp_only: true,
            pacing: Pacing {
                interval_ms,
                max_per_s,
                max_in_flight: 32,
            },
            thresholds: Thresholds::default(),
        }
    }

    fn rid(i: usize) -> RouteId {
        RouteId::new(&format!("r{i}")).unwrap()
    }

    /// Simulated time: every probe answers `ok` 5 ms after it started.
    /// Returns (probes started, verdicts) until `until_ms`.
    fn run(m: &mut Monitor, from_ms: u64, until_ms: u64, ok: bool) -> (usize, Vec<Verdict>) {
        let mut now = Millis(from_ms);
        let mut probes = 0;
        let mut verdicts = Vec::new();
        let mut pending: Option<(Millis, ProbeTarget)> = None;
        while now.0 <= until_ms {
            if let Some((at, t)) = pending.take() {
                if at <= now {
                    verdicts.extend(m.complete(&t, ok));
                } else {
                    pending = Some((at, t));
                }
            }
            if pending.is_none() {
                if let Some(t) = m.poll(now) {
                    probes += 1;
                    pending = Some((now.saturating_add_ms(5), t));
                }
            }
            let next = match (&pending, m.next_wakeup()) {
                (Some((at, _)), Some(w)) => (*at).min(w),
                (Some((at, _)), None) => *at,
                (None, Some(w)) => w,
                (None, None) => break,
            };
            now = next.max(Millis(now.0 + 1));
        }
        (probes, verdicts)
    }

    #[test]
    fn ten_thousand_routes_on_one_endpoint_cost_one_probe_per_interval() {
        let mut m = Monitor::new(cfg(5_000, 50));
        for i in 0..10_000 {
            let ep = format!("http://192.0.2.10:8080/invoke/{i}");
            assert_eq!(m.track(&rid(i), &ep, true, Millis(0)), None);
        }
        assert_eq!(m.endpoints(), 1);
        assert_eq!(m.routes(), 10_000);
        let (probes, verdicts) = run(&mut m, 0, 60_000, true);
        assert_eq!(probes, 13, "t = 0, 5, ..., 60 s");
        assert!(verdicts.is_empty());
    }

    #[test]
    fn a_verdict_fans_out_to_every_route_on_the_endpoint_after_the_thresholds() {
        let mut m = Monitor::new(cfg(1_000, 50));
        for i in 0..300 {
            m.track(&rid(i), "http://192.0.2.10:8080/x", true, Millis(0));
        }
        m.track(&rid(999), "http://192.0.2.11:8080/x", true, Millis(0));
        let t = ProbeTarget::for_check("http://192.0.2.10:8080/", true).unwrap();
        // Probes until `t` was probed once (the other endpoint answers
        // ok); the verdict that probe of `t` produced.
        let mut now = 0;
        let probe_t = |m: &mut Monitor, now: &mut u64, ok: bool| loop {
            *now += 1;
            if let Some(p) = m.poll(Millis(*now)) {
                let v = m.complete(&p, if p == t { ok } else { true });
                if p == t {
                    return v;
                }
            }
        };
        // Two failures: nothing yet (threshold 3).
        assert_eq!(probe_t(&mut m, &mut now, false), None);
        assert_eq!(probe_t(&mut m, &mut now, false), None);
        let down = probe_t(&mut m, &mut now, false).expect("third failure");
        assert!(!down.healthy);
        assert_eq!(down.routes.len(), 300);
        assert!(!down.routes.contains(&rid(999)));
        // A route joining the down endpoint is down at once.
        assert_eq!(
            m.track(&rid(300), "http://192.0.2.10:8080/y", true, Millis(now)),
            Some(false)
        );
        assert_eq!(m.endpoints_down(), 1);
        // Two good probes bring all 301 back.
        assert_eq!(probe_t(&mut m, &mut now, true), None);
        let up = probe_t(&mut m, &mut now, true).expect("second success");
        assert!(up.healthy);
        assert_eq!(up.routes.len(), 301);
    }

    #[test]
    fn probe_results_count_answered_and_failed_probes_of_tracked_endpoints() {
        let mut m = Monitor::new(cfg(1_000, 50));
        m.track(&rid(1), "http://192.0.2.10:8080/a", true, Millis(0));
        let t = m.poll(Millis(1)).expect("a probe");
        m.complete(&t, false);
        // A result for a probe that is not out is not counted.
        m.complete(&t, true);
        assert_eq!(m.probe_results(), (0, 1));
        let t = m.poll(Millis(2_000)).expect("the next probe");
        m.complete(&t, true);
        assert_eq!(m.probe_results(), (1, 1));
    }

    #[test]
    fn the_last_route_leaving_forgets_the_endpoint() {
        let mut m = Monitor::new(cfg(1_000, 50));
        m.track(&rid(1), "http://192.0.2.10:8080/a", true, Millis(0));
        m.track(&rid(2), "http://192.0.2.10:8080/b", true, Millis(0));
        m.untrack(&rid(1));
        assert_eq!(m.endpoints(), 1);
        // An endpoint change moves the route.
        m.track(&rid(2), "http://192.0.2.12:8080/b", true, Millis(0));
        assert_eq!(m.endpoints(), 1);
        m.untrack(&rid(2));
        assert_eq!((m.endpoints(), m.routes()), (0, 0));
        assert_eq!(m.poll(Millis(10)), None);
        assert_eq!(m.next_wakeup(), None);
    }

    #[test]
    fn disabled_checks_track_but_never_probe() {
        let mut m = Monitor::new(MonitorConfig {
            enabled: false,
            ..cfg(1_000, 50)
        });
        m.track(&rid(1), "http://192.0.2.10:8080/a", true, Millis(0));
        assert_eq!(m.poll(Millis(0)), None);
        assert_eq!(m.next_wakeup(), None);
        // Turned on by a reload: probed from then on.
        let r = rid(1);
        let fixes = m.sync(
            cfg(1_000, 50),
            [(&r, "http://192.0.2.10:8080/a", true)],
            Millis(5),
        );
        assert!(fixes.is_empty());
        assert!(m.poll(Millis(5)).is_some());
    }

    #[test]
    fn sync_starts_an_endpoint_of_unhealthy_routes_down_and_fixes_the_rest() {
        let mut m = Monitor::new(cfg(1_000, 50));
        let (a, b) = (rid(1), rid(2));
        let fixes = m.sync(
            cfg(1_000, 50),
            [
                (&a, "http://192.0.2.10:8080/a", false),
                (&b, "http://192.0.2.10:8080/b", true),
            ],
            Millis(0),
        );
        assert_eq!(fixes, vec![(b.clone(), false)]);
        // And it recovers through probes (not stuck down).
        let (_, verdicts) = run(&mut m, 0, 3_000, true);
        assert_eq!(verdicts.len(), 1);
        assert!(verdicts[0].healthy);
        assert_eq!(verdicts[0].routes, vec![a, b]);
    }

    #[test]
    fn http_and_tcp_checks_identify_endpoints_differently() {
        let mut m = Monitor::new(MonitorConfig {
            tcp_only: false,
            ..cfg(1_000, 50)
        });
        m.track(&rid(1), "http://192.0.2.10:443/a", true, Millis(0));
        m.track(&rid(2), "https://192.0.2.10/b", true, Millis(0));
        assert_eq!(m.endpoints(), 2, "GET /healthz and a bare connect differ");
        let (r1, r2) = (rid(1), rid(2));
        m.sync(
            cfg(1_000, 50),
            [
                (&r1, "http://192.0.2.10:443/a", true),
                (&r2, "https://192.0.2.10/b", true),
            ],
            Millis(0),
        );
        assert_eq!(m.endpoints(), 1, "tcp checks dedupe by host:port");
    }
}

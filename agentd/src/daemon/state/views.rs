//! The admin views of the daemon state (`agentctl status`, `routes`,
//! `agents`, `stats`): read-only renderings of the table and counters.

use super::*;

impl State {
    pub fn status(&self, now: Millis) -> StatusView {
        let mut by = [0u64; 4];
        for r in self.table.iter() {
            by[r.source as usize] += 1;
        }
        StatusView {
            router_id: self.runtime.router_id.clone(),
            software: self.software.clone(),
            uptime_s: now.saturating_sub(self.started) / 1000,
            generation: self.table.generation(),
            routes: self.table.len() as u64,
            local_routes: by[RouteSource::Local as usize],
            static_routes: by[RouteSource::Static as usize],
            peer_routes: by[RouteSource::Peer as usize] + by[RouteSource::Relay as usize],
            fib_subscribers: 0,
            config_error: self.config_error.clone(),
            config_problems_total: self.runtime.problems.len() as u64,
            config_problems: self
                .runtime
                .problems
                .iter()
                .take(MAX_STATUS_PROBLEMS)
                .map(ConfigProblem::of)
                .collect(),
            config_source: self.config_source.clone(),
            config_generation: self.config_generation,
            policy_error: self.runtime.policy.invalid.clone(),
            warnings: self.runtime.advice().into_iter().map(Into::into).collect(),
            // Discovery's, filled in by the daemon.
            nexus_alias: Default::default(),
            relay: None,
            ipv6: None,
        }
    }

    pub fn routes(&self, q: &RoutesQuery, now: Millis) -> RoutePage {
        let limit = page_limit(q.limit);
        let mut rows: Vec<&Route> = self
            .table
            .iter()
            .filter(|r| q.capability.as_ref().is_none_or(|c| *c == r.capability))
            .filter(|r| q.after.as_ref().is_none_or(|a| r.id > *a))
            .collect();
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        let next = (rows.len() > limit).then(|| rows[limit - 1].id.clone());
        rows.truncate(limit);
        let down: Vec<&str> = self.table.peers_down().collect();
        RoutePage {
            routes: rows
                .into_iter()
                .map(|r| RouteView {
                    session_up: r.next_hop.as_deref().is_none_or(|h| !down.contains(&h)),
                    ..RouteView::of(r, now)
                })
                .collect(),
            next,
        }
    }

    pub fn agents(&self, q: &AgentsQuery) -> AgentPage {
        let limit = page_limit(q.limit);
        let mut by_origin: BTreeMap<&str, (AgentView, BTreeSet<&str>)> = BTreeMap::new();
        for r in self.table.iter() {
            if q.after.as_ref().is_some_and(|a| *r.origin <= **a) {
                continue;
            }
            let (view, caps) = by_origin.entry(&r.origin).or_insert_with(|| {
                (
                    AgentView {
                        origin: r.origin.as_str().into(),
                        tenant: r.tenant.as_str().into(),
                        routes: 0,
                        capabilities: Vec::new(),
                        healthy_routes: 0,
                    },
                    BTreeSet::new(),
                )
            });
            view.routes += 1;
            view.healthy_routes += u64::from(r.healthy);
            caps.insert(&r.capability);
        }
        let more = by_origin.len() > limit;
        let agents: Vec<AgentView> = by_origin
            .into_values()
            .take(limit)
            .map(|(mut v, caps)| {
                v.capabilities = caps.into_iter().map(Into::into).collect();
                v
            })
            .collect();
        let next = if more {
            agents.last().map(|a| a.origin.clone())
        } else {
            None
        };
        AgentPage { agents, next }
    }

    /// `agentctl stats` at `now`: our counters and the gateway's latest
    /// report with its age.
    pub fn stats_at(&self, now: Millis) -> StatsView {
        let mut counters = self.counters.clone();
        counters.insert("routes".into(), self.table.len() as u64);
        let mut by = [0u64; 4];
        for r in self.table.iter() {
            by[r.source as usize] += 1;
        }
        for s in [
            RouteSource::Local,
            RouteSource::Static,
            RouteSource::Peer,
            RouteSource::Relay,
        ] {
            counters.insert(format!("routes.{}", s.as_str()).into(), by[s as usize]);
        }
        counters.insert("generation".into(), self.table.generation());
        counters.insert("config_generation".into(), self.config_generation);
        let gateway = self.gateway.map(|(stats, at)| GatewayView {
            stats,
            age_ms: now.saturating_sub(at),
        });
        StatsView { counters, gateway }
    }
}

fn page_limit(limit: u32) -> usize {
    (if limit == 0 {
        MAX_PAGE
    } else {
        limit.min(MAX_PAGE)
    }) as usize
}

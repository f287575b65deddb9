//! Unicast DNS-SD in the daemon: the lookup rounds of
//! `discovery::unicast::browse` with the resolver they ask, the
//! questions waiting to go out as effects, and the search domains'
//! status for `agentctl candidates`.

use std::net::SocketAddr;
use std::time::Duration;

use super::dns::DnsQuery;
use super::settings::DiscoverySettings;
use crate::discovery::unicast::answer::{Answer, DnsError};
use crate::discovery::unicast::browse::{Ask, BrowseSettings, Browser, Event};
use crate::ipc::discovery::{DomainRow, MAX_DOMAIN_ROWS};
use crate::time::Millis;

/// What unicast DNS-SD runs with; equal plans keep the running lookups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub resolver: SocketAddr,
    pub browse: BrowseSettings,
    pub timeout: Duration,
}

impl Plan {
    /// `Ok(None)`: no search domain (off, nothing to say); `Err`: why it
    /// cannot run although domains are set.
    pub fn of(s: &DiscoverySettings) -> Result<Option<Plan>, String> {
        if s.search_domains.is_empty() || !s.enabled {
            return Ok(None);
        }
        let resolver = s.resolver.ok_or(
            "discovery.search_domain is set but discovery.resolver is not: unicast DNS-SD is off",
        )?;
        Ok(Some(Plan {
            resolver,
            browse: BrowseSettings {
                domains: s.search_domains.clone(),
                require_dnssec: s.require_dnssec,
                refresh_min_ms: s.refresh_min_ms,
                refresh_max_ms: s.refresh_max_ms,
            },
            timeout: Duration::from_millis(s.query_timeout_ms),
        }))
    }
}

#[derive(Debug)]
pub struct Unicast {
    plan: Plan,
    browser: Browser,
    /// Questions for the effect driver.
    out: Vec<DnsQuery>,
}

impl Unicast {
    pub fn new(plan: Plan, now: Millis) -> Unicast {
        Unicast {
            browser: Browser::new(plan.browse.clone(), now),
            plan,
            out: Vec::new(),
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The instances found now (to withdraw when it stops).
    pub fn known(&self) -> Vec<String> {
        self.browser.known().map(str::to_string).collect()
    }

    /// Questions go out as effects; found and lost instances come back.
    fn route(&mut self, events: Vec<Event>) -> Vec<Event> {
        let mut rest = Vec::new();
        for e in events {
            match e {
                Event::Ask(ask) => self.out.push(DnsQuery {
                    ask,
                    resolver: self.plan.resolver,
                    timeout: self.plan.timeout,
                }),
                other => rest.push(other),
            }
        }
        rest
    }

    pub fn tick(&mut self, now: Millis) -> Vec<Event> {
        let events = self.browser.tick(now);
        self.route(events)
    }

    pub fn answered(
        &mut self,
        ask: &Ask,
        result: Result<Answer, DnsError>,
        now: Millis,
    ) -> Vec<Event> {
        let events = self.browser.answered(ask, result, now);
        self.route(events)
    }

    pub fn next_deadline(&self) -> Option<Millis> {
        self.browser.next_deadline()
    }

    pub fn take_queries(&mut self) -> Vec<DnsQuery> {
        std::mem::take(&mut self.out)
    }

    /// The last error of each domain (to log changes).
    pub fn errors(&self) -> Vec<(String, Option<String>)> {
        self.browser
            .status()
            .into_iter()
            .map(|s| (s.domain, s.last_error.map(|(_, e)| e)))
            .collect()
    }

    pub fn rows(&self, now: Millis) -> Vec<DomainRow> {
        let ago = |t: Millis| now.saturating_sub(t);
        self.browser
            .status()
            .into_iter()
            .take(MAX_DOMAIN_ROWS)
            .map(|s| DomainRow {
                domain: s.domain.into(),
                resolver: self.plan.resolver.to_string().into(),
                last_success_ago_ms: s.last_success.map(ago),
                last_error_ago_ms: s.last_error.as_ref().map(|(t, _)| ago(*t)),
                last_error: s.last_error.map(|(_, e)| e.into()),
                instances: u32::try_from(s.instances).unwrap_or(u32::MAX),
                next_lookup_in_ms: s.next_lookup.map(|t| t.saturating_sub(now)),
            })
            .collect()
    }
}

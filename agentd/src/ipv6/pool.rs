//! The addresses bound now: one per agent, held while any of its routes
//! is, at most `ipv6.max_addresses`.
//!
//! Pure bookkeeping. The daemon adds an address to the kernel when
//! [`Pool::bind`] returns a new one and removes it when [`Pool::release`]
//! frees it; [`Pool::stale`] names what a previous run left behind.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::Ipv6Addr;

use super::derive::{derive, AgentKey, Prefix};

/// Why an agent got no address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolError {
    /// `ipv6.max_addresses` are bound.
    Full { max: usize },
    /// No usable address was found for the agent (never expected: each
    /// try is a fresh pseudo-random identifier).
    Exhausted,
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Full { max } => write!(
                f,
                "all {max} addresses of ipv6.max_addresses are bound to other agents"
            ),
            PoolError::Exhausted => f.write_str("no free address could be derived for this agent"),
        }
    }
}

impl std::error::Error for PoolError {}

/// One agent's address and the routes holding it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub addr: Ipv6Addr,
    pub routes: BTreeSet<Box<str>>,
}

/// What [`Pool::bind`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// A new address: add it to the kernel.
    New(Ipv6Addr),
    /// The agent had it already (another route of the same agent, or the
    /// same route again).
    Held(Ipv6Addr),
}

impl Bound {
    pub fn addr(self) -> Ipv6Addr {
        match self {
            Bound::New(a) | Bound::Held(a) => a,
        }
    }
}

#[derive(Debug)]
pub struct Pool {
    prefix: Prefix,
    secret: [u8; 32],
    max: usize,
    agents: HashMap<AgentKey, Binding>,
    by_addr: HashMap<Ipv6Addr, AgentKey>,
    by_route: HashMap<Box<str>, AgentKey>,
}

impl Pool {
    pub fn new(prefix: Prefix, secret: [u8; 32], max: usize) -> Pool {
        Pool {
            prefix,
            secret,
            max,
            agents: HashMap::new(),
            by_addr: HashMap::new(),
            by_route: HashMap::new(),
        }
    }

    pub fn prefix(&self) -> &Prefix {
        &self.prefix
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Addresses bound now.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The address of `agent` for `route`: the one it holds, or a new one
    /// while fewer than `max` are bound. A route moving to another agent
    /// (its registration changed) leaves its old binding first.
    pub fn bind(&mut self, agent: &AgentKey, route: &str) -> Result<Bound, PoolError> {
        if self.by_route.get(route).is_some_and(|k| k != agent) {
            self.release(route);
        }
        if let Some(b) = self.agents.get_mut(agent) {
            b.routes.insert(route.into());
            self.by_route.insert(route.into(), agent.clone());
            return Ok(Bound::Held(b.addr));
        }
        if self.agents.len() >= self.max {
            return Err(PoolError::Full { max: self.max });
        }
        let taken = |a: Ipv6Addr| self.by_addr.contains_key(&a);
        let addr = derive(&self.prefix, agent, &self.secret, taken).ok_or(PoolError::Exhausted)?;
        self.by_addr.insert(addr, agent.clone());
        self.by_route.insert(route.into(), agent.clone());
        self.agents.insert(
            agent.clone(),
            Binding {
                addr,
                routes: BTreeSet::from([Box::from(route)]),
            },
        );
        Ok(Bound::New(addr))
    }

    /// `route` no longer holds its address (lease ended, withdrawn): the
    /// address, when that was its agent's last route (remove it from the
    /// kernel).
    pub fn release(&mut self, route: &str) -> Option<Ipv6Addr> {
        let agent = self.by_route.remove(route)?;
        let b = self.agents.get_mut(&agent)?;
        b.routes.remove(route);
        if !b.routes.is_empty() {
            return None;
        }
        let addr = b.addr;
        self.agents.remove(&agent);
        self.by_addr.remove(&addr);
        Some(addr)
    }

    /// The address `route` holds.
    pub fn addr_of(&self, route: &str) -> Option<Ipv6Addr> {
        self.by_route
            .get(route)
            .and_then(|k| self.agents.get(k))
            .map(|b| b.addr)
    }

    /// The route ids served at `addr` (what the per-address listener
    /// forwards to, and nothing else).
    pub fn routes_at(&self, addr: Ipv6Addr) -> Option<&BTreeSet<Box<str>>> {
        let k = self.by_addr.get(&addr)?;
        self.agents.get(k).map(|b| &b.routes)
    }

    /// Every binding, by address.
    pub fn bindings(&self) -> impl Iterator<Item = (&AgentKey, &Binding)> {
        self.agents.iter()
    }

    /// Of the addresses found on the interface (`present`), those in our
    /// prefix that nothing holds: left by an earlier run, to remove.
    pub fn stale(&self, present: impl IntoIterator<Item = Ipv6Addr>) -> Vec<Ipv6Addr> {
        present
            .into_iter()
            .filter(|a| self.prefix.contains(*a) && !self.by_addr.contains_key(a))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(origin: &str, cap: &str) -> AgentKey {
        AgentKey {
            tenant: "lab".into(),
            origin: origin.into(),
            capability: cap.into(),
        }
    }

    fn pool(max: usize) -> Pool {
        Pool::new(Prefix::parse("2001:db8:7::/64").unwrap(), [3; 32], max)
    }

    #[test]
    fn an_agent_keeps_its_address_across_release_and_rebind() {
        let mut p = pool(4);
        let w = agent("agent://lab/w", "weather.now");
        let a = p.bind(&w, "r1").unwrap();
        assert!(matches!(a, Bound::New(_)));
        assert_eq!(p.bind(&w, "r1").unwrap(), Bound::Held(a.addr()));
        assert_eq!(
            p.bind(&w, "r2").unwrap(),
            Bound::Held(a.addr()),
            "a replica shares it"
        );
        assert_eq!(p.release("r1"), None, "r2 still holds it");
        assert_eq!(p.release("r2"), Some(a.addr()));
        assert!(p.is_empty());
        // A fresh pool (a restart) and a new route id: the same address.
        let mut again = pool(4);
        assert_eq!(again.bind(&w, "r9").unwrap(), Bound::New(a.addr()));
        assert_eq!(again.routes_at(a.addr()).unwrap().len(), 1);
    }

    #[test]
    fn max_addresses_is_a_typed_refusal_naming_the_limit_and_frees_with_a_release() {
        let mut p = pool(2);
        p.bind(&agent("agent://lab/a", "x.a"), "ra").unwrap();
        p.bind(&agent("agent://lab/b", "x.b"), "rb").unwrap();
        let e = p.bind(&agent("agent://lab/c", "x.c"), "rc").unwrap_err();
        assert_eq!(e, PoolError::Full { max: 2 });
        assert!(
            e.to_string()
                .contains("all 2 addresses of ipv6.max_addresses"),
            "{e}"
        );
        // An agent that has one is not refused.
        assert!(p.bind(&agent("agent://lab/a", "x.a"), "ra2").is_ok());
        p.release("rb");
        assert!(p.bind(&agent("agent://lab/c", "x.c"), "rc").is_ok());
    }

    #[test]
    fn a_route_that_changes_agent_leaves_its_old_address() {
        let mut p = pool(4);
        let old = p.bind(&agent("agent://lab/a", "x.a"), "r").unwrap().addr();
        let new = p.bind(&agent("agent://lab/a", "x.b"), "r").unwrap().addr();
        assert_ne!(old, new);
        assert_eq!(p.len(), 1, "the old address was freed");
        assert_eq!(p.addr_of("r"), Some(new));
        assert!(p.routes_at(old).is_none());
    }

    #[test]
    fn stale_addresses_are_ours_unheld_and_in_the_prefix() {
        let mut p = pool(4);
        let held = p.bind(&agent("agent://lab/a", "x.a"), "r").unwrap().addr();
        let left: Ipv6Addr = "2001:db8:7::1234".parse().unwrap();
        let foreign: Ipv6Addr = "2001:db8:8::1".parse().unwrap();
        assert_eq!(p.stale([held, left, foreign]), vec![left]);
    }
}

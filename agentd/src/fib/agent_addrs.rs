//! The replica's agent addresses: the /128s agentd bound, each to one
//! agent (DESIGN §7 "IPv6 /128"). agent-gw looks up the local address of
//! every connection it accepts here, so the set is a map by address,
//! bounded by [`MAX_AGENT_ADDRS`], and a generation tells the listener
//! driver whether anything changed.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::sync::Arc;

use super::{AgentAddr, FibChange, MAX_AGENT_ADDRS};

/// Why a set of agent addresses was refused (nothing of it applied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TooManyAgentAddrs {
    pub addrs: usize,
}

impl std::fmt::Display for TooManyAgentAddrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FIB stream would hold {} agent addresses, more than the bound of {MAX_AGENT_ADDRS}",
            self.addrs
        )
    }
}

/// The bound addresses, by address.
#[derive(Debug, Default)]
pub struct AgentAddrs {
    by_addr: BTreeMap<Ipv6Addr, Arc<AgentAddr>>,
    generation: u64,
    /// Bindings that were not well-formed ([`AgentAddr::check`]).
    rejected: u64,
}

impl AgentAddrs {
    /// The agent bound to `addr`.
    pub fn get(&self, addr: &Ipv6Addr) -> Option<&Arc<AgentAddr>> {
        self.by_addr.get(addr)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<AgentAddr>> {
        self.by_addr.values()
    }

    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }

    /// Grows whenever the set changes; starts at 0.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Replaces the whole set (a snapshot's).
    pub fn replace(&mut self, addrs: Vec<AgentAddr>) -> Result<(), TooManyAgentAddrs> {
        if addrs.len() > MAX_AGENT_ADDRS {
            return Err(TooManyAgentAddrs { addrs: addrs.len() });
        }
        let mut fresh = BTreeMap::new();
        for a in addrs {
            if a.check().is_ok() {
                fresh.insert(a.addr, Arc::new(a));
            } else {
                self.rejected += 1;
            }
        }
        if fresh != self.by_addr {
            self.by_addr = fresh;
            self.generation += 1;
        }
        Ok(())
    }

    /// Refuses `changes` as a whole if applying them in order would hold
    /// more than [`MAX_AGENT_ADDRS`] at any point.
    pub fn check_count(&self, changes: &[FibChange]) -> Result<(), TooManyAgentAddrs> {
        let mut count = self.by_addr.len();
        let mut touched: BTreeMap<Ipv6Addr, bool> = BTreeMap::new();
        for change in changes {
            let (addr, present_after) = match change {
                FibChange::Bind(a) => (a.addr, true),
                FibChange::Unbind(a) => (*a, false),
                _ => continue,
            };
            let present = touched
                .get(&addr)
                .copied()
                .unwrap_or_else(|| self.by_addr.contains_key(&addr));
            match (present, present_after) {
                (false, true) => count += 1,
                (true, false) => count -= 1,
                _ => {}
            }
            touched.insert(addr, present_after);
            if count > MAX_AGENT_ADDRS {
                return Err(TooManyAgentAddrs { addrs: count });
            }
        }
        Ok(())
    }

    /// A `Bind`: adds or replaces the binding of its address.
    pub fn bind(&mut self, a: AgentAddr) {
        if a.check().is_err() {
            self.rejected += 1;
            return;
        }
        if self.by_addr.get(&a.addr).map(|b| &**b) != Some(&a) {
            self.by_addr.insert(a.addr, Arc::new(a));
            self.generation += 1;
        }
    }

    /// An `Unbind`.
    pub fn unbind(&mut self, addr: &Ipv6Addr) {
        if self.by_addr.remove(addr).is_some() {
            self.generation += 1;
        }
    }
}

/// The changes that turn the published set `old` into `new` (both
/// sorted by address), and `old` into `new`: what agentd sends after the
/// address service bound or released something.
pub fn changes(old: &mut Vec<AgentAddr>, new: Vec<AgentAddr>) -> Vec<FibChange> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.addr == n.addr => {
                if o != n {
                    out.push(FibChange::Bind(n.clone()));
                }
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if o.addr < n.addr => {
                out.push(FibChange::Unbind(o.addr));
                i += 1;
            }
            (Some(o), None) => {
                out.push(FibChange::Unbind(o.addr));
                i += 1;
            }
            (_, Some(n)) => {
                out.push(FibChange::Bind(n.clone()));
                j += 1;
            }
            (None, None) => break,
        }
    }
    *old = new;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(n: u16, origin: &str) -> AgentAddr {
        AgentAddr {
            addr: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, n),
            tenant: "lab".into(),
            origin: origin.into(),
            capability: "echo".into(),
        }
    }

    #[test]
    fn bind_unbind_and_generation() {
        let mut s = AgentAddrs::default();
        s.bind(addr(1, "agent://lab/a"));
        assert_eq!((s.len(), s.generation()), (1, 1));
        // The same binding again changes nothing.
        s.bind(addr(1, "agent://lab/a"));
        assert_eq!(s.generation(), 1);
        // Another agent at the same address replaces it.
        s.bind(addr(1, "agent://lab/b"));
        let at = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        assert_eq!(&*s.get(&at).unwrap().origin, "agent://lab/b");
        assert_eq!(s.generation(), 2);
        s.unbind(&at);
        s.unbind(&at);
        assert!(s.is_empty());
        assert_eq!(s.generation(), 3);
    }

    #[test]
    fn changes_between_sets() {
        let mut old = vec![addr(1, "agent://lab/a"), addr(3, "agent://lab/c")];
        let new = vec![
            addr(2, "agent://lab/b"),
            addr(3, "agent://lab/x"),
            addr(4, "agent://lab/d"),
        ];
        let out = changes(&mut old, new.clone());
        assert_eq!(
            out,
            [
                FibChange::Unbind(addr(1, "").addr),
                FibChange::Bind(addr(2, "agent://lab/b")),
                FibChange::Bind(addr(3, "agent://lab/x")),
                FibChange::Bind(addr(4, "agent://lab/d")),
            ]
        );
        assert_eq!(old, new);
        assert!(changes(&mut old, new.clone()).is_empty());
        assert_eq!(changes(&mut old, vec![]).len(), 3);
        // Applied to a replica's set, the changes give the new set.
        let mut s = AgentAddrs::default();
        let mut published = Vec::new();
        for set in [new.clone(), vec![addr(3, "agent://lab/c")], new] {
            for c in changes(&mut published, set.clone()) {
                match c {
                    FibChange::Bind(a) => s.bind(a),
                    FibChange::Unbind(a) => s.unbind(&a),
                    _ => unreachable!(),
                }
            }
            let held: Vec<AgentAddr> = s.iter().map(|a| (**a).clone()).collect();
            assert_eq!(held, set);
        }
    }

    #[test]
    fn malformed_bindings_are_left_out() {
        let mut s = AgentAddrs::default();
        let mut bad = addr(1, "not-a-uri");
        s.bind(bad.clone());
        bad.origin = "agent://lab/a".into();
        bad.addr = Ipv6Addr::LOCALHOST;
        s.replace(vec![bad, addr(2, "agent://lab/a")]).unwrap();
        assert_eq!((s.len(), s.rejected()), (1, 2));
    }

    #[test]
    fn counts_are_bounded_before_anything_applies() {
        let mut s = AgentAddrs::default();
        let many: Vec<AgentAddr> = (0..=MAX_AGENT_ADDRS as u32)
            .map(|i| AgentAddr {
                addr: Ipv6Addr::from((0x2001_0db8_u128 << 96) | (u128::from(i) + 1)),
                ..addr(0, "agent://lab/a")
            })
            .collect();
        assert!(s.replace(many.clone()).is_err());
        assert!(s.is_empty());
        let changes: Vec<FibChange> = many.into_iter().map(FibChange::Bind).collect();
        assert!(s.check_count(&changes).is_err());
        // Unbinding on the way keeps a long delta within the bound.
        let mut churn = Vec::new();
        for i in 0..(MAX_AGENT_ADDRS as u32 + 10) {
            let a = Ipv6Addr::from((0x2001_0db8_u128 << 96) | (u128::from(i) + 1));
            churn.push(FibChange::Bind(AgentAddr {
                addr: a,
                ..addr(0, "agent://lab/a")
            }));
            churn.push(FibChange::Unbind(a));
        }
        assert!(s.check_count(&churn).is_ok());
    }
}

//! This router's per-agent address service (`config ipv6`), brought up
//! at start and on every reload that changes its section: the prefix
//! resolved (`auto`: from the upstream link's own addresses), the link
//! that holds the /128s made if it is missing, proxy NDP turned on
//! upstream (`ndp-proxy`), what an earlier run left removed, and every
//! reason it cannot work said up front — in `agentctl status` and the
//! log, not at an agent's first request.
//!
//! The kernel calls are rtnetlink requests answered at once by the local
//! kernel (`ipv6::kernel`); they run here, on the loop, at start and
//! reload only.

use std::collections::{HashMap, HashSet};
use std::net::Ipv6Addr;
use std::path::Path;

use edkey::Sha256;
use uci_schema::uci::Package;
use uci_schema::Ipv6Mode;

use crate::ipc::message::{Ipv6Grant, Ipv6Refusal, Ipv6View};
use crate::ipv6::kernel::{enable_proxy_ndp, forwarding, index_of, Rtnl};
use crate::ipv6::netlink::AddrEntry;
use crate::ipv6::{AgentKey, Bound, Pool, PoolError, Prefix};
use crate::route::RouteId;
use crate::{log_info, log_warn};

use super::privilege;

/// Where OpenWrt keeps odhcpd's configuration.
pub const DHCP_CONFIG: &str = "/etc/config/dhcp";

/// The service, with what it found when it came up.
#[derive(Debug)]
pub struct Ipv6Service {
    cfg: uci_schema::Ipv6,
    prefix: Option<Prefix>,
    pool: Option<Pool>,
    /// Why addresses cannot be bound now (empty: they can).
    problems: Vec<String>,
    /// Cautions that do not stop it (odhcpd's NDP relay).
    warnings: Vec<String>,
    stale_removed: u64,
    /// The kernel side, once the service is up: the socket, the link
    /// holding the addresses, the upstream link (`ndp-proxy`).
    kernel: Option<Kernel>,
    /// Routes that asked and got no address, and why.
    refused: HashMap<Box<str>, (Ipv6Refusal, String)>,
}

#[derive(Debug)]
struct Kernel {
    nl: Rtnl,
    link: u32,
    upstream: Option<u32>,
    /// The prefix's `unreachable` route, when this service added it.
    unreachable: Option<Prefix>,
}

impl Kernel {
    fn add(&mut self, addr: Ipv6Addr) -> std::io::Result<()> {
        self.nl.add_addr(self.link, addr)?;
        if let Some(up) = self.upstream {
            if let Err(e) = self.nl.add_proxy(up, addr) {
                let _ = self.nl.del_addr(self.link, addr);
                return Err(e);
            }
        }
        Ok(())
    }

    fn del(&mut self, addr: Ipv6Addr) -> std::io::Result<()> {
        if let Some(up) = self.upstream {
            self.nl.del_proxy(up, addr)?;
        }
        self.nl.del_addr(self.link, addr)
    }
}

/// What the service needs from outside its section.
#[derive(Debug)]
pub struct Env<'a> {
    /// The router's identity key file (`agentd.identity`): the secret of
    /// the address derivation comes from it, so addresses survive a
    /// restart (the state directory does not survive a reboot).
    pub identity: &'a Path,
    /// odhcpd's UCI file ([`DHCP_CONFIG`]).
    pub dhcp_config: &'a Path,
    /// Whether an odhcpd process runs.
    pub odhcpd_running: bool,
}

impl Ipv6Service {
    /// Brings the service up as `cfg` says; `None` when `mode` is off.
    pub fn start(cfg: &uci_schema::Ipv6, env: &Env<'_>) -> Option<Ipv6Service> {
        if cfg.mode == Ipv6Mode::Off {
            return None;
        }
        let mut s = Ipv6Service {
            cfg: cfg.clone(),
            prefix: None,
            pool: None,
            problems: Vec::new(),
            warnings: Vec::new(),
            stale_removed: 0,
            kernel: None,
            refused: HashMap::new(),
        };
        s.bring_up(env);
        for p in &s.problems {
            log_warn!("ipv6: {p}");
        }
        for w in &s.warnings {
            log_warn!("ipv6: {w}");
        }
        if s.problems.is_empty() {
            log_info!(
                "ipv6: {} mode, agent addresses from {} on {}{}",
                s.cfg.mode,
                s.prefix.map(|p| p.to_string()).unwrap_or_default(),
                s.cfg.interface,
                if s.stale_removed > 0 {
                    format!(" ({} left by an earlier run removed)", s.stale_removed)
                } else {
                    String::new()
                }
            );
        }
        Some(s)
    }

    /// Takes down what the service put into the kernel — every agent
    /// address, its proxy entry, the prefix's unreachable route — before a
    /// reload replaces or ends it: an address left on the link would no
    /// longer be pinned to its agent. (A stopping agentd leaves them: its
    /// gateway keeps serving them pinned, and the next start removes or
    /// binds them again.)
    pub fn stop(mut self) {
        let (Some(pool), Some(kernel)) = (self.pool.take(), self.kernel.as_mut()) else {
            return;
        };
        for (_, b) in pool.bindings() {
            match kernel.del(b.addr) {
                Ok(()) => log_info!("ipv6: {} released (the service stops)", b.addr),
                Err(e) => log_warn!("ipv6: cannot remove {}: {e}", b.addr),
            }
        }
        if let Some(p) = kernel.unreachable.take() {
            if let Err(e) = kernel.nl.del_unreachable(p.network(), p.prefix_len()) {
                log_warn!("ipv6: cannot remove the unreachable route of {p}: {e}");
            }
        }
    }

    /// Whether `other` would come up differently (a reload restarts the
    /// service only then).
    pub fn same_config(&self, other: &uci_schema::Ipv6) -> bool {
        self.cfg == *other
    }

    fn bring_up(&mut self, env: &Env<'_>) {
        let ndp = self.cfg.mode == Ipv6Mode::NdpProxy;
        if let Some(w) = odhcpd_relay(env, &self.cfg.upstream_interface) {
            if ndp {
                self.warnings.push(w);
            }
        }
        let net_admin = privilege::holds(privilege::CAP_NET_ADMIN);
        if !net_admin {
            self.problems.push("agentd holds no CAP_NET_ADMIN, which adding addresses and proxy-NDP entries needs (run it as root: it keeps CAP_NET_ADMIN and drops every other capability)".into());
        }
        let mut nl = match Rtnl::open() {
            Ok(nl) => nl,
            Err(e) => {
                self.problems.push(format!("cannot open rtnetlink: {e}"));
                return;
            }
        };
        self.prefix = match resolve_prefix(&self.cfg, &mut nl) {
            Ok(p) => Some(p),
            Err(why) => {
                self.problems.push(why);
                None
            }
        };
        let secret = match secret(env.identity) {
            Ok(s) => Some(s),
            Err(why) => {
                self.problems.push(why);
                None
            }
        };
        let (Some(prefix), Some(secret), true) = (self.prefix, secret, net_admin) else {
            return;
        };
        let link = match nl.ensure_dummy(&self.cfg.interface) {
            Ok(i) => i,
            Err(e) => {
                self.problems
                    .push(format!("interface {}: {e}", self.cfg.interface));
                return;
            }
        };
        let pool = Pool::new(prefix, secret, self.cfg.max_addresses as usize);
        match nl.addrs(Some(link)) {
            Ok(found) => {
                for stale in pool.stale(found.iter().map(|e| e.addr)) {
                    match nl.del_addr(link, stale) {
                        Ok(()) => self.stale_removed += 1,
                        Err(e) => self.problems.push(format!(
                            "cannot remove {stale} left on {}: {e}",
                            self.cfg.interface
                        )),
                    }
                }
            }
            Err(e) => self.problems.push(format!(
                "cannot list the addresses of {}: {e}",
                self.cfg.interface
            )),
        }
        let mut unreachable = None;
        if !ndp {
            // What of the prefix no agent holds is refused at once. (In
            // ndp-proxy mode the prefix is the upstream link's own.)
            match nl.ensure_unreachable(prefix.network(), prefix.prefix_len()) {
                Ok(added) => unreachable = added.then_some(prefix),
                Err(e) => self.warnings.push(format!("cannot add an unreachable route for {prefix}: {e} (callers of released addresses wait out their timeouts)")),
            }
        }
        let mut upstream = None;
        if ndp {
            let up = &self.cfg.upstream_interface;
            let Some(index) = index_of(up).ok().flatten() else {
                self.problems
                    .push(format!("upstream_interface {up} does not exist"));
                return;
            };
            upstream = Some(index);
            if let Err(e) = enable_proxy_ndp(up) {
                self.problems
                    .push(format!("cannot turn proxy_ndp on for {up}: {e}"));
                return;
            }
            if matches!(forwarding(up), Ok(false)) {
                self.warnings.push(format!("IPv6 forwarding is off on {up}: the kernel answers neighbour solicitations for proxy entries only on a forwarding link (a router's normal state; net.ipv6.conf.{up}.forwarding=1)"));
            }
            match nl.proxies(index) {
                Ok(found) => {
                    for stale in pool.stale(found.iter().map(|n| n.addr)) {
                        match nl.del_proxy(index, stale) {
                            Ok(()) => self.stale_removed += 1,
                            Err(e) => self.problems.push(format!(
                                "cannot remove the proxy entry of {stale} on {up}: {e}"
                            )),
                        }
                    }
                }
                Err(e) => self
                    .problems
                    .push(format!("cannot list the proxy entries of {up}: {e}")),
            }
        }
        self.pool = Some(pool);
        self.kernel = Some(Kernel {
            nl,
            link,
            upstream,
            unreachable,
        });
    }

    /// Brings the bound addresses in line with `wanted` — the live local
    /// routes whose agents asked, and who the agents are: binds what is
    /// missing and releases what no route holds any more, adding and
    /// removing the kernel's addresses (and proxy entries). A route that
    /// gets none is remembered with the reason ([`Ipv6Service::grant`]).
    pub fn reconcile(&mut self, wanted: &[(RouteId, AgentKey)]) {
        let (Some(pool), Some(kernel)) = (&mut self.pool, &mut self.kernel) else {
            return;
        };
        let want: HashSet<&str> = wanted.iter().map(|(r, _)| r.as_str()).collect();
        let held: Vec<Box<str>> = pool
            .bindings()
            .flat_map(|(_, b)| b.routes.iter().cloned())
            .filter(|r| !want.contains(&**r))
            .collect();
        for route in held {
            if let Some(addr) = pool.release(&route) {
                match kernel.del(addr) {
                    Ok(()) => log_info!("ipv6: {addr} released (route {route} is gone)"),
                    Err(e) => log_warn!("ipv6: cannot remove {addr} of route {route}: {e}"),
                }
            }
        }
        self.refused.retain(|r, _| want.contains(&**r));
        for (route, agent) in wanted {
            let bound = match pool.bind(agent, route.as_str()) {
                Ok(Bound::Held(_)) => continue,
                Ok(Bound::New(addr)) => match kernel.add(addr) {
                    Ok(()) => {
                        log_info!("ipv6: {addr} bound to route {route} ({})", agent.origin);
                        Ok(())
                    }
                    Err(e) => {
                        pool.release(route.as_str());
                        Err((
                            Ipv6Refusal::Failed,
                            format!("the kernel refused {addr}: {e}"),
                        ))
                    }
                },
                Err(e @ PoolError::Full { .. }) => Err((Ipv6Refusal::Full, e.to_string())),
                Err(e) => Err((Ipv6Refusal::Failed, e.to_string())),
            };
            match bound {
                Ok(()) => {
                    self.refused.remove(route.as_str());
                }
                Err(why) => {
                    if self.refused.get(route.as_str()) != Some(&why) {
                        log_warn!("ipv6: no address for route {route}: {}", why.1);
                    }
                    self.refused.insert(route.as_str().into(), why);
                }
            }
        }
    }

    /// What became of route `route`'s request for an address.
    pub fn grant(&self, route: &RouteId) -> Ipv6Grant {
        if let Some(addr) = self.pool.as_ref().and_then(|p| p.addr_of(route.as_str())) {
            return Ipv6Grant::Bound(addr);
        }
        let (why, reason) = match (self.problems.first(), self.refused.get(route.as_str())) {
            (_, Some((why, reason))) => (*why, reason.clone()),
            (Some(p), None) => (
                Ipv6Refusal::NotReady,
                format!("IPv6 binding is not ready on this router: {p}"),
            ),
            (None, None) => (Ipv6Refusal::Failed, "no address bound".to_string()),
        };
        Ipv6Grant::NotBound {
            why,
            reason: reason.into(),
        }
    }

    /// The bound addresses with their agents, sorted by address: what
    /// the FIB carries to agent-gw.
    pub fn agent_addrs(&self) -> Vec<crate::fib::AgentAddr> {
        let Some(pool) = &self.pool else {
            return Vec::new();
        };
        let mut out: Vec<crate::fib::AgentAddr> = pool
            .bindings()
            .map(|(k, b)| crate::fib::AgentAddr {
                addr: b.addr,
                tenant: k.tenant.clone(),
                origin: k.origin.clone(),
                capability: k.capability.clone(),
            })
            .collect();
        out.sort_by_key(|a| a.addr);
        out
    }

    /// What `agentctl status` and ubus show.
    pub fn view(&self) -> Ipv6View {
        Ipv6View {
            mode: self.cfg.mode.to_string().into(),
            prefix: self.prefix.map(|p| p.to_string().into()),
            configured_prefix: self.cfg.prefix.as_str().into(),
            interface: self.cfg.interface.as_str().into(),
            upstream_interface: self.cfg.upstream_interface.as_str().into(),
            bound: self.pool.as_ref().map_or(0, |p| p.len() as u64),
            max_addresses: self.cfg.max_addresses,
            ready: self.pool.is_some() && self.problems.is_empty(),
            problems: self.problems.iter().map(|p| p.as_str().into()).collect(),
            warnings: self.warnings.iter().map(|p| p.as_str().into()).collect(),
            stale_removed: self.stale_removed,
        }
    }
}

/// The prefix `cfg` names, or — `auto` — the one of a global address of
/// the upstream link (the WAN's, or one delegated to it).
fn resolve_prefix(cfg: &uci_schema::Ipv6, nl: &mut Rtnl) -> Result<Prefix, String> {
    if cfg.prefix != "auto" {
        return Prefix::parse(&cfg.prefix).map_err(|e| format!("prefix {}: {e}", cfg.prefix));
    }
    let up = &cfg.upstream_interface;
    let index = index_of(up)
        .map_err(|e| format!("prefix 'auto': {e}"))?
        .ok_or_else(|| format!("prefix 'auto': upstream_interface {up} does not exist"))?;
    let found = nl
        .addrs(Some(index))
        .map_err(|e| format!("prefix 'auto': cannot list the addresses of {up}: {e}"))?;
    auto_prefix(&found).ok_or_else(|| {
        format!("prefix 'auto': {up} has no global IPv6 prefix of /48 to /64 now (set ipv6.prefix to the routed or delegated prefix)")
    })
}

/// The first global-scope address's prefix that can hold agent
/// addresses (/48 to /64 of global unicast or unique local space).
pub fn auto_prefix(found: &[AddrEntry]) -> Option<Prefix> {
    found
        .iter()
        .filter(|e| e.scope == 0)
        .find_map(|e| Prefix::new(e.addr, e.prefix_len).ok())
}

/// The derivation secret: a hash of the router's identity key (made if
/// missing, as the mesh would), never the key itself.
fn secret(identity: &Path) -> Result<[u8; 32], String> {
    let key = router_pki::identity::load_or_create_key(identity).map_err(|e| {
        format!(
            "the address secret comes from the identity key {}: {e}",
            identity.display()
        )
    })?;
    let mut h = Sha256::new();
    h.update(b"agentd ipv6 address secret v1\0");
    h.update(key.to_bytes());
    Ok(h.finalize())
}

/// odhcpd relaying NDP on `upstream`: it flushes proxy entries it did
/// not make, so ours would vanish. `Some(warning)` when its running
/// configuration says `ndp 'relay'` for a section of that interface.
pub fn odhcpd_relay(env: &Env<'_>, upstream: &str) -> Option<String> {
    if !env.odhcpd_running {
        return None;
    }
    let text = std::fs::read_to_string(env.dhcp_config).ok()?;
    relay_section(&text, upstream).map(|name| {
        format!(
            "odhcpd relays NDP on {upstream} ({} section '{name}': option ndp 'relay') and flushes proxy entries it did not create: set option ndp 'disabled' there, or use mode 'routed-prefix'",
            env.dhcp_config.display()
        )
    })
}

/// The `dhcp` section of `text` (odhcpd's UCI file) that relays NDP on
/// `upstream` (named by the section or its `interface` option).
pub fn relay_section(text: &str, upstream: &str) -> Option<String> {
    let pkg = Package::parse_prefix(text).pkg;
    let found = pkg.sections_of("dhcp").find_map(|s| {
        let single = |o: &str| s.get(o).and_then(|v| v.items().first()).map(String::as_str);
        let name = s.name.as_deref().unwrap_or("");
        let on = single("interface").unwrap_or(name) == upstream || name == upstream;
        (on && single("ndp") == Some("relay")).then(|| name.to_string())
    });
    found
}

/// Whether a process named `odhcpd` runs (read from `/proc`).
pub fn odhcpd_running() -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .take(65_536)
        .any(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim_end() == "odhcpd")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: &str, len: u8, scope: u8) -> AddrEntry {
        AddrEntry {
            seq: 1,
            index: 2,
            prefix_len: len,
            scope,
            addr: addr.parse().unwrap(),
        }
    }

    #[test]
    fn auto_takes_the_first_global_prefix_that_can_hold_agents() {
        let found = [
            entry("fe80::1", 64, 253),
            entry("2001:db8:9::1", 128, 0),
            entry("2001:db8:7:1::1", 64, 0),
            entry("2001:db8:8::1", 56, 0),
        ];
        assert_eq!(
            auto_prefix(&found).unwrap().to_string(),
            "2001:db8:7:1::/64"
        );
        assert_eq!(
            auto_prefix(&found[..2]),
            None,
            "link-local and a /128 hold none"
        );
    }

    #[test]
    fn odhcpd_relaying_ndp_on_the_upstream_is_found_by_section_or_interface() {
        let text = "
config dhcp 'lan'
\toption interface 'lan'
\toption ndp 'relay'
\toption master '0'

config dhcp 'wan6'
\toption interface 'wan'
\toption ndp 'relay'
\toption master '1'
";
        assert_eq!(relay_section(text, "wan").as_deref(), Some("wan6"));
        assert_eq!(relay_section(text, "lan").as_deref(), Some("lan"));
        assert_eq!(relay_section(text, "eth9"), None);
        let off = text.replace(
            "option ndp 'relay'\n\toption master '1'",
            "option ndp 'disabled'",
        );
        assert_eq!(relay_section(&off, "wan"), None);
    }

    #[test]
    fn the_secret_is_stable_for_one_key_and_differs_between_keys() {
        let dir = std::env::temp_dir().join(format!("agentd-ipv6-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (one, two) = (dir.join("one.key"), dir.join("two.key"));
        let a = secret(&one).unwrap();
        assert_eq!(secret(&one).unwrap(), a, "the key made once is read back");
        assert_ne!(secret(&two).unwrap(), a);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

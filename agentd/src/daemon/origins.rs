//! Who holds what among the locally registered routes: per tenant and per
//! source address a count, and the quotas checked against them. The
//! daemon's state keeps this ledger next to the table (every local route
//! added or removed goes through [`Ledger::add`] / [`Ledger::remove`]), so
//! ownership checks and quotas cost a hash lookup, never a table scan. Per
//! origin, the owner and route ids are kept by the claims index
//! (`state::claims`), in the one entry an origin has there: a map of its
//! own keyed by origin cost a hash slot and a copy of the origin string
//! per local route.
//!
//! Route ids are scoped to (tenant, origin) by [`scoped_route_id`]: no
//! caller can name an id that another origin's registration would need.

use std::collections::HashMap;
use std::net::IpAddr;

use edkey::Sha256;

use crate::ipc::error::Quota;
use crate::owner::Owner;
use crate::route::{Route, RouteId, MAX_ID_LEN};

/// Local routes by tenant and source.
#[derive(Debug, Default)]
pub struct Ledger {
    tenants: HashMap<Box<str>, u64>,
    sources: HashMap<IpAddr, u64>,
}

/// The quota limits of the running configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Quotas {
    pub per_origin: u64,
    pub per_source: u64,
    /// `tenant.max_routes` of tenants that have a `tenant` section; other
    /// tenants are bounded by the per-origin and per-source quotas and
    /// `max_routes`.
    pub per_tenant: HashMap<Box<str>, u64>,
}

/// The highest trust a LAN registration is granted, per tenant (DESIGN §3
/// "Trust is the router's"): the `trust` a registrant sends is a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustCaps {
    /// `tenant.max_trust` of tenants that have a section.
    pub per_tenant: HashMap<Box<str>, u64>,
    /// The schema default of `tenant.max_trust`, for the other tenants.
    pub default: u64,
}

impl TrustCaps {
    /// What a registration of `tenant` claiming `trust` is granted.
    pub fn grant(&self, tenant: &str, trust: u64) -> u64 {
        trust.min(self.per_tenant.get(tenant).copied().unwrap_or(self.default))
    }
}

impl Default for TrustCaps {
    fn default() -> Self {
        let default = match uci_schema::schema::section_spec("tenant")
            .and_then(|s| s.option("max_trust"))
            .map(|o| o.default)
        {
            Some(uci_schema::schema::DefaultValue::Text(t)) => t.parse().unwrap_or(0),
            _ => 0,
        };
        TrustCaps {
            per_tenant: HashMap::new(),
            default,
        }
    }
}

impl Ledger {
    /// Whether one more route for `origin` (which holds `held` local
    /// routes) and `tenant` by `owner` fits the quotas; the first one
    /// exceeded is named with its holder.
    pub fn check_new(
        &self,
        q: &Quotas,
        (origin, held): (&str, usize),
        tenant: &str,
        owner: Option<Owner>,
    ) -> Result<(), (Quota, String, u64)> {
        if held as u64 >= q.per_origin {
            return Err((Quota::PerOrigin, format!("origin {origin}"), q.per_origin));
        }
        if let Some(src) = owner.and_then(Owner::source) {
            if self.sources.get(&src).copied().unwrap_or(0) >= q.per_source {
                return Err((Quota::PerSource, format!("source {src}"), q.per_source));
            }
        }
        if let Some(&limit) = q.per_tenant.get(tenant) {
            if self.tenants.get(tenant).copied().unwrap_or(0) >= limit {
                return Err((Quota::PerTenant, format!("tenant {tenant}"), limit));
            }
        }
        Ok(())
    }

    /// Counts a new local route (not an update of one already held).
    pub fn add(&mut self, route: &Route) {
        *self
            .tenants
            .entry(route.tenant.as_str().into())
            .or_insert(0) += 1;
        if let Some(src) = route.owner.and_then(Owner::source) {
            *self.sources.entry(src).or_insert(0) += 1;
        }
    }

    /// Stops counting a local route.
    pub fn remove(&mut self, route: &Route) {
        decrement(&mut self.tenants, &*route.tenant);
        if let Some(src) = route.owner.and_then(Owner::source) {
            decrement(&mut self.sources, &src);
        }
    }

    /// Local routes counted for `tenant`.
    pub fn tenant_routes(&self, tenant: &str) -> u64 {
        self.tenants.get(tenant).copied().unwrap_or(0)
    }
}

fn decrement<K: std::hash::Hash + Eq + ?Sized, Q>(map: &mut HashMap<Q, u64>, key: &K)
where
    Q: std::borrow::Borrow<K> + std::hash::Hash + Eq,
{
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

fn hex16(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    let d = h.finalize();
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The route id prefix of everything `origin` of `tenant` registers:
/// `r-` and 64 bits of SHA-256 over both (collision-resistant, so nobody
/// can pick an origin whose ids land in another's namespace).
pub fn scope_prefix(tenant: &str, origin: &str) -> String {
    format!(
        "r-{}-",
        hex16(&[b"agentd route scope", tenant.as_bytes(), origin.as_bytes()])
    )
}

/// The route id a caller's registration gets.
///
/// * No id named: `<scope>` + a hash of capability, version and endpoint,
///   so the same agent registering the same thing gets the same id back.
/// * An id inside the caller's own scope (what an earlier reply said):
///   used as it is — re-registering with the reply's `route_id` is an
///   idempotent upsert.
/// * Any other id `X`: `<scope>X` (or `<scope>h` + a hash of `X` when that
///   would be too long). A caller naming another origin's id thus gets an
///   id of its own and cannot block or take over that origin's route.
pub fn scoped_route_id(
    tenant: &str,
    origin: &str,
    named: Option<&RouteId>,
    capability: &str,
    version: u32,
    endpoint: &str,
) -> RouteId {
    let scope = scope_prefix(tenant, origin);
    let id = match named {
        Some(x) if x.as_str().starts_with(&scope) => x.as_str().to_string(),
        Some(x) if scope.len() + x.as_str().len() <= MAX_ID_LEN => format!("{scope}{}", x.as_str()),
        Some(x) => format!("{scope}h{}", hex16(&[x.as_str().as_bytes()])),
        None => format!(
            "{scope}{}",
            hex16(&[
                capability.as_bytes(),
                &version.to_be_bytes(),
                endpoint.as_bytes()
            ])
        ),
    };
    // Hex digits, '-' and a valid route id are a valid route id.
    RouteId::new(&id).unwrap_or_else(|_| RouteId::new(&scope[..scope.len() - 1]).expect("hex"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> RouteId {
        RouteId::new(s).unwrap()
    }

    #[test]
    fn ids_are_scoped_to_tenant_and_origin() {
        let a = scoped_route_id("lab", "agent://lab/a", None, "demo.echo", 1, "http://h:1/");
        let b = scoped_route_id("lab", "agent://lab/b", None, "demo.echo", 1, "http://h:1/");
        assert_ne!(a, b);
        assert!(a
            .as_str()
            .starts_with(&scope_prefix("lab", "agent://lab/a")));
        // Stable: the same registration gets the same id.
        assert_eq!(
            a,
            scoped_route_id("lab", "agent://lab/a", None, "demo.echo", 1, "http://h:1/")
        );
        // b naming a's id gets an id of its own scope.
        let claimed = scoped_route_id("lab", "agent://lab/b", Some(&a), "x", 1, "http://h:1/");
        assert_ne!(claimed, a);
        assert!(claimed
            .as_str()
            .starts_with(&scope_prefix("lab", "agent://lab/b")));
        // a naming its own reply id keeps it.
        assert_eq!(
            scoped_route_id("lab", "agent://lab/a", Some(&a), "x", 9, "http://other:2/"),
            a
        );
        // A short free-form name is kept readable, a long one hashed.
        let named = scoped_route_id("lab", "agent://lab/a", Some(&id("printer-1")), "x", 1, "e");
        assert!(named.as_str().ends_with("-printer-1"), "{named}");
        let long = "x".repeat(MAX_ID_LEN);
        let hashed = scoped_route_id("lab", "agent://lab/a", Some(&id(&long)), "x", 1, "e");
        assert!(hashed.as_str().len() <= MAX_ID_LEN);
    }

    fn route(origin: &str, rid: &str, owner: Option<Owner>) -> Route {
        Route {
            id: id(rid),
            capability: "demo.echo".into(),
            version: 1,
            origin: origin.into(),
            endpoint: "http://192.0.2.1:1/".into(),
            tenant: "lab".into(),
            region: "local".into(),
            attrs: Default::default(),
            access: Default::default(),
            contract: None,
            source: crate::route::RouteSource::Local,
            path: Box::default(),
            next_hop: None,
            lease: crate::route::Lease::Permanent,
            healthy: true,
            allow_loopback: false,
            owner,
            proof: Default::default(),
            disputed: false,
        }
    }

    #[test]
    fn a_registration_gets_at_most_its_tenants_trust_cap() {
        let mut caps = TrustCaps::default();
        assert_eq!(caps.default, 50, "the schema default");
        caps.per_tenant.insert("ops".into(), 90);
        assert_eq!(caps.grant("lab", 100), 50);
        assert_eq!(caps.grant("lab", 10), 10);
        assert_eq!(caps.grant("ops", 100), 90);
    }

    #[test]
    fn quotas_count_per_origin_source_and_tenant_and_free_on_removal() {
        let src: IpAddr = "192.0.2.9".parse().unwrap();
        let owner = Some(Owner::Bootstrap(src));
        let mut per_tenant = HashMap::new();
        per_tenant.insert("lab".into(), 3);
        let q = Quotas {
            per_origin: 2,
            per_source: 3,
            per_tenant,
        };
        let mut l = Ledger::default();
        l.add(&route("agent://lab/a", "r1", owner));
        l.add(&route("agent://lab/a", "r2", owner));
        assert_eq!(
            l.check_new(&q, ("agent://lab/a", 2), "lab", owner)
                .unwrap_err()
                .0,
            Quota::PerOrigin
        );
        l.add(&route("agent://lab/b", "r3", owner));
        assert_eq!(
            l.check_new(&q, ("agent://lab/c", 0), "lab", owner)
                .unwrap_err()
                .0,
            Quota::PerSource
        );
        assert_eq!(
            l.check_new(&q, ("agent://lab/c", 0), "lab", Some(Owner::Subject))
                .unwrap_err()
                .0,
            Quota::PerTenant
        );
        assert_eq!(l.check_new(&q, ("agent://ops/c", 0), "ops", None), Ok(()));
        l.remove(&route("agent://lab/a", "r1", owner));
        l.remove(&route("agent://lab/a", "r2", owner));
        assert_eq!(l.check_new(&q, ("agent://lab/a", 0), "lab", owner), Ok(()));
        assert_eq!(l.tenant_routes("lab"), 1);
    }
}

//! The route model: what a registration, a static `route` section or a
//! peer advertisement becomes, and what selection ranks.
//!
//! These types are the shared vocabulary of agentd, agent-gw and agentctl
//! (and travel inside IPC frames), so they are plain data with validating
//! constructors for the identifiers that arrive from untrusted input.

use std::fmt;
use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::time::Millis;

mod text;

pub use text::Text;

/// Longest accepted route id, capability name, agent URI component etc.
pub const MAX_ID_LEN: usize = 128;
/// Longest accepted endpoint URL.
pub const MAX_ENDPOINT_LEN: usize = 512;

/// Why an identifier from the outside was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    Empty(&'static str),
    TooLong(&'static str, usize),
    BadChar(&'static str, char),
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdError::Empty(what) => write!(f, "{what} is empty"),
            IdError::TooLong(what, max) => write!(f, "{what} is longer than {max} bytes"),
            IdError::BadChar(what, c) => write!(f, "{what} contains invalid character {c:?}"),
        }
    }
}

impl std::error::Error for IdError {}

fn check_token(what: &'static str, s: &str, max: usize, extra: &[char]) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty(what));
    }
    if s.len() > max {
        return Err(IdError::TooLong(what, max));
    }
    match s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || extra.contains(c)))
    {
        Some(c) => Err(IdError::BadChar(what, c)),
        None => Ok(()),
    }
}

/// Separates a route_id from the next hop in the table id of a peer path
/// (`<route_id>@<next_hop>`). It occurs in neither a route_id nor a DNS
/// label, so a path id never collides with a local, static or other path id.
pub const PATH_SEPARATOR: char = '@';

/// Stable identity of a route. Opaque to clients; `[A-Za-z0-9._:-]{1,128}`.
///
/// A path learned from a peer is its own table entry with the id
/// `<route_id>@<next_hop>` (multipath keeps one path per advertising peer);
/// only [`RouteId::via`] makes such an id.
///
/// Shared, not copied: the table and the daemon's indexes (claims,
/// origins, health targets, leases) each hold every id, and a clone that
/// is a reference count instead of a heap string is most of what an id
/// costs per route. The wire encoding is a `Box<str>` newtype's, as it
/// always was (IPC frames and the lease file carry ids).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteId(Text);

impl Serialize for RouteId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_newtype_struct("RouteId", &*self.0)
    }
}

impl<'de> Deserialize<'de> for RouteId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RouteId, D::Error> {
        /// The encoding `#[derive(Deserialize)]` gave `RouteId(Box<str>)`.
        #[derive(Deserialize)]
        #[serde(rename = "RouteId")]
        struct Wire(Text);
        Wire::deserialize(d).map(|w| RouteId(w.0))
    }
}

/// Validates a router_id (a DNS label: letters, digits, inner `-`, ≤ 63),
/// the schema's `peer.router_id` kind.
pub fn check_router_id(s: &str) -> Result<(), IdError> {
    const WHAT: &str = "router_id";
    if s.is_empty() {
        return Err(IdError::Empty(WHAT));
    }
    if s.len() > 63 {
        return Err(IdError::TooLong(WHAT, 63));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
    {
        return Err(IdError::BadChar(WHAT, c));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err(IdError::BadChar(WHAT, '-'));
    }
    Ok(())
}

impl RouteId {
    /// A route_id from the outside (registration, static route, admin
    /// command): never a path id, since `@` is refused.
    pub fn new(s: &str) -> Result<RouteId, IdError> {
        check_token("route_id", s, MAX_ID_LEN, &[':'])?;
        Ok(RouteId(Text::new(s)))
    }

    /// The table id of the path to `route_id` learned from `next_hop`:
    /// `<route_id>@<next_hop>`. `route_id` must be a plain route_id (a path
    /// id is refused: paths do not nest) and `next_hop` a router_id.
    pub fn via(route_id: &RouteId, next_hop: &str) -> Result<RouteId, IdError> {
        if route_id.next_hop().is_some() {
            return Err(IdError::BadChar("route_id", PATH_SEPARATOR));
        }
        check_router_id(next_hop)?;
        Ok(RouteId(Text::new(&format!(
            "{}{PATH_SEPARATOR}{next_hop}",
            route_id.0
        ))))
    }

    /// Parses a table id as shown by `agentctl routes` (`r` or `r@hop`).
    pub fn parse_table_id(s: &str) -> Result<RouteId, IdError> {
        match s.split_once(PATH_SEPARATOR) {
            None => RouteId::new(s),
            Some((base, hop)) => RouteId::via(&RouteId::new(base)?, hop),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The route_id this id names: itself, or the part before `@` of a
    /// path id.
    pub fn base(&self) -> &str {
        self.0
            .split_once(PATH_SEPARATOR)
            .map_or(self.as_str(), |(base, _)| base)
    }

    /// The advertising router of a path id; `None` for our own routes.
    pub fn next_hop(&self) -> Option<&str> {
        self.0.split_once(PATH_SEPARATOR).map(|(_, hop)| hop)
    }
}

impl fmt::Debug for RouteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RouteId({})", self.0)
    }
}

impl fmt::Display for RouteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Validates a capability name such as `demo.echo` (`[A-Za-z0-9._-]`, ≤128).
pub fn check_capability(s: &str) -> Result<(), IdError> {
    check_token("capability", s, MAX_ID_LEN, &[])
}

/// Validates a tenant name (`[A-Za-z0-9._-]`, ≤128).
pub fn check_tenant(s: &str) -> Result<(), IdError> {
    check_token("tenant", s, MAX_ID_LEN, &[])
}

/// Validates an agent URI `agent://tenant/name` (name may hold `/`).
pub fn check_agent_uri(s: &str) -> Result<(), IdError> {
    let rest = s.strip_prefix("agent://").ok_or(IdError::BadChar(
        "agent uri (must start with agent://)",
        s.chars().next().unwrap_or(' '),
    ))?;
    let (tenant, name) = rest
        .split_once('/')
        .ok_or(IdError::Empty("agent uri name"))?;
    check_tenant(tenant)?;
    check_token("agent uri name", name, MAX_ID_LEN, &['/', ':', '@'])
}

/// Where a route came from; policy may restrict which sources it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RouteSource {
    /// Registered by a LAN agent through this router, under a lease.
    Local,
    /// A `route` section in UCI; never expires.
    Static,
    /// Learned from an ARPX peer.
    Peer,
    /// Reachable through an outbound relay connection.
    Relay,
}

impl RouteSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteSource::Local => "local",
            RouteSource::Static => "static",
            RouteSource::Peer => "peer",
            RouteSource::Relay => "relay",
        }
    }
}

/// How a route's origin (`agent://tenant/name`) was proven where it was
/// registered, weakest first (DESIGN §3 "Origins are owned mesh-wide").
/// The mirror of ARPX's `OriginProof` (agentd's light modules do not link
/// the arpx crate; `daemon/peers/routes.rs` converts): a local route's
/// proof follows from its owner and source, a peer path's is what the
/// origin router signed into its advertisement.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum OriginProof {
    /// Auth `none`: only the registrant's source address.
    #[default]
    None,
    /// A router-issued bootstrap token bound to the source address.
    Bootstrap,
    /// An operator's route (`config route`, or an administrator over IPC).
    Static,
    /// A tenant-signed token whose subject is the origin: the only
    /// cryptographic proof, and the only one that may add replicas of an
    /// origin on other routers.
    Jwt,
}

impl OriginProof {
    pub const ALL: [OriginProof; 4] = [
        OriginProof::None,
        OriginProof::Bootstrap,
        OriginProof::Static,
        OriginProof::Jwt,
    ];

    /// Stable name (`agentctl routes`, the `min_proof` rule option).
    pub fn as_str(self) -> &'static str {
        match self {
            OriginProof::None => "none",
            OriginProof::Bootstrap => "bootstrap",
            OriginProof::Static => "static",
            OriginProof::Jwt => "jwt",
        }
    }

    /// Whether the origin was proven cryptographically.
    pub fn is_proven(self) -> bool {
        self == OriginProof::Jwt
    }

    /// The proof a route of ours carries: an operator's route (static, or
    /// registered over IPC by an administrator without a recorded owner)
    /// is `static`; a LAN registration says what its credential was.
    pub fn of_local(source: RouteSource, owner: Option<crate::owner::Owner>) -> OriginProof {
        use crate::owner::Owner;
        match (source, owner) {
            (RouteSource::Local, Some(Owner::Address(_))) => OriginProof::None,
            (RouteSource::Local, Some(Owner::Bootstrap(_))) => OriginProof::Bootstrap,
            (RouteSource::Local, Some(Owner::Subject)) => OriginProof::Jwt,
            _ => OriginProof::Static,
        }
    }
}

impl fmt::Display for OriginProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Metrics that feed the score. All unsigned 64-bit: the score saturates
/// rather than trusting inputs to be small.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attributes {
    pub latency_ms: u64,
    /// Cost in millionths of a unit.
    pub cost_micros: u64,
    /// Load in ‰, 0–1000 (the schema's `route.load` range, checked by
    /// [`Attributes::check`] on every way in).
    pub load_permille: u64,
    /// Trust 0–100 (the schema's `route.trust` range).
    pub trust: u64,
}

/// The inclusive range of a route attribute, as the `route` section of
/// the schema declares it (`latency_ms`, `cost`, `load`, `trust`,
/// `version`): registrations, renewals, static routes and the gateway's
/// decoder all accept exactly what a static route may say.
pub fn attr_range(option: &str) -> (u64, u64) {
    match uci_schema::schema::section_spec("route")
        .and_then(|s| s.option(option))
        .map(|o| o.kind)
    {
        Some(uci_schema::schema::Kind::UInt { min, max }) => (min, max),
        _ => (0, u64::MAX),
    }
}

/// The schema default of a route attribute (`trust` 50, ...).
pub fn attr_default(option: &str) -> u64 {
    match uci_schema::schema::section_spec("route")
        .and_then(|s| s.option(option))
        .map(|o| o.default)
    {
        Some(uci_schema::schema::DefaultValue::Text(t)) => t.parse().unwrap_or(0),
        _ => 0,
    }
}

/// An attribute outside its schema range. `field` is the SDK API name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttrError {
    pub field: &'static str,
    pub value: u64,
    pub min: u64,
    pub max: u64,
}

impl fmt::Display for AttrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} is outside {}..={}",
            self.field, self.value, self.min, self.max
        )
    }
}

/// The SDK API field of each attribute and its `route` option.
pub const ATTR_FIELDS: [(&str, &str); 4] = [
    ("latency_ms", "latency_ms"),
    ("cost_microunits", "cost"),
    ("load_permille", "load"),
    ("trust", "trust"),
];

/// Checks `value` of SDK field `field` against its schema range.
pub fn check_attr(field: &'static str, value: u64) -> Result<(), AttrError> {
    let option = ATTR_FIELDS
        .iter()
        .find(|(f, _)| *f == field)
        .map_or(field, |(_, o)| o);
    let (min, max) = attr_range(option);
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(AttrError {
            field,
            value,
            min,
            max,
        })
    }
}

impl Attributes {
    /// Every attribute within its schema range.
    pub fn check(&self) -> Result<(), AttrError> {
        check_attr("latency_ms", self.latency_ms)?;
        check_attr("cost_microunits", self.cost_micros)?;
        check_attr("load_permille", self.load_permille)?;
        check_attr("trust", self.trust)
    }
}

/// Effect class of a capability's contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    Read,
    Write,
    External,
}

/// What a capability promises about itself. Drives safe retry (only
/// idempotent requests may move after possible delivery) and MCP schemas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contract {
    pub effect: Effect,
    pub idempotent: bool,
    /// JSON Schema of the input, kept as text (it is forwarded, not
    /// interpreted, by the control plane).
    pub input_schema: Option<Box<str>>,
    pub description: Option<Box<str>>,
}

/// Who may use a route beyond its own tenant. Empty lists mean "only the
/// route's tenant" and "any source agent" respectively.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    pub allowed_tenants: Vec<Box<str>>,
    pub allowed_sources: Vec<Box<str>>,
}

/// No access lists: what a [`RouteAccess`] without a box reads as.
static OPEN_ACCESS: Access = Access {
    allowed_tenants: Vec::new(),
    allowed_sources: Vec::new(),
};

/// A route's [`Access`], one pointer wide: nearly every route has both
/// lists empty, and two inline `Vec`s were 48 bytes of every table slot.
/// Reads as (derefs to) an `Access`, compares and encodes as one, so a
/// route's wire and disk encoding is the one it always was.
#[derive(Clone, Default)]
pub struct RouteAccess(Option<Box<Access>>);

impl From<Access> for RouteAccess {
    fn from(a: Access) -> RouteAccess {
        if a.allowed_tenants.is_empty() && a.allowed_sources.is_empty() {
            RouteAccess(None)
        } else {
            RouteAccess(Some(Box::new(a)))
        }
    }
}

impl Deref for RouteAccess {
    type Target = Access;
    fn deref(&self) -> &Access {
        self.0.as_deref().unwrap_or(&OPEN_ACCESS)
    }
}

impl DerefMut for RouteAccess {
    fn deref_mut(&mut self) -> &mut Access {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for RouteAccess {
    fn eq(&self, other: &RouteAccess) -> bool {
        **self == **other
    }
}

impl Eq for RouteAccess {}

impl fmt::Debug for RouteAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl Serialize for RouteAccess {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for RouteAccess {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RouteAccess, D::Error> {
        Access::deserialize(d).map(RouteAccess::from)
    }
}

/// When a route stops being eligible on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lease {
    /// Static routes: never expire.
    Permanent,
    /// Eligible strictly before this monotonic instant.
    Until(Millis),
}

impl Lease {
    pub fn live_at(self, now: Millis) -> bool {
        match self {
            Lease::Permanent => true,
            Lease::Until(deadline) => now < deadline,
        }
    }
}

/// Everything selection and forwarding need to know about one endpoint of
/// one capability.
///
/// Both daemons hold one inline per table slot, so its size is most of
/// what a route costs them: strings are one-pointer [`Text`]s, and what
/// most routes lack (access lists, a contract) sits behind a pointer. The
/// field types encode as the plain ones they replaced (`Box<str>`,
/// `Access`, `Option<Contract>`, `Vec<Box<str>>`): IPC frames and the
/// lease file did not change (see the tests).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub id: RouteId,
    pub capability: Text,
    /// Interface version, ≥ 1.
    pub version: u32,
    /// Agent URI of the registering agent, `agent://tenant/name`.
    pub origin: Text,
    /// Handler URL for local/static routes; for peer/relay routes the
    /// data-plane address of the next hop.
    pub endpoint: Text,
    pub tenant: Text,
    pub region: Text,
    pub attrs: Attributes,
    pub access: RouteAccess,
    /// Boxed: most routes have none, and inline it was 40 bytes of each.
    pub contract: Option<Box<Contract>>,
    pub source: RouteSource,
    /// Routers traversed, origin router first; empty for our own routes.
    pub path: Box<[Box<str>]>,
    /// Router that advertised this route to us (peer routes only).
    pub next_hop: Option<Text>,
    pub lease: Lease,
    /// Health as last judged by the health checker / peer session state.
    pub healthy: bool,
    /// The operator let this route's endpoint be loopback or one of the
    /// router's own addresses (`route.allow_loopback`, or
    /// `agentd.allow_loopback_endpoints` when it was registered). The
    /// gateway re-checks the endpoint at connect time with this leave.
    pub allow_loopback: bool,
    /// The identity a local registration is bound to (see `owner`);
    /// `None` for static and peer routes and for routes an administrator
    /// registered.
    pub owner: Option<crate::owner::Owner>,
    /// How the origin was proven (local: from `owner` and `source`, see
    /// [`OriginProof::of_local`]; peer: from the advertisement).
    pub proof: OriginProof,
    /// Another origin router's claim of this route's origin wins (the race
    /// rule of `daemon/state/claims.rs`): the route stays in the table but
    /// is ineligible everywhere (`origin_disputed`). agentd sets it; the
    /// gateway's FIB replica receives it with the route.
    pub disputed: bool,
}

impl Route {
    /// Hop count used by the score: routers between us and the origin.
    pub fn hops(&self) -> u64 {
        self.path.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `RouteId` was before it shared its string: the wire encoding
    /// must stay this one.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    #[serde(rename = "RouteId")]
    struct BoxedId(Box<str>);

    #[test]
    fn route_id_keeps_the_boxed_string_encoding() {
        let id = RouteId::parse_table_id("svc:1@router-b").unwrap();
        let old = BoxedId("svc:1@router-b".into());
        let bytes = postcard::to_allocvec(&old).unwrap();
        assert_eq!(postcard::to_allocvec(&id).unwrap(), bytes);
        assert_eq!(postcard::from_bytes::<RouteId>(&bytes).unwrap(), id);
        let json = serde_json::to_string(&old).unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), json);
        assert_eq!(serde_json::from_str::<RouteId>(&json).unwrap(), id);
        // A clone shares the string.
        assert!(Text::ptr_eq(&id.0, &id.clone().0));
    }

    /// Both daemons keep a `Route` inline per table slot (agentd's RIB,
    /// agent-gw's FIB replica), plus the empty slots of the slab's growth
    /// reserve: its size is most of a route's cost to them. It was 304
    /// bytes before issue 25; a field that grows it past this bound should
    /// go behind a pointer as the access lists and the contract did.
    #[test]
    fn a_route_stays_small_inline() {
        assert!(
            std::mem::size_of::<Route>() <= 168,
            "size_of::<Route>() = {}",
            std::mem::size_of::<Route>()
        );
        assert_eq!(std::mem::size_of::<RouteAccess>(), 8);
    }

    /// What `Route` was before its fields shrank (`Box<str>` strings, the
    /// access lists and contract inline, a `Vec` path): the wire and disk
    /// encoding must stay this one.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    #[serde(rename = "Route")]
    struct OldRoute {
        id: BoxedId,
        capability: Box<str>,
        version: u32,
        origin: Box<str>,
        endpoint: Box<str>,
        tenant: Box<str>,
        region: Box<str>,
        attrs: Attributes,
        access: Access,
        contract: Option<Contract>,
        source: RouteSource,
        path: Vec<Box<str>>,
        next_hop: Option<Box<str>>,
        lease: Lease,
        healthy: bool,
        allow_loopback: bool,
        owner: Option<crate::owner::Owner>,
        proof: OriginProof,
        disputed: bool,
    }

    fn old_and_new(full: bool) -> (OldRoute, Route) {
        let s = |v: &str| -> Box<str> { v.into() };
        let id = if full { "svc:1@router-b" } else { "svc:1" };
        let old = OldRoute {
            id: BoxedId(id.into()),
            capability: s("demo.echo"),
            version: 7,
            origin: s("agent://lab/printer"),
            endpoint: s("https://198.51.100.2:7447"),
            tenant: s("lab"),
            region: s(if full { "eu-west" } else { "" }),
            attrs: Attributes {
                latency_ms: 12,
                cost_micros: 1_000_000,
                load_permille: 250,
                trust: 90,
            },
            access: if full {
                Access {
                    allowed_tenants: vec![s("guest"), s("ops")],
                    allowed_sources: vec![s("agent://lab/*")],
                }
            } else {
                Access::default()
            },
            contract: full.then(|| Contract {
                effect: Effect::Write,
                idempotent: true,
                input_schema: Some(s(r#"{"type":"object","required":["x"]}"#)),
                description: Some(s("echoes \"x\" back")),
            }),
            source: if full {
                RouteSource::Peer
            } else {
                RouteSource::Local
            },
            path: if full {
                vec![s("router-a"), s("router-b")]
            } else {
                Vec::new()
            },
            next_hop: full.then(|| s("router-b")),
            lease: if full {
                Lease::Until(Millis(123_456_789))
            } else {
                Lease::Permanent
            },
            healthy: full,
            allow_loopback: full,
            owner: full.then(|| crate::owner::Owner::Bootstrap("2001:db8::7".parse().unwrap())),
            proof: if full {
                OriginProof::Jwt
            } else {
                OriginProof::None
            },
            disputed: full,
        };
        let new = Route {
            id: RouteId::parse_table_id(id).unwrap(),
            capability: (&old.capability).into(),
            version: old.version,
            origin: (&old.origin).into(),
            endpoint: (&old.endpoint).into(),
            tenant: (&old.tenant).into(),
            region: (&old.region).into(),
            attrs: old.attrs,
            access: old.access.clone().into(),
            contract: old.contract.clone().map(Box::new),
            source: old.source,
            path: old.path.clone().into(),
            next_hop: old.next_hop.as_ref().map(Into::into),
            lease: old.lease,
            healthy: old.healthy,
            allow_loopback: old.allow_loopback,
            owner: old.owner,
            proof: old.proof,
            disputed: old.disputed,
        };
        (old, new)
    }

    #[test]
    fn a_route_keeps_the_encoding_of_its_old_field_types() {
        for full in [true, false] {
            let (old, new) = old_and_new(full);
            let bytes = postcard::to_allocvec(&old).unwrap();
            assert_eq!(postcard::to_allocvec(&new).unwrap(), bytes, "full: {full}");
            assert_eq!(postcard::from_bytes::<Route>(&bytes).unwrap(), new);
            let json = serde_json::to_string(&old).unwrap();
            assert_eq!(serde_json::to_string(&new).unwrap(), json, "full: {full}");
            assert_eq!(serde_json::from_str::<Route>(&json).unwrap(), new);
            let pretty = serde_json::to_string_pretty(&old).unwrap();
            assert_eq!(serde_json::to_string_pretty(&new).unwrap(), pretty);
        }
    }

    #[test]
    fn empty_access_lists_take_no_box_and_compare_by_content() {
        let (_, mut r) = old_and_new(false);
        assert!(r.access.0.is_none());
        assert_eq!(r.access, RouteAccess::default());
        r.access.allowed_tenants.push("guest".into());
        assert!(r.access.0.is_some());
        r.access.allowed_tenants.clear();
        // A box emptied in place still equals (and encodes as) no lists.
        assert_eq!(r.access, Access::default().into());
        assert_eq!(
            postcard::to_allocvec(&r.access).unwrap(),
            postcard::to_allocvec(&Access::default()).unwrap()
        );
        let full = old_and_new(true).1;
        assert_eq!(*full.access, old_and_new(true).0.access);
    }

    #[test]
    fn route_id_rejects_empty_long_and_odd_characters() {
        assert!(RouteId::new("r-0123:abc").is_ok());
        assert_eq!(RouteId::new(""), Err(IdError::Empty("route_id")));
        assert_eq!(
            RouteId::new(&"a".repeat(129)),
            Err(IdError::TooLong("route_id", 128))
        );
        assert_eq!(RouteId::new("a b"), Err(IdError::BadChar("route_id", ' ')));
    }

    #[test]
    fn path_ids_name_route_and_next_hop_and_only_via_makes_them() {
        let r = RouteId::new("svc:1").unwrap();
        assert_eq!((r.base(), r.next_hop()), ("svc:1", None));
        let p = RouteId::via(&r, "router-b").unwrap();
        assert_eq!(p.as_str(), "svc:1@router-b");
        assert_eq!((p.base(), p.next_hop()), ("svc:1", Some("router-b")));
        assert_eq!(RouteId::parse_table_id("svc:1@router-b"), Ok(p.clone()));
        assert_eq!(RouteId::parse_table_id("svc:1"), Ok(r.clone()));
        // '@' never enters through new(); paths do not nest; hops are labels.
        assert_eq!(
            RouteId::new("svc:1@router-b"),
            Err(IdError::BadChar("route_id", '@'))
        );
        assert!(RouteId::via(&p, "router-c").is_err());
        for hop in ["", "-b", "b-", "router_b", "a.b", &"x".repeat(64)] {
            assert!(RouteId::via(&r, hop).is_err(), "{hop:?}");
        }
        assert!(RouteId::parse_table_id("svc@").is_err());
        assert!(RouteId::parse_table_id("@router-b").is_err());
        // The longest route_id with the longest hop still makes an id.
        let long = RouteId::new(&"a".repeat(MAX_ID_LEN)).unwrap();
        let hop = "b".repeat(63);
        assert_eq!(RouteId::via(&long, &hop).unwrap().next_hop(), Some(&*hop));
    }

    #[test]
    fn agent_uri_needs_scheme_tenant_and_name() {
        assert!(check_agent_uri("agent://lab/printer").is_ok());
        assert!(check_agent_uri("agent://lab/a/b").is_ok());
        assert!(check_agent_uri("http://lab/printer").is_err());
        assert!(check_agent_uri("agent://lab").is_err());
        assert!(check_agent_uri("agent://la b/x").is_err());
    }

    #[test]
    fn attribute_ranges_come_from_the_schema_table() {
        assert_eq!(attr_range("load"), (0, 1000));
        assert_eq!(attr_range("trust"), (0, 100));
        assert_eq!(attr_range("latency_ms"), (0, u64::MAX));
        assert_eq!(attr_range("version"), (1, u64::from(u32::MAX)));
        assert_eq!(attr_default("trust"), 50);
        let ok = Attributes {
            latency_ms: 3,
            cost_micros: 0,
            load_permille: 1000,
            trust: 100,
        };
        assert_eq!(ok.check(), Ok(()));
        let e = Attributes {
            load_permille: 5000,
            ..ok
        }
        .check()
        .unwrap_err();
        assert_eq!((e.field, e.min, e.max), ("load_permille", 0, 1000));
        assert_eq!(e.to_string(), "load_permille 5000 is outside 0..=1000");
        assert_eq!(
            Attributes { trust: 101, ..ok }.check().unwrap_err().field,
            "trust"
        );
        for (_, option) in ATTR_FIELDS {
            assert!(
                uci_schema::schema::section_spec("route")
                    .and_then(|s| s.option(option))
                    .is_some(),
                "route.{option} is in the schema"
            );
        }
    }

    #[test]
    fn lease_is_live_strictly_before_deadline() {
        let l = Lease::Until(Millis(1000));
        assert!(l.live_at(Millis(999)));
        assert!(!l.live_at(Millis(1000)));
        assert!(Lease::Permanent.live_at(Millis(u64::MAX)));
    }
}

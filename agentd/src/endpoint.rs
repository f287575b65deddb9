//! Handler endpoints: the one URL model and the one SSRF classifier that
//! agentd (registrations, static routes) and agent-gw (API decode, connect
//! time) share, so what is accepted is exactly what can be forwarded to.
//!
//! [`Endpoint::parse`] accepts `http://host[:port][/path][?query]` only
//! (port 80 when absent; `https://` is refused typed — the gateway speaks
//! plain HTTP/1.1 to handlers on the LAN). Every numeric host spelling is
//! canonicalised the way `inet_aton` and browsers read it (`2130706433`,
//! `0x7f.1`, `0177.0.0.1`, `127.1`), trailing dots are dropped, and
//! IPv4-mapped IPv6 becomes IPv4, so no spelling slips past the classifier.
//!
//! [`Guard`] decides, sans-IO, whether an address may be a handler: never
//! unspecified, multicast, broadcast, reserved or unscoped link-local;
//! loopback and the router's own addresses only when the operator allowed
//! it; the suite's own listener ports on any local address never (that is
//! how a gateway would forward to itself). Host names are classified by
//! what they resolve to ([`Guard::check_resolved`]); `localhost` and
//! `*.localhost` are loopback without asking a resolver (RFC 6761).
//! [`local_addrs`] is the one piece of I/O: the router's interface
//! addresses and subnets, read at check time (so a new or removed
//! address counts at once; no cache to go stale). [`scope`] narrows what
//! LAN registrations may name to the LAN.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use crate::route::MAX_ENDPOINT_LEN;

/// Port of an `http://` URL that names none.
pub const HTTP_DEFAULT_PORT: u16 = 80;
/// Longest DNS name accepted as a host.
pub const MAX_HOST_NAME: usize = 253;
/// Longest IPv6 zone (interface name or index).
pub const MAX_ZONE: usize = 15;

/// Why a URL is not an endpoint at all (an `invalid_field` refusal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointError {
    TooLong,
    /// Whitespace, control or non-ASCII bytes, or a fragment.
    BadChar,
    /// Not `http://` (nor `https://`).
    Scheme,
    /// `https://`: not supported (see the module doc).
    HttpsUnsupported,
    NoHost,
    UserInfo,
    /// Not a decimal 1..=65535.
    BadPort,
    /// A host that is neither an IP address nor a DNS name, or a numeric
    /// spelling out of range (`1.2.3.256`, `0x1ffffffff`).
    BadHost,
    /// An IPv6 zone (`%25eth0`) on an address that is not link-local, or
    /// a malformed one.
    BadZone,
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl EndpointError {
    /// The human message (also what `Display` writes).
    pub fn message(&self) -> &'static str {
        match self {
            EndpointError::TooLong => "endpoint URL is longer than 512 bytes",
            EndpointError::BadChar => {
                "endpoint URL contains whitespace, control or non-ASCII characters or a fragment"
            }
            EndpointError::Scheme => "endpoint URL must start with http://",
            EndpointError::HttpsUnsupported => {
                "https:// endpoints are not supported: the gateway forwards to handlers over plain HTTP/1.1 (use http://)"
            }
            EndpointError::NoHost => "endpoint URL has no host",
            EndpointError::UserInfo => "endpoint URL must not carry credentials",
            EndpointError::BadPort => "endpoint port must be a number 1..=65535",
            EndpointError::BadHost => "endpoint host is neither an IP address nor a DNS name",
            EndpointError::BadZone => {
                "an IPv6 zone (%25<interface>) is only allowed on a link-local address"
            }
        }
    }
}

impl std::error::Error for EndpointError {}

/// The host part of an endpoint, canonical.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    /// IPv4-mapped IPv6 is stored as IPv4.
    Ip(IpAddr),
    /// Lower case, no trailing dot.
    Name(Box<str>),
}

/// A parsed, canonical handler endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub host: Host,
    /// IPv6 zone of a link-local address (interface name or index).
    pub zone: Option<Box<str>>,
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: Box<str>,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, EndpointError> {
        if url.len() > MAX_ENDPOINT_LEN {
            return Err(EndpointError::TooLong);
        }
        if !url.bytes().all(|b| (33..=126).contains(&b)) || url.contains('#') {
            return Err(EndpointError::BadChar);
        }
        let lower_scheme = |p: &str| url.len() >= p.len() && url[..p.len()].eq_ignore_ascii_case(p);
        let rest = if lower_scheme("http://") {
            &url[7..]
        } else if lower_scheme("https://") {
            return Err(EndpointError::HttpsUnsupported);
        } else {
            return Err(EndpointError::Scheme);
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(split);
        if authority.contains('@') {
            return Err(EndpointError::UserInfo);
        }
        let (host, zone, port) = split_authority(authority)?;
        let port = match port {
            None => HTTP_DEFAULT_PORT,
            Some(p) => parse_port(p)?,
        };
        let path: Box<str> = if tail.starts_with('/') {
            tail.into()
        } else {
            format!("/{tail}").into()
        };
        Ok(Endpoint {
            host,
            zone,
            port,
            path,
        })
    }

    /// `host:port` as written in a `Host` header and used as the
    /// connection pool key (IPv6 in brackets, zone as `%25`).
    pub fn authority(&self) -> String {
        match (&self.host, &self.zone) {
            (Host::Ip(IpAddr::V6(a)), Some(z)) => format!("[{a}%25{z}]:{}", self.port),
            (Host::Ip(IpAddr::V6(a)), None) => format!("[{a}]:{}", self.port),
            (Host::Ip(IpAddr::V4(a)), _) => format!("{a}:{}", self.port),
            (Host::Name(n), _) => format!("{n}:{}", self.port),
        }
    }

    /// The canonical URL text (what a route stores is still what the
    /// agent sent; this is for messages and tests).
    pub fn to_url(&self) -> String {
        format!("http://{}{}", self.authority(), self.path)
    }

    /// The socket address for `ip` (the literal host, or one address a
    /// name resolved to), with the zone's interface index for scoped
    /// link-local IPv6. `None` when the zone names no interface.
    pub fn socket_addr(&self, ip: IpAddr) -> Option<SocketAddr> {
        match (ip, &self.zone) {
            (IpAddr::V6(a), Some(z)) => {
                Some(SocketAddrV6::new(a, self.port, 0, interface_index(z)?).into())
            }
            _ => Some(SocketAddr::new(ip, self.port)),
        }
    }
}

fn parse_port(p: &str) -> Result<u16, EndpointError> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(EndpointError::BadPort);
    }
    match p.parse::<u32>() {
        Ok(n @ 1..=65535) => Ok(n as u16),
        _ => Err(EndpointError::BadPort),
    }
}

type Authority<'a> = (Host, Option<Box<str>>, Option<&'a str>);

fn split_authority(a: &str) -> Result<Authority<'_>, EndpointError> {
    if a.is_empty() {
        return Err(EndpointError::NoHost);
    }
    if let Some(inner) = a.strip_prefix('[') {
        let (lit, after) = inner.split_once(']').ok_or(EndpointError::BadHost)?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(EndpointError::BadPort)?),
        };
        let (addr, zone) = match lit.split_once('%') {
            None => (lit, None),
            Some((addr, z)) => {
                let z = z.strip_prefix("25").ok_or(EndpointError::BadZone)?;
                let ok = !z.is_empty()
                    && z.len() <= MAX_ZONE
                    && z.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
                if !ok {
                    return Err(EndpointError::BadZone);
                }
                (addr, Some(Box::<str>::from(z)))
            }
        };
        let v6: Ipv6Addr = addr.parse().map_err(|_| EndpointError::BadHost)?;
        let ip = match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        };
        if zone.is_some() && !matches!(ip, IpAddr::V6(a) if is_link_local_v6(a)) {
            return Err(EndpointError::BadZone);
        }
        return Ok((Host::Ip(ip), zone, port));
    }
    let (host, port) = match a.split_once(':') {
        None => (a, None),
        Some((h, p)) => (h, Some(p)),
    };
    Ok((parse_host(host)?, None, port))
}

/// A non-bracketed host: a numeric IPv4 spelling or a DNS name.
fn parse_host(h: &str) -> Result<Host, EndpointError> {
    let h = h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase();
    if h.is_empty() {
        return Err(EndpointError::NoHost);
    }
    let parts: Vec<&str> = h.split('.').collect();
    // As WHATWG URL: if the last label looks numeric the host is an IPv4
    // address in some spelling, and must parse as one.
    let last = parts.last().copied().unwrap_or("");
    if numeric_part(last).is_some() || last.bytes().all(|b| b.is_ascii_digit()) {
        return ipv4_numeric(&parts)
            .map(|a| Host::Ip(IpAddr::V4(a)))
            .ok_or(EndpointError::BadHost);
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if h.len() > MAX_HOST_NAME || !parts.iter().all(|l| label_ok(l)) {
        return Err(EndpointError::BadHost);
    }
    Ok(Host::Name(h.into()))
}

/// One part of an `inet_aton` spelling: decimal, `0x` hex or `0` octal.
fn numeric_part(p: &str) -> Option<u64> {
    if p.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(x) = p.strip_prefix("0x") {
        (x, 16)
    } else if p.len() > 1 && p.starts_with('0') {
        (&p[1..], 8)
    } else {
        (p, 10)
    };
    if digits.is_empty() {
        // "0x" alone is 0, as inet_aton reads it.
        return (radix == 16).then_some(0);
    }
    if digits.len() > 32 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// `a`, `a.b`, `a.b.c`, `a.b.c.d` with the last part filling the rest.
fn ipv4_numeric(parts: &[&str]) -> Option<Ipv4Addr> {
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let nums: Vec<u64> = parts
        .iter()
        .map(|p| numeric_part(p))
        .collect::<Option<_>>()?;
    let (last, head) = nums.split_last()?;
    if head.iter().any(|&n| n > 255) {
        return None;
    }
    let rest_bits = 8 * (4 - head.len() as u32);
    if rest_bits < 64 && *last >> rest_bits != 0 {
        return None;
    }
    let mut v: u32 = 0;
    for (i, &n) in head.iter().enumerate() {
        v |= (n as u32) << (24 - 8 * i as u32);
    }
    Some(Ipv4Addr::from(v | *last as u32))
}

fn is_link_local_v6(a: Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80
}

/// The interface index of zone `z` (a name or a number).
fn interface_index(z: &str) -> Option<u32> {
    if let Ok(n) = z.parse::<u32>() {
        return Some(n);
    }
    let c = std::ffi::CString::new(z).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// What an address is, as far as being a handler goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrClass {
    Unicast,
    Loopback,
    Unspecified,
    Multicast,
    Broadcast,
    /// 240.0.0.0/4 (except broadcast).
    Reserved,
    /// IPv4 169.254/16, or IPv6 fe80::/10 without a zone.
    LinkLocal,
}

/// The IPv4 address an IPv6 address stands for, if it embeds one:
/// IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d` (deprecated,
/// still routed to IPv4 by some stacks) and the NAT64 well-known prefix
/// `64:ff9b::/96` (a NAT64 on the path turns it into that IPv4 address).
pub fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = a.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = a.segments();
    let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..6] == [0; 6] && !a.is_unspecified() && !a.is_loopback() {
        return Some(v4);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(v4);
    }
    None
}

/// The class of `ip`; `scoped` says an IPv6 zone came with it.
pub fn classify(ip: IpAddr, scoped: bool) -> AddrClass {
    match ip {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => {
            if let Some(v4) = embedded_v4(a) {
                return classify_v4(v4);
            }
            if a.is_unspecified() {
                AddrClass::Unspecified
            } else if a.is_loopback() {
                AddrClass::Loopback
            } else if a.is_multicast() {
                AddrClass::Multicast
            } else if is_link_local_v6(a) && !scoped {
                AddrClass::LinkLocal
            } else {
                AddrClass::Unicast
            }
        }
    }
}

fn classify_v4(a: Ipv4Addr) -> AddrClass {
    let o = a.octets();
    if o[0] == 0 {
        AddrClass::Unspecified
    } else if o[0] == 127 {
        AddrClass::Loopback
    } else if a.is_broadcast() {
        AddrClass::Broadcast
    } else if a.is_link_local() {
        AddrClass::LinkLocal
    } else if a.is_multicast() {
        AddrClass::Multicast
    } else if o[0] >= 240 {
        AddrClass::Reserved
    } else {
        AddrClass::Unicast
    }
}

/// Why an endpoint address is refused. `code` is the stable `reason` of
/// an `endpoint_refused` error (docs/sdk-api.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Refusal {
    /// Loopback (127/8, ::1, `localhost`), without the operator's leave.
    Loopback,
    Unspecified,
    Multicast,
    Broadcast,
    Reserved,
    /// Link-local without an IPv6 zone (or IPv4 link-local).
    LinkLocal,
    /// One of the router's own interface addresses, without leave.
    OwnAddress,
    /// A port one of this router's agentd/agent-gw listeners uses, on a
    /// local address: the gateway would forward to itself.
    OwnListener,
    /// The host name resolved to no address.
    Unresolvable,
    /// A LAN registration's endpoint outside the LAN ([`scope`]).
    NotLan(scope::NotLan),
}

impl Refusal {
    pub const ALL: [Refusal; 10] = [
        Refusal::Loopback,
        Refusal::Unspecified,
        Refusal::Multicast,
        Refusal::Broadcast,
        Refusal::Reserved,
        Refusal::LinkLocal,
        Refusal::OwnAddress,
        Refusal::OwnListener,
        Refusal::Unresolvable,
        Refusal::NotLan(scope::NotLan::RouterLink),
    ];

    pub fn code(self) -> &'static str {
        match self {
            Refusal::Loopback => "endpoint_loopback",
            Refusal::Unspecified => "endpoint_unspecified",
            Refusal::Multicast => "endpoint_multicast",
            Refusal::Broadcast => "endpoint_broadcast",
            Refusal::Reserved => "endpoint_reserved",
            Refusal::LinkLocal => "endpoint_link_local",
            Refusal::OwnAddress => "endpoint_own_address",
            Refusal::OwnListener => "endpoint_own_listener",
            Refusal::Unresolvable => "endpoint_unresolvable",
            Refusal::NotLan(_) => "endpoint_not_lan",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Refusal::Loopback => "is a loopback address (the router itself; allowed only with agentd.allow_loopback_endpoints or route.allow_loopback)",
            Refusal::Unspecified => "is an unspecified address",
            Refusal::Multicast => "is a multicast address",
            Refusal::Broadcast => "is a broadcast address",
            Refusal::Reserved => "is a reserved address",
            Refusal::LinkLocal => "is link-local without an interface zone",
            Refusal::OwnAddress => "is one of the router's own addresses (allowed only with agentd.allow_loopback_endpoints or route.allow_loopback)",
            Refusal::OwnListener => "is a port of this router's own agentd/agent-gw listeners",
            Refusal::Unresolvable => "resolves to no address",
            Refusal::NotLan(why) => why.describe(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The router's own addresses, as `getifaddrs` reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalAddrs {
    pub addrs: Vec<IpAddr>,
    /// IPv4 directed-broadcast addresses of the interfaces.
    pub broadcast: Vec<Ipv4Addr>,
    /// Each address with its interface and prefix length (the links and
    /// their subnets, for [`scope`]).
    pub nets: Vec<IfNet>,
}

/// One address of one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfNet {
    pub ifname: Box<str>,
    pub addr: IpAddr,
    /// Prefix length of the subnet (from the netmask).
    pub len: u8,
    /// The interface is a loopback interface.
    pub loopback: bool,
    /// The interface is up and has carrier (`IFF_UP` and `IFF_RUNNING`).
    pub up: bool,
    /// The interface can multicast (`IFF_MULTICAST`).
    pub multicast: bool,
    /// An IPv6 address still in duplicate address detection ([`dad`]):
    /// nothing can be sent from it yet. Read only by
    /// [`local_addrs_with_dad`] (which also leaves out addresses that
    /// failed detection: another node's).
    pub tentative: bool,
}

impl IfNet {
    /// Whether `ip` lies in this subnet. A `/0` (no netmask) and IPv6
    /// link-local subnets (`fe80::/64` is on every link) hold nothing.
    pub fn holds(&self, ip: IpAddr) -> bool {
        let link_local = matches!(self.addr, IpAddr::V6(a) if is_link_local_v6(a));
        self.len > 0 && !link_local && crate::owner::prefix_contains(self.addr, self.len, ip)
    }
}

/// Most interface addresses read (a bound on the work of one check; a
/// router has a handful).
pub const MAX_IF_ADDRS: usize = 4096;

/// Reads the interface addresses now. An error yields an empty list: the
/// class checks (loopback, unspecified, ...) still apply. No address is
/// marked tentative: the endpoint checks (on the gateway's path to a
/// handler) need not pay for reading that.
pub fn local_addrs() -> LocalAddrs {
    read_local_addrs(&[])
}

/// [`local_addrs`], with each IPv6 address's duplicate address detection
/// read too ([`dad`]): those still in it are marked
/// [`IfNet::tentative`], those that failed it are left out (another
/// node's). For what announces the addresses.
pub fn local_addrs_with_dad() -> LocalAddrs {
    read_local_addrs(&dad::unready())
}

fn read_local_addrs(unready: &[(Box<str>, Ipv6Addr, dad::Unready)]) -> LocalAddrs {
    let mut out = LocalAddrs::default();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        // SAFETY: a non-null ifa_addr points at a sockaddr of its family.
        if let Some(ip) = unsafe { sockaddr_ip(ifa.ifa_addr) } {
            if out.addrs.len() >= MAX_IF_ADDRS {
                break;
            }
            let ifname = if ifa.ifa_name.is_null() {
                Box::<str>::from("")
            } else {
                // SAFETY: a non-null ifa_name is a NUL-terminated string
                // owned by the list.
                unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                    .to_string_lossy()
                    .into()
            };
            let state = unready
                .iter()
                .find(|(dev, a, _)| *dev == ifname && ip == IpAddr::V6(*a))
                .map(|(_, _, s)| *s);
            // An address that failed duplicate detection is another node's.
            if state != Some(dad::Unready::Failed) {
                // SAFETY: a non-null ifa_netmask points at a sockaddr of
                // the address's family.
                let len = match unsafe { sockaddr_ip(ifa.ifa_netmask) } {
                    Some(IpAddr::V4(m)) => u32::from(m).leading_ones() as u8,
                    Some(IpAddr::V6(m)) => u128::from(m).leading_ones() as u8,
                    None => 0,
                };
                let has = |flag: libc::c_int| ifa.ifa_flags & (flag as u32) != 0;
                out.addrs.push(ip);
                out.nets.push(IfNet {
                    ifname,
                    addr: ip,
                    len,
                    loopback: has(libc::IFF_LOOPBACK),
                    up: has(libc::IFF_UP) && has(libc::IFF_RUNNING),
                    multicast: has(libc::IFF_MULTICAST),
                    tentative: state == Some(dad::Unready::Tentative),
                });
            }
        }
        if ifa.ifa_flags & (libc::IFF_BROADCAST as u32) != 0 {
            // SAFETY: with IFF_BROADCAST, ifa_ifu is the broadcast address.
            if let Some(IpAddr::V4(b)) = unsafe { sockaddr_ip(ifa.ifa_ifu) } {
                out.broadcast.push(b);
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// # Safety
/// `sa` is null or points at a valid `sockaddr` of the family it names.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: the caller promises a valid sockaddr; we read by family.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let s = &*(sa as *const libc::sockaddr_in);
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr))))
            }
            libc::AF_INET6 => {
                let s = &*(sa as *const libc::sockaddr_in6);
                Some(IpAddr::V6(Ipv6Addr::from(s.sin6_addr.s6_addr)))
            }
            _ => None,
        }
    }
}

/// The endpoint rules of one router.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guard {
    /// Loopback and the router's own addresses are allowed
    /// (`agentd.allow_loopback_endpoints`, `route.allow_loopback`).
    pub allow_loopback: bool,
    /// Ports of this router's own listeners (never a handler's on a local
    /// address).
    pub own_ports: Vec<u16>,
    /// Where LAN registrations may point ([`scope`]; static routes are the
    /// operator's and do not use it).
    pub lan: scope::LanScope,
}

impl Guard {
    /// The guard of `config`: its listener ports, and whether
    /// registrations may name loopback.
    pub fn of_config(c: &uci_schema::Config) -> Guard {
        let g = &c.gateway;
        let mut own_ports: Vec<u16> = [
            &g.sdk_listen,
            &g.public_listen,
            &g.peer_listen,
            &g.admin_listen,
            &c.arpx.listen,
        ]
        .iter()
        .filter_map(|s| s.parse::<SocketAddr>().ok())
        .map(|a| a.port())
        .collect();
        own_ports.sort_unstable();
        own_ports.dedup();
        Guard {
            allow_loopback: c.agentd.allow_loopback_endpoints,
            own_ports,
            lan: scope::LanScope::of_config(c),
        }
    }

    /// The same rules with loopback allowed or not (a static route's own
    /// `allow_loopback`).
    pub fn with_loopback(&self, allow: bool) -> Guard {
        Guard {
            allow_loopback: allow,
            ..self.clone()
        }
    }

    /// The LAN scope of a registration by `caller` naming `ip` (the
    /// literal host, or one address a name resolved to); `peers`: the
    /// known peer router addresses.
    pub fn check_lan(
        &self,
        ep: &Endpoint,
        ip: IpAddr,
        caller: IpAddr,
        local: &LocalAddrs,
        peers: &[IpAddr],
    ) -> Result<(), Refusal> {
        self.lan
            .check(ip, ep.zone.as_deref(), caller, local, peers)
            .map_err(Refusal::NotLan)
    }

    /// May a handler listen at `ip`:`port`? `scoped`: an IPv6 zone came
    /// with it.
    pub fn check_ip(
        &self,
        ip: IpAddr,
        scoped: bool,
        port: u16,
        local: &LocalAddrs,
    ) -> Result<(), Refusal> {
        let canon = match ip {
            IpAddr::V6(a) => embedded_v4(a).map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let own = local.addrs.contains(&ip) || local.addrs.contains(&canon);
        if let IpAddr::V4(a) = canon {
            if local.broadcast.contains(&a) && !own {
                return Err(Refusal::Broadcast);
            }
        }
        let class = classify(ip, scoped);
        let is_local = own || class == AddrClass::Loopback;
        if is_local && self.own_ports.contains(&port) {
            return Err(Refusal::OwnListener);
        }
        match class {
            AddrClass::Unicast if own && !self.allow_loopback => Err(Refusal::OwnAddress),
            AddrClass::Unicast => Ok(()),
            AddrClass::Loopback if self.allow_loopback => Ok(()),
            AddrClass::Loopback => Err(Refusal::Loopback),
            AddrClass::Unspecified => Err(Refusal::Unspecified),
            AddrClass::Multicast => Err(Refusal::Multicast),
            AddrClass::Broadcast => Err(Refusal::Broadcast),
            AddrClass::Reserved => Err(Refusal::Reserved),
            AddrClass::LinkLocal => Err(Refusal::LinkLocal),
        }
    }

    /// Checks what can be checked without a resolver: an IP literal in
    /// full, `localhost`/`*.localhost` as loopback. `Ok(true)`: the host
    /// is a name that still needs [`Guard::check_resolved`].
    pub fn check_literal(&self, ep: &Endpoint, local: &LocalAddrs) -> Result<bool, Refusal> {
        match &ep.host {
            Host::Ip(ip) => self
                .check_ip(*ip, ep.zone.is_some(), ep.port, local)
                .map(|()| false),
            Host::Name(n) if is_localhost(n) => {
                if self.own_ports.contains(&ep.port) {
                    Err(Refusal::OwnListener)
                } else if self.allow_loopback {
                    // Still resolved: it must really be loopback.
                    Ok(true)
                } else {
                    Err(Refusal::Loopback)
                }
            }
            Host::Name(_) => Ok(true),
        }
    }

    /// Checks every address a host name resolved to: one refused address
    /// refuses the endpoint (a resolver may answer differently next time).
    pub fn check_resolved(
        &self,
        ep: &Endpoint,
        resolved: &[IpAddr],
        local: &LocalAddrs,
    ) -> Result<(), Refusal> {
        if resolved.is_empty() {
            return Err(Refusal::Unresolvable);
        }
        for ip in resolved {
            self.check_ip(*ip, false, ep.port, local)?;
        }
        Ok(())
    }
}

/// `localhost` and `*.localhost` (RFC 6761 §6.3: always loopback).
pub fn is_localhost(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

/// Parse and check an endpoint as far as possible without a resolver:
/// the check agentd runs on every registration and static route.
/// `Ok(Some(ep))` with a name host still needs resolving by whoever
/// connects.
pub fn check_url(url: &str, guard: &Guard, local: &LocalAddrs) -> Result<Endpoint, Refused> {
    let ep = Endpoint::parse(url).map_err(Refused::Invalid)?;
    guard.check_literal(&ep, local).map_err(Refused::Address)?;
    Ok(ep)
}

/// [`check_url`] for a LAN registration (or a renewal that moves its
/// endpoint) from `caller`: a literal address must also lie in the LAN
/// ([`scope`]). A host name is checked, address by address, by the
/// gateway that resolves it.
pub fn check_registration(
    url: &str,
    guard: &Guard,
    local: &LocalAddrs,
    caller: IpAddr,
    peers: &[IpAddr],
) -> Result<Endpoint, Refused> {
    let ep = check_url(url, guard, local)?;
    if let Host::Ip(ip) = ep.host {
        guard
            .check_lan(&ep, ip, caller, local, peers)
            .map_err(Refused::Address)?;
    }
    Ok(ep)
}

/// Either kind of endpoint refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    Invalid(EndpointError),
    Address(Refusal),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Invalid(e) => e.fmt(f),
            Refused::Address(r) => write!(f, "endpoint {r}"),
        }
    }
}

pub mod dad;
pub mod scope;

#[cfg(test)]
mod tests;

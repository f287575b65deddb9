//! The mDNS sockets (RFC 6762): one UDP socket per address family on
//! port 5353, shared with any other responder on the host, that tells
//! for each datagram which interface it came in on and sends each
//! datagram out of the interface the caller names.
//!
//! The interface matters because an mDNS answer is only true on the link
//! it describes: a querier on `br-lan` must not learn the addresses of
//! `wan`. So every received datagram carries its arrival interface
//! (`IP_PKTINFO` / `IPV6_PKTINFO`) and every send names its outgoing one,
//! rather than trusting the routing table (which, for a multicast group
//! joined on several links, would pick one of them).
//!
//! Sending never waits: a responder that blocks on a full socket buffer
//! would stall the event loop, and mDNS already tolerates loss (queries
//! and announcements are repeated).
//!
//! [`interfaces`] reads what the responder needs to know about the links
//! it serves (index, state, addresses) in one `getifaddrs` pass.

use std::ffi::{c_int, c_void, CString};
use std::future::poll_fn;
use std::io;
use std::mem::{size_of, size_of_val};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::Interest;
use tokio::net::UdpSocket;

use crate::endpoint::LocalAddrs;

/// The mDNS IPv4 group (RFC 6762 §3).
pub const GROUP_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 251);
/// The mDNS IPv6 link-local group (RFC 6762 §3).
pub const GROUP_V6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xfb);
/// The mDNS port (RFC 6762 §3).
pub const PORT: u16 = 5353;

/// Most addresses of each family kept per interface: a LAN bridge has a
/// handful; the bound keeps a misconfigured one from growing every
/// announcement without limit.
pub const MAX_ADDRS_PER_FAMILY: usize = 32;
/// Most interface names [`interfaces`] looks up in one call.
pub const MAX_INTERFACES: usize = 64;
/// TTL / hop limit of everything we send: RFC 6762 §11 has receivers
/// check it is 255, so an off-link sender cannot spoof a link's records.
const HOP_LIMIT: c_int = 255;
/// Datagrams handled (received or dropped) in one poll of [`MdnsSockets::recv`]
/// before it yields, so a flood of truncated datagrams cannot hold the
/// runtime thread.
const MAX_TRIES_PER_POLL: usize = 64;
/// Control messages looked at per datagram: we ask for one.
const MAX_CMSGS: usize = 8;
/// Syscall retries after `EINTR`.
const MAX_EINTR: usize = 8;

/// Bytes of control buffer that hold one pktinfo of either family.
const CONTROL_LEN: usize = {
    let v4 = size_of::<libc::in_pktinfo>();
    let v6 = size_of::<libc::in6_pktinfo>();
    let data = if v4 > v6 { v4 } else { v6 };
    // SAFETY: CMSG_SPACE is pure arithmetic on its argument.
    (unsafe { libc::CMSG_SPACE(data as u32) }) as usize
};
/// The control buffer in `u64` words, so it is aligned for `cmsghdr`.
const CONTROL_WORDS: usize = CONTROL_LEN.div_ceil(8);

/// The two mDNS sockets; either may be missing (see [`MdnsSockets::open`]).
#[derive(Debug)]
pub struct MdnsSockets {
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
    /// The port bound and multicast to (5353 except in tests, where a
    /// free port keeps other responders on the machine out of them).
    port: u16,
    /// Why a family was left out, for the caller to log once.
    left_out: Option<String>,
    /// Which family [`MdnsSockets::recv`] reads first; alternated so a
    /// flood on one family cannot starve the other.
    v6_first: AtomicBool,
}

/// One datagram received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Bytes written at the start of the caller's buffer.
    pub len: usize,
    /// The arrival interface; 0 when the kernel gave no pktinfo, which a
    /// responder should treat as "link unknown" and not answer.
    pub ifindex: u32,
    /// The sender (an IPv6 link-local sender carries its scope id, so it
    /// can be answered by unicast as is).
    pub from: SocketAddr,
}

impl MdnsSockets {
    /// Opens the IPv4 and IPv6 sockets on port 5353. A family that cannot
    /// be opened (IPv6 disabled, no IPv4 on a v6-only box) is left out and
    /// the reason kept in [`MdnsSockets::left_out`]: mDNS on the other
    /// family still serves the LAN. Errors only when neither opens.
    ///
    /// Panics outside a tokio runtime with I/O enabled (the sockets are
    /// registered with its reactor).
    pub fn open() -> Result<MdnsSockets, String> {
        Self::open_on(PORT)
    }

    /// [`MdnsSockets::open`] on another port: with `SO_REUSEPORT`, a
    /// unicast datagram to a shared port reaches only one of the sharing
    /// sockets, so tests use a port nobody else holds.
    pub(crate) fn open_on(port: u16) -> Result<MdnsSockets, String> {
        let v4 = open_v4(port);
        let v6 = open_v6(port);
        let left_out = match (&v4, &v6) {
            (Err(a), Err(b)) => return Err(format!("{a}; {b}")),
            (Err(e), Ok(_)) | (Ok(_), Err(e)) => Some(e.clone()),
            (Ok(_), Ok(_)) => None,
        };
        Ok(MdnsSockets {
            v4: v4.ok(),
            v6: v6.ok(),
            port,
            left_out,
            v6_first: AtomicBool::new(false),
        })
    }

    pub fn has_v4(&self) -> bool {
        self.v4.is_some()
    }

    pub fn has_v6(&self) -> bool {
        self.v6.is_some()
    }

    /// Why one family could not be opened, if one could not.
    pub fn left_out(&self) -> Option<&str> {
        self.left_out.as_deref()
    }

    /// Joins the mDNS group on interface `ifindex` in both families. A
    /// failure in one family does not keep the other from joining (a link
    /// without IPv6 still gets IPv4 mDNS); the error names each family
    /// that failed. Joining again is fine, so the caller can simply join
    /// every served interface after each link change.
    pub fn join(&self, ifindex: u32) -> Result<(), String> {
        let mut errors = Vec::new();
        if let Some(s) = &self.v4 {
            match membership_v4(s, ifindex, libc::IP_ADD_MEMBERSHIP) {
                Err(e) if e.raw_os_error() != Some(libc::EADDRINUSE) => errors.push(format!(
                    "mDNS IPv4: join {GROUP_V4} on interface {ifindex}: {e}"
                )),
                _ => {}
            }
        }
        if let Some(s) = &self.v6 {
            match membership_v6(s, ifindex, libc::IPV6_ADD_MEMBERSHIP) {
                Err(e) if e.raw_os_error() != Some(libc::EADDRINUSE) => errors.push(format!(
                    "mDNS IPv6: join {GROUP_V6} on interface {ifindex}: {e}"
                )),
                _ => {}
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Leaves the group on `ifindex` in both families. Errors are ignored:
    /// they mean we were not a member (or the interface is gone, which
    /// dropped the membership already).
    pub fn leave(&self, ifindex: u32) {
        if let Some(s) = &self.v4 {
            let _ = membership_v4(s, ifindex, libc::IP_DROP_MEMBERSHIP);
        }
        if let Some(s) = &self.v6 {
            let _ = membership_v6(s, ifindex, libc::IPV6_DROP_MEMBERSHIP);
        }
    }

    /// Waits for the next datagram on either socket and writes it into
    /// `buf`. A datagram longer than `buf` is dropped (a partial DNS
    /// message is useless and could be misread) and the wait goes on.
    ///
    /// Cancel-safe: a datagram is only taken off a socket in the same poll
    /// that returns it.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        poll_fn(|cx| self.poll_recv(cx, buf)).await
    }

    fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<Received>> {
        let v6_first = self.v6_first.fetch_xor(true, Ordering::Relaxed);
        let order = if v6_first {
            [&self.v6, &self.v4]
        } else {
            [&self.v4, &self.v6]
        };
        let mut tries = 0;
        for sock in order.into_iter().flatten() {
            loop {
                if tries >= MAX_TRIES_PER_POLL {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                tries += 1;
                match sock.poll_recv_ready(cx) {
                    Poll::Pending => break,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) => {}
                }
                let fd = sock.as_raw_fd();
                match sock.try_io(Interest::READABLE, || recv_one(fd, buf)) {
                    Ok(Some(r)) => return Poll::Ready(Ok(r)),
                    // Truncated or unreadable sender: dropped; next one.
                    Ok(None) => {}
                    // Readiness is cleared; the next poll_recv_ready
                    // registers the waker.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
        Poll::Pending
    }

    /// Sends `bytes` to the mDNS group of one family on interface
    /// `ifindex`. `Ok(false)`: the socket buffer was full and the datagram
    /// was dropped rather than waited for.
    pub fn send_multicast(&self, v6: bool, ifindex: u32, bytes: &[u8]) -> io::Result<bool> {
        if v6 {
            let to = SocketAddrV6::new(GROUP_V6, self.port, 0, ifindex);
            send_v6(self.sock(true)?, to, bytes)
        } else {
            let to = SocketAddrV4::new(GROUP_V4, self.port);
            send_v4(self.sock(false)?, to, ifindex, bytes)
        }
    }

    /// Sends `bytes` by unicast to `to` (a legacy querier, RFC 6762 §6.7,
    /// or a querier that asked for a unicast reply) out of interface
    /// `ifindex`. An IPv6 link-local `to` without a scope id gets
    /// `ifindex` as its scope (it is meaningless without one); an
    /// IPv4-mapped one goes out of the IPv4 socket. `Ok(false)` as for
    /// [`MdnsSockets::send_multicast`].
    pub fn send_unicast(&self, to: SocketAddr, ifindex: u32, bytes: &[u8]) -> io::Result<bool> {
        match to {
            SocketAddr::V4(a) => send_v4(self.sock(false)?, a, ifindex, bytes),
            SocketAddr::V6(a) => {
                if let Some(v4) = a.ip().to_ipv4_mapped() {
                    let a = SocketAddrV4::new(v4, a.port());
                    return send_v4(self.sock(false)?, a, ifindex, bytes);
                }
                let scope = if is_link_local_v6(*a.ip()) && a.scope_id() == 0 {
                    ifindex
                } else {
                    a.scope_id()
                };
                let a = SocketAddrV6::new(*a.ip(), a.port(), a.flowinfo(), scope);
                send_v6(self.sock(true)?, a, bytes)
            }
        }
    }

    fn sock(&self, v6: bool) -> io::Result<&UdpSocket> {
        let (s, family) = if v6 {
            (&self.v6, "IPv6")
        } else {
            (&self.v4, "IPv4")
        };
        s.as_ref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("mDNS: no {family} socket (it could not be opened)"),
            )
        })
    }
}

fn open_v4(port: u16) -> Result<UdpSocket, String> {
    let fail = |step: &str, e: io::Error| format!("mDNS IPv4 socket: {step}: {e}");
    let fd = udp_socket(libc::AF_INET).map_err(|e| fail("socket", e))?;
    let opts: [(c_int, c_int, &str, c_int); 7] = [
        (libc::SOL_SOCKET, libc::SO_REUSEADDR, "SO_REUSEADDR", 1),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT, "SO_REUSEPORT", 1),
        (libc::IPPROTO_IP, libc::IP_PKTINFO, "IP_PKTINFO", 1),
        (
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_TTL,
            "IP_MULTICAST_TTL",
            HOP_LIMIT,
        ),
        (libc::IPPROTO_IP, libc::IP_TTL, "IP_TTL", HOP_LIMIT),
        (
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_LOOP,
            "IP_MULTICAST_LOOP",
            1,
        ),
        (
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_ALL,
            "IP_MULTICAST_ALL",
            0,
        ),
    ];
    for (level, name, label, value) in opts {
        set_opt(fd.as_raw_fd(), level, name, &value)
            .map_err(|e| fail(&format!("setsockopt {label}"), e))?;
    }
    let sa = sockaddr_v4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port));
    // SAFETY: `sa` is a sockaddr_in and the length passed is its size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            size_of_val(&sa) as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(fail(
            &format!("bind 0.0.0.0:{port}"),
            io::Error::last_os_error(),
        ));
    }
    UdpSocket::from_std(fd.into()).map_err(|e| fail("register with the runtime", e))
}

fn open_v6(port: u16) -> Result<UdpSocket, String> {
    let fail = |step: &str, e: io::Error| format!("mDNS IPv6 socket: {step}: {e}");
    let fd = udp_socket(libc::AF_INET6).map_err(|e| fail("socket", e))?;
    let opts: [(c_int, c_int, &str, c_int); 7] = [
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, "IPV6_V6ONLY", 1),
        (libc::SOL_SOCKET, libc::SO_REUSEADDR, "SO_REUSEADDR", 1),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT, "SO_REUSEPORT", 1),
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_RECVPKTINFO,
            "IPV6_RECVPKTINFO",
            1,
        ),
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MULTICAST_HOPS,
            "IPV6_MULTICAST_HOPS",
            HOP_LIMIT,
        ),
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_UNICAST_HOPS,
            "IPV6_UNICAST_HOPS",
            HOP_LIMIT,
        ),
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MULTICAST_LOOP,
            "IPV6_MULTICAST_LOOP",
            1,
        ),
    ];
    for (level, name, label, value) in opts {
        set_opt(fd.as_raw_fd(), level, name, &value)
            .map_err(|e| fail(&format!("setsockopt {label}"), e))?;
    }
    // Linux before 4.20 lacks it; the arrival ifindex still lets the
    // caller ignore datagrams of links it did not join.
    match set_opt(
        fd.as_raw_fd(),
        libc::IPPROTO_IPV6,
        libc::IPV6_MULTICAST_ALL,
        &0,
    ) {
        Err(e) if e.raw_os_error() != Some(libc::ENOPROTOOPT) => {
            return Err(fail("setsockopt IPV6_MULTICAST_ALL", e));
        }
        _ => {}
    }
    let sa = sockaddr_v6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0));
    // SAFETY: `sa` is a sockaddr_in6 and the length passed is its size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in6).cast(),
            size_of_val(&sa) as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(fail(
            &format!("bind [::]:{port}"),
            io::Error::last_os_error(),
        ));
    }
    UdpSocket::from_std(fd.into()).map_err(|e| fail("register with the runtime", e))
}

/// A new non-blocking, close-on-exec UDP socket of `family`.
fn udp_socket(family: c_int) -> io::Result<OwnedFd> {
    let ty = libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socket takes no pointers; the result is checked below.
    let fd = unsafe { libc::socket(family, ty, libc::IPPROTO_UDP) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor we just created and nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a plain-data option value `T` (an int or a kernel
/// struct from libc).
fn set_opt<T>(fd: RawFd, level: c_int, name: c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at a live T and the length passed is its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast::<c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn ifindex_c(ifindex: u32) -> io::Result<c_int> {
    c_int::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))
}

fn membership_v4(s: &UdpSocket, ifindex: u32, op: c_int) -> io::Result<()> {
    // `ip_mreqn` names the interface by index: an interface's IPv4
    // address may be missing or shared, its index is not.
    let m = libc::ip_mreqn {
        imr_multiaddr: in_addr(GROUP_V4),
        imr_address: in_addr(Ipv4Addr::UNSPECIFIED),
        imr_ifindex: ifindex_c(ifindex)?,
    };
    set_opt(s.as_raw_fd(), libc::IPPROTO_IP, op, &m)
}

fn membership_v6(s: &UdpSocket, ifindex: u32, op: c_int) -> io::Result<()> {
    let m = libc::ipv6_mreq {
        ipv6mr_multiaddr: libc::in6_addr {
            s6_addr: GROUP_V6.octets(),
        },
        ipv6mr_interface: ifindex,
    };
    set_opt(s.as_raw_fd(), libc::IPPROTO_IPV6, op, &m)
}

fn in_addr(a: Ipv4Addr) -> libc::in_addr {
    libc::in_addr {
        s_addr: u32::from(a).to_be(),
    }
}

fn sockaddr_v4(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all zeroes is valid (and zeroes
    // the padding the kernel expects to be zero).
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = a.port().to_be();
    sa.sin_addr = in_addr(*a.ip());
    sa
}

fn sockaddr_v6(a: SocketAddrV6) -> libc::sockaddr_in6 {
    // SAFETY: sockaddr_in6 is plain data; all zeroes is valid.
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sa.sin6_port = a.port().to_be();
    sa.sin6_flowinfo = a.flowinfo().to_be();
    sa.sin6_addr.s6_addr = a.ip().octets();
    sa.sin6_scope_id = a.scope_id();
    sa
}

/// The sender of a received datagram; `None` for a family we do not use.
fn socket_addr(ss: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match c_int::from(ss.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // sockaddr_storage is aligned for every sockaddr type.
            let sa = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr));
            Some(SocketAddrV4::new(ip, u16::from_be(sa.sin_port)).into())
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sa =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sa.sin6_addr.s6_addr);
            let port = u16::from_be(sa.sin6_port);
            let flow = u32::from_be(sa.sin6_flowinfo);
            Some(SocketAddrV6::new(ip, port, flow, sa.sin6_scope_id).into())
        }
        _ => None,
    }
}

/// Reads one datagram with its arrival interface. `Ok(None)`: a datagram
/// was taken and dropped (truncated, or a sender we cannot name).
fn recv_one(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    // SAFETY: sockaddr_storage and msghdr are plain data; all zeroes is a
    // valid value of each (null pointers, zero lengths).
    let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut control = [0u64; CONTROL_WORDS];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of_val(&from) as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control) as _;
    let n = retry_eintr(|| {
        // SAFETY: every pointer in `msg` points at a live local (or at
        // `buf`) of the length given beside it, for the call's duration.
        unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) }
    })?;
    if msg.msg_flags & libc::MSG_TRUNC != 0 {
        return Ok(None);
    }
    let Some(from) = socket_addr(&from, msg.msg_namelen) else {
        return Ok(None);
    };
    Ok(Some(Received {
        len: n.min(buf.len()),
        ifindex: arrival_ifindex(&msg),
        from,
    }))
}

/// The interface index of the pktinfo control message in `msg`, or 0.
fn arrival_ifindex(msg: &libc::msghdr) -> u32 {
    // SAFETY: CMSG_LEN is pure arithmetic.
    let v4_len = unsafe { libc::CMSG_LEN(size_of::<libc::in_pktinfo>() as u32) } as usize;
    // SAFETY: as above.
    let v6_len = unsafe { libc::CMSG_LEN(size_of::<libc::in6_pktinfo>() as u32) } as usize;
    // SAFETY: `msg` was filled by recvmsg: its control pointer and the
    // length the kernel wrote back describe a live buffer.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
    for _ in 0..MAX_CMSGS {
        if c.is_null() {
            break;
        }
        // SAFETY: CMSG_FIRSTHDR/NXTHDR return null or a header wholly
        // inside the control buffer, which is aligned for cmsghdr.
        let h = unsafe { &*c };
        let len = h.cmsg_len as usize;
        if h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_PKTINFO && len >= v4_len {
            // SAFETY: the header's length covers an in_pktinfo after it;
            // read_unaligned makes no alignment assumption about the data.
            let p = unsafe {
                libc::CMSG_DATA(c)
                    .cast::<libc::in_pktinfo>()
                    .read_unaligned()
            };
            return u32::try_from(p.ipi_ifindex).unwrap_or(0);
        }
        if h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_PKTINFO && len >= v6_len
        {
            // SAFETY: as above, for in6_pktinfo.
            let p = unsafe {
                libc::CMSG_DATA(c)
                    .cast::<libc::in6_pktinfo>()
                    .read_unaligned()
            };
            return p.ipi6_ifindex;
        }
        // SAFETY: `c` is a header of `msg`'s control buffer (see above).
        c = unsafe { libc::CMSG_NXTHDR(msg, c) };
    }
    0
}

/// Sends one IPv4 datagram, out of `ifindex` when it is not 0: an
/// `IP_PKTINFO` control message sets the outgoing interface for this
/// datagram alone, so interleaved sends on several links need no
/// `IP_MULTICAST_IF` round trip each.
fn send_v4(s: &UdpSocket, to: SocketAddrV4, ifindex: u32, bytes: &[u8]) -> io::Result<bool> {
    let sa = sockaddr_v4(to);
    let mut control = [0u64; CONTROL_WORDS];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; all zeroes is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&sa as *const libc::sockaddr_in).cast_mut().cast();
    msg.msg_namelen = size_of_val(&sa) as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if ifindex != 0 {
        let info = libc::in_pktinfo {
            ipi_ifindex: ifindex_c(ifindex)?,
            ipi_spec_dst: in_addr(Ipv4Addr::UNSPECIFIED),
            ipi_addr: in_addr(Ipv4Addr::UNSPECIFIED),
        };
        let data_len = size_of::<libc::in_pktinfo>() as u32;
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is pure arithmetic.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(data_len) } as _;
        // SAFETY: the control buffer is CONTROL_LEN >= CMSG_SPACE(data_len)
        // bytes, aligned, and msg_controllen is set, so the first header
        // is non-null and inside it.
        let c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        // SAFETY: `c` points at a cmsghdr inside `control` (see above),
        // followed by room for an in_pktinfo.
        unsafe {
            (*c).cmsg_level = libc::IPPROTO_IP;
            (*c).cmsg_type = libc::IP_PKTINFO;
            (*c).cmsg_len = libc::CMSG_LEN(data_len) as _;
            libc::CMSG_DATA(c)
                .cast::<libc::in_pktinfo>()
                .write_unaligned(info);
        }
    }
    let fd = s.as_raw_fd();
    sent(retry_eintr(|| {
        // SAFETY: every pointer in `msg` points at a live local (or at
        // `bytes`, only read) of the length given beside it.
        unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) }
    }))
}

/// Sends one IPv6 datagram; the scope id of `to` picks the interface for
/// link-local and multicast destinations.
fn send_v6(s: &UdpSocket, to: SocketAddrV6, bytes: &[u8]) -> io::Result<bool> {
    let sa = sockaddr_v6(to);
    let fd = s.as_raw_fd();
    sent(retry_eintr(|| {
        // SAFETY: `bytes` and `sa` are live for the call with the lengths
        // given.
        unsafe {
            libc::sendto(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                (&sa as *const libc::sockaddr_in6).cast(),
                size_of_val(&sa) as libc::socklen_t,
            )
        }
    }))
}

/// A send's outcome: a full buffer is a drop, not an error.
fn sent(r: io::Result<usize>) -> io::Result<bool> {
    match r {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs a syscall returning a length or -1, again after `EINTR` (a
/// bounded number of times).
fn retry_eintr(mut f: impl FnMut() -> isize) -> io::Result<usize> {
    let mut tries = 0;
    loop {
        let r = f();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        tries += 1;
        if e.kind() != io::ErrorKind::Interrupted || tries >= MAX_EINTR {
            return Err(e);
        }
    }
}

fn is_link_local_v6(a: Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80
}

/// What the responder needs to know about one served interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub index: u32,
    /// Administratively up and with carrier (`IFF_UP` and `IFF_RUNNING`):
    /// announcing on a link without carrier only fills a queue.
    pub up: bool,
    /// `IFF_MULTICAST`: without it, joining the group may succeed but
    /// nothing is delivered.
    pub multicast: bool,
    /// At most [`MAX_ADDRS_PER_FAMILY`], in `getifaddrs` order.
    pub v4: Vec<Ipv4Addr>,
    /// Link-local included (it is what mDNS on IPv6 is about); at most
    /// [`MAX_ADDRS_PER_FAMILY`]. Tentative addresses are not: nothing can
    /// be sent from them, and a peer told one could not reach it yet.
    pub v6: Vec<Ipv6Addr>,
}

/// The interfaces named in `names` (first [`MAX_INTERFACES`] distinct
/// names), in that order, from one reading of the interface addresses
/// (`endpoint::local_addrs`, which the driver also takes our own
/// addresses and subnets from). A name with no interface, or with no
/// address to announce (IPv6 addresses still in duplicate address
/// detection do not count), is left out.
pub fn interfaces(names: &[String], local: &LocalAddrs) -> Vec<Interface> {
    let mut out: Vec<Interface> = Vec::new();
    for name in names {
        if out.len() >= MAX_INTERFACES || out.iter().any(|i| &i.name == name) {
            continue;
        }
        let nets = local.nets.iter().filter(|n| *n.ifname == **name);
        let mut iface = match (if_index(name), nets.clone().next()) {
            (Some(index), Some(first)) => Interface {
                name: name.clone(),
                index,
                up: first.up,
                multicast: first.multicast,
                v4: Vec::new(),
                v6: Vec::new(),
            },
            _ => continue,
        };
        for n in nets.filter(|n| !n.tentative) {
            match n.addr {
                IpAddr::V4(a) if iface.v4.len() < MAX_ADDRS_PER_FAMILY => iface.v4.push(a),
                IpAddr::V6(a) if iface.v6.len() < MAX_ADDRS_PER_FAMILY => iface.v6.push(a),
                _ => {}
            }
        }
        if iface.v4.is_empty() && iface.v6.is_empty() {
            continue;
        }
        out.push(iface);
    }
    out
}

/// The index of interface `name`; `None` when there is none (or the name
/// could not be one: empty, too long, with a NUL).
fn if_index(name: &str) -> Option<u32> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return None;
    }
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

#[cfg(test)]
mod tests;

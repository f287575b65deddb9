//! The kernel side of the per-agent addresses: one `NETLINK_ROUTE`
//! socket, requests from [`netlink`](super::netlink) sent and their
//! acknowledgements awaited, dumps read to their end.
//!
//! Blocking, with a receive timeout: every request here is answered by
//! the local kernel at once, so a call costs microseconds on the event
//! loop's thread, and a kernel that never answers costs at most
//! [`ANSWER_TIMEOUT`] and an error instead of a hang. Needs
//! `CAP_NET_ADMIN` for every change (dumps need nothing).

use std::io;
use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use super::netlink::{self, AddrEntry, Answer, NeighEntry};

/// Longest wait for one answer datagram.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Most datagrams one dump may take (each up to a page or two): a
/// bound on a table that keeps growing under us.
const MAX_DUMP_DATAGRAMS: usize = 4096;

/// An open rtnetlink socket.
#[derive(Debug)]
pub struct Rtnl {
    fd: OwnedFd,
    seq: u32,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl Rtnl {
    pub fn open() -> io::Result<Rtnl> {
        // SAFETY: plain socket(2); the descriptor is owned below.
        let fd = check(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        })?;
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: a zeroed sockaddr_nl is valid (pid 0: the kernel picks).
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `sa` is a valid sockaddr_nl of the size passed.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        let tv = libc::timeval {
            tv_sec: ANSWER_TIMEOUT.as_secs() as libc::time_t,
            tv_usec: 0,
        };
        // SAFETY: SO_RCVTIMEO takes a timeval of the size passed.
        check(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        })?;
        Ok(Rtnl { fd, seq: 0 })
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: a pointer and length of a live buffer; unconnected
        // netlink sockets send to the kernel (pid 0) by default.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != msg.len() {
            return Err(io::Error::other("netlink request sent in part"));
        }
        Ok(())
    }

    fn recv(&self, buf: &mut [u8]) -> io::Result<Vec<Answer>> {
        // SAFETY: a pointer and length of a live, writable buffer.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    io::Error::new(io::ErrorKind::TimedOut, "the kernel did not answer")
                }
                _ => e,
            });
        }
        netlink::decode(&buf[..n as usize])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Sends the request `build(seq)` makes and waits for its
    /// acknowledgement; the kernel's refusal as an `io::Error` of its
    /// errno.
    fn request(&mut self, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<()> {
        let seq = self.next_seq();
        self.send(&build(seq))?;
        let mut buf = vec![0u8; 8192];
        for _ in 0..MAX_DUMP_DATAGRAMS {
            for a in self.recv(&mut buf)? {
                if let Answer::Ack { seq: s, errno } = a {
                    if s == seq {
                        return match errno {
                            0 => Ok(()),
                            e => Err(io::Error::from_raw_os_error(-e)),
                        };
                    }
                }
            }
        }
        Err(io::Error::other("no acknowledgement from the kernel"))
    }

    /// Sends the dump request `build(seq)` makes and reads to its end.
    fn dump(&mut self, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<Vec<Answer>> {
        let seq = self.next_seq();
        self.send(&build(seq))?;
        let mut buf = vec![0u8; 32 * 1024];
        let mut out = Vec::new();
        for _ in 0..MAX_DUMP_DATAGRAMS {
            for a in self.recv(&mut buf)? {
                match a {
                    Answer::Done { seq: s } if s == seq => return Ok(out),
                    Answer::Ack { seq: s, errno } if s == seq && errno != 0 => {
                        return Err(io::Error::from_raw_os_error(-errno))
                    }
                    a => out.push(a),
                }
            }
        }
        Err(io::Error::other("the kernel's dump did not end"))
    }

    /// The index of link `name` (set up), created as a dummy link when it
    /// does not exist. A kernel without the dummy driver (OpenWrt's
    /// `kmod-dummy`) refuses that: the error says so.
    pub fn ensure_dummy(&mut self, name: &str) -> io::Result<u32> {
        let index = match index_of(name)? {
            Some(i) => i,
            None => {
                self.request(|seq| netlink::new_dummy(name, seq)).map_err(|e| {
                    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                        io::Error::new(
                            io::ErrorKind::Unsupported,
                            format!("link {name} does not exist and this kernel cannot create a dummy link (no dummy driver: install kmod-dummy, or name an existing link in ipv6.interface)"),
                        )
                    } else {
                        e
                    }
                })?;
                index_of(name)?.ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, format!("link {name} vanished"))
                })?
            }
        };
        self.request(|seq| netlink::link_up(index, seq))?;
        Ok(index)
    }

    pub fn add_addr(&mut self, index: u32, addr: Ipv6Addr) -> io::Result<()> {
        self.request(|seq| netlink::add_addr(index, addr, seq))
    }

    /// Removes `addr`; one that is not there is not an error.
    pub fn del_addr(&mut self, index: u32, addr: Ipv6Addr) -> io::Result<()> {
        match self.request(|seq| netlink::del_addr(index, addr, seq)) {
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Ok(()),
            r => r,
        }
    }

    /// The IPv6 addresses of link `index` (every link with `None`).
    pub fn addrs(&mut self, index: Option<u32>) -> io::Result<Vec<AddrEntry>> {
        Ok(self
            .dump(netlink::dump_addrs)?
            .into_iter()
            .filter_map(|a| match a {
                Answer::Addr(e) if index.is_none_or(|i| i == e.index) => Some(e),
                _ => None,
            })
            .collect())
    }

    /// Adds an `unreachable` route for the prefix; one there already
    /// (ours from an earlier run, or netifd's) is not an error. `true`:
    /// this call added it.
    pub fn ensure_unreachable(&mut self, net: Ipv6Addr, len: u8) -> io::Result<bool> {
        match self.request(|seq| netlink::add_unreachable(net, len, seq)) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(false),
            r => r.map(|()| true),
        }
    }

    /// Removes the `unreachable` route of the prefix; none is not an error.
    pub fn del_unreachable(&mut self, net: Ipv6Addr, len: u8) -> io::Result<()> {
        match self.request(|seq| netlink::del_unreachable(net, len, seq)) {
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
            r => r,
        }
    }

    pub fn add_proxy(&mut self, index: u32, addr: Ipv6Addr) -> io::Result<()> {
        self.request(|seq| netlink::add_proxy(index, addr, seq))
    }

    /// Removes a proxy entry; one that is not there is not an error.
    pub fn del_proxy(&mut self, index: u32, addr: Ipv6Addr) -> io::Result<()> {
        match self.request(|seq| netlink::del_proxy(index, addr, seq)) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    /// The proxy-NDP entries of link `index`.
    pub fn proxies(&mut self, index: u32) -> io::Result<Vec<NeighEntry>> {
        Ok(self
            .dump(netlink::dump_proxies)?
            .into_iter()
            .filter_map(|a| match a {
                Answer::Neigh(n) if n.index == index && n.is_proxy() => Some(n),
                _ => None,
            })
            .collect())
    }
}

/// A link name the kernel could hold (`IFNAMSIZ`, no `/`): also what
/// makes it safe in a `/proc/sys` path.
pub fn valid_ifname(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
        && name != "."
        && name != ".."
}

/// The index of link `name`, `None` when there is none.
pub fn index_of(name: &str) -> io::Result<Option<u32>> {
    if !valid_ifname(name) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a link name"),
        ));
    }
    let c =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated string that lives across the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    Ok((i != 0).then_some(i))
}

/// Turns proxy NDP on for link `name` (`net.ipv6.conf.<name>.proxy_ndp`),
/// written to `/proc/sys` directly.
pub fn enable_proxy_ndp(name: &str) -> io::Result<()> {
    if !valid_ifname(name) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a link name"),
        ));
    }
    std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/proxy_ndp"), "1")
}

/// Whether the kernel forwards IPv6 on link `name` — without it, it
/// answers no neighbour solicitation for a proxy entry (`ndisc_recv_ns`
/// checks the link's `forwarding`).
pub fn forwarding(name: &str) -> io::Result<bool> {
    if !valid_ifname(name) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a link name"),
        ));
    }
    let v = std::fs::read_to_string(format!("/proc/sys/net/ipv6/conf/{name}/forwarding"))?;
    Ok(v.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_names_that_could_leave_proc_sys_are_refused() {
        for ok in ["agent0", "wan", "eth0.2", "br-lan", "wlan0@phy"] {
            assert!(valid_ifname(ok), "{ok}");
        }
        for bad in ["", ".", "..", "../../x", "a/b", "sixteen_chars_xx", "a b"] {
            assert!(!valid_ifname(bad), "{bad}");
            assert!(
                index_of(bad).is_err() && enable_proxy_ndp(bad).is_err(),
                "{bad}"
            );
        }
    }
}

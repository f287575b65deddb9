//! The rtnetlink messages the per-agent addresses need, encoded and
//! decoded by hand (no shelling out to `ip`, no netlink crate): a dummy
//! link, IPv6 addresses on it, proxy-NDP neighbour entries on the
//! upstream link, and the dumps that find what an earlier run left.
//!
//! Pure: requests are built into byte buffers and the kernel's answers
//! decoded from them, every length checked against what is there
//! (`Malformed` rather than a panic: the bytes come from the kernel, but
//! a decoder of untrusted-looking input is fuzzed all the same).
//! Layouts from `linux/netlink.h`, `linux/rtnetlink.h`,
//! `linux/if_addr.h`, `linux/neighbour.h`, `linux/if_link.h`.

use std::fmt;
use std::net::Ipv6Addr;

// nlmsghdr types and flags.
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_MULTI: u16 = 0x2;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_DUMP: u16 = 0x300;
pub const NLM_F_REPLACE: u16 = 0x100;
pub const NLM_F_EXCL: u16 = 0x200;
pub const NLM_F_CREATE: u16 = 0x400;

// rtnetlink message types.
pub const RTM_NEWLINK: u16 = 16;
pub const RTM_NEWADDR: u16 = 20;
pub const RTM_DELADDR: u16 = 21;
pub const RTM_GETADDR: u16 = 22;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;
pub const RTM_NEWNEIGH: u16 = 28;
pub const RTM_DELNEIGH: u16 = 29;
pub const RTM_GETNEIGH: u16 = 30;

const AF_INET6: u8 = 10;
const AF_UNSPEC: u8 = 0;
const IFF_UP: u32 = 0x1;

// Attributes.
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;
const NDA_DST: u16 = 1;

/// `IFA_F_NODAD`: the address is usable at once (it is ours alone: no
/// duplicate address detection on a dummy link), and `IFA_F_NOPREFIXROUTE`:
/// no route for a /128 is needed beyond the local one.
const IFA_F_NODAD: u32 = 0x02;
const IFA_F_NOPREFIXROUTE: u32 = 0x200;
const RT_SCOPE_UNIVERSE: u8 = 0;
const NUD_PERMANENT: u16 = 0x80;
/// `NTF_PROXY`: a proxy-NDP entry (answer solicitations for this address).
pub const NTF_PROXY: u8 = 0x08;

const HDR: usize = 16;
const IFINFOMSG: usize = 16;
const IFADDRMSG: usize = 8;
const NDMSG: usize = 12;
const RTMSG: usize = 12;
const RTA_DST: u16 = 1;
const RT_TABLE_MAIN: u8 = 254;
const RTPROT_STATIC: u8 = 4;
const RTN_UNREACHABLE: u8 = 7;
/// Longest answer message this decoder takes (a dump datagram is at most
/// a page or two; anything longer is not one of ours).
pub const MAX_MESSAGE: usize = 64 * 1024;

/// Why the kernel's bytes could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A length field points outside the buffer, or below its header.
    Malformed(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Malformed(what) => write!(f, "malformed netlink message: {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// One request being built: header, fixed part, attributes.
struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    fn new(kind: u16, flags: u16, seq: u32) -> Msg {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        Msg { buf }
    }

    fn bytes(&mut self, b: &[u8]) -> &mut Msg {
        self.buf.extend_from_slice(b);
        self
    }

    fn attr(&mut self, kind: u16, payload: &[u8]) -> &mut Msg {
        let len = 4 + payload.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.buf.resize(align(self.buf.len()), 0);
        self
    }

    /// An attribute holding attributes (`IFLA_LINKINFO`).
    fn nested(&mut self, kind: u16, inner: &[(u16, &[u8])]) -> &mut Msg {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        for (k, p) in inner {
            self.attr(*k, p);
        }
        let len = (self.buf.len() - start) as u16;
        self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        self
    }

    fn finish(&mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        std::mem::take(&mut self.buf)
    }
}

fn ifinfomsg(index: u32, flags: u32, change: u32) -> [u8; IFINFOMSG] {
    let mut m = [0u8; IFINFOMSG];
    m[0] = AF_UNSPEC;
    m[4..8].copy_from_slice(&(index as i32).to_ne_bytes());
    m[8..12].copy_from_slice(&flags.to_ne_bytes());
    m[12..16].copy_from_slice(&change.to_ne_bytes());
    m
}

fn name_z(name: &str) -> Vec<u8> {
    let mut v = name.as_bytes().to_vec();
    v.push(0);
    v
}

/// Creates the dummy link `name` (fails with `EEXIST` if it is there).
pub fn new_dummy(name: &str, seq: u32) -> Vec<u8> {
    Msg::new(
        RTM_NEWLINK,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        seq,
    )
    .bytes(&ifinfomsg(0, 0, 0))
    .attr(IFLA_IFNAME, &name_z(name))
    .nested(IFLA_LINKINFO, &[(IFLA_INFO_KIND, b"dummy")])
    .finish()
}

/// Sets link `index` up.
pub fn link_up(index: u32, seq: u32) -> Vec<u8> {
    Msg::new(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, seq)
        .bytes(&ifinfomsg(index, IFF_UP, IFF_UP))
        .finish()
}

fn ifaddrmsg(index: u32) -> [u8; IFADDRMSG] {
    let mut m = [0u8; IFADDRMSG];
    m[0] = AF_INET6;
    m[1] = 128;
    m[2] = IFA_F_NODAD as u8;
    m[3] = RT_SCOPE_UNIVERSE;
    m[4..8].copy_from_slice(&index.to_ne_bytes());
    m
}

/// Adds `addr`/128 to link `index` (replacing it if it is there).
pub fn add_addr(index: u32, addr: Ipv6Addr, seq: u32) -> Vec<u8> {
    Msg::new(
        RTM_NEWADDR,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
        seq,
    )
    .bytes(&ifaddrmsg(index))
    .attr(IFA_LOCAL, &addr.octets())
    .attr(IFA_ADDRESS, &addr.octets())
    .attr(
        IFA_FLAGS,
        &(IFA_F_NODAD | IFA_F_NOPREFIXROUTE).to_ne_bytes(),
    )
    .finish()
}

/// Removes `addr`/128 from link `index`.
pub fn del_addr(index: u32, addr: Ipv6Addr, seq: u32) -> Vec<u8> {
    Msg::new(RTM_DELADDR, NLM_F_REQUEST | NLM_F_ACK, seq)
        .bytes(&ifaddrmsg(index))
        .attr(IFA_LOCAL, &addr.octets())
        .attr(IFA_ADDRESS, &addr.octets())
        .finish()
}

/// An `unreachable` route for `net`/`len` in the main table: what of the
/// prefix no agent holds is refused with an ICMPv6 unreachable at once
/// (instead of a caller waiting out its connect timeout, or a forwarding
/// router sending it back upstream). Fails with `EEXIST` where one is
/// there already (netifd adds one for a delegated prefix).
pub fn add_unreachable(net: Ipv6Addr, len: u8, seq: u32) -> Vec<u8> {
    unreachable(
        RTM_NEWROUTE,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        net,
        len,
        seq,
    )
}

/// Removes the `unreachable` route [`add_unreachable`] added.
pub fn del_unreachable(net: Ipv6Addr, len: u8, seq: u32) -> Vec<u8> {
    unreachable(RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK, net, len, seq)
}

fn unreachable(kind: u16, flags: u16, net: Ipv6Addr, len: u8, seq: u32) -> Vec<u8> {
    let mut m = [0u8; RTMSG];
    m[0] = AF_INET6;
    m[1] = len;
    m[4] = RT_TABLE_MAIN;
    m[5] = RTPROT_STATIC;
    m[6] = RT_SCOPE_UNIVERSE;
    m[7] = RTN_UNREACHABLE;
    Msg::new(kind, flags, seq)
        .bytes(&m)
        .attr(RTA_DST, &net.octets())
        .finish()
}

/// Asks for every IPv6 address of every link.
pub fn dump_addrs(seq: u32) -> Vec<u8> {
    let mut m = [0u8; IFADDRMSG];
    m[0] = AF_INET6;
    Msg::new(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, seq)
        .bytes(&m)
        .finish()
}

fn ndmsg(index: u32, state: u16, flags: u8) -> [u8; NDMSG] {
    let mut m = [0u8; NDMSG];
    m[0] = AF_INET6;
    m[4..8].copy_from_slice(&(index as i32).to_ne_bytes());
    m[8..10].copy_from_slice(&state.to_ne_bytes());
    m[10] = flags;
    m
}

/// A proxy-NDP entry for `addr` on link `index` (the upstream): the
/// kernel answers neighbour solicitations for it there.
pub fn add_proxy(index: u32, addr: Ipv6Addr, seq: u32) -> Vec<u8> {
    Msg::new(
        RTM_NEWNEIGH,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
        seq,
    )
    .bytes(&ndmsg(index, NUD_PERMANENT, NTF_PROXY))
    .attr(NDA_DST, &addr.octets())
    .finish()
}

pub fn del_proxy(index: u32, addr: Ipv6Addr, seq: u32) -> Vec<u8> {
    Msg::new(RTM_DELNEIGH, NLM_F_REQUEST | NLM_F_ACK, seq)
        .bytes(&ndmsg(index, 0, NTF_PROXY))
        .attr(NDA_DST, &addr.octets())
        .finish()
}

/// Asks for the IPv6 proxy-NDP entries of every link.
pub fn dump_proxies(seq: u32) -> Vec<u8> {
    Msg::new(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, seq)
        .bytes(&ndmsg(0, 0, NTF_PROXY))
        .finish()
}

/// One message of the kernel's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `NLMSG_ERROR` for request `seq`: 0 is the acknowledgement, else a
    /// negated errno.
    Ack { seq: u32, errno: i32 },
    /// The end of a dump.
    Done { seq: u32 },
    /// An IPv6 address (`RTM_NEWADDR` in a dump).
    Addr(AddrEntry),
    /// A neighbour entry (`RTM_NEWNEIGH` in a dump).
    Neigh(NeighEntry),
    /// Anything else (skipped).
    Other { seq: u32, kind: u16 },
}

/// An address the kernel holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrEntry {
    pub seq: u32,
    pub index: u32,
    pub prefix_len: u8,
    /// `RT_SCOPE_*`: 0 universe (global), 253 link.
    pub scope: u8,
    pub addr: Ipv6Addr,
}

/// A neighbour entry the kernel holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighEntry {
    pub seq: u32,
    pub index: u32,
    pub flags: u8,
    pub addr: Ipv6Addr,
}

impl NeighEntry {
    pub fn is_proxy(&self) -> bool {
        self.flags & NTF_PROXY != 0
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The attributes in `b`: (type, payload), each length checked.
fn attrs(mut b: &[u8]) -> Result<Vec<(u16, &[u8])>, DecodeError> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = usize::from(u16_at(b, 0));
        if len < 4 || len > b.len() {
            return Err(DecodeError::Malformed("attribute length"));
        }
        // The nested and byte-order flags are not ours to keep.
        out.push((u16_at(b, 2) & 0x3fff, &b[4..len]));
        b = &b[align(len).min(b.len())..];
    }
    Ok(out)
}

fn ipv6_of(p: &[u8]) -> Option<Ipv6Addr> {
    <[u8; 16]>::try_from(p).ok().map(Ipv6Addr::from)
}

/// Every message in one datagram from the kernel.
pub fn decode(mut b: &[u8]) -> Result<Vec<Answer>, DecodeError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < HDR {
            return Err(DecodeError::Malformed("header cut short"));
        }
        let len = u32_at(b, 0) as usize;
        if len < HDR || len > b.len() || len > MAX_MESSAGE {
            return Err(DecodeError::Malformed("message length"));
        }
        let (kind, seq) = (u16_at(b, 4), u32_at(b, 8));
        let body = &b[HDR..len];
        out.push(match kind {
            NLMSG_ERROR => {
                if body.len() < 4 {
                    return Err(DecodeError::Malformed("error message cut short"));
                }
                Answer::Ack {
                    seq,
                    errno: u32_at(body, 0) as i32,
                }
            }
            NLMSG_DONE => Answer::Done { seq },
            RTM_NEWADDR => addr_entry(seq, body)?,
            RTM_NEWNEIGH => neigh_entry(seq, body)?,
            kind => Answer::Other { seq, kind },
        });
        b = &b[align(len).min(b.len())..];
    }
    Ok(out)
}

fn addr_entry(seq: u32, body: &[u8]) -> Result<Answer, DecodeError> {
    if body.len() < IFADDRMSG {
        return Err(DecodeError::Malformed("ifaddrmsg cut short"));
    }
    if body[0] != AF_INET6 {
        return Ok(Answer::Other {
            seq,
            kind: RTM_NEWADDR,
        });
    }
    let found = attrs(&body[IFADDRMSG..])?;
    // IFA_ADDRESS is the address itself except on point-to-point links,
    // where IFA_LOCAL is ours.
    let addr = [IFA_LOCAL, IFA_ADDRESS].iter().find_map(|k| {
        found
            .iter()
            .find(|(t, _)| t == k)
            .and_then(|(_, p)| ipv6_of(p))
    });
    Ok(match addr {
        Some(addr) => Answer::Addr(AddrEntry {
            seq,
            index: u32_at(body, 4),
            prefix_len: body[1],
            scope: body[3],
            addr,
        }),
        None => Answer::Other {
            seq,
            kind: RTM_NEWADDR,
        },
    })
}

fn neigh_entry(seq: u32, body: &[u8]) -> Result<Answer, DecodeError> {
    if body.len() < NDMSG {
        return Err(DecodeError::Malformed("ndmsg cut short"));
    }
    if body[0] != AF_INET6 {
        return Ok(Answer::Other {
            seq,
            kind: RTM_NEWNEIGH,
        });
    }
    let found = attrs(&body[NDMSG..])?;
    let addr = found
        .iter()
        .find(|(t, _)| *t == NDA_DST)
        .and_then(|(_, p)| ipv6_of(p));
    Ok(match addr {
        Some(addr) => Answer::Neigh(NeighEntry {
            seq,
            index: u32_at(body, 4),
            flags: body[10],
            addr,
        }),
        None => Answer::Other {
            seq,
            kind: RTM_NEWNEIGH,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn requests_carry_their_length_type_flags_and_attributes() {
        let m = add_addr(7, a("2001:db8::5"), 42);
        assert_eq!(u32_at(&m, 0) as usize, m.len());
        assert_eq!(u16_at(&m, 4), RTM_NEWADDR);
        assert_eq!(
            u16_at(&m, 6),
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
        );
        assert_eq!(u32_at(&m, 8), 42);
        let body = &m[HDR..];
        assert_eq!((body[0], body[1], u32_at(body, 4)), (AF_INET6, 128, 7));
        let at = attrs(&body[IFADDRMSG..]).unwrap();
        assert_eq!(at[0], (IFA_LOCAL, &a("2001:db8::5").octets()[..]));
        assert_eq!(at[1].0, IFA_ADDRESS);
        assert_eq!(
            at[2],
            (
                IFA_FLAGS,
                &(IFA_F_NODAD | IFA_F_NOPREFIXROUTE).to_ne_bytes()[..]
            )
        );

        let d = new_dummy("agent0", 1);
        let at = attrs(&d[HDR + IFINFOMSG..]).unwrap();
        assert_eq!(at[0], (IFLA_IFNAME, &b"agent0\0"[..]));
        assert_eq!(at[1].0, IFLA_LINKINFO);
        assert_eq!(
            attrs(at[1].1).unwrap(),
            vec![(IFLA_INFO_KIND, &b"dummy"[..])]
        );

        let u = add_unreachable(a("2001:db8:55::"), 56, 3);
        assert_eq!(
            (u16_at(&u, 4), u16_at(&u, 6)),
            (
                RTM_NEWROUTE,
                NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
            )
        );
        let body = &u[HDR..];
        assert_eq!((body[0], body[1], body[7]), (AF_INET6, 56, RTN_UNREACHABLE));
        assert_eq!(
            attrs(&body[RTMSG..]).unwrap()[0],
            (RTA_DST, &a("2001:db8:55::").octets()[..])
        );

        let p = add_proxy(3, a("2001:db8::9"), 2);
        let body = &p[HDR..];
        assert_eq!(body[10], NTF_PROXY);
        assert_eq!(u16_at(body, 8), NUD_PERMANENT);
        assert_eq!(
            attrs(&body[NDMSG..]).unwrap()[0],
            (NDA_DST, &a("2001:db8::9").octets()[..])
        );
    }

    /// A kernel-shaped message: header plus body.
    fn msg(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut m = Msg::new(kind, NLM_F_MULTI, seq);
        m.bytes(body);
        m.finish()
    }

    /// One attribute's bytes, as the kernel lays them out.
    fn attr_only(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut m = Msg { buf: Vec::new() };
        m.attr(kind, payload);
        m.buf
    }

    #[test]
    fn the_kernels_answers_decode_and_bad_lengths_are_typed_errors() {
        let mut dump = Vec::new();
        let mut addr_body = ifaddrmsg(4).to_vec();
        addr_body[1] = 64;
        addr_body.extend(attr_only(IFA_ADDRESS, &a("2001:db8:1::1").octets()));
        dump.extend(msg(RTM_NEWADDR, 9, &addr_body));
        let mut neigh_body = ndmsg(2, NUD_PERMANENT, NTF_PROXY).to_vec();
        neigh_body.extend(attr_only(NDA_DST, &a("2001:db8:1::2").octets()));
        dump.extend(msg(RTM_NEWNEIGH, 9, &neigh_body));
        dump.extend(msg(NLMSG_DONE, 9, &0i32.to_ne_bytes()));
        let got = decode(&dump).unwrap();
        assert_eq!(
            got[0],
            Answer::Addr(AddrEntry {
                seq: 9,
                index: 4,
                prefix_len: 64,
                scope: 0,
                addr: a("2001:db8:1::1")
            })
        );
        assert!(matches!(&got[1], Answer::Neigh(n) if n.is_proxy() && n.index == 2));
        assert_eq!(got[2], Answer::Done { seq: 9 });

        let mut err = (-17i32).to_ne_bytes().to_vec();
        err.extend_from_slice(&[0; HDR]);
        assert_eq!(
            decode(&msg(NLMSG_ERROR, 5, &err)).unwrap(),
            vec![Answer::Ack { seq: 5, errno: -17 }]
        );

        let good = msg(RTM_NEWADDR, 1, &addr_body);
        for cut in [3, HDR - 1, HDR + 2, good.len() - 1] {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = good.clone();
        long[0..4].copy_from_slice(&(good.len() as u32 + 8).to_ne_bytes());
        assert!(decode(&long).is_err());
        let mut bad_attr = good.clone();
        let at = HDR + IFADDRMSG;
        bad_attr[at..at + 2].copy_from_slice(&200u16.to_ne_bytes());
        assert_eq!(
            decode(&bad_attr),
            Err(DecodeError::Malformed("attribute length"))
        );
    }
}

use super::*;
use std::time::Duration;

/// Guard against a hang; nothing waits this long when the code works.
const GUARD: Duration = Duration::from_secs(5);

fn lo_index() -> u32 {
    let lo = interfaces(&["lo".to_string()], &crate::endpoint::local_addrs());
    assert_eq!(lo.len(), 1, "no loopback interface");
    lo[0].index
}

/// A UDP port nobody holds right now (on both families when IPv6
/// exists), so other responders on the machine stay out of the test.
fn free_port() -> u16 {
    for _ in 0..32 {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = s.local_addr().unwrap().port();
        drop(s);
        let v6_free = std::net::UdpSocket::bind(("::1", port)).is_ok()
            || std::net::UdpSocket::bind("[::1]:0").is_err();
        if v6_free {
            return port;
        }
    }
    panic!("no free UDP port found");
}

#[test]
fn interfaces_finds_loopback_and_omits_missing() {
    let got = interfaces(
        &["lo".into(), "no-such-if0".into(), "lo".into()],
        &crate::endpoint::local_addrs(),
    );
    assert_eq!(got.len(), 1, "{got:?}");
    let lo = &got[0];
    assert_eq!(lo.name, "lo");
    assert!(lo.index >= 1);
    assert!(lo.v4.contains(&Ipv4Addr::LOCALHOST), "{lo:?}");
    assert!(lo.v4.len() <= MAX_ADDRS_PER_FAMILY);
    assert!(interfaces(&[], &crate::endpoint::local_addrs()).is_empty());
    assert!(interfaces(
        &["".into(), "a-name-far-too-long-for-linux".into()],
        &crate::endpoint::local_addrs()
    )
    .is_empty());
}

#[tokio::test]
async fn recv_reports_loopback_ifindex_and_sender_v4() {
    let port = free_port();
    let m = MdnsSockets::open_on(port).unwrap();
    assert!(m.has_v4(), "{:?}", m.left_out());
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"hello v4", ("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 64];
    let r = tokio::time::timeout(GUARD, m.recv(&mut buf))
        .await
        .expect("no datagram")
        .unwrap();
    assert_eq!(&buf[..r.len], b"hello v4");
    assert_eq!(r.ifindex, lo_index());
    assert_eq!(r.from, tx.local_addr().unwrap());
}

#[tokio::test]
async fn recv_reports_loopback_ifindex_and_sender_v6() {
    let tx = match std::net::UdpSocket::bind("[::1]:0") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped: cannot bind [::1] ({e}): no IPv6 loopback here");
            return;
        }
    };
    let port = free_port();
    let m = MdnsSockets::open_on(port).unwrap();
    assert!(
        m.has_v6(),
        "::1 binds but the mDNS IPv6 socket did not open: {:?}",
        m.left_out()
    );
    tx.send_to(b"hello v6", ("::1", port)).unwrap();
    let mut buf = [0u8; 64];
    let r = tokio::time::timeout(GUARD, m.recv(&mut buf))
        .await
        .expect("no datagram")
        .unwrap();
    assert_eq!(&buf[..r.len], b"hello v6");
    assert_eq!(r.ifindex, lo_index());
    assert_eq!(r.from, tx.local_addr().unwrap());
}

#[tokio::test]
async fn recv_drops_truncated_datagrams_and_goes_on() {
    let port = free_port();
    let m = MdnsSockets::open_on(port).unwrap();
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(&[7u8; 100], ("127.0.0.1", port)).unwrap();
    tx.send_to(b"short", ("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 16];
    let r = tokio::time::timeout(GUARD, m.recv(&mut buf))
        .await
        .expect("no datagram")
        .unwrap();
    assert_eq!(&buf[..r.len], b"short");
}

#[tokio::test]
async fn recv_is_cancel_safe() {
    let port = free_port();
    let m = MdnsSockets::open_on(port).unwrap();
    let mut buf = [0u8; 64];
    // A wait that is cancelled takes nothing off the socket.
    let idle = tokio::time::timeout(Duration::from_millis(1), m.recv(&mut buf)).await;
    assert!(idle.is_err());
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"after", ("127.0.0.1", port)).unwrap();
    let r = tokio::time::timeout(GUARD, m.recv(&mut buf))
        .await
        .expect("no datagram")
        .unwrap();
    assert_eq!(&buf[..r.len], b"after");
}

#[tokio::test]
async fn send_unicast_arrives_v4() {
    let port = free_port();
    let m = MdnsSockets::open_on(port).unwrap();
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(GUARD)).unwrap();
    let to = rx.local_addr().unwrap();
    assert!(m.send_unicast(to, lo_index(), b"answer v4").unwrap());
    let mut buf = [0u8; 64];
    let (n, from) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"answer v4");
    assert_eq!(from.port(), port);
    // With no interface named, routing picks it.
    assert!(m.send_unicast(to, 0, b"again").unwrap());
    let (n, _) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"again");
}

#[tokio::test]
async fn send_unicast_arrives_v6() {
    let rx = match std::net::UdpSocket::bind("[::1]:0") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped: cannot bind [::1] ({e}): no IPv6 loopback here");
            return;
        }
    };
    rx.set_read_timeout(Some(GUARD)).unwrap();
    let port = free_port();
    let m = MdnsSockets::open_on(port).unwrap();
    assert!(m
        .send_unicast(rx.local_addr().unwrap(), lo_index(), b"answer v6")
        .unwrap());
    let mut buf = [0u8; 64];
    let (n, from) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"answer v6");
    assert_eq!(from.port(), port);
}

#[tokio::test]
async fn join_twice_is_fine_and_unknown_interface_is_named() {
    let m = MdnsSockets::open_on(free_port()).unwrap();
    let lo = lo_index();
    m.join(lo).unwrap();
    m.join(lo).unwrap();
    m.leave(lo);
    m.leave(lo);
    let err = m.join(999_999).unwrap_err();
    assert!(err.contains("interface 999999"), "{err}");
    if m.has_v4() {
        assert!(err.contains("IPv4"), "{err}");
    }
    if m.has_v6() {
        assert!(err.contains("IPv6"), "{err}");
    }
}

#[tokio::test]
async fn a_family_that_cannot_bind_is_left_out() {
    let port = free_port();
    // Held without SO_REUSEADDR: our IPv4 bind must fail.
    let _hold = std::net::UdpSocket::bind(("0.0.0.0", port)).unwrap();
    match MdnsSockets::open_on(port) {
        Ok(m) => {
            assert!(!m.has_v4());
            let why = m.left_out().unwrap();
            assert!(why.contains("IPv4") && why.contains("bind"), "{why}");
        }
        Err(e) => assert!(e.contains("IPv4") && e.contains("bind"), "{e}"),
    }
}

#[test]
fn interfaces_take_flags_and_bounded_addresses_from_one_reading() {
    use crate::endpoint::IfNet;
    let net = |i: u32, up: bool| IfNet {
        ifname: "lo".into(),
        addr: IpAddr::V4(Ipv4Addr::from(0x7f00_0001 + i)),
        len: 8,
        loopback: true,
        up,
        multicast: false,
        tentative: false,
    };
    let mut nets: Vec<IfNet> = (0..40).map(|i| net(i, true)).collect();
    nets.push(IfNet {
        addr: IpAddr::V6(Ipv6Addr::LOCALHOST),
        len: 128,
        ..net(0, true)
    });
    let local = LocalAddrs {
        nets,
        ..LocalAddrs::default()
    };
    let got = interfaces(&["lo".into()], &local);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].up && !got[0].multicast);
    assert_eq!(got[0].v4.len(), MAX_ADDRS_PER_FAMILY);
    assert_eq!(got[0].v6, [Ipv6Addr::LOCALHOST]);
    // An interface the reading has no address of is not served.
    assert!(interfaces(&["lo".into()], &LocalAddrs::default()).is_empty());
}

#[test]
fn tentative_ipv6_addresses_are_not_announced_nor_make_a_link() {
    use crate::endpoint::IfNet;
    let v6 = |a: &str, tentative: bool| IfNet {
        ifname: "lo".into(),
        addr: IpAddr::V6(a.parse().unwrap()),
        len: 64,
        loopback: false,
        up: true,
        multicast: true,
        tentative,
    };
    let reading = |nets: Vec<IfNet>| LocalAddrs {
        nets,
        ..LocalAddrs::default()
    };
    // Only a tentative link-local: the link waits for its address.
    let dad = reading(vec![v6("fe80::1", true)]);
    assert!(interfaces(&["lo".into()], &dad).is_empty());
    // Once it is usable the link is served with it; a second address
    // still in detection stays out.
    let done = reading(vec![v6("fe80::1", false), v6("2001:db8::1", true)]);
    let got = interfaces(&["lo".into()], &done);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].v6, ["fe80::1".parse::<Ipv6Addr>().unwrap()]);
}

//! Arbitrary packets heard by a responder that holds its names: queries
//! (mDNS and legacy, probes, known answers, QU bits) and responses
//! (conflicts, the shared name's holders). It never panics, and every
//! packet it sends encodes into a message our decoder reads back as the
//! same, within mDNS's size limit.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use agentd::discovery::mdns::packet::{Name, Packet, MAX_MESSAGE};
use agentd::discovery::mdns::responder::{Config, Responder, Service};
use agentd::time::Millis;
use libfuzzer_sys::fuzz_target;

fn name(text: &str) -> Name {
    Name::dotted(text).expect("a valid name")
}

fn config(v6: bool) -> Config {
    let mut addrs = vec![IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))];
    if v6 {
        addrs.push(IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)));
    }
    Config {
        host: b"router-a".to_vec(),
        services: vec![
            Service {
                kind: name("_arpx._tcp.local"),
                port: 7444,
                txt: b"\x04rv=1".to_vec(),
            },
            Service {
                kind: name("_agentd._tcp.local"),
                port: 7446,
                txt: b"\x03v=1".to_vec(),
            },
        ],
        alias: Some(name("nexus-router.local")),
        own: addrs.clone(),
        addrs,
    }
}

/// Runs the responder's timers up to `until`, checking what it sends.
fn run(r: &mut Responder, mut now: Millis, until: Millis) -> Millis {
    loop {
        while let Some(t) = r.poll_transmit() {
            let bytes = t.packet.encode();
            assert!(bytes.len() <= MAX_MESSAGE, "{} bytes sent", bytes.len());
            let back = Packet::decode(&bytes).expect("our own packet reads back");
            assert_eq!(back, t.packet, "our own packet reads differently");
        }
        while r.poll_event().is_some() {}
        match r.poll_timeout() {
            Some(t) if t <= until => {
                now = t.max(now);
                r.handle_timeout(now);
            }
            _ => return now,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let mut r = Responder::new(u64::from(control));
    r.configure(Millis(0), config(control & 1 != 0));
    let mut now = run(&mut r, Millis(0), Millis(6000));
    // The input: packets, each after a two-byte length, each heard from
    // port 5353 or a legacy port a little later than the one before.
    let mut input = rest;
    let mut i = 0u64;
    while input.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([input[0], input[1]])) % (MAX_MESSAGE + 1);
        let packet = &input[2..(2 + len).min(input.len())];
        input = &input[(2 + len).min(input.len())..];
        let Ok(p) = Packet::decode(packet) else {
            continue;
        };
        i += 1;
        let port = if control & 2 != 0 && i % 2 == 0 { 40_000 } else { 5353 };
        let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)), port);
        now = Millis(now.0 + 300 * i);
        r.receive(now, from, &p);
        now = run(&mut r, now, Millis(now.0 + 2000));
    }
});

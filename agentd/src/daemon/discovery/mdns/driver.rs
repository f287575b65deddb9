//! The mDNS task: sockets in, sans-IO machines in the middle, packets
//! and events out. It owns one responder and one querier per joined
//! interface, wakes for a packet, a command or the machines' next
//! timer, and re-reads the interfaces every few seconds (an address
//! that comes or goes is announced or said goodbye to; netlink would
//! tell sooner, but a router's LAN addresses rarely move and this keeps
//! the task to one kind of source).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::socket::{self, MdnsSockets};
use super::{
    alias_name, AliasState, Announcement, Command, MdnsEvent, Resolved, ALIAS_HOST, ARPX_SERVICE,
    SDK_SERVICE,
};
use crate::daemon::input::Input;
use crate::discovery::mdns::packet::{Name, Packet, MAX_MESSAGE};
use crate::discovery::mdns::querier::{self, Querier};
use crate::discovery::mdns::responder::{self, Config, Responder, Service, Transmit};
use crate::time::Millis;
use crate::{log_debug, log_warn};

/// How often the interfaces' addresses are read again.
const RESCAN: u64 = 5000;
/// How often while one of them is still in duplicate address detection
/// (a second or two after a link comes up): the link is announced on as
/// soon as its address can send, not up to [`RESCAN`] later.
const RESCAN_DAD: u64 = 250;
/// Addresses published per family and interface: a packet of all of
/// them still fits one Ethernet frame.
const MAX_ADDRS: usize = 16;

struct Link {
    name: String,
    index: u32,
    addrs: Vec<IpAddr>,
    /// The link's subnets: a packet from outside them is not from the
    /// link (see [`on_link`]).
    nets: Vec<crate::endpoint::IfNet>,
    responder: Responder,
    querier: Querier,
}

struct Driver {
    wanted: Vec<String>,
    links: Vec<Link>,
    announcement: Option<Announcement>,
    alias_given: bool,
    /// Every address of this machine (see `responder::Config::own`).
    own: Vec<IpAddr>,
    /// Every subnet of this machine, by interface.
    nets: Vec<crate::endpoint::IfNet>,
    /// Instances reported, by full name: per link, what it resolved to.
    /// A list (each link's querier holds at most 64 instances): a map
    /// type of its own costs more code than the search costs time.
    seen: Vec<(String, Vec<(u32, Resolved)>)>,
    events: Vec<MdnsEvent>,
    arpx: Name,
    sdk: Name,
    alias: Name,
    seed: u64,
}

fn name(text: &str) -> Name {
    Name::dotted(text).expect("a constant, valid name")
}

fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    // Only delays depend on it: a failed read still gives a usable,
    // if predictable, seed.
    let _ = getrandom::getrandom(&mut b);
    u64::from_le_bytes(b) ^ Millis::now().0
}

/// The full name as the discovery table reads it: the instance label as
/// text, then the service type with its trailing dot.
fn fullname(instance: &Name) -> String {
    match instance.split_first() {
        Some((label, rest)) => format!("{}.{rest}", String::from_utf8_lossy(label)),
        None => instance.to_string(),
    }
}

/// The task. Ends on `Shutdown` (after the goodbyes), when the handle
/// is dropped, or when the event loop is gone; `done` is dropped then.
pub async fn run(
    sockets: MdnsSockets,
    interfaces: Vec<String>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    inputs: mpsc::Sender<Input>,
    done: oneshot::Sender<()>,
) {
    let mut d = Driver {
        wanted: interfaces,
        links: Vec::new(),
        announcement: None,
        alias_given: false,
        own: Vec::new(),
        nets: Vec::new(),
        seen: Vec::new(),
        events: Vec::new(),
        arpx: name(ARPX_SERVICE),
        sdk: name(SDK_SERVICE),
        alias: name(ALIAS_HOST),
        seed: random_seed(),
    };
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut rescan_at = Millis::ZERO;
    loop {
        let now = Millis::now();
        if now >= rescan_at {
            let waiting = d.rescan(now, &sockets);
            rescan_at = now.saturating_add_ms(if waiting { RESCAN_DAD } else { RESCAN });
        }
        for link in &mut d.links {
            link.responder.handle_timeout(now);
            link.querier.handle_timeout(now);
        }
        d.drain(now, &sockets);
        let events: Vec<MdnsEvent> = d.events.drain(..).collect();
        for ev in events {
            if inputs.send(Input::Discovered(ev)).await.is_err() {
                d.goodbye(&sockets);
                return;
            }
        }
        let next = d.next_timeout().map_or(rescan_at, |t| t.min(rescan_at));
        let wait = Duration::from_millis(next.saturating_sub(Millis::now()));
        tokio::select! {
            cmd = commands.recv() => match cmd {
                None | Some(Command::Shutdown) => break,
                Some(cmd) => d.command(Millis::now(), cmd),
            },
            got = sockets.recv(&mut buf) => match got {
                Ok(r) => {
                    let bytes = &buf[..r.len.min(buf.len())];
                    d.receive(Millis::now(), r.ifindex, r.from, bytes);
                }
                Err(e) => log_debug!("discovery: mDNS receive: {e}"),
            },
            () = tokio::time::sleep(wait) => {}
        }
    }
    d.goodbye(&sockets);
    drop(done);
}

impl Driver {
    fn next_timeout(&self) -> Option<Millis> {
        self.links
            .iter()
            .flat_map(|l| [l.responder.poll_timeout(), l.querier.poll_timeout()])
            .flatten()
            .min()
    }

    fn config(&self, addrs: &[IpAddr]) -> Config {
        let Some(a) = &self.announcement else {
            return Config::default();
        };
        let mut services = Vec::new();
        if let Some((record, port)) = &a.arpx {
            services.push(Service {
                kind: self.arpx.clone(),
                port: *port,
                txt: record.to_rdata(),
            });
        }
        if let Some(port) = a.sdk_port {
            services.push(Service {
                kind: self.sdk.clone(),
                port,
                txt: b"\x03v=1".to_vec(),
            });
        }
        let alias = a.alias && a.sdk_port.is_some() && !self.alias_given;
        Config {
            host: a.router_id.as_bytes().to_vec(),
            services,
            alias: alias.then(|| self.alias.clone()),
            addrs: addrs.to_vec(),
            own: self.own.clone(),
        }
    }

    fn reconfigure(&mut self, now: Millis) {
        for i in 0..self.links.len() {
            let config = self.config(&self.links[i].addrs);
            self.links[i].responder.configure(now, config);
        }
    }

    /// Reads the interfaces again: joins new ones, leaves vanished
    /// ones, and republishes where the addresses changed. Returns whether
    /// an address of a wanted interface that has carrier is still
    /// tentative. (Without carrier an address stays tentative for as long
    /// as the cable is out: that waits for the next plain rescan, not
    /// four reads a second.)
    fn rescan(&mut self, now: Millis, sockets: &MdnsSockets) -> bool {
        let local = crate::endpoint::local_addrs_with_dad();
        let waiting = detecting(&local.nets, &self.wanted);
        let found: Vec<socket::Interface> = socket::interfaces(&self.wanted, &local)
            .into_iter()
            .filter(|i| i.up && i.multicast)
            .collect();
        self.own = local.addrs;
        self.nets = local.nets;
        let (keep, gone): (Vec<Link>, Vec<Link>) = std::mem::take(&mut self.links)
            .into_iter()
            .partition(|l| found.iter().any(|i| i.name == l.name && i.index == l.index));
        self.links = keep;
        for link in gone {
            sockets.leave(link.index);
            log_debug!("discovery: mDNS left {}", link.name);
            let names: Vec<String> = self.seen.iter().map(|(n, _)| n.clone()).collect();
            for fullname in names {
                self.forget(link.index, fullname);
            }
        }
        for iface in found {
            let addrs: Vec<IpAddr> = (iface.v4.iter().take(MAX_ADDRS).map(|a| IpAddr::V4(*a)))
                .chain(iface.v6.iter().take(MAX_ADDRS).map(|a| IpAddr::V6(*a)))
                .collect();
            let nets: Vec<crate::endpoint::IfNet> = self
                .nets
                .iter()
                .filter(|n| *n.ifname == *iface.name)
                .cloned()
                .collect();
            if let Some(l) = self.links.iter_mut().find(|l| l.index == iface.index) {
                l.nets = nets.clone();
            }
            let at = self.links.iter().position(|l| l.index == iface.index);
            let i = match at {
                Some(i) if self.links[i].addrs == addrs => continue,
                Some(i) => i,
                None => {
                    if let Err(e) = sockets.join(iface.index) {
                        log_warn!("discovery: mDNS on {}: {e}", iface.name);
                    }
                    let seed = self.seed ^ u64::from(iface.index).rotate_left(32);
                    self.links.push(Link {
                        name: iface.name.clone(),
                        index: iface.index,
                        addrs: Vec::new(),
                        nets,
                        responder: Responder::new(seed),
                        querier: Querier::new(self.arpx.clone(), now, seed.rotate_left(17)),
                    });
                    self.links.len() - 1
                }
            };
            self.links[i].addrs = addrs;
            let config = self.config(&self.links[i].addrs);
            self.links[i].responder.configure(now, config);
        }
        waiting
    }

    fn command(&mut self, now: Millis, cmd: Command) {
        match cmd {
            Command::Announce(a) => {
                self.announcement = a.map(|a| *a);
                self.reconfigure(now);
            }
            Command::DeferAlias => {
                if !self.alias_given {
                    self.alias_given = true;
                    self.reconfigure(now);
                }
            }
            Command::Verify(router_id) => {
                if let Ok(instance) = self.arpx.prefixed(router_id.as_bytes()) {
                    for link in &mut self.links {
                        link.querier.verify(now, &instance);
                    }
                }
            }
            Command::Shutdown => {}
        }
    }

    fn receive(&mut self, now: Millis, ifindex: u32, from: SocketAddr, bytes: &[u8]) {
        let Some(link) = self.links.iter_mut().find(|l| l.index == ifindex) else {
            return;
        };
        if !on_link(from.ip(), &link.nets) {
            log_debug!(
                "discovery: mDNS packet from {from} on {} ignored: not from the link",
                link.name
            );
            return;
        }
        let packet = match Packet::decode(bytes) {
            Ok(p) => p,
            Err(e) => {
                log_debug!(
                    "discovery: mDNS packet from {from} on {} ignored: {e:?}",
                    link.name
                );
                return;
            }
        };
        link.responder.receive(now, from, &packet);
        link.querier.receive(now, &packet);
    }

    /// Sends what the machines want sent and turns their events into
    /// the daemon's.
    fn drain(&mut self, now: Millis, sockets: &MdnsSockets) {
        let mut alias_lost = false;
        for i in 0..self.links.len() {
            let link = &mut self.links[i];
            while let Some(t) = link.responder.poll_transmit() {
                send(sockets, link.index, &link.addrs, &link.name, t);
            }
            while let Some(packet) = link.querier.poll_transmit() {
                let t = Transmit { to: None, packet };
                send(sockets, link.index, &link.addrs, &link.name, t);
            }
            let index = link.index;
            let mut found = Vec::new();
            while let Some(ev) = link.querier.poll_event() {
                found.push(ev);
            }
            let mut said = Vec::new();
            while let Some(ev) = link.responder.poll_event() {
                said.push(ev);
            }
            let link_name = link.name.clone();
            for ev in found {
                match ev {
                    querier::Event::Resolved(r) => self.resolved(index, r),
                    querier::Event::Removed(instance) => self.forget(index, fullname(&instance)),
                }
            }
            for ev in said {
                alias_lost |= self.responder_event(&link_name, ev);
            }
        }
        if alias_lost && !self.alias_given {
            self.alias_given = true;
            self.reconfigure(now);
            // The goodbyes of the alias records.
            self.drain(now, sockets);
        }
    }

    /// Returns whether the alias was given up.
    fn responder_event(&mut self, link: &str, ev: responder::Event) -> bool {
        use responder::Event as E;
        let state = match ev {
            E::AliasClaiming => AliasState::Claiming,
            E::AliasAnswering => AliasState::Answering,
            E::AliasHeld(holder) => {
                let list: Vec<String> = holder.iter().map(IpAddr::to_string).collect();
                AliasState::Deferred(format!(
                    "{} answers {} (looked up before claiming it)",
                    list.join(", "),
                    alias_name()
                ))
            }
            E::AliasConflict => AliasState::Deferred(format!(
                "another device claimed {} while we probed or held it (RFC 6762 §8.2/§9)",
                alias_name()
            )),
            E::Renamed { from, to } => {
                log_warn!("discovery: another device on {link} answers {from}: we are {to} there now (RFC 6762 §9)");
                return false;
            }
            E::GaveUp(name) => {
                log_warn!("discovery: gave up {name} on {link} after repeated conflicts");
                return false;
            }
        };
        let lost = matches!(state, AliasState::Deferred(_));
        if self.alias_given && lost {
            return false;
        }
        self.events.push(MdnsEvent::Alias(state));
        lost
    }

    fn resolved(&mut self, index: u32, r: querier::Resolved) {
        let full = fullname(&r.instance);
        let entry = Resolved {
            fullname: full.clone(),
            port: r.port,
            addresses: r.addresses,
            txt: r.txt,
        };
        let at = match self.seen.iter().position(|(n, _)| *n == full) {
            Some(at) => at,
            None => {
                self.seen.push((full, Vec::new()));
                self.seen.len() - 1
            }
        };
        let links = &mut self.seen[at].1;
        links.retain(|(i, _)| *i != index);
        links.push((index, entry.clone()));
        // One instance seen on several links: the latest record, every
        // address.
        let mut merged = entry;
        for (_, other) in links.iter() {
            for a in &other.addresses {
                if !merged.addresses.contains(a) {
                    merged.addresses.push(*a);
                }
            }
        }
        self.events.push(MdnsEvent::Resolved(merged));
    }

    fn forget(&mut self, index: u32, fullname: String) {
        let Some(at) = self.seen.iter().position(|(n, _)| *n == fullname) else {
            return;
        };
        let links = &mut self.seen[at].1;
        links.retain(|(i, _)| *i != index);
        if links.is_empty() {
            self.seen.swap_remove(at);
            self.events.push(MdnsEvent::Removed { fullname });
        }
    }

    /// Every link's goodbye, sent now.
    fn goodbye(&mut self, sockets: &MdnsSockets) {
        for link in &mut self.links {
            if let Some(t) = link.responder.goodbye() {
                send(sockets, link.index, &link.addrs, &link.name, t);
            }
        }
    }
}

/// RFC 6762 §11: mDNS is link-local, and a packet whose source is not
/// on the link (a unicast query routed in from elsewhere, a spoofed
/// source to reflect answers at) is not answered or believed. On the
/// link: an IPv6 link-local source, or one inside a subnet of the link.
fn on_link(from: IpAddr, nets: &[crate::endpoint::IfNet]) -> bool {
    let from = match from {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None if v6.segments()[0] & 0xffc0 == 0xfe80 => return true,
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    nets.iter().any(|n| n.holds(from))
}

/// Whether an address of a `wanted` interface that has carrier is still
/// in duplicate address detection (see [`Driver::rescan`]).
fn detecting(nets: &[crate::endpoint::IfNet], wanted: &[String]) -> bool {
    nets.iter()
        .any(|n| n.tentative && n.up && wanted.iter().any(|w| **w == *n.ifname))
}

fn send(sockets: &MdnsSockets, index: u32, addrs: &[IpAddr], link: &str, t: Transmit) {
    let bytes = t.packet.encode();
    if bytes.len() > MAX_MESSAGE {
        log_warn!(
            "discovery: mDNS packet of {} bytes on {link} not sent (over {MAX_MESSAGE})",
            bytes.len()
        );
        return;
    }
    let result = match t.to {
        Some(to) => sockets.send_unicast(to, index, &bytes).map(|_| ()),
        None => {
            // Each family that has an address on the link.
            let mut r = Ok(());
            for v6 in [false, true] {
                if addrs.iter().any(|a| a.is_ipv6() == v6) {
                    if let Err(e) = sockets.send_multicast(v6, index, &bytes) {
                        r = Err(e);
                    }
                }
            }
            r
        }
    };
    if let Err(e) = result {
        log_debug!("discovery: mDNS send on {link}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::IfNet;

    fn net(addr: &str, len: u8) -> IfNet {
        IfNet {
            ifname: "br-lan".into(),
            addr: addr.parse().unwrap(),
            len,
            loopback: false,
            up: true,
            multicast: true,
            tentative: false,
        }
    }

    #[test]
    fn only_a_tentative_address_with_carrier_on_a_wanted_link_is_waited_for() {
        let wanted = ["br-lan".to_string()];
        let tentative = |up: bool, ifname: &str| IfNet {
            ifname: ifname.into(),
            up,
            tentative: true,
            ..net("fe80::1", 64)
        };
        assert!(!detecting(&[net("fe80::1", 64)], &wanted));
        assert!(detecting(
            &[net("192.0.2.1", 24), tentative(true, "br-lan")],
            &wanted
        ));
        // No carrier: tentative for as long as the cable is out.
        assert!(!detecting(&[tentative(false, "br-lan")], &wanted));
        // Not an interface discovery runs on.
        assert!(!detecting(&[tentative(true, "wan")], &wanted));
    }

    #[test]
    fn only_sources_on_the_link_are_heard() {
        let nets = [
            net("192.0.2.1", 24),
            net("2001:db8:1::1", 64),
            net("fe80::1", 64),
        ];
        for ok in [
            "192.0.2.77",
            "2001:db8:1::9",
            "fe80::42",
            "::ffff:192.0.2.5",
        ] {
            assert!(on_link(ok.parse().unwrap(), &nets), "{ok}");
        }
        for off in [
            "198.51.100.7",
            "2001:db8:2::9",
            "::ffff:203.0.113.1",
            "192.0.3.1",
        ] {
            assert!(!on_link(off.parse().unwrap(), &nets), "{off}");
        }
        // A link with no subnet (no IPv4 address yet) hears IPv6
        // link-local sources only.
        assert!(on_link("fe80::42".parse().unwrap(), &[]));
        assert!(!on_link("192.0.2.77".parse().unwrap(), &[]));
    }
}

//! The zone lines that publish a router for unicast DNS-SD (RFC 6763
//! §4–§6, master-file syntax of RFC 1035 §5): what an operator adds to
//! the zone of a domain other routers list in `discovery.search_domain`.
//! They carry exactly what mDNS announces: the PTR of the service to the
//! instance (named after the router_id), its SRV (ARPX port, host
//! `<router_id>.<domain>`), the TXT record of `discovery::record` (same
//! record version, so an approval made from either holds), and the
//! host's addresses.

use std::net::IpAddr;

use super::browse::SERVICE;
use crate::discovery::record::Record;

/// TTL written on every line: short enough that a changed record is seen
/// within minutes (browsers refresh by TTL, within their bounds).
pub const TTL: u32 = 120;

/// What to publish, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish<'a> {
    pub record: &'a Record,
    pub arpx_port: u16,
    /// The zone's domain (no trailing dot).
    pub domain: &'a str,
    pub addresses: &'a [IpAddr],
}

/// The zone lines, names fully qualified, one record each.
pub fn lines(p: &Publish<'_>) -> Vec<String> {
    let rid = &p.record.router_id;
    let service = format!("{SERVICE}.{}.", p.domain);
    let instance = format!("{rid}.{service}");
    let host = format!("{rid}.{}.", p.domain);
    let txt: Vec<String> = p
        .record
        .pairs()
        .into_iter()
        .map(|(k, v)| format!("\"{k}={v}\""))
        .collect();
    let mut out = vec![
        format!("{service} {TTL} IN PTR {instance}"),
        format!("{instance} {TTL} IN SRV 0 0 {} {host}", p.arpx_port),
        format!("{instance} {TTL} IN TXT {}", txt.join(" ")),
    ];
    for a in p.addresses {
        let ty = if a.is_ipv6() { "AAAA" } else { "A" };
        out.push(format!("{host} {TTL} IN {ty} {a}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use router_pki::Fingerprint;

    #[test]
    fn the_lines_carry_what_mdns_announces() {
        let r = Record::ours("router-a", "lab.example", Fingerprint([1; 32]), 7444, 7447);
        let addrs: Vec<IpAddr> = vec!["2001:db8::1".parse().unwrap(), "192.0.2.1".parse().unwrap()];
        let l = lines(&Publish {
            record: &r,
            arpx_port: 7444,
            domain: "lab.example",
            addresses: &addrs,
        });
        assert_eq!(
            l[0],
            "_arpx._tcp.lab.example. 120 IN PTR router-a._arpx._tcp.lab.example."
        );
        assert_eq!(
            l[1],
            "router-a._arpx._tcp.lab.example. 120 IN SRV 0 0 7444 router-a.lab.example."
        );
        let want_txt = format!(
            "router-a._arpx._tcp.lab.example. 120 IN TXT \"v=1\" \"rid=router-a\" \"dom=lab.example\" \"fp={}\" \"rv={}\" \"gw=7447\"",
            Fingerprint([1; 32]),
            r.version
        );
        assert_eq!(l[2], want_txt);
        assert_eq!(l[3], "router-a.lab.example. 120 IN AAAA 2001:db8::1");
        assert_eq!(l[4], "router-a.lab.example. 120 IN A 192.0.2.1");
    }
}

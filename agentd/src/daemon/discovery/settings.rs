//! What discovery runs on, from the typed configuration (`uci-schema`
//! holds every default and range).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use router_pki::Fingerprint;
use uci_schema::Admission;

use crate::discovery::table::Approval;

/// The `discovery` section plus what it announces and what the file
/// says about peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoverySettings {
    pub enabled: bool,
    /// `discovery.interface`: where to announce and browse.
    pub interfaces: Vec<String>,
    pub mode: Admission,
    pub lifetime_ms: u64,
    /// `nexus_alias`: answer `nexus-router.local`.
    pub nexus_alias: bool,
    /// `allow_fingerprint`, parsed.
    pub allow: Vec<Fingerprint>,
    /// `allow_fingerprint` entries that are not fingerprints (logged).
    pub allow_invalid: Vec<String>,
    /// Enabled `peer` sections written by approve: router_id → the
    /// record version and key approved.
    pub approved: BTreeMap<String, Approval>,
    /// Enabled other `peer` sections: router_id → their pin.
    pub configured: BTreeMap<String, Option<Fingerprint>>,
    /// The ports announced: ARPX (SRV of `_arpx._tcp`), the peer data
    /// plane (`gw=`), the SDK API (SRV of `_agentd._tcp`). `None`: that
    /// listener is off.
    pub arpx_port: Option<u16>,
    pub data_port: Option<u16>,
    pub sdk_port: Option<u16>,
    /// `discovery.resolver` with its port (53 unless given); `None`: unset.
    pub resolver: Option<SocketAddr>,
    /// `discovery.search_domain`, lower case, without a trailing dot.
    pub search_domains: Vec<String>,
    pub require_dnssec: bool,
    pub refresh_min_ms: u64,
    pub refresh_max_ms: u64,
    pub query_timeout_ms: u64,
    /// `agentd.allow_loopback_endpoints` (lab): a unicast candidate may
    /// have a loopback address (a zone served for routers on one host).
    pub allow_loopback: bool,
}

/// The resolver option: an address, or an address and port.
fn resolver_of(s: &str) -> Option<SocketAddr> {
    s.parse::<SocketAddr>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)))
}

fn port_of(listen: &str) -> Option<u16> {
    listen
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|a| a.port())
        .filter(|p| *p != 0)
}

impl DiscoverySettings {
    pub fn of_config(c: &uci_schema::Config) -> DiscoverySettings {
        let d = &c.discovery;
        let mut allow = Vec::new();
        let mut allow_invalid = Vec::new();
        for f in &d.allow_fingerprint {
            match f.parse::<Fingerprint>() {
                Ok(fp) => allow.push(fp),
                Err(_) => allow_invalid.push(f.clone()),
            }
        }
        let mut approved = BTreeMap::new();
        let mut configured = BTreeMap::new();
        for p in c.peers.iter().filter(|p| p.enabled) {
            // The schema checked the pin; empty means none.
            let pin = p.key_fingerprint.parse::<Fingerprint>().ok();
            if p.discovered {
                let version = u32::try_from(p.record_version).unwrap_or(0);
                approved.insert(p.router_id.clone(), Approval { version, pin });
            } else {
                configured.insert(p.router_id.clone(), pin);
            }
        }
        DiscoverySettings {
            enabled: d.enabled,
            interfaces: d.interface.clone(),
            mode: d.admission,
            lifetime_ms: d.candidate_lifetime_s.saturating_mul(1000),
            nexus_alias: d.nexus_alias,
            allow,
            allow_invalid,
            approved,
            configured,
            arpx_port: port_of(&c.arpx.listen),
            data_port: port_of(&c.gateway.peer_listen),
            sdk_port: port_of(&c.gateway.sdk_listen),
            resolver: resolver_of(&d.resolver),
            search_domains: d
                .search_domain
                .iter()
                .map(|s| s.trim_end_matches('.').to_ascii_lowercase())
                .filter(|s| !s.is_empty())
                .collect(),
            require_dnssec: d.require_dnssec,
            refresh_min_ms: d.refresh_min_s.saturating_mul(1000),
            refresh_max_ms: d.refresh_max_s.saturating_mul(1000),
            query_timeout_ms: d.query_timeout_ms,
            allow_loopback: c.agentd.allow_loopback_endpoints,
        }
    }
}

impl Default for DiscoverySettings {
    fn default() -> Self {
        DiscoverySettings::of_config(uci_schema::Config::defaults())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_schema_and_split_the_peers() {
        let text = "
config agentd 'main'
\toption router_id 'router-a'
config gateway 'gateway'
\toption peer_listen '0.0.0.0:17447'
config arpx 'arpx'
\toption listen '0.0.0.0:17444'
config discovery 'discovery'
\tlist interface 'veth0'
\tlist allow_fingerprint 'sha256:0000000000000000000000000000000000000000000000000000000000000000'
config peer 'b'
\toption router_id 'router-b'
\toption address '192.0.2.2'
\toption discovered '1'
\toption record_version '77'
\toption key_fingerprint 'sha256:0707070707070707070707070707070707070707070707070707070707070707'
config peer 'c'
\toption router_id 'router-c'
\toption address '192.0.2.3'
";
        let c = uci_schema::Config::from_str(text, "t").unwrap();
        let s = DiscoverySettings::of_config(&c);
        assert!(s.enabled, "schema default");
        assert_eq!(s.mode, Admission::Manual, "schema default");
        assert_eq!(s.lifetime_ms, 5000, "schema default");
        assert!(s.nexus_alias, "schema default");
        assert_eq!(s.interfaces, vec!["veth0".to_string()]);
        assert_eq!(s.allow, vec![Fingerprint([0; 32])]);
        assert!(
            s.allow_invalid.is_empty(),
            "the schema refuses malformed ones"
        );
        assert_eq!(
            s.approved.get("router-b"),
            Some(&Approval {
                version: 77,
                pin: Some(Fingerprint([7; 32]))
            })
        );
        assert_eq!(s.configured.get("router-c"), Some(&None));
        assert_eq!((s.arpx_port, s.data_port), (Some(17444), Some(17447)));
        assert_eq!(s.sdk_port, Some(7446), "schema default");
        assert_eq!(
            (s.resolver, s.search_domains.len()),
            (None, 0),
            "schema default: off"
        );
    }

    #[test]
    fn unicast_settings_take_a_resolver_port_and_several_domains() {
        let text = "
config discovery 'discovery'
\toption resolver '192.0.2.53'
\tlist search_domain 'Lab.Example.'
\tlist search_domain 'other.example'
\toption require_dnssec '1'
";
        let c = uci_schema::Config::from_str(text, "t").unwrap();
        let s = DiscoverySettings::of_config(&c);
        assert_eq!(s.resolver, Some("192.0.2.53:53".parse().unwrap()));
        assert_eq!(s.search_domains, vec!["lab.example", "other.example"]);
        assert!(s.require_dnssec);
        assert_eq!(
            (s.refresh_min_ms, s.refresh_max_ms, s.query_timeout_ms),
            (5_000, 900_000, 2_000)
        );
        let c = uci_schema::Config::from_str(
            "config discovery 'discovery'\n\toption resolver '[2001:db8::53]:5353'\n\toption search_domain 'lab.example'\n",
            "t",
        )
        .unwrap();
        let s = DiscoverySettings::of_config(&c);
        assert_eq!(s.resolver, Some("[2001:db8::53]:5353".parse().unwrap()));
        assert_eq!(
            s.search_domains,
            vec!["lab.example"],
            "an option is a list of one"
        );
    }
}

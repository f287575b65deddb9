//! `agentctl discovery records [ZONE] [--address IP]...`: the zone lines
//! an operator adds so that routers of other domains find this one by
//! unicast DNS-SD (docs/discovery.md). Derived from the configuration
//! and the identity key exactly as the mDNS announcement is (same
//! record, same record version), from files only: no daemon needed.
//!
//! Addresses: `--address` if given; else the ARPX listen address when it
//! is a specific one; else the routable addresses of the
//! `discovery.interface` interfaces (what mDNS announces).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use router_pki::identity;
use router_pki::Fingerprint;
use serde_json::json;

use super::command::exit;
use super::run::{Failure, Output};
use crate::config;
use crate::daemon::discovery::settings::DiscoverySettings;
use crate::discovery::record::Record;
use crate::discovery::unicast::zone::{self, Publish};

fn refuse(message: String) -> Failure {
    Failure {
        code: exit::DAEMON_ERROR,
        kind: "cannot_publish",
        message,
    }
}

/// Addresses worth publishing: not loopback, link-local, unspecified or
/// multicast.
fn routable(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => {
            !v.is_loopback() && !v.is_unspecified() && !v.is_multicast() && !v.is_link_local()
        }
        IpAddr::V6(v) => {
            !v.is_loopback()
                && !v.is_unspecified()
                && !v.is_multicast()
                && (v.segments()[0] & 0xffc0) != 0xfe80
        }
    }
}

fn addresses(cfg: &uci_schema::Config, given: &[IpAddr]) -> Vec<IpAddr> {
    if !given.is_empty() {
        return given.to_vec();
    }
    if let Ok(a) = cfg.arpx.listen.parse::<SocketAddr>() {
        if !a.ip().is_unspecified() {
            return vec![a.ip()];
        }
    }
    let ifs = &cfg.discovery.interface;
    let mut out: Vec<IpAddr> = crate::endpoint::local_addrs()
        .nets
        .into_iter()
        .filter(|n| ifs.iter().any(|i| **i == *n.ifname))
        .map(|n| n.addr)
        .filter(routable)
        .collect();
    out.sort();
    out.dedup();
    out
}

pub fn records(
    config: Option<&Path>,
    zone_name: Option<&str>,
    given: &[IpAddr],
) -> Result<(Output, u8), Failure> {
    let file = config
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(crate::daemon::options::DEFAULT_CONFIG));
    let partial = uci_schema::Config::load_partial(&file);
    let cfg = &partial.config;
    let router_id = config::load_file_partial(&file)
        .map(|(rt, _)| rt.router_id)
        .unwrap_or_else(|_| config::Runtime::default().router_id);
    let router_id = router_id.to_string();
    let key_path = Path::new(&cfg.agentd.identity);
    let key = identity::load_key(key_path).map_err(|e| {
        refuse(format!(
            "identity key {}: {e} (agentd creates it at its first start)",
            key_path.display()
        ))
    })?;
    let fp = Fingerprint::of(&key.verifying_key());
    let s = DiscoverySettings::of_config(cfg);
    let arpx_port = s
        .arpx_port
        .ok_or_else(|| refuse("arpx.listen is off: nothing to publish".into()))?;
    let data_port = s
        .data_port
        .ok_or_else(|| refuse("gateway.peer_listen is off: nothing to publish".into()))?;
    let domain = cfg.agentd.domain.as_str();
    let zone_name = zone_name
        .map(|z| z.trim_end_matches('.').to_ascii_lowercase())
        .or_else(|| (!domain.is_empty()).then(|| domain.to_string()))
        .ok_or_else(|| {
            refuse(
                "agentd.domain is not set: name the zone (agentctl discovery records ZONE)".into(),
            )
        })?;
    let record = Record::ours(&router_id, domain, fp, arpx_port, data_port);
    let addrs = addresses(cfg, given);
    let lines = zone::lines(&Publish {
        record: &record,
        arpx_port,
        domain: &zone_name,
        addresses: &addrs,
    });
    let mut text = format!(
        "; {router_id}: unicast DNS-SD records for zone {zone_name} (record version {})\n",
        record.version
    );
    for l in &lines {
        text.push_str(l);
        text.push('\n');
    }
    if addrs.is_empty() {
        text.push_str(&format!(
            "; no routable address on {}: add AAAA/A lines for {router_id}.{zone_name}. (or use --address)\n",
            if cfg.discovery.interface.is_empty() {
                "any discovery.interface".to_string()
            } else {
                cfg.discovery.interface.join(", ")
            }
        ));
    }
    let json = json!({
        "router_id": router_id,
        "zone": zone_name,
        "version": record.version,
        "fingerprint": fp.to_string(),
        "port": arpx_port,
        "data_port": data_port,
        "addresses": addrs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "records": lines,
    });
    Ok((Output { text, json }, exit::OK))
}

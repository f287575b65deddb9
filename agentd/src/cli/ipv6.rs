//! The per-agent address service in `agentctl status` (and ubus): JSON
//! and the status table's rows.

use serde_json::{json, Value};

use crate::ipc::message::Ipv6View;

pub fn ipv6_json(v: &Ipv6View) -> Value {
    json!({
        "mode": &*v.mode,
        "prefix": v.prefix.as_deref(),
        "configured_prefix": &*v.configured_prefix,
        "interface": &*v.interface,
        "upstream_interface": &*v.upstream_interface,
        "bound": v.bound,
        "max_addresses": v.max_addresses,
        "ready": v.ready,
        "problems": v.problems.iter().map(|p| &**p).collect::<Vec<_>>(),
        "warnings": v.warnings.iter().map(|w| &**w).collect::<Vec<_>>(),
        "stale_removed": v.stale_removed,
    })
}

/// `ipv6` and one row per problem and warning.
pub fn ipv6_rows(v: &Ipv6View) -> Vec<(String, String)> {
    let prefix = v.prefix.as_deref().unwrap_or("none");
    let mut rows = vec![(
        "ipv6".to_string(),
        format!(
            "{}: {} on {}, {} of {} bound{}",
            v.mode,
            if v.configured_prefix.as_ref() == "auto" {
                format!("{prefix} (auto)")
            } else {
                prefix.to_string()
            },
            v.interface,
            v.bound,
            v.max_addresses,
            if v.ready { "" } else { ", NOT READY" }
        ),
    )];
    rows.extend(
        v.problems
            .iter()
            .map(|p| ("  ipv6 problem".to_string(), p.to_string())),
    );
    rows.extend(
        v.warnings
            .iter()
            .map(|w| ("  ipv6 warning".to_string(), w.to_string())),
    );
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_that_cannot_bind_says_why_in_both_forms() {
        let v = Ipv6View {
            mode: "ndp-proxy".into(),
            prefix: Some("2001:db8:7:1::/64".into()),
            configured_prefix: "auto".into(),
            interface: "agent0".into(),
            upstream_interface: "wan".into(),
            bound: 0,
            max_addresses: 256,
            ready: false,
            problems: vec!["agentd holds no CAP_NET_ADMIN".into()],
            warnings: vec!["odhcpd relays NDP on wan".into()],
            stale_removed: 2,
        };
        let j = ipv6_json(&v);
        assert_eq!(j["ready"], false);
        assert_eq!(j["problems"][0], "agentd holds no CAP_NET_ADMIN");
        assert_eq!(j["prefix"], "2001:db8:7:1::/64");
        let rows = ipv6_rows(&v);
        assert_eq!(
            rows[0].1,
            "ndp-proxy: 2001:db8:7:1::/64 (auto) on agent0, 0 of 256 bound, NOT READY"
        );
        assert_eq!(
            rows[1],
            (
                "  ipv6 problem".into(),
                "agentd holds no CAP_NET_ADMIN".into()
            )
        );
        assert_eq!(rows[2].0, "  ipv6 warning");
    }
}

//! The `/etc/config/agentd` the OpenWrt feed ships
//! (`openwrt-feed/agentd/files/agentd.config`), generated from the schema
//! so the package's defaults are the schema's and nothing else. A test
//! (`tests/feed_config.rs`) keeps the committed file equal to
//! [`default_config`]; regenerate with
//! `UPDATE_FEED=1 cargo test -p uci-schema --test feed_config`.
//!
//! Every value written is the schema default: the file changes nothing a
//! fresh install would not do without it, it only shows the options an
//! operator looks for first — above all the secure defaults (caller
//! authentication on every listener, manual admission of discovered
//! routers, relay, IPv6 binding and the cloud connector off).

use crate::schema::{section_spec, DefaultValue};

/// The options spelled out, per singleton section, in this order.
const SHOWN: &[(&str, &[&str])] = &[
    (
        "agentd",
        &[
            "enabled",
            "router_id",
            "domain",
            "identity",
            "domain_ca",
            "router_cert",
            "ipc_socket",
            "state_dir",
            "default_lease",
            "min_lease",
            "max_lease",
            "max_routes",
            "default_action",
            "log_level",
            "allow_loopback_endpoints",
        ],
    ),
    (
        "gateway",
        &[
            "sdk_listen",
            "public_listen",
            "peer_listen",
            "admin_listen",
            "auth",
            "bootstrap",
            "max_request_bytes",
            "rate_per_second",
            "rate_burst",
            "max_inflight",
            "task_capacity",
            "task_ttl",
            "hop_limit",
        ],
    ),
    ("arpx", &["listen", "reflector"]),
    ("discovery", &["enabled", "interface", "admission"]),
    ("ipv6", &["mode"]),
    ("relay", &["mode"]),
    ("cloud", &["enabled"]),
];

fn quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// The text of the shipped default configuration.
pub fn default_config() -> String {
    let mut out = String::from(
        "# /etc/config/agentd — the agentd suite's configuration (DESIGN §9, §13).\n\
         # Shipped by the agentd package; generated from uci-schema, so every\n\
         # value below is the built-in default. Every option, its range and\n\
         # meaning: docs/config.md. Check a change: agentd --check-config FILE.\n\
         # Apply it: /etc/init.d/agentd reload, or reload_config after uci\n\
         # commit agentd (uci commit alone reloads nothing); LuCI's Save & Apply\n\
         # does both. An option set to '' is the same as an absent one (its\n\
         # default); a listener is turned off with 'off'.\n",
    );
    for (ty, options) in SHOWN {
        let spec = section_spec(ty).expect("SHOWN names schema sections");
        out.push_str(&format!("\n# {}\n", spec.doc));
        out.push_str(&format!("config {ty} {}\n", quote(spec.canonical_name)));
        for name in *options {
            let opt = spec.option(name).expect("SHOWN names schema options");
            let doc = match opt.empty {
                Some(means) if opt.needs_off() => format!("{} 'off': {means}.", opt.doc),
                Some(means) => format!("{} Empty: {means}.", opt.doc),
                None => opt.doc.to_string(),
            };
            out.push_str(&format!("\t# {doc}\n"));
            match opt.default {
                DefaultValue::Text(v) => {
                    out.push_str(&format!("\toption {name} {}\n", quote(v)));
                }
                DefaultValue::Items(items) => {
                    for v in items {
                        out.push_str(&format!("\tlist {name} {}\n", quote(v)));
                    }
                }
                DefaultValue::Required | DefaultValue::SectionName => {
                    unreachable!("{ty}.{name}: singleton options have defaults")
                }
            }
        }
    }
    out
}

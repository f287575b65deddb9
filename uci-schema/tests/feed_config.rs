//! The `/etc/config/agentd` the OpenWrt feed ships is generated from the
//! schema, is valid, changes no default, keeps the secure defaults, and it
//! and a corpus of generated configs round-trip through uci-schema
//! unchanged. Regenerate the file with
//! `UPDATE_FEED=1 cargo test -p uci-schema --test feed_config`.

use std::path::PathBuf;

use uci_schema::schema::{DefaultValue, Kind, SECTIONS};
use uci_schema::uci::Package;
use uci_schema::{Admission, Auth, Config, Ipv6Mode, RelayMode};

fn shipped_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../openwrt-feed/agentd/files/agentd.config")
}

fn shipped() -> String {
    std::fs::read_to_string(shipped_path()).expect("openwrt-feed/agentd/files/agentd.config")
}

#[test]
fn committed_feed_config_is_what_the_schema_generates() {
    let generated = uci_schema::feed::default_config();
    if std::env::var_os("UPDATE_FEED").is_some() {
        std::fs::write(shipped_path(), &generated).expect("write agentd.config");
    }
    assert!(
        shipped() == generated,
        "openwrt-feed/agentd/files/agentd.config is stale; run \
         UPDATE_FEED=1 cargo test -p uci-schema --test feed_config"
    );
}

#[test]
fn shipped_config_is_valid_and_changes_no_default() {
    let partial = Config::from_str_partial(&shipped(), "agentd.config");
    assert!(
        partial.problems.is_empty(),
        "problems: {:?}",
        partial.problems
    );
    let c = Config::from_str(&shipped(), "agentd.config").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&c, Config::defaults());
}

#[test]
fn shipped_config_keeps_the_secure_defaults() {
    let c = Config::from_str(&shipped(), "agentd.config").unwrap();
    // Callers authenticate on every listener the gateway opens, loopback
    // or not (auth is gateway-wide), and the SDK listener is not loopback.
    assert_eq!(c.gateway.auth, Auth::Jwt);
    assert!(!c.gateway.sdk_listen.starts_with("127."));
    assert_eq!(c.discovery.admission, Admission::Manual);
    assert_eq!(c.relay.mode, RelayMode::Off);
    assert_eq!(c.ipv6.mode, Ipv6Mode::Off);
    assert!(!c.cloud.enabled);
    assert!(!c.agentd.allow_loopback_endpoints);
    // Every line is spelled out in the file, so an operator sees them.
    for needle in [
        "option auth 'jwt'",
        "option admission 'manual'",
        "config relay 'relay'\n",
        "option enabled '0'",
    ] {
        assert!(shipped().contains(needle), "{needle:?} not in the file");
    }
}

/// parse → write → parse gives the same package, and the typed config
/// survives `to_uci` (which itself reads its output back).
fn assert_round_trips(text: &str, what: &str) {
    let pkg = Package::parse(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    let written = pkg.write().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(Package::parse(&written).unwrap(), pkg, "{what}: package");
    assert_eq!(
        pkg.write().unwrap(),
        written,
        "{what}: writing is deterministic"
    );
    let c = Config::from_str(text, what).unwrap_or_else(|e| panic!("{what}: {e}"));
    let again = c.to_uci().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(Config::from_str(&again, what).unwrap(), c, "{what}: config");
    assert_eq!(
        Config::from_package(&c.to_package(), what).unwrap(),
        c,
        "{what}: to_package"
    );
}

#[test]
fn shipped_demo_and_design_configs_round_trip() {
    assert_round_trips(&shipped(), "agentd.config");
    assert_round_trips(uci_schema::demo::DEMO_CONFIG, "demo");
    let design = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/design-example.conf"),
    )
    .unwrap();
    if Config::from_str(&design, "design").is_ok() {
        assert_round_trips(&design, "design");
    }
}

/// Values of a kind that are not its default: range ends, every enum
/// spelling, both booleans.
fn variants(kind: Kind, default: &str) -> Vec<String> {
    let all = match kind {
        Kind::Bool => vec!["0".to_string(), "1".to_string()],
        Kind::UInt { min, max } => vec![
            min.to_string(),
            max.to_string(),
            min.saturating_add(1).min(max).to_string(),
        ],
        Kind::Enum(names) => names.iter().map(|n| n.to_string()).collect(),
        _ => Vec::new(),
    };
    all.into_iter().filter(|v| v != default).collect()
}

/// One option of a singleton section changed from the shipped file: a
/// config per (option, value). Those the schema's cross-option checks
/// refuse (min_lease above default_lease, ...) are skipped; the rest must
/// round-trip and differ from the defaults in exactly that option.
#[test]
fn generated_configs_round_trip_unchanged() {
    let base = shipped();
    let mut checked = 0;
    for spec in SECTIONS.iter().filter(|s| !s.many) {
        for opt in spec.options.iter().filter(|o| !o.list) {
            let DefaultValue::Text(default) = opt.default else {
                continue;
            };
            for v in variants(opt.kind, default) {
                // Into the shipped section (a second section of a
                // singleton type would be refused).
                let mut pkg = Package::parse(&base).unwrap();
                let section = pkg
                    .sections
                    .iter_mut()
                    .find(|s| s.ty == spec.ty)
                    .expect("shipped file has every singleton section");
                section.set(opt.name, &v);
                let what = format!("{}.{}={v}", spec.ty, opt.name);
                let text = pkg.write().unwrap_or_else(|e| panic!("{what}: {e}"));
                let Ok(c) = Config::from_str(&text, &what) else {
                    continue;
                };
                assert_ne!(&c, Config::defaults(), "{what} changed nothing");
                assert_round_trips(&text, &what);
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 140,
        "only {checked} generated configs were valid"
    );
}

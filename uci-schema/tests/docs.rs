//! The committed reference page is exactly what the schema generates.
//! Regenerate with: `UPDATE_DOCS=1 cargo test -p uci-schema --test docs`
//! (which also regenerates the LuCI app's option table, support/luci.rs).

use std::path::PathBuf;

#[path = "support/luci.rs"]
mod luci;

#[test]
fn committed_config_doc_matches_the_schema() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/config.md");
    let generated = uci_schema::defaults_doc();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &generated).expect("write docs/config.md");
    }
    let committed = std::fs::read_to_string(&path).expect("docs/config.md exists");
    assert!(
        committed == generated,
        "docs/config.md is stale; run UPDATE_DOCS=1 cargo test -p uci-schema --test docs"
    );
}

/// Every default `docs/sdk-api.md` states for a UCI option, written as
/// "`section.option` (default V)" or "`section.option`, default V", is the
/// schema's default.
#[test]
fn defaults_stated_in_the_sdk_api_doc_are_the_schemas() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/sdk-api.md");
    let doc = std::fs::read_to_string(&path).expect("docs/sdk-api.md exists");
    // Line breaks inside a sentence do not matter.
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut checked = Vec::new();
    for (i, _) in doc.match_indices('`') {
        let rest = &doc[i + 1..];
        let Some(end) = rest.find('`') else { break };
        let Some((ty, name)) = rest[..end].split_once('.') else {
            continue;
        };
        let Some(option) = uci_schema::schema::section_spec(ty).and_then(|s| s.option(name)) else {
            continue;
        };
        let after = &rest[end + 1..];
        let stated = ["` (default ", "`, default "]
            .iter()
            .find_map(|p| after.strip_prefix(&p[1..]))
            .map(|v| v.split([')', ';', ',', ' ']).next().unwrap_or(""));
        let Some(stated) = stated else { continue };
        let uci_schema::schema::DefaultValue::Text(default) = option.default else {
            panic!("{ty}.{name} has no single default, yet the doc states {stated}");
        };
        assert_eq!(
            stated, default,
            "docs/sdk-api.md says {ty}.{name} defaults to {stated}, the schema says {default}"
        );
        checked.push(format!("{ty}.{name}"));
    }
    for must in [
        "gateway.clock_skew",
        "gateway.max_token_lifetime",
        "gateway.bootstrap_ttl",
        "gateway.max_request_bytes",
        "gateway.max_result_bytes",
        "agentd.default_lease",
    ] {
        assert!(
            checked.iter().any(|c| c == must),
            "docs/sdk-api.md states no default for {must} (checked {checked:?})"
        );
    }
}

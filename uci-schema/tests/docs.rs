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

/// The defaults a document states for UCI options, written as
/// "`section.option` (default V)" or "`section.option`, default V", as
/// (option, stated value, the schema's default). A byte size may carry a
/// unit ("16 MiB"), which is multiplied out.
fn stated_defaults(file: &str) -> Vec<(String, String, String)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(file);
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    // Line breaks inside a sentence do not matter.
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
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
        let Some(value) = ["` (default ", "`, default "]
            .iter()
            .find_map(|p| after.strip_prefix(&p[1..]))
        else {
            continue;
        };
        let mut words = value.split([')', ';', ',', ' ']);
        // Spelled as code or as a rate: `jwt`, 20/s.
        let mut stated = words
            .next()
            .unwrap_or("")
            .replace('`', "")
            .trim_end_matches([':', '.'])
            .trim_end_matches("/s")
            .to_string();
        let unit = match words.next() {
            Some("KiB") => Some(1u64 << 10),
            Some("MiB") => Some(1 << 20),
            Some("GiB") => Some(1 << 30),
            _ => None,
        };
        if let (Some(unit), Ok(n)) = (unit, stated.parse::<u64>()) {
            stated = (n * unit).to_string();
        }
        let default = match option.default {
            uci_schema::schema::DefaultValue::Text(d) => d.to_string(),
            // A list's default is stated as its items, in backticks.
            uci_schema::schema::DefaultValue::Items(items) => items.join(" "),
            _ => panic!("{file}: {ty}.{name} has no default, yet the doc states {stated}"),
        };
        out.push((format!("{ty}.{name}"), stated, default));
    }
    out
}

/// Every default the README and the docs state for a UCI option is the
/// schema's.
#[test]
fn defaults_stated_in_the_docs_are_the_schemas() {
    let mut files = vec!["README.md".to_string()];
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
    for entry in std::fs::read_dir(&docs).expect("docs/") {
        let name = entry.expect("docs entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".md") && name != "config.md" {
            files.push(format!("docs/{name}"));
        }
    }
    let mut wrong = Vec::new();
    for file in &files {
        for (option, stated, default) in stated_defaults(file) {
            if stated != default {
                wrong.push(format!(
                    "{file} says {option} defaults to {stated}, the schema says {default}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The SDK API doc states the defaults a client author needs.
#[test]
fn the_sdk_api_doc_states_the_limits_a_client_meets() {
    let checked: Vec<String> = stated_defaults("docs/sdk-api.md")
        .into_iter()
        .map(|(option, _, _)| option)
        .collect();
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

//! The committed reference page is exactly what the schema generates.
//! Regenerate with: `UPDATE_DOCS=1 cargo test -p uci-schema --test docs`.

use std::path::PathBuf;

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

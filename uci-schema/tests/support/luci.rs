//! The LuCI app's option table is generated from the schema, so the
//! Settings, Policy and Mappings pages validate exactly what
//! `agentd --check-config` accepts (one source of truth):
//!
//! - `luci-app/htdocs/luci-static/resources/agentd/schema.js`
//!   (shipped): every section and option with kind, range, enum values,
//!   default, what an empty value means, and its doc line;
//! - `tests/luci-harness/validation-samples.json` (tests only): a corpus of
//!   probe values and, for every distinct kind, which of them
//!   [`check_value`] accepts. The Chromium test runs the app's JavaScript
//!   validator over the corpus and requires the same verdicts.
//!
//! Regenerate both with: `UPDATE_DOCS=1 cargo test -p uci-schema --test docs`
//! (the same switch that regenerates docs/config.md).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Value};
use uci_schema::schema::{check_value, DefaultValue, Kind, OptionSpec, SectionSpec, SECTIONS};

const SCHEMA_JS: &str = "../luci-app/htdocs/luci-static/resources/agentd/schema.js";
const SAMPLES: &str = "../tests/luci-harness/validation-samples.json";

/// The kind as the JavaScript validator names it, and its parameters. An
/// exhaustive match: a new kind does not compile until the app knows it.
fn kind_json(kind: Kind) -> Value {
    let name = match kind {
        Kind::Bool => "bool",
        Kind::UInt { min, max } => {
            return json!({ "kind": "uint", "min": min.to_string(), "max": max.to_string() })
        }
        Kind::Enum(names) => return json!({ "kind": "enum", "values": names }),
        Kind::Text => "text",
        Kind::Token => "token",
        Kind::Fingerprint => "fingerprint",
        Kind::Path => "path",
        Kind::SocketAddr => "socketaddr",
        Kind::HostPort => "hostport",
        Kind::Host => "host",
        Kind::Resolver => "resolver",
        Kind::DnsLabel => "dnslabel",
        Kind::DomainName => "domainname",
        Kind::Ifname => "ifname",
        Kind::AgentPrefix => "agentprefix",
        Kind::IpNet => "ipnet",
        Kind::Name => "name",
        Kind::RouteId => "routeid",
        Kind::Pattern => "pattern",
        Kind::AgentUri => "agenturi",
        Kind::Url => "url",
        Kind::JwtKey => "jwtkey",
        Kind::JsonObject => "jsonobject",
    };
    json!({ "kind": name })
}

/// A stable key of one distinct kind (`uint:1:300`, `enum:a|b`, `path`).
fn kind_key(kind: Kind) -> String {
    match kind {
        Kind::UInt { min, max } => format!("uint:{min}:{max}"),
        Kind::Enum(names) => format!("enum:{}", names.join("|")),
        other => kind_json(other)["kind"].as_str().unwrap_or("").to_string(),
    }
}

fn option_json(s: &SectionSpec, o: &OptionSpec) -> Value {
    let mut v = kind_json(o.kind);
    let m = v.as_object_mut().expect("kind_json gives an object");
    m.insert("label".into(), json!(s.label(o.name)));
    m.insert("list".into(), json!(o.list));
    match o.default {
        DefaultValue::Required => {
            m.insert("required".into(), json!(true));
        }
        DefaultValue::Text(t) => {
            m.insert("default".into(), json!(t));
        }
        DefaultValue::Items(items) => {
            m.insert("default".into(), json!(items));
        }
        DefaultValue::SectionName => {
            m.insert("section_name".into(), json!(true));
        }
    }
    if let Some(means) = o.empty {
        m.insert("empty".into(), json!(means));
    }
    m.insert("doc".into(), json!(o.doc));
    v
}

fn schema_js() -> String {
    let mut sections = serde_json::Map::new();
    for s in SECTIONS {
        let mut options = serde_json::Map::new();
        for o in s.options {
            options.insert(o.name.into(), option_json(s, o));
        }
        let order: Vec<&str> = s.options.iter().map(|o| o.name).collect();
        sections.insert(
            s.ty.into(),
            json!({
                "order": order,
                "many": s.many,
                "name": s.canonical_name,
                "doc": s.doc,
                "options": options,
            }),
        );
    }
    let table = serde_json::to_string_pretty(&Value::Object(sections)).expect("serialisable");
    format!(
        "'use strict';\n'require baseclass';\n\n\
         // GENERATED from uci-schema's table (uci_schema::schema::SECTIONS) by\n\
         // uci-schema/tests/support/luci.rs; do not edit. Regenerate with\n\
         // `UPDATE_DOCS=1 cargo test -p uci-schema --test docs`.\n\
         // Every section of /etc/config/agentd and every option with its kind,\n\
         // label, range (u64 bounds as decimal strings), default, the meaning\n\
         // of an empty value and its doc line; agentd/validate.js checks values\n\
         // against it exactly as `agentd --check-config` does.\n\n\
         return baseclass.extend({{\n\tsections: {}\n}});\n",
        table.replace('\n', "\n\t")
    )
}

/// Probe values: every default of the table plus values that sit on the
/// edges of the kinds (ranges, address syntax, name alphabets, lengths).
fn probes() -> Vec<String> {
    let mut p: Vec<String> = [
        "",
        " ",
        "0",
        "1",
        "2",
        "5",
        "63",
        "64",
        "100",
        "101",
        "299",
        "300",
        "301",
        "1000",
        "1001",
        "1023",
        "1024",
        "65535",
        "65536",
        "86400",
        "86401",
        "4294967295",
        "4294967296",
        "9007199254740993",
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "+5",
        " 5",
        "5 ",
        "0x10",
        "1e3",
        "007",
        "yes",
        "no",
        "on",
        "off",
        "true",
        "false",
        "enabled",
        "disabled",
        "maybe",
        "Yes",
        "a",
        "A",
        "a b",
        "tok~en!",
        "tab\there",
        "br-lan",
        "eth0.1",
        "wlan0@phy",
        "iface_name-15ch",
        "iface_name-16chr",
        "-bad",
        "bad-",
        "router-a",
        "router_a",
        "r",
        "example.com",
        "example.com.",
        "a..b",
        ".example",
        "xn--bcher-kva.example",
        "1.2.3.4",
        "192.0.2.1",
        "01.2.3.4",
        "256.1.1.1",
        "1.2.3",
        "::",
        "::1",
        "2001:db8::1",
        "2001:DB8::A",
        "::ffff:192.0.2.1",
        "1:2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7:8:9",
        "1::2::3",
        "12345::1",
        "fe80::1%eth0",
        "2001:db8::/32",
        "2001:db8::/64",
        "2001:db8::/128",
        "2001:db8::/129",
        "2001:db8::/47",
        "2001:db8::/48",
        "2001:db8:1:200::/56",
        "2001:db8::/65",
        "fd00:1::/64",
        "fe80::/64",
        "ff02::/64",
        "::/64",
        "::ffff:0:0/64",
        "auto",
        "fd00::1/48",
        "192.0.2.0/24",
        "192.0.2.1/32",
        "192.0.2.1/33",
        "192.0.2.0/",
        "[::]:7446",
        "[::1]:0",
        "[2001:db8::53]:53",
        "[2001:db8::53]",
        "[fe80::1%2]:80",
        "0.0.0.0:7446",
        "192.0.2.1:53",
        "192.0.2.1:65535",
        "192.0.2.1:65536",
        "192.0.2.1:",
        "host.example:7444",
        "host:0",
        "host:65535",
        "-host:80",
        "/etc/agentd/identity.key",
        "/",
        "relative/path",
        "/with\u{1}control",
        "*",
        "admin.*",
        "a*b",
        ".*",
        "*.x",
        "demo.echo",
        "office.print",
        "x:y",
        "ab_c.d-e",
        "agent://lab/echo",
        "agent://lab/a/b:c@d",
        "agent://lab/",
        "agent:///x",
        "agent://l ab/x",
        "agent://lab",
        "http://192.0.2.1:8080/invoke",
        "http://192.0.2.1:0/x",
        "https://example.com",
        "https://example.com:443/path?q=1#f",
        "http://user@host/",
        "http://[2001:db8::1]:80/x",
        "http://[2001:db8::1]/x",
        "http://[2001:db8::1/x",
        "http://",
        "http://-bad/",
        "ftp://example.com/",
        "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "ed25519:____________________________________________",
        "ed25519:AAAA",
        "ed25519:",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "sha256:0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",
        "sha257:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "SHA256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "sha256:00",
        "host:99999",
        "192.0.2.300",
        "192.0.2.300:7447",
        "9lives.example",
        "{}",
        "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}}",
        "[]",
        "{bad",
        "\"text\"",
        " {} ",
        "manual",
        "allowlist",
        "same-domain",
        "mcp",
        "a2a",
        "allow",
        "deny",
        "jwt",
        "none",
        "tcp",
        "http",
        "client",
        "server",
        "ndp-proxy",
        "local",
        "peer",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    p.push("n".repeat(128));
    p.push("n".repeat(129));
    p.push("l".repeat(63));
    p.push("l".repeat(64));
    p.push(format!("/{}", "p".repeat(4095)));
    p.push(format!("/{}", "p".repeat(4096)));
    for s in SECTIONS {
        for o in s.options {
            if let Kind::Enum(names) = o.kind {
                p.extend(names.iter().map(|n| n.to_string()));
            }
            match o.default {
                DefaultValue::Text(t) => p.push(t.to_string()),
                DefaultValue::Items(items) => p.extend(items.iter().map(|i| i.to_string())),
                DefaultValue::Required | DefaultValue::SectionName => {}
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    p.retain(|v| seen.insert(v.clone()));
    p
}

fn samples_json() -> String {
    let probes = probes();
    let mut kinds: BTreeMap<String, Value> = BTreeMap::new();
    for s in SECTIONS {
        for o in s.options {
            kinds.entry(kind_key(o.kind)).or_insert_with(|| {
                let verdicts: String = probes
                    .iter()
                    .map(|v| if check_value(o.kind, v) { '1' } else { '0' })
                    .collect();
                let mut k = kind_json(o.kind);
                k["accepts"] = json!(verdicts);
                k
            });
        }
    }
    let mut out = serde_json::to_string_pretty(&json!({
        "generated_by": "uci-schema/tests/support/luci.rs (UPDATE_DOCS=1 cargo test -p uci-schema --test docs)",
        "probes": probes,
        "kinds": kinds,
    }))
    .expect("serialisable");
    out.push('\n');
    out
}

fn check(path: &str, generated: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(&path, generated).expect("write the generated file");
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is missing ({e})", path.display()));
    assert!(
        committed == generated,
        "{} is stale (the schema changed); run UPDATE_DOCS=1 cargo test -p uci-schema --test docs",
        path.display()
    );
}

#[test]
fn committed_luci_option_table_matches_the_schema() {
    check(SCHEMA_JS, &schema_js());
}

#[test]
fn committed_validation_samples_match_the_schema_checks() {
    check(SAMPLES, &samples_json());
}

/// The corpus is worth running: every kind but free text both accepts and
/// refuses some probe, so a validator that says yes (or no) to everything
/// fails the Chromium comparison.
#[test]
fn every_kind_has_accepted_and_refused_probes() {
    let probes = probes();
    for s in SECTIONS {
        for o in s.options {
            let ok = probes.iter().filter(|v| check_value(o.kind, v)).count();
            if o.kind == Kind::Text {
                continue;
            }
            assert!(
                ok > 0 && ok < probes.len(),
                "{}.{}: {ok} of {} probes accepted",
                s.ty,
                o.name,
                probes.len()
            );
        }
    }
}

//! `agentctl pki show`: this router's identity as the config describes it
//! — router_id, identity key and fingerprint, domain CA, router
//! certificate (and whether it matches the key, names the router and
//! chains to the CA), and how each peer is trusted. Reads files only and
//! creates nothing (a missing identity key is reported, not made).
//!
//! Exit status 1 when anything configured is unusable, with the full
//! report still printed: a setup script can check it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use router_pki::identity::{self, KeyFileError};
use router_pki::tls::{load_cert_file, DomainCa};
use router_pki::x509::{self, PublicKey, Summary};
use router_pki::Fingerprint;
use serde_json::{json, Value};

use super::command::exit;
use super::pki::date;
use super::run::{Failure, Output};
use crate::config;

/// The report, built once for both forms.
struct Report {
    lines: Vec<(String, String)>,
    json: serde_json::Map<String, Value>,
    problems: Vec<String>,
}

impl Report {
    fn line(&mut self, key: &str, value: impl Into<String>) {
        self.lines.push((key.to_string(), value.into()));
    }

    fn problem(&mut self, p: String) {
        self.problems.push(p);
    }
}

fn cert_json(s: &Summary) -> Value {
    json!({
        "subject": s.subject.to_string(),
        "issuer": s.issuer.to_string(),
        "dns_names": s.dns_names,
        "not_before": date(s.not_before),
        "not_after": date(s.not_after),
        "fingerprint": s.key.fingerprint().map(|f| f.to_string()),
    })
}

fn key_text(k: &PublicKey) -> String {
    match k {
        PublicKey::Ed25519(_) => k.fingerprint().map(|f| f.to_string()).unwrap_or_default(),
        PublicKey::Other(oid) => format!("not Ed25519 (algorithm {oid})"),
    }
}

fn validity(r: &mut Report, what: &str, s: &Summary, now: i64) {
    r.line(
        "  valid",
        format!("{} to {}", date(s.not_before), date(s.not_after)),
    );
    if now > s.not_after {
        r.problem(format!("{what} expired at {}", date(s.not_after)));
    } else if now < s.not_before {
        r.problem(format!("{what} is not valid before {}", date(s.not_before)));
    }
}

pub fn show(config: Option<&Path>, now: SystemTime) -> Result<(Output, u8), Failure> {
    let file = config
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(crate::daemon::options::DEFAULT_CONFIG));
    let partial = uci_schema::Config::load_partial(&file);
    let cfg = &partial.config;
    let router_id = config::load_file_partial(&file)
        .map(|(rt, _)| rt.router_id)
        .unwrap_or_else(|_| config::Runtime::default().router_id);
    let now_s = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut r = Report {
        lines: Vec::new(),
        json: serde_json::Map::new(),
        problems: Vec::new(),
    };
    let file_note = if file.exists() {
        file.display().to_string()
    } else {
        format!("{} (not found: defaults shown)", file.display())
    };
    r.line("config", file_note);
    r.json
        .insert("config".into(), file.display().to_string().into());
    r.line("router_id", router_id.to_string());
    r.json
        .insert("router_id".into(), router_id.to_string().into());

    let key = identity_section(&mut r, Path::new(&cfg.agentd.identity));
    let domain = Some(cfg.agentd.domain.as_str()).filter(|d| !d.is_empty());
    r.line("domain", domain.unwrap_or("(none)"));
    r.json.insert("domain".into(), domain.into());
    let ca = ca_section(&mut r, &cfg.agentd.domain_ca, domain, now_s);
    router_cert_section(
        &mut r,
        &cfg.agentd.router_cert,
        &router_id,
        key.as_ref(),
        ca.as_ref(),
        now,
    );
    peers_section(&mut r, &cfg.peers, ca.is_some());
    // A peer section the schema refused (a malformed pin, say) is not in
    // `cfg.peers` at all: say why it is missing.
    for p in &partial.problems {
        if p.error.section.as_ref().is_some_and(|s| s.ty == "peer") {
            r.problem(p.to_string());
        }
    }

    let width = r.lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut text: String = r
        .lines
        .iter()
        .map(|(k, v)| format!("{k:width$}  {v}\n"))
        .collect();
    if !r.problems.is_empty() {
        text.push_str("\nproblems:\n");
        for p in &r.problems {
            text.push_str(&format!("  - {p}\n"));
        }
    }
    let code = if r.problems.is_empty() {
        exit::OK
    } else {
        exit::DAEMON_ERROR
    };
    r.json.insert("ok".into(), r.problems.is_empty().into());
    r.json.insert("problems".into(), r.problems.clone().into());
    Ok((
        Output {
            text,
            json: Value::Object(r.json),
        },
        code,
    ))
}

/// The gateway's service group (the feed's uci-defaults creates it).
pub const GATEWAY_GROUP: &str = "agent-gw";

fn identity_section(r: &mut Report, path: &Path) -> Option<router_pki::VerifyingKey> {
    r.line("identity", path.display().to_string());
    let mut j = json!({ "path": path.display().to_string() });
    let key = match identity::load_key(path) {
        Ok(k) => {
            let public = k.verifying_key();
            let fp = Fingerprint::of(&public);
            r.line("  fingerprint", fp.to_string());
            r.line("  public key", identity::format_public_key(&public));
            j["exists"] = true.into();
            j["fingerprint"] = fp.to_string().into();
            j["public_key"] = identity::format_public_key(&public).into();
            let meta = std::fs::metadata(path).ok();
            let mode = meta.as_ref().map_or(0, |m| m.permissions().mode() & 0o777);
            j["mode"] = format!("{mode:04o}").into();
            // Group read is how agent-gw (its own user) reads the key
            // (`pki init-identity --group agent-gw`); anything more is a leak.
            let gateway_group = meta.as_ref().is_some_and(|m| {
                use std::os::unix::fs::MetadataExt;
                super::pki_identity::gid_of(GATEWAY_GROUP) == Some(m.gid())
            });
            let allowed = if gateway_group { 0o040 } else { 0 };
            if mode & 0o077 & !allowed != 0 {
                r.problem(format!(
                    "identity key {} is readable by others (mode {mode:04o}): chmod 600 it{}",
                    path.display(),
                    if gateway_group {
                        ""
                    } else {
                        " (or 640 with group agent-gw)"
                    }
                ));
            }
            Some(public)
        }
        Err(KeyFileError::Io(_, e)) if e.kind() == std::io::ErrorKind::NotFound => {
            r.line(
                "  status",
                "not created yet (agentd creates it on first start)",
            );
            j["exists"] = false.into();
            None
        }
        Err(e) => {
            j["exists"] = true.into();
            j["error"] = e.to_string().into();
            r.problem(e.to_string());
            None
        }
    };
    r.json.insert("identity".into(), j);
    key
}

fn ca_section(r: &mut Report, path: &str, domain: Option<&str>, now: i64) -> Option<DomainCa> {
    if path.is_empty() {
        r.line("domain_ca", "(none: unpinned peers cannot be trusted)");
        r.json.insert("domain_ca".into(), Value::Null);
        return None;
    }
    r.line("domain_ca", path);
    match DomainCa::load(Path::new(path), domain) {
        Ok(ca) => {
            let s = ca.summary();
            r.line("  subject", s.subject.to_string());
            r.line("  fingerprint", key_text(&s.key));
            validity(r, "domain CA certificate", s, now);
            let mut j = cert_json(s);
            j["path"] = path.into();
            r.json.insert("domain_ca".into(), j);
            Some(ca)
        }
        Err(e) => {
            r.problem(e.to_string());
            r.json.insert(
                "domain_ca".into(),
                json!({ "path": path, "error": e.to_string() }),
            );
            None
        }
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}

fn router_cert_section(
    r: &mut Report,
    path: &str,
    router_id: &str,
    key: Option<&router_pki::VerifyingKey>,
    ca: Option<&DomainCa>,
    now: SystemTime,
) {
    if path.is_empty() {
        r.line(
            "router_cert",
            "(none: a self-signed certificate of the identity key; peers must pin its fingerprint)",
        );
        r.json.insert("router_cert".into(), Value::Null);
        return;
    }
    r.line("router_cert", path);
    let chain = match load_cert_file(Path::new(path)) {
        Ok(c) => c,
        Err(e) => {
            r.problem(e.to_string());
            r.json.insert(
                "router_cert".into(),
                json!({ "path": path, "error": e.to_string() }),
            );
            return;
        }
    };
    let s = match x509::read(&chain[0]) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("router_cert {path}: {e}");
            r.problem(msg.clone());
            r.json
                .insert("router_cert".into(), json!({ "path": path, "error": msg }));
            return;
        }
    };
    r.line("  subject", s.subject.to_string());
    r.line("  dns names", s.dns_names.join(", "));
    r.line("  issuer", s.issuer.to_string());
    r.line("  key", key_text(&s.key));
    let now_s = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    validity(r, "router certificate", &s, now_s);
    let mut j = cert_json(&s);
    j["path"] = path.into();
    let matches = key.map(|k| s.key == PublicKey::Ed25519(k.to_bytes()));
    r.line(
        "  matches identity",
        matches.map_or("unknown (no identity key)", yes_no),
    );
    j["matches_identity"] = matches.into();
    if matches == Some(false) {
        r.problem(format!(
            "router_cert {path} is for key {}, not the identity key",
            key_text(&s.key)
        ));
    }
    let named = s
        .dns_names
        .iter()
        .any(|n| n.eq_ignore_ascii_case(router_id));
    r.line("  names router_id", yes_no(named));
    j["valid_for_router_id"] = named.into();
    if !named {
        r.problem(format!("router_cert {path} has no dNSName {router_id}"));
    }
    let chains = ca.map(|ca| ca.check(&chain, router_id, now));
    let chain_text = match &chains {
        None => "unknown (no domain_ca)".to_string(),
        Some(Ok(())) => "yes".to_string(),
        Some(Err(e)) => format!("NO: {e}"),
    };
    r.line("  chains to domain_ca", chain_text);
    j["chains_to_domain_ca"] = chains.as_ref().map(Result::is_ok).into();
    if let Some(Err(e)) = chains {
        r.problem(format!("router_cert {path}: {e}"));
    }
    r.json.insert("router_cert".into(), j);
}

fn peers_section(r: &mut Report, peers: &[uci_schema::config::Peer], have_ca: bool) {
    let mut list = Vec::new();
    for p in peers.iter().filter(|p| p.enabled) {
        let (trust, value) = if p.key_fingerprint.is_empty() {
            if !have_ca {
                r.problem(format!(
                    "peer {}: no key_fingerprint and no usable domain_ca: its sessions will fail",
                    p.router_id
                ));
            }
            ("domain_ca", Value::Null)
        } else {
            match p.key_fingerprint.parse::<Fingerprint>() {
                Ok(f) => ("pin", f.to_string().into()),
                Err(e) => {
                    r.problem(format!("peer {}: key_fingerprint: {e}", p.router_id));
                    ("invalid pin", p.key_fingerprint.clone().into())
                }
            }
        };
        let shown = value.as_str().map_or(String::new(), |v| format!(" {v}"));
        r.line(&format!("peer {}", p.router_id), format!("{trust}{shown}"));
        list.push(json!({ "router_id": p.router_id, "trust": trust, "key_fingerprint": value }));
    }
    r.json.insert("peers".into(), list.into());
}

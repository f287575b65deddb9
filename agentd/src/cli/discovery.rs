//! `agentctl candidates`, `approve`, `revoke` (and their ubus methods):
//! text for people, stable JSON for scripts and LuCI, from the same view.
//! Field names are spelled out here so an internal rename never changes
//! what ubus clients parse.

use serde_json::{json, Value};

use super::table::Table;
use crate::ipc::discovery::{AdmissionDone, CandidateRow, CandidatesView};

fn row_json(c: &CandidateRow) -> Value {
    json!({
        "id": &*c.router_id,
        "instance": &*c.instance,
        "version": c.version,
        "domain": &*c.domain,
        "fingerprint": &*c.fingerprint,
        "address": &*c.address,
        "port": c.port,
        "data_port": c.data_port,
        "state": &*c.state,
        "reason": c.reason.as_deref(),
        "announced": c.announced,
        "expires_in_ms": c.expires_in_ms,
        "expires_in_s": c.expires_in_ms.div_ceil(1000),
    })
}

pub fn candidates_json(v: &CandidatesView) -> Value {
    json!({
        "admission": &*v.admission,
        "discovery": if v.off_reason.is_none() { "on" } else { "off" },
        "off_reason": v.off_reason.as_deref(),
        "candidates": v.candidates.iter().map(row_json).collect::<Vec<_>>(),
    })
}

pub fn candidates_text(v: &CandidatesView) -> String {
    let mut out = format!("admission: {}\n", v.admission);
    if let Some(why) = &v.off_reason {
        out.push_str(&format!("discovery: {why}\n"));
    }
    if v.candidates.is_empty() {
        out.push_str("no candidates\n");
        return out;
    }
    let mut t = Table::new(&[
        "ROUTER_ID",
        "VERSION",
        "STATE",
        "ADDRESS",
        "DOMAIN",
        "FINGERPRINT",
        "EXPIRES",
    ]);
    for c in &v.candidates {
        t.row(vec![
            c.router_id.to_string(),
            c.version.to_string(),
            c.state.to_string(),
            format!("{}:{} (gw {})", c.address, c.port, c.data_port),
            if c.domain.is_empty() {
                "-".into()
            } else {
                c.domain.to_string()
            },
            c.fingerprint.to_string(),
            if c.announced {
                "announced".into()
            } else {
                format!("{}s", c.expires_in_ms.div_ceil(1000))
            },
        ]);
    }
    out.push_str(&t.render());
    // Reasons are sentences with two fingerprints: below the table.
    for c in v.candidates.iter() {
        if let Some(why) = &c.reason {
            let instance = if c.instance == c.router_id {
                String::new()
            } else {
                format!(" (mDNS instance '{}')", c.instance)
            };
            out.push_str(&format!(
                "{} version {}{instance}: {}: {why}\n",
                c.router_id, c.version, c.state
            ));
        }
    }
    out
}

pub fn admission_json(approve: bool, d: &AdmissionDone) -> Value {
    json!({
        "ok": true,
        "action": if approve { "approved" } else { "revoked" },
        "id": &*d.router_id,
        "version": d.version,
        "section": &*d.section,
        "generation": d.generation,
    })
}

pub fn admission_text(approve: bool, d: &AdmissionDone) -> String {
    if approve {
        format!(
            "approved {} at record version {}: peer section {} written, configuration reloaded\n",
            d.router_id, d.version, d.section
        )
    } else {
        format!(
            "revoked {} (record version {}): peer section {} removed, configuration reloaded\n",
            d.router_id, d.version, d.section
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_json_has_the_documented_fields() {
        let v = CandidatesView {
            admission: "manual".into(),
            off_reason: None,
            candidates: vec![CandidateRow {
                router_id: "router-b".into(),
                instance: "router-b".into(),
                version: 5,
                domain: "lab.example".into(),
                fingerprint: "sha256:00".into(),
                address: "192.0.2.2".into(),
                port: 7444,
                data_port: 7447,
                state: "pending".into(),
                reason: None,
                announced: false,
                expires_in_ms: 1500,
            }],
        };
        let j = candidates_json(&v);
        let c = &j["candidates"][0];
        for key in [
            "id",
            "version",
            "domain",
            "fingerprint",
            "address",
            "port",
            "data_port",
            "state",
            "expires_in_ms",
        ] {
            assert!(!c[key].is_null(), "{key} missing in {c}");
        }
        assert_eq!(c["id"], "router-b");
        assert_eq!(c["state"], "pending");
        let text = candidates_text(&v);
        assert!(text.contains("router-b") && text.contains("2s"), "{text}");
    }

    /// A conflict shows its state in the table and its reason (both
    /// fingerprints) below it, and in JSON as `reason`.
    #[test]
    fn a_conflict_is_shown_with_its_reason() {
        let why = "router-b is approved with key sha256:aa (record version 7); this announcement carries key sha256:bb";
        let v = CandidatesView {
            admission: "manual".into(),
            off_reason: None,
            candidates: vec![CandidateRow {
                router_id: "router-b".into(),
                instance: "router-b (2)".into(),
                version: 9,
                state: "conflict".into(),
                reason: Some(why.into()),
                announced: true,
                ..CandidateRow::default()
            }],
        };
        let j = candidates_json(&v);
        assert_eq!(j["candidates"][0]["state"], "conflict");
        assert_eq!(j["candidates"][0]["reason"], why);
        assert_eq!(j["candidates"][0]["instance"], "router-b (2)");
        let text = candidates_text(&v);
        assert!(
            text.contains(&format!(
                "router-b version 9 (mDNS instance 'router-b (2)'): conflict: {why}"
            )),
            "{text}"
        );
    }
}

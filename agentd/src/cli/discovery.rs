//! `agentctl candidates`, `approve`, `revoke` (and their ubus methods):
//! text for people, stable JSON for scripts and LuCI, from the same view.
//! Field names are spelled out here so an internal rename never changes
//! what ubus clients parse.

use serde_json::{json, Value};

use super::table::Table;
use crate::ipc::discovery::{AdmissionDone, CandidateRow, CandidatesView, DomainRow};

fn row_json(c: &CandidateRow) -> Value {
    json!({
        "id": &*c.router_id,
        "source": &*c.source,
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
        "unicast_off_reason": v.unicast_off_reason.as_deref(),
        "unicast": v.unicast.iter().map(domain_json).collect::<Vec<_>>(),
    })
}

fn domain_json(d: &DomainRow) -> Value {
    json!({
        "domain": &*d.domain,
        "resolver": &*d.resolver,
        "last_success_ago_ms": d.last_success_ago_ms,
        "last_error": d.last_error.as_deref(),
        "last_error_ago_ms": d.last_error_ago_ms,
        "instances": d.instances,
        "next_lookup_in_ms": d.next_lookup_in_ms,
    })
}

fn ago(ms: Option<u64>) -> String {
    ms.map_or("never".into(), |ms| format!("{}s ago", ms / 1000))
}

/// One paragraph per search domain: what the last lookups gave.
fn unicast_text(v: &CandidatesView) -> String {
    let mut out = String::new();
    if let Some(why) = &v.unicast_off_reason {
        out.push_str(&format!("unicast DNS-SD: {why}\n"));
    }
    for d in &v.unicast {
        out.push_str(&format!(
            "unicast DNS-SD {} via {}: {} router(s), last success {}, next lookup {}\n",
            d.domain,
            d.resolver,
            d.instances,
            ago(d.last_success_ago_ms),
            d.next_lookup_in_ms
                .map_or("running".into(), |ms| format!("in {}s", ms.div_ceil(1000)))
        ));
        if let Some(e) = &d.last_error {
            out.push_str(&format!("  last error {}: {e}\n", ago(d.last_error_ago_ms)));
        }
    }
    out
}

pub fn candidates_text(v: &CandidatesView) -> String {
    let mut out = format!("admission: {}\n", v.admission);
    if let Some(why) = &v.off_reason {
        out.push_str(&format!("discovery: {why}\n"));
    }
    out.push_str(&unicast_text(v));
    if v.candidates.is_empty() {
        out.push_str("no candidates\n");
        return out;
    }
    let mut t = Table::new(&[
        "ROUTER_ID",
        "SOURCE",
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
            c.source.to_string(),
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
            } else if &*c.source == "unicast" {
                format!(" (unicast {})", c.instance)
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
                source: "mdns".into(),
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
            ..CandidatesView::default()
        };
        let j = candidates_json(&v);
        let c = &j["candidates"][0];
        for key in [
            "id",
            "source",
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
            ..CandidatesView::default()
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
    /// Unicast DNS-SD: each search domain's last success and last error
    /// (typed, as the daemon recorded it), in JSON and in text.
    #[test]
    fn unicast_domains_show_their_last_success_and_error() {
        let v = CandidatesView {
            admission: "manual".into(),
            candidates: vec![CandidateRow {
                router_id: "router-b".into(),
                source: "unicast".into(),
                instance: "router-b._arpx._tcp.lab.example".into(),
                version: 3,
                state: "pending".into(),
                reason: Some("x".into()),
                ..CandidateRow::default()
            }],
            unicast: vec![DomainRow {
                domain: "lab.example".into(),
                resolver: "192.0.2.53:53".into(),
                last_success_ago_ms: Some(4_000),
                last_error: Some("PTR _arpx._tcp.lab.example: no answer after 2 tries".into()),
                last_error_ago_ms: Some(1_000),
                instances: 1,
                next_lookup_in_ms: Some(2_500),
            }],
            ..CandidatesView::default()
        };
        let j = candidates_json(&v);
        assert_eq!(j["candidates"][0]["source"], "unicast");
        assert_eq!(j["unicast"][0]["domain"], "lab.example");
        assert_eq!(j["unicast"][0]["last_success_ago_ms"], 4000);
        assert_eq!(
            j["unicast"][0]["last_error"],
            "PTR _arpx._tcp.lab.example: no answer after 2 tries"
        );
        let text = candidates_text(&v);
        assert!(
            text.contains("unicast DNS-SD lab.example via 192.0.2.53:53: 1 router(s), last success 4s ago, next lookup in 3s"),
            "{text}"
        );
        assert!(
            text.contains(
                "  last error 1s ago: PTR _arpx._tcp.lab.example: no answer after 2 tries"
            ),
            "{text}"
        );
        assert!(
            text.contains("(unicast router-b._arpx._tcp.lab.example)"),
            "{text}"
        );
    }
}

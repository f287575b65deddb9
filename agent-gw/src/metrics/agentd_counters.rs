//! agentd's families (`agentd_*`), from the counters it answers to the
//! IPC `stats` request (what `agentctl stats` lists): routes by source,
//! peer sessions by state, ARPX traffic and rejections, health probes,
//! discovery, reloads, leases.
//!
//! agentd names its counters with dots (`arpx.rejected.loop`); each maps
//! here to a family and, for the counters that are one of a set, a label
//! (`agentd_arpx_paths_rejected_total{reason="loop"}`). The label values
//! that come from a name's suffix are the codes of agentd's own enums
//! (close codes, rejection reasons, session states), so they stay a small
//! fixed set; they are still checked to be short snake_case, and a name
//! that fits no rule is written as an untyped `agentd_stat_<name>` rather
//! than dropped, so a counter added to agentd shows up before it has a
//! rule here.

use std::collections::BTreeMap;

use super::text::{EncodeError, Exposition, Kind};

/// How one counter (or all counters under a prefix) becomes a sample.
struct Rule {
    /// The counter's name, or (with `suffix`) a prefix ending in `.`.
    key: &'static str,
    family: &'static str,
    kind: Kind,
    help: &'static str,
    /// A fixed (label name, value) of the samples.
    label: Option<(&'static str, &'static str)>,
    /// For a prefix rule: the label whose value is the name's rest.
    suffix: Option<&'static str>,
}

const fn rule(
    key: &'static str,
    family: &'static str,
    kind: Kind,
    help: &'static str,
    label: Option<(&'static str, &'static str)>,
) -> Rule {
    Rule {
        key,
        family,
        kind,
        help,
        label,
        suffix: None,
    }
}

/// A rule for every counter under `key` (ending in `.`): the rest of the
/// name is the value of label `suffix`.
const fn prefix(
    key: &'static str,
    family: &'static str,
    kind: Kind,
    help: &'static str,
    label: Option<(&'static str, &'static str)>,
    suffix: &'static str,
) -> Rule {
    Rule {
        key,
        family,
        kind,
        help,
        label,
        suffix: Some(suffix),
    }
}

use Kind::{Counter as C, Gauge as G};

const ROUTES: &str =
    "Routes in the RIB by source (local registrations, static routes, paths from peers, relayed).";
const SESSIONS: &str = "Configured ARPX peers by the session state agentctl peers shows.";
const PROBES: &str = "Health probe results taken (answered / failed).";
const UPDATES: &str = "ARPX update messages, received ('in') and sent ('out').";
const PATHS: &str = "Paths carried in ARPX updates, received and sent.";
const WITHDRAWS: &str = "ARPX withdraw messages, received and sent.";
const WITHDRAWN: &str = "Paths withdrawn by ARPX withdraws, received and sent.";
const REJECTED: &str = "Paths from peers rejected, by reason.";
const CLOSES: &str = "ARPX sessions closed, by direction (close sent / received) and close code.";
const RELOADS: &str = "Config reloads by result.";
const RESTORED: &str = "Leases read back from the state directory at start, by result.";
const LINKS: &str = "Peer data-plane link events (up, down, refused).";
const PEER_PATHS: &str = "Changes of peer paths applied to the RIB, by kind.";

#[rustfmt::skip]
const RULES: &[Rule] = &[
    rule("routes.local", "agentd_routes", G, ROUTES, Some(("source", "local"))),
    rule("routes.static", "agentd_routes", G, ROUTES, Some(("source", "static"))),
    rule("routes.peer", "agentd_routes", G, ROUTES, Some(("source", "peer"))),
    rule("routes.relay", "agentd_routes", G, ROUTES, Some(("source", "relay"))),
    rule("generation", "agentd_rib_generation", G, "Generation of the RIB (goes up with every change).", None),
    rule("config_generation", "agentd_config_generation", G, "Generation of the running config (goes up with every reload that changed it).", None),
    prefix("arpx.sessions.", "agentd_arpx_sessions", G, SESSIONS, None, "state"),
    rule("arpx.peers", "agentd_arpx_peers", G, "ARPX peers configured.", None),
    rule("arpx.peers_eligible", "agentd_arpx_peers_eligible", G, "Configured peers this router may hold a session with now.", None),
    rule("arpx.sessions_established", "agentd_arpx_sessions_established_total", C, "ARPX sessions that reached established.", None),
    rule("arpx.dials", "agentd_arpx_dials_total", C, "ARPX connections dialled.", None),
    rule("arpx.dial_failures", "agentd_arpx_dial_failures_total", C, "ARPX dials that failed (connect or handshake).", None),
    rule("arpx.inbound_refused", "agentd_arpx_inbound_refused_total", C, "Inbound ARPX connections refused.", None),
    rule("arpx.send_queue_overflows", "agentd_arpx_send_queue_overflows_total", C, "ARPX sessions whose send queue overflowed.", None),
    rule("arpx.frames_too_large", "agentd_arpx_frames_too_large_total", C, "ARPX frames refused for their size.", None),
    rule("arpx.paths_refused_by_rib", "agentd_arpx_paths_refused_by_rib_total", C, "Paths from peers the RIB refused (route limits).", None),
    rule("arpx.links", "agentd_arpx_links", G, "Peer data-plane links known.", None),
    rule("arpx.links_invalid", "agentd_arpx_links_invalid_total", C, "Peer data-plane link announcements refused as invalid.", None),
    rule("arpx.updates_in", "agentd_arpx_updates_total", C, UPDATES, Some(("direction", "in"))),
    rule("arpx.updates_out", "agentd_arpx_updates_total", C, UPDATES, Some(("direction", "out"))),
    rule("arpx.routes_in", "agentd_arpx_paths_total", C, PATHS, Some(("direction", "in"))),
    rule("arpx.routes_out", "agentd_arpx_paths_total", C, PATHS, Some(("direction", "out"))),
    rule("arpx.withdraws_in", "agentd_arpx_withdraws_total", C, WITHDRAWS, Some(("direction", "in"))),
    rule("arpx.withdraws_out", "agentd_arpx_withdraws_total", C, WITHDRAWS, Some(("direction", "out"))),
    rule("arpx.withdrawn_in", "agentd_arpx_withdrawn_paths_total", C, WITHDRAWN, Some(("direction", "in"))),
    rule("arpx.withdrawn_out", "agentd_arpx_withdrawn_paths_total", C, WITHDRAWN, Some(("direction", "out"))),
    prefix("arpx.rejected.", "agentd_arpx_paths_rejected_total", C, REJECTED, None, "reason"),
    rule("arpx.evicted_fair_share", "agentd_arpx_paths_evicted_total", C, "Paths evicted to keep each peer's fair share of max_routes.", None),
    rule("arpx.ignored_stale", "agentd_arpx_stale_ignored_total", C, "Stale ARPX updates ignored.", None),
    rule("arpx.export_refused", "agentd_arpx_export_refused_total", C, "Routes not advertised to a peer (export policy).", None),
    prefix("arpx.closes_sent.", "agentd_arpx_closes_total", C, CLOSES, Some(("direction", "sent")), "code"),
    prefix("arpx.closes_received.", "agentd_arpx_closes_total", C, CLOSES, Some(("direction", "received")), "code"),
    rule("health.endpoints", "agentd_health_endpoints", G, "Distinct endpoints being health-checked.", None),
    rule("health.endpoints_down", "agentd_health_endpoints_down", G, "Health-checked endpoints judged down.", None),
    rule("health.probes", "agentd_health_probes_started_total", C, "Health probes started.", None),
    rule("health.probes_ok", "agentd_health_probe_results_total", C, PROBES, Some(("result", "ok"))),
    rule("health.probes_failed", "agentd_health_probe_results_total", C, PROBES, Some(("result", "failed"))),
    rule("fib.subscribers", "agentd_fib_subscribers", G, "Gateways subscribed to the FIB.", None),
    rule("fib.snapshots", "agentd_fib_snapshots_total", C, "FIB snapshots sent to gateways.", None),
    rule("fib.deltas", "agentd_fib_deltas_total", C, "FIB deltas sent to gateways.", None),
    rule("fib.dropped", "agentd_fib_subscribers_dropped_total", C, "FIB subscribers dropped for falling behind.", None),
    rule("discovery.candidates", "agentd_discovery_candidates", G, "Routers seen by DNS-SD discovery.", None),
    rule("discovery.admitted", "agentd_discovery_admitted", G, "Discovered routers admitted as peers.", None),
    rule("discovery.announcements", "agentd_discovery_announcements_total", C, "DNS-SD announcements received.", None),
    rule("discovery.own_ignored", "agentd_discovery_own_ignored_total", C, "This router's own announcements ignored.", None),
    rule("discovery.refused_full", "agentd_discovery_refused_full_total", C, "Discovered routers refused because the candidate table was full.", None),
    rule("discovery.expired", "agentd_discovery_expired_total", C, "Discovered routers expired.", None),
    rule("discovery.version_changes", "agentd_discovery_version_changes_total", C, "Discovered routers whose record version changed.", None),
    rule("discovery.records_invalid", "agentd_discovery_records_invalid_total", C, "DNS-SD records refused as invalid.", None),
    rule("discovery.verifies", "agentd_discovery_verifies_total", C, "Discovered routers' records verified.", None),
    rule("reloads.ok", "agentd_config_reloads_total", C, RELOADS, Some(("result", "ok"))),
    rule("reloads.failed", "agentd_config_reloads_total", C, RELOADS, Some(("result", "failed"))),
    rule("reloads.inconsistent", "agentd_config_reloads_total", C, RELOADS, Some(("result", "inconsistent"))),
    rule("leases.expired", "agentd_leases_expired_total", C, "Route leases that expired.", None),
    rule("leases.restored", "agentd_leases_restored_total", C, RESTORED, Some(("result", "restored"))),
    rule("leases.restore_clamped", "agentd_leases_restored_total", C, RESTORED, Some(("result", "clamped"))),
    rule("leases.restore_skipped", "agentd_leases_restored_total", C, RESTORED, Some(("result", "skipped"))),
    rule("links.up", "agentd_link_events_total", C, LINKS, Some(("event", "up"))),
    rule("links.down", "agentd_link_events_total", C, LINKS, Some(("event", "down"))),
    rule("links.refused", "agentd_link_events_total", C, LINKS, Some(("event", "refused"))),
    rule("flushes", "agentd_flushes_total", C, "Route flushes (all routes of an origin or source removed at once).", None),
    rule("peer_paths.upserted", "agentd_peer_path_changes_total", C, PEER_PATHS, Some(("change", "upserted"))),
    rule("peer_paths.unchanged", "agentd_peer_path_changes_total", C, PEER_PATHS, Some(("change", "unchanged"))),
    rule("peer_paths.removed", "agentd_peer_path_changes_total", C, PEER_PATHS, Some(("change", "removed"))),
    rule("peer_paths.shadowed", "agentd_peer_path_changes_total", C, PEER_PATHS, Some(("change", "shadowed"))),
];

/// Counters that are sums or copies of labelled ones above.
const SKIPPED: &[&str] = &["routes", "arpx.sessions_up"];

/// Longest label value taken from a counter's name.
const MAX_SUFFIX: usize = 48;

/// A name suffix usable as a label value: short snake_case.
fn suffix_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SUFFIX
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The labels of counter `name` under rule `r`, if `r` takes it.
fn labels_of(r: &Rule, name: &str) -> Option<Vec<(&'static str, String)>> {
    let mut labels: Vec<(&'static str, String)> =
        r.label.iter().map(|(k, v)| (*k, (*v).into())).collect();
    match r.suffix {
        Some(suffix) => {
            let rest = name.strip_prefix(r.key)?;
            if !suffix_ok(rest) {
                return None;
            }
            labels.push((suffix, rest.into()));
        }
        None if r.key != name => return None,
        None => {}
    }
    Some(labels)
}

/// Writes agentd's families from its `stats` counters.
pub fn write(e: &mut Exposition, counters: &BTreeMap<Box<str>, u64>) -> Result<(), EncodeError> {
    type Samples = Vec<(Vec<(&'static str, String)>, u64)>;
    let mut families: Vec<(&Rule, Samples)> = Vec::new();
    let mut unmapped: Vec<(String, u64)> = Vec::new();
    for (name, value) in counters {
        if SKIPPED.contains(&name.as_ref()) {
            continue;
        }
        let hit = RULES
            .iter()
            .find_map(|r| labels_of(r, name).map(|l| (r, l)));
        match hit {
            Some((r, labels)) => match families.iter_mut().find(|(f, _)| f.family == r.family) {
                Some((_, samples)) => samples.push((labels, *value)),
                None => families.push((r, vec![(labels, *value)])),
            },
            None => unmapped.push((unmapped_name(name), *value)),
        }
    }
    // The table's order, so related families stay together.
    families.sort_by_key(|(r, _)| RULES.iter().position(|x| x.family == r.family));
    for (r, samples) in &families {
        let rows = samples.iter().map(|(labels, v)| {
            let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            (l, *v)
        });
        e.family(r.family, r.kind, r.help, rows)?;
    }
    for (name, v) in unmapped {
        // Two agentd names that fold to one metric name: keep the first.
        match e.single(
            &name,
            Kind::Untyped,
            "An agentctl stats counter without a metric rule yet.",
            v,
        ) {
            Err(EncodeError::Duplicate(_)) => {}
            other => other?,
        }
    }
    Ok(())
}

/// `agentd_stat_` and the name with every character outside
/// `[a-zA-Z0-9_]` as `_`.
fn unmapped_name(name: &str) -> String {
    let mut n = String::from("agentd_stat_");
    n.extend(
        name.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
    );
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(pairs: &[(&str, u64)]) -> String {
        let counters = pairs.iter().map(|(k, v)| ((*k).into(), *v)).collect();
        let mut e = Exposition::new();
        write(&mut e, &counters).unwrap();
        e.finish()
    }

    #[test]
    fn counters_of_one_set_become_one_labelled_family() {
        let out = render(&[
            ("routes", 3),
            ("routes.local", 2),
            ("routes.peer", 1),
            ("arpx.rejected.loop", 4),
            ("arpx.rejected.path_too_long", 1),
        ]);
        assert!(out.contains("# TYPE agentd_routes gauge\n"), "{out}");
        assert!(out.contains("agentd_routes{source=\"local\"} 2\n"), "{out}");
        assert!(out.contains("agentd_routes{source=\"peer\"} 1\n"), "{out}");
        assert!(out.contains("# TYPE agentd_arpx_paths_rejected_total counter\n"));
        assert!(out.contains("agentd_arpx_paths_rejected_total{reason=\"loop\"} 4\n"));
        assert_eq!(out.matches("# TYPE agentd_routes ").count(), 1);
        // The sum is not written again.
        assert!(!out.contains("agentd_routes 3"), "{out}");
    }

    #[test]
    fn closes_carry_direction_and_code() {
        let out = render(&[
            ("arpx.closes_sent.hold_expired", 2),
            ("arpx.closes_received.peer_removed", 1),
        ]);
        assert!(out.contains(
            "agentd_arpx_closes_total{direction=\"received\",code=\"peer_removed\"} 1\n"
        ));
        assert!(
            out.contains("agentd_arpx_closes_total{direction=\"sent\",code=\"hold_expired\"} 2\n")
        );
        assert_eq!(out.matches("# HELP agentd_arpx_closes_total").count(), 1);
    }

    #[test]
    fn unknown_or_odd_names_are_written_untyped_never_as_label_values() {
        let out = render(&[("arpx.rejected.Has Space", 1), ("new.thing-x", 5)]);
        assert!(
            out.contains("# TYPE agentd_stat_arpx_rejected_Has_Space untyped\n"),
            "{out}"
        );
        assert!(out.contains("agentd_stat_new_thing_x 5\n"), "{out}");
        assert!(!out.contains("reason="), "{out}");
    }
}

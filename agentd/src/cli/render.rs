//! How agentctl shows daemon answers: aligned tables for people, stable
//! JSON for scripts, rpcd and LuCI.
//!
//! The JSON is built field by field here rather than derived from the IPC
//! types, so renaming an internal field never silently changes what ubus
//! clients parse. Both forms come from the same view structs, so the table
//! and the JSON always agree.

use serde_json::{json, Map, Value};

use super::table::Table;
use crate::ipc::message::{AgentView, IpcError, LookupView, RouteView, StatsView, StatusView};
use crate::route::RouteId;

/// `{"error": {"code": code, "message": text}}` for a refused request.
pub fn error_json(e: &IpcError) -> Value {
    json!({ "error": { "code": e.code(), "message": e.to_string() } })
}

pub fn status_json(s: &StatusView) -> Value {
    json!({
        "router_id": &*s.router_id,
        "software": &*s.software,
        "uptime_s": s.uptime_s,
        "generation": s.generation,
        "routes": { "total": s.routes, "local": s.local_routes, "static": s.static_routes, "peer": s.peer_routes },
        "fib_subscribers": s.fib_subscribers,
        "config": {
            "source": &*s.config_source,
            "generation": s.config_generation,
            "ok": s.config_error.is_none() && s.config_problems_total == 0,
            "error": s.config_error.as_deref(),
            "problems_total": s.config_problems_total,
            "problems": s.config_problems.iter().map(|p| json!({
                "section_type": p.section_type.as_deref(),
                "section": p.section.as_deref(),
                "option": p.option.as_deref(),
                "reason": &*p.reason,
                "action": &*p.action,
                "message": &*p.message,
            })).collect::<Vec<_>>(),
        },
        "policy": {
            "ok": s.policy_error.is_none(),
            "error": s.policy_error.as_deref(),
        },
        "warnings": s.warnings.iter().map(|w| &**w).collect::<Vec<_>>(),
        "nexus_alias": {
            "name": &*s.nexus_alias.name,
            "state": &*s.nexus_alias.state,
            "detail": s.nexus_alias.detail.as_deref(),
        },
        "relay": s.relay.as_deref().map(super::peers::relay_json),
        "ipv6": s.ipv6.as_deref().map(super::ipv6::ipv6_json),
    })
}

pub fn status_text(s: &StatusView) -> String {
    let mut t = Table::new(&["FIELD", "VALUE"]);
    let mut kv = |k: &str, v: String| t.row(vec![k.to_string(), v]);
    kv("router_id", s.router_id.to_string());
    kv("software", s.software.to_string());
    kv("uptime", format!("{} s", s.uptime_s));
    kv("generation", s.generation.to_string());
    kv(
        "routes",
        format!(
            "{} (local {}, static {}, peer {})",
            s.routes, s.local_routes, s.static_routes, s.peer_routes
        ),
    );
    kv("fib_subscribers", s.fib_subscribers.to_string());
    kv("config", s.config_source.to_string());
    kv("config_generation", s.config_generation.to_string());
    kv(
        "config_status",
        match &s.config_error {
            None => "ok".to_string(),
            Some(e) => format!("ERROR (running on the last valid state): {e}"),
        },
    );
    if s.config_problems_total > 0 {
        kv(
            "config_problems",
            format!(
                "{} (running on the valid part of the file)",
                s.config_problems_total
            ),
        );
        for p in &s.config_problems {
            kv("  problem", p.message.to_string());
        }
        let listed = s.config_problems.len() as u64;
        if s.config_problems_total > listed {
            kv(
                "  problem",
                format!("... and {} more", s.config_problems_total - listed),
            );
        }
    }
    kv(
        "policy",
        match &s.policy_error {
            None => "ok".to_string(),
            Some(e) => format!("INVALID, denying every request: {e}"),
        },
    );
    for w in &s.warnings {
        kv("warning", w.to_string());
    }
    let a = &s.nexus_alias;
    kv(
        "mdns_alias",
        match &a.detail {
            None => format!("{} {}", a.name, a.state),
            Some(d) => format!("{} {}: {d}", a.name, a.state),
        },
    );
    for (k, v) in s
        .relay
        .as_deref()
        .into_iter()
        .flat_map(super::peers::relay_rows)
        .chain(
            s.ipv6
                .as_deref()
                .into_iter()
                .flat_map(super::ipv6::ipv6_rows),
        )
    {
        kv(&k, v);
    }
    // Without the header: status is a key/value list.
    t.render()
        .split_once('\n')
        .map(|(_, rest)| rest.to_string())
        .unwrap_or_default()
}

/// A path vector as `router-a>router-b` (origin first), `-` when empty.
fn path_text(path: &[Box<str>]) -> String {
    if path.is_empty() {
        "-".to_string()
    } else {
        path.iter().map(|p| &**p).collect::<Vec<_>>().join(">")
    }
}

fn path_json(path: &[Box<str>]) -> Value {
    json!(path.iter().map(|p| &**p).collect::<Vec<_>>())
}

fn lease_json(r: &RouteView) -> Value {
    match r.expires_in_s {
        None => json!("permanent"),
        Some(s) => json!(s),
    }
}

/// `route_id` is the route's own id (the same for every path to it),
/// `path_id` the table entry (`<route_id>@<next_hop>` for a peer path,
/// else the route_id again).
pub fn route_json(r: &RouteView) -> Value {
    json!({
        "route_id": r.route_id.base(),
        "path_id": r.route_id.as_str(),
        "capability": &*r.capability,
        "version": r.version,
        "origin": &*r.origin,
        "endpoint": &*r.endpoint,
        "tenant": &*r.tenant,
        "region": &*r.region,
        "source": r.source.as_str(),
        "latency_ms": r.attrs.latency_ms,
        "cost": r.attrs.cost_micros,
        "load": r.attrs.load_permille,
        "trust": r.attrs.trust,
        "healthy": r.healthy,
        "expires_in_s": lease_json(r),
        "path": path_json(&r.path),
        "hops": r.path.len(),
        "next_hop": r.next_hop.as_deref(),
        "session_up": r.session_up,
        "proof": r.proof.as_str(),
        "disputed": r.disputed,
        "eligible": r.eligible(),
    })
}

pub fn routes_json(routes: &[RouteView]) -> Value {
    json!({ "routes": routes.iter().map(route_json).collect::<Vec<_>>() })
}

pub fn routes_text(routes: &[RouteView]) -> String {
    if routes.is_empty() {
        return "no routes\n".to_string();
    }
    let mut t = Table::new(&[
        "ROUTE",
        "CAPABILITY",
        "VER",
        "SOURCE",
        "VIA",
        "PATH",
        "ORIGIN",
        "ENDPOINT",
        "LAT",
        "COST",
        "LOAD",
        "TRUST",
        "PROOF",
        "HEALTH",
        "LEASE",
    ])
    .right(2)
    .right(8)
    .right(9)
    .right(10)
    .right(11);
    for r in routes {
        t.row(vec![
            r.route_id.to_string(),
            r.capability.to_string(),
            r.version.to_string(),
            r.source.as_str().to_string(),
            r.next_hop.as_deref().unwrap_or("-").to_string(),
            path_text(&r.path),
            r.origin.to_string(),
            r.endpoint.to_string(),
            r.attrs.latency_ms.to_string(),
            r.attrs.cost_micros.to_string(),
            r.attrs.load_permille.to_string(),
            r.attrs.trust.to_string(),
            if r.disputed {
                format!("{}/disputed", r.proof)
            } else {
                r.proof.to_string()
            },
            if r.healthy { "up" } else { "down" }.to_string(),
            match (r.expires_in_s, r.source) {
                (Some(s), _) => format!("{s}s"),
                // A peer path lives as long as its session (and until
                // withdrawn); it has no lease of its own here.
                (None, crate::route::RouteSource::Peer | crate::route::RouteSource::Relay)
                    if r.session_up =>
                {
                    "session".to_string()
                }
                // Kept for arpx.graceful_s after the session was lost.
                (None, crate::route::RouteSource::Peer | crate::route::RouteSource::Relay) => {
                    "session down".to_string()
                }
                (None, _) => "static".to_string(),
            },
        ]);
    }
    t.render()
}

pub fn agents_json(agents: &[AgentView]) -> Value {
    let rows: Vec<Value> = agents
        .iter()
        .map(|a| {
            json!({
                "origin": &*a.origin,
                "tenant": &*a.tenant,
                "routes": a.routes,
                "healthy_routes": a.healthy_routes,
                "capabilities": a.capabilities.iter().map(|c| &**c).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "agents": rows })
}

pub fn agents_text(agents: &[AgentView]) -> String {
    if agents.is_empty() {
        return "no agents\n".to_string();
    }
    let mut t = Table::new(&["ORIGIN", "TENANT", "ROUTES", "HEALTHY", "CAPABILITIES"])
        .right(2)
        .right(3);
    for a in agents {
        t.row(vec![
            a.origin.to_string(),
            a.tenant.to_string(),
            a.routes.to_string(),
            a.healthy_routes.to_string(),
            a.capabilities
                .iter()
                .map(|c| &**c)
                .collect::<Vec<_>>()
                .join(","),
        ]);
    }
    t.render()
}

pub fn lookup_json(capability: &str, version: u32, v: &LookupView) -> Value {
    let candidates: Vec<Value> = v
        .candidates
        .iter()
        .enumerate()
        .map(|(rank, c)| {
            json!({
                "rank": rank + 1,
                "route_id": c.route_id.base(),
                "path_id": c.route_id.as_str(),
                "origin": &*c.origin,
                "endpoint": &*c.endpoint,
                "source": c.source.as_str(),
                "proof": c.proof.as_str(),
                "next_hop": c.next_hop.as_deref(),
                "path": path_json(&c.path),
                "hops": c.path.len(),
                "score": c.score,
            })
        })
        .collect();
    let rejections: Map<String, Value> = v
        .rejections
        .iter()
        .map(|(k, n)| (k.to_string(), json!(n)))
        .collect();
    json!({
        "capability": capability,
        "version": version,
        "rule": v.rule.as_deref(),
        "denied": v.denied,
        "refusal": v.refusal.as_deref(),
        // The winning table entry (a path id for a peer path).
        "winner": v.candidates.first().map(|c| c.route_id.as_str()),
        "candidates": candidates,
        "rejections": rejections,
    })
}

pub fn lookup_text(capability: &str, version: u32, v: &LookupView, explain: bool) -> String {
    let rule = v.rule.as_deref().unwrap_or("(default action)");
    let refusal = v.refusal.as_deref().unwrap_or("unknown");
    let mut out = String::new();
    match (v.denied, v.candidates.first()) {
        (true, _) if refusal == "policy_invalid" => out.push_str(&format!(
            "{capability} v{version}: denied: the policy is invalid (see agentctl status)\n"
        )),
        (true, _) if v.rule.is_none() => out.push_str(&format!(
            "{capability} v{version}: denied by the default action\n"
        )),
        (true, _) => out.push_str(&format!(
            "{capability} v{version}: denied by policy rule {rule}\n"
        )),
        (false, Some(w)) => {
            let via = match &w.next_hop {
                Some(hop) => format!(
                    "{} via router {hop}, path {}, {} hops",
                    w.source.as_str(),
                    path_text(&w.path),
                    w.path.len()
                ),
                None => format!("{} via {}", w.endpoint, w.source.as_str()),
            };
            out.push_str(&format!(
                "{capability} v{version}: winner {} ({via}, score {}), rule {rule}\n",
                w.route_id, w.score
            ))
        }
        (false, None) => out.push_str(&format!(
            "{capability} v{version}: no eligible route ({refusal}), rule {rule}\n"
        )),
    }
    if !explain {
        return out;
    }
    if !v.candidates.is_empty() {
        out.push('\n');
        let mut t = Table::new(&[
            "RANK", "ROUTE", "SCORE", "SOURCE", "PROOF", "HOPS", "PATH", "ORIGIN", "ENDPOINT",
        ])
        .right(0)
        .right(2)
        .right(4);
        for (i, c) in v.candidates.iter().enumerate() {
            t.row(vec![
                (i + 1).to_string(),
                c.route_id.to_string(),
                c.score.to_string(),
                c.source.as_str().to_string(),
                c.proof.to_string(),
                c.path.len().to_string(),
                path_text(&c.path),
                c.origin.to_string(),
                c.endpoint.to_string(),
            ]);
        }
        out.push_str(&t.render());
    }
    out.push('\n');
    if v.rejections.values().all(|n| *n == 0) {
        out.push_str("rejected: none\n");
    } else {
        let mut t = Table::new(&["REJECTED BY", "ROUTES"]).right(1);
        for (reason, n) in v.rejections.iter().filter(|(_, n)| **n > 0) {
            t.row(vec![reason.to_string(), n.to_string()]);
        }
        out.push_str(&t.render());
    }
    out
}

/// `agentctl reload`: `generation` is the configuration generation
/// (`status`'s `config.generation`, one more per applied configuration),
/// never the route table's.
pub fn reloaded_json(config_generation: u64) -> Value {
    json!({ "reloaded": true, "generation": config_generation })
}

pub fn reloaded_text(config_generation: u64) -> String {
    format!("configuration reloaded, config generation {config_generation}\n")
}

pub fn unregistered_json(route_id: &str, generation: u64) -> Value {
    json!({ "route_id": route_id, "removed": true, "generation": generation })
}

pub fn unregistered_text(route_id: &str, generation: u64) -> String {
    format!("route {route_id} withdrawn, generation {generation}\n")
}

pub fn flushed_json(origin: &str, removed: u64, ids: &[RouteId], generation: u64) -> Value {
    let ids: Vec<&str> = ids.iter().map(RouteId::as_str).collect();
    json!({ "origin": origin, "removed": removed, "route_ids": ids, "generation": generation })
}

pub fn flushed_text(origin: &str, removed: u64, ids: &[RouteId], generation: u64) -> String {
    let mut t = format!("{removed} route(s) of {origin} withdrawn, generation {generation}\n");
    for id in ids {
        t.push_str(&format!("  {id}\n"));
    }
    if (ids.len() as u64) < removed {
        t.push_str(&format!("  … and {} more\n", removed - ids.len() as u64));
    }
    t
}

pub fn stats_json(s: &StatsView) -> Value {
    let counters: Map<String, Value> = s
        .counters
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let gateway = s.gateway.as_ref().map(|g| {
        let st = &g.stats;
        json!({
            "age_ms": g.age_ms,
            "buffer": {"used": st.buffer_used, "limit": st.buffer_limit, "peak": st.buffer_peak},
            "tasks": {"used": st.tasks, "capacity": st.task_capacity},
            "refused": {
                "budget": st.refused_budget,
                "budget_tenant_share": st.refused_budget_tenant,
                "budget_source_share": st.refused_budget_source,
                "tasks_full": st.refused_tasks_full,
                "tasks_tenant_share": st.refused_tasks_tenant,
                "tasks_source_share": st.refused_tasks_source,
            },
            "history_degraded": st.history_degraded,
            "results_released": st.results_released,
            "stalled_followers": st.stalled_followers,
            "peer_conns": st.peer_conns,
            "peer_handshakes_out": st.peer_handshakes_out,
            "peer_handshakes_in": st.peer_handshakes_in,
            "peer_streams_refused": st.peer_streams_refused,
            "peer_assertions_signed": st.peer_assertions_signed,
            "peer_signatures": st.peer_signatures,
            "peer_assertions_verified": st.peer_assertions_verified,
            "peer_signature_checks": st.peer_signature_checks,
            "peer_transit_calls": st.peer_transit_calls,
            "peer_transit_bytes": st.peer_transit_bytes,
        })
    });
    json!({ "counters": counters, "gateway": gateway })
}

/// `agentctl tasks` / ubus `tasks`: agent-gw keeps the async tasks, agentd
/// only its latest report of the table, so this is the table's occupancy
/// and refusals, not a list of tasks (a task is readable only by the
/// caller that started it, through the gateway). `reported` is false until
/// a gateway has reported; `age_ms` says how fresh the figures are.
pub fn tasks_json(s: &StatsView) -> Value {
    match &s.gateway {
        None => json!({ "reported": false, "age_ms": null, "tasks": null, "remote": null }),
        Some(g) => {
            let st = &g.stats;
            json!({
                "reported": true,
                "age_ms": g.age_ms,
                "tasks": {
                    "held": st.tasks,
                    "capacity": st.task_capacity,
                    "refused_full": st.refused_tasks_full,
                    "refused_tenant_share": st.refused_tasks_tenant,
                    "refused_source_share": st.refused_tasks_source,
                    "results_released": st.results_released,
                },
                "remote": {
                    "held": st.remote_tasks,
                    "capacity": st.task_capacity,
                    "refused_full": st.refused_remote_full,
                    "refused_tenant_share": st.refused_remote_tenant,
                    "refused_source_share": st.refused_remote_source,
                    "results_released": st.remote_released,
                },
            })
        }
    }
}

pub fn tasks_text(s: &StatsView) -> String {
    let Some(g) = &s.gateway else {
        return "no report from agent-gw yet\n".to_string();
    };
    let st = &g.stats;
    let mut t = Table::new(&["TASKS", "VALUE"]).right(1);
    for (k, v) in [
        ("held", st.tasks),
        ("capacity", st.task_capacity),
        ("refused: table full", st.refused_tasks_full),
        ("refused: tenant share", st.refused_tasks_tenant),
        ("refused: source share", st.refused_tasks_source),
        ("results released", st.results_released),
        ("on other routers: held", st.remote_tasks),
        ("on other routers: refused full", st.refused_remote_full),
        (
            "on other routers: refused tenant share",
            st.refused_remote_tenant,
        ),
        (
            "on other routers: refused source share",
            st.refused_remote_source,
        ),
        ("on other routers: results released", st.remote_released),
    ] {
        t.row(vec![k.to_string(), v.to_string()]);
    }
    let mut out = t.render();
    out.push_str(&format!("(agent-gw report {} ms old)\n", g.age_ms));
    out
}

pub fn stats_text(s: &StatsView) -> String {
    let mut t = Table::new(&["COUNTER", "VALUE"]).right(1);
    for (k, v) in &s.counters {
        t.row(vec![k.to_string(), v.to_string()]);
    }
    let mut out = t.render();
    match &s.gateway {
        None => out.push_str("\ngateway: no report from agent-gw yet\n"),
        Some(g) => {
            let st = &g.stats;
            let mut t = Table::new(&["GATEWAY", "VALUE"]).right(1);
            let pct = |used: u64, of: u64| match used.saturating_mul(100).checked_div(of) {
                Some(p) => format!("{used}/{of} ({p}%)"),
                None => format!("{used}/{of}"),
            };
            for (k, v) in [
                ("buffer bytes", pct(st.buffer_used, st.buffer_limit)),
                ("buffer peak", st.buffer_peak.to_string()),
                ("tasks", pct(st.tasks, st.task_capacity)),
                ("refused: budget full", st.refused_budget.to_string()),
                (
                    "refused: tenant budget share",
                    st.refused_budget_tenant.to_string(),
                ),
                (
                    "refused: source budget share",
                    st.refused_budget_source.to_string(),
                ),
                (
                    "refused: task table full",
                    st.refused_tasks_full.to_string(),
                ),
                (
                    "refused: tenant task share",
                    st.refused_tasks_tenant.to_string(),
                ),
                (
                    "refused: source task share",
                    st.refused_tasks_source.to_string(),
                ),
                ("history degraded", st.history_degraded.to_string()),
                ("results released", st.results_released.to_string()),
                ("stalled followers", st.stalled_followers.to_string()),
                ("peer connections", st.peer_conns.to_string()),
                (
                    "peer handshakes out/in",
                    format!("{}/{}", st.peer_handshakes_out, st.peer_handshakes_in),
                ),
                ("peer streams refused", st.peer_streams_refused.to_string()),
                (
                    "peer assertions signed/signatures",
                    format!("{}/{}", st.peer_assertions_signed, st.peer_signatures),
                ),
                (
                    "peer assertions verified/checks",
                    format!(
                        "{}/{}",
                        st.peer_assertions_verified, st.peer_signature_checks
                    ),
                ),
                (
                    "peer transit calls/bytes",
                    format!("{}/{}", st.peer_transit_calls, st.peer_transit_bytes),
                ),
                ("report age", format!("{} ms", g.age_ms)),
            ] {
                t.row(vec![k.to_string(), v]);
            }
            out.push('\n');
            out.push_str(&t.render());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc::message::{GatewayStats, GatewayView};

    #[test]
    fn stats_show_the_gateway_report_in_json_and_text() {
        let mut s = StatsView::default();
        assert_eq!(stats_json(&s)["gateway"], Value::Null);
        assert!(stats_text(&s).contains("no report from agent-gw"));
        s.gateway = Some(GatewayView {
            stats: GatewayStats {
                buffer_used: 4 << 20,
                buffer_limit: 16 << 20,
                tasks: 3,
                task_capacity: 512,
                refused_budget: 7,
                refused_tasks_source: 2,
                peer_conns: 3,
                peer_handshakes_out: 5,
                peer_handshakes_in: 4,
                peer_streams_refused: 6,
                peer_assertions_signed: 40,
                peer_signatures: 9,
                peer_assertions_verified: 12,
                peer_signature_checks: 5,
                peer_transit_calls: 2,
                peer_transit_bytes: 16_777_216,
                ..GatewayStats::default()
            },
            age_ms: 900,
        });
        let j = stats_json(&s);
        assert_eq!(j["gateway"]["buffer"]["used"], 4 << 20);
        assert_eq!(j["gateway"]["buffer"]["limit"], 16 << 20);
        assert_eq!(j["gateway"]["tasks"]["capacity"], 512);
        assert_eq!(j["gateway"]["refused"]["budget"], 7);
        assert_eq!(j["gateway"]["refused"]["tasks_source_share"], 2);
        assert_eq!(j["gateway"]["peer_conns"], 3);
        assert_eq!(j["gateway"]["peer_handshakes_out"], 5);
        assert_eq!(j["gateway"]["peer_handshakes_in"], 4);
        assert_eq!(j["gateway"]["peer_streams_refused"], 6);
        assert_eq!(j["gateway"]["peer_transit_bytes"], 16_777_216);
        assert_eq!(j["gateway"]["peer_signatures"], 9);
        assert_eq!(j["gateway"]["peer_signature_checks"], 5);
        let t = stats_text(&s);
        assert!(t.contains("4194304/16777216 (25%)"), "{t}");
        assert!(t.contains("refused: budget full"), "{t}");
        let row = |name: &str| {
            t.lines()
                .find(|l| l.starts_with(name))
                .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
        };
        assert_eq!(row("peer connections").as_deref(), Some("3"), "{t}");
        assert_eq!(row("peer handshakes out/in").as_deref(), Some("5/4"), "{t}");
        assert_eq!(row("peer streams refused").as_deref(), Some("6"), "{t}");
        assert_eq!(
            row("peer assertions signed/signatures").as_deref(),
            Some("40/9"),
            "{t}"
        );
        assert_eq!(
            row("peer assertions verified/checks").as_deref(),
            Some("12/5"),
            "{t}"
        );
    }

    #[test]
    fn tasks_show_the_handles_of_tasks_on_other_routers() {
        let s = StatsView {
            gateway: Some(GatewayView {
                stats: GatewayStats {
                    task_capacity: 8,
                    remote_tasks: 2,
                    refused_remote_source: 3,
                    remote_released: 5,
                    ..GatewayStats::default()
                },
                age_ms: 10,
            }),
            ..StatsView::default()
        };
        let j = tasks_json(&s);
        assert_eq!(j["remote"]["held"], 2);
        assert_eq!(j["remote"]["capacity"], 8);
        assert_eq!(j["remote"]["refused_source_share"], 3);
        assert_eq!(j["remote"]["results_released"], 5);
        let t = tasks_text(&s);
        let row = |name: &str| {
            t.lines()
                .find(|l| l.starts_with(name))
                .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
        };
        assert_eq!(row("on other routers: held").as_deref(), Some("2"), "{t}");
        assert_eq!(
            row("on other routers: results released").as_deref(),
            Some("5"),
            "{t}"
        );
    }
}

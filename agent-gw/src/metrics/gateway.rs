//! agent-gw's own families (`agentgw_*`): requests, buffer budget, task
//! tables, refusals, peer connections, handshakes and assertion checks —
//! what `agentctl stats` shows under `gateway`, taken live at the scrape
//! rather than from the report agentd holds (which may be seconds old).

use agentd::ipc::message::GatewayStats;

use super::text::{EncodeError, Exposition, Kind};

/// Writes the gateway's families. `requests` are the rows of
/// [`super::requests::RequestCounts::rows`].
pub fn write(
    e: &mut Exposition,
    s: &GatewayStats,
    requests: &[(&'static str, &'static str, String, u64)],
) -> Result<(), EncodeError> {
    e.family(
        "agentgw_requests_total",
        Kind::Counter,
        "Requests answered on the LAN and public listeners, by listener, outcome (x-agentd-outcome; 'answered' when unmarked) and HTTP status.",
        requests.iter().map(|(l, o, c, n)| {
            (
                [("listener", *l), ("outcome", *o), ("code", c.as_str())],
                *n,
            )
        }),
    )?;
    e.single(
        "agentgw_buffer_used_bytes",
        Kind::Gauge,
        "Bytes of gateway.buffer_budget in use (task results, stream histories, bodies held for resending).",
        s.buffer_used,
    )?;
    e.single(
        "agentgw_buffer_limit_bytes",
        Kind::Gauge,
        "gateway.buffer_budget in bytes.",
        s.buffer_limit,
    )?;
    e.single(
        "agentgw_buffer_peak_bytes",
        Kind::Gauge,
        "Most bytes of the buffer budget ever in use since start.",
        s.buffer_peak,
    )?;
    e.family(
        "agentgw_tasks",
        Kind::Gauge,
        "Tasks held: 'local' runs here, 'remote' are handles of tasks that run on another router.",
        [
            ([("table", "local")], s.tasks),
            ([("table", "remote")], s.remote_tasks),
        ],
    )?;
    e.single(
        "agentgw_task_capacity",
        Kind::Gauge,
        "gateway.task_capacity: the most tasks each table holds.",
        s.task_capacity,
    )?;
    e.family(
        "agentgw_refusals_total",
        Kind::Counter,
        "New work refused because a resource (buffer budget, task table, remote task table) was full or the caller's tenant or source address held its whole share.",
        [
            ([("resource", "buffer"), ("reason", "full")], s.refused_budget),
            (
                [("resource", "buffer"), ("reason", "tenant_share")],
                s.refused_budget_tenant,
            ),
            (
                [("resource", "buffer"), ("reason", "source_share")],
                s.refused_budget_source,
            ),
            ([("resource", "tasks"), ("reason", "full")], s.refused_tasks_full),
            (
                [("resource", "tasks"), ("reason", "tenant_share")],
                s.refused_tasks_tenant,
            ),
            (
                [("resource", "tasks"), ("reason", "source_share")],
                s.refused_tasks_source,
            ),
            (
                [("resource", "remote_tasks"), ("reason", "full")],
                s.refused_remote_full,
            ),
            (
                [("resource", "remote_tasks"), ("reason", "tenant_share")],
                s.refused_remote_tenant,
            ),
            (
                [("resource", "remote_tasks"), ("reason", "source_share")],
                s.refused_remote_source,
            ),
        ],
    )?;
    e.family(
        "agentgw_task_results_released_total",
        Kind::Counter,
        "Finished tasks released because their result was fetched.",
        [
            ([("table", "local")], s.results_released),
            ([("table", "remote")], s.remote_released),
        ],
    )?;
    e.single(
        "agentgw_stream_history_degraded_total",
        Kind::Counter,
        "Stream events kept with a degraded history bound (buffer budget full).",
        s.history_degraded,
    )?;
    e.single(
        "agentgw_stream_followers_stalled_total",
        Kind::Counter,
        "Stream followers detached for taking no bytes within stream_drain_timeout_ms.",
        s.stalled_followers,
    )?;
    e.single(
        "agentgw_peer_connections",
        Kind::Gauge,
        "Open data-plane connections with other routers' gateways (HTTP/2 over mTLS), both directions.",
        s.peer_conns,
    )?;
    e.family(
        "agentgw_peer_handshakes_total",
        Kind::Counter,
        "Completed TLS handshakes of peer data-plane connections: 'out' dialled by this gateway, 'in' accepted.",
        [
            ([("direction", "out")], s.peer_handshakes_out),
            ([("direction", "in")], s.peer_handshakes_in),
        ],
    )?;
    e.single(
        "agentgw_peer_streams_refused_total",
        Kind::Counter,
        "HTTP/2 streams the peer listener refused or reset.",
        s.peer_streams_refused,
    )?;
    e.single(
        "agentgw_peer_transit_calls_total",
        Kind::Counter,
        "Calls passed through to another router with their body streamed unread.",
        s.peer_transit_calls,
    )?;
    e.single(
        "agentgw_peer_transit_bytes_total",
        Kind::Counter,
        "Request body bytes of calls passed through unread.",
        s.peer_transit_bytes,
    )?;
    e.single(
        "agentgw_peer_assertions_signed_total",
        Kind::Counter,
        "Forwarding assertions issued to peers.",
        s.peer_assertions_signed,
    )?;
    e.single(
        "agentgw_peer_signatures_total",
        Kind::Counter,
        "Ed25519 signatures made for forwarding assertions (calls of one event-loop turn share one).",
        s.peer_signatures,
    )?;
    e.single(
        "agentgw_peer_assertions_verified_total",
        Kind::Counter,
        "Forwarding assertions from peers accepted.",
        s.peer_assertions_verified,
    )?;
    e.single(
        "agentgw_peer_signature_checks_total",
        Kind::Counter,
        "Signature verifications of peer assertions made (refused forgeries count too: checks above accepted assertions mean refusals).",
        s.peer_signature_checks,
    )?;
    Ok(())
}

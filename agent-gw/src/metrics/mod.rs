//! The Prometheus endpoint: `GET /metrics` on `gateway.admin_listen`.
//!
//! ```text
//!  scraper ──GET /metrics──▶ admin listener (agent-gw)
//!                              │ live: stats::snapshot + request counts   → agentgw_*
//!                              └─ IPC `stats` to agentd (bounded wait)   → agentd_*
//! ```
//!
//! One endpoint covers both daemons, and agent-gw serves it: DESIGN §11
//! puts it on the gateway's admin listener, agentd (privileged, the
//! control plane) keeps no HTTP listener at all, and the gateway already
//! holds an IPC connection to ask agentd for its counters. One scrape then
//! is one consistent moment: the gateway's numbers are read when the
//! request arrives (not the up-to-5-s-old report agentd holds), agentd's
//! are its answer to that same request. When agentd does not answer in
//! time, `agentd_up` is 0 and only the gateway's families are written, so
//! a scrape never hangs on the control plane.
//!
//! The listener is bounded like the others: a few connections at once
//! (more are closed at accept), a small request head that must arrive
//! in time, a lifetime per connection. It has no authentication; the
//! address is the access control, so anything but loopback is logged.

mod agentd_counters;
mod gateway;
pub mod requests;
pub mod text;

use std::cell::Cell;
use std::convert::Infallible;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use agentd::ipc::message::{GatewayStats, StatsView};

use crate::body::{full, Body};
use crate::core::Core;

/// What a scrape reads: the gateway core, and the requests its
/// listeners counted.
#[derive(Clone, Debug)]
pub struct Scraped {
    pub core: Rc<Core>,
    pub requests: Rc<requests::RequestCounts>,
}
use text::{EncodeError, Exposition, Kind};

/// Scrapes served at once; further connections are closed at accept.
pub const MAX_CONNECTIONS: u32 = 4;
/// A scraper must send its request head within this time.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request head read.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// Longest a connection may stay open (keep-alive included).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// How long a scrape waits for agentd's counters.
const AGENTD_WAIT: Duration = Duration::from_secs(2);
/// The one path served.
pub const PATH: &str = "/metrics";

/// Binds `gateway.admin_listen` when it is set and serves it. An
/// address that cannot be bound (taken by another gateway on the same
/// host, say) is logged and the data plane runs without metrics: they
/// are not worth an outage.
pub async fn start(gw: &Scraped) -> io::Result<()> {
    let Some(addr) = gw.core.cfg.admin_listen else {
        return Ok(());
    };
    let listener = match crate::listen::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            agentd::log_error!(
                "admin listener (gateway.admin_listen) {addr}: {e}; serving without /metrics"
            );
            return Ok(());
        }
    };
    if !addr.ip().is_loopback() {
        agentd::log_warn!(
            "admin listener {addr} is not on loopback: /metrics has no authentication, anyone who reaches the address can read it"
        );
    }
    agentd::log_notice!("listening admin={}", listener.local_addr()?);
    tokio::task::spawn_local(serve(listener, gw.clone()));
    Ok(())
}

/// Serves scrapes from `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, gw: Scraped) {
    let mut pacer = agentd::accept::Pacer::new("admin listener");
    let open = Rc::new(Cell::new(0u32));
    loop {
        let Ok((stream, _)) = pacer.accept(&listener).await else {
            continue;
        };
        if open.get() >= MAX_CONNECTIONS {
            drop(stream);
            continue;
        }
        open.set(open.get() + 1);
        let (gw, open) = (gw.clone(), open.clone());
        tokio::task::spawn_local(async move {
            let svc = service_fn(|req| {
                let gw = gw.clone();
                async move { Ok::<_, Infallible>(answer(&gw, &req).await) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, conn).await;
            open.set(open.get() - 1);
        });
    }
}

/// `GET`/`HEAD /metrics` → the exposition; another method there → 405;
/// any other path → 404. A request body is never read.
async fn answer(gateway: &Scraped, req: &Request<Incoming>) -> Response<Body> {
    let state = &gateway.core;
    if req.uri().path() != PATH {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: only GET /metrics is served here\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: GET /metrics\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let agentd = match tokio::time::timeout(AGENTD_WAIT, state.control.stats()).await {
        Ok(Ok(s)) => Some(s),
        _ => None,
    };
    let gw = crate::stats::snapshot(state);
    match render(&gw, &gateway.requests.rows(), agentd.as_ref()) {
        Ok(body) => {
            let mut r = Response::new(if req.method() == Method::HEAD {
                crate::body::empty()
            } else {
                full(Bytes::from(body))
            });
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(text::CONTENT_TYPE),
            );
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        Err(e) => {
            agentd::log_error!("metrics: {e}");
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "metrics could not be rendered\n",
            )
        }
    }
}

fn plain(status: StatusCode, msg: &'static str) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from_static(msg.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The whole exposition: the gateway's families, `agentd_up`, and
/// agentd's families when it answered.
pub fn render(
    gw: &GatewayStats,
    requests: &[(&'static str, &'static str, String, u64)],
    agentd: Option<&StatsView>,
) -> Result<String, EncodeError> {
    let mut e = Exposition::new();
    gateway::write(&mut e, gw, requests)?;
    e.single(
        "agentd_up",
        Kind::Gauge,
        "1 when agentd answered this scrape's stats request in time, else 0 (its families are then left out).",
        u64::from(agentd.is_some()),
    )?;
    if let Some(s) = agentd {
        agentd_counters::write(&mut e, &s.counters)?;
    }
    Ok(e.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_agentd_only_the_gateway_and_agentd_up_0_are_written() {
        let out = render(&GatewayStats::default(), &[], None).unwrap();
        assert!(out.contains("\nagentd_up 0\n"), "{out}");
        assert!(out.contains("# TYPE agentgw_requests_total counter\n"));
        assert!(!out.contains("agentd_routes"));
    }

    #[test]
    fn with_agentd_both_daemons_families_are_written() {
        let mut s = StatsView::default();
        s.counters.insert("routes.local".into(), 2);
        let gw = GatewayStats {
            tasks: 3,
            ..Default::default()
        };
        let out = render(&gw, &[("lan", "answered", "200".into(), 7)], Some(&s)).unwrap();
        assert!(out.contains("\nagentd_up 1\n"), "{out}");
        assert!(out.contains("agentd_routes{source=\"local\"} 2\n"));
        assert!(out.contains("agentgw_tasks{table=\"local\"} 3\n"));
        assert!(out.contains(
            "agentgw_requests_total{listener=\"lan\",outcome=\"answered\",code=\"200\"} 7\n"
        ));
    }
}

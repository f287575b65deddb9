//! The relay roles on the data plane (DESIGN §7 "Relay (NAT)"). agentd
//! chooses the relay; the gateway follows the FIB's links:
//!
//! * At the relay, a client router's link is [`LinkRelay::Client`]: it
//!   is never dialled. Its tunnel arrives on our peer listener (ALPN
//!   `agentd-relay/1`, the same trust as a data connection: exactly the
//!   key its ARPX session verified), and we are the HTTP/2 client on it:
//!   calls toward the client ride its streams ([`client_tunnel`]).
//! * At the client, our relay's link is [`LinkRelay::Server`]: besides
//!   the usual data connection (our calls into the mesh), a [`Keeper`]
//!   holds our tunnel to it open and serves the calls the relay sends us
//!   on it, exactly as on a data connection from a neighbour.
//!
//! The relay reads and forwards the calls it carries: it sees payloads.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use agentd::fib::LinkRelay;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::core::Core;
use crate::forward::hop::HopBody;
use crate::peer::coalesce::Coalesce;
use crate::peer::conns::{connect_tls, jitter};
use crate::peer::{Link, PeerStats};
use crate::relay::tunnel::{self, ClientLimits, Liveness};

use super::gateway::Gateway;
use super::peer::{neighbour_service, Tls};

/// Longest TCP connect plus TLS handshake of our tunnel.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

fn liveness(state: &Core) -> Liveness {
    let r = &state.cfg.relay;
    Liveness {
        interval: Duration::from_millis(r.ping_interval_ms),
        timeout: Duration::from_millis(r.ping_timeout_ms),
    }
}

/// The relay's end: a client router's tunnel, accepted on the peer
/// listener. Calls toward the client ride it until it ends, the client
/// stops answering PINGs, or its ARPX session ends.
pub(super) async fn client_tunnel(gw: Rc<Gateway>, tls: Tls, link: Link, from: SocketAddr) {
    let state = gw.core.clone();
    let id = link.router_id.clone();
    if link.relay != LinkRelay::Client {
        agentd::log_info!(
            "relay tunnel from {id} at {from} refused: it is not a client router of this relay"
        );
        return;
    }
    let close = state.peer.accepted(link.clone());
    let r = state.cfg.relay;
    let limits = ClientLimits {
        max_streams: r.max_streams_per_client,
        max_bytes_in_flight: r.max_bytes_in_flight,
    };
    let opened = tunnel::open::<_, HopBody>(Coalesce::new(tls), limits, liveness(&state)).await;
    let (t, conn) = match opened {
        Ok(x) => x,
        Err(e) => {
            agentd::log_info!("relay tunnel from {id} at {from}: HTTP/2 handshake: {e}");
            return;
        }
    };
    let t = Rc::new(t);
    let Some(n) = state.peer.conns.tunnel_up(&link, t.sender(), t.clone()) else {
        return;
    };
    let stats = state.peer.stats.clone();
    PeerStats::add(&stats.conns, 1);
    agentd::log_info!("relay tunnel from client router {id} at {from} up");
    let why = tokio::select! {
        r = conn => match r {
            Ok(()) => "closed by the client router".to_string(),
            Err(e) => e.to_string(),
        },
        () = close.notified() => "its ARPX session ended".to_string(),
    };
    agentd::log_info!("relay tunnel from client router {id} ended: {why}");
    state.peer.conns.tunnel_down(&id, n, why);
    stats.conns.set(stats.conns.get().saturating_sub(1));
}

/// The client's end: one [`Keeper`] per relay link (there is one, the
/// relay agentd uses).
#[derive(Debug, Default)]
pub struct Keepers {
    running: HashMap<Box<str>, (Link, JoinHandle<()>)>,
}

impl Keepers {
    /// Follows the link set: a keeper for each link to our relay, none
    /// for a link that went or changed (its tunnel closes with it).
    pub fn sync(&mut self, state: &Rc<Core>, links: &[Link]) {
        self.running.retain(|_, (link, task)| {
            let keep = links.contains(link);
            if !keep {
                task.abort();
            }
            keep
        });
        for l in links.iter().filter(|l| l.relay == LinkRelay::Server) {
            if self.running.contains_key(&l.router_id) {
                continue;
            }
            let task = tokio::task::spawn_local(keep(state.clone(), l.clone()));
            self.running.insert(l.router_id.clone(), (l.clone(), task));
        }
    }
}

impl Drop for Keepers {
    fn drop(&mut self) {
        for (_, task) in self.running.values() {
            task.abort();
        }
    }
}

/// Holds our tunnel to the relay of `link` open, serving what arrives
/// on it, and redials with backoff and jitter until aborted.
async fn keep(state: Rc<Core>, link: Link) {
    let r = state.cfg.relay;
    let min = Duration::from_millis(r.reconnect_min_ms.max(1));
    let max = Duration::from_millis(r.reconnect_max_ms.max(r.reconnect_min_ms).max(1));
    let mut backoff = min;
    let id = link.router_id.clone();
    loop {
        let started = tokio::time::Instant::now();
        match dial(&state, &link).await {
            Ok((tls, from)) => {
                let Some(svc) = neighbour_service(&state, &link, from) else {
                    return;
                };
                PeerStats::add(&state.peer.stats.handshakes_out, 1);
                agentd::log_notice!("relay tunnel to {id} at {} up", link.data);
                let ended = tunnel::serve(Coalesce::new(tls), svc, liveness(&state)).await;
                let why = match ended {
                    Ok(()) => "closed by the relay".to_string(),
                    Err(e) => e.to_string(),
                };
                agentd::log_warn!("relay tunnel to {id} ended: {why}");
                if started.elapsed() >= Duration::from_secs(10) {
                    backoff = min;
                }
            }
            Err(why) => agentd::log_warn!("relay tunnel to {id} at {}: {why}", link.data),
        }
        tokio::time::sleep(jitter(backoff)).await;
        backoff = (backoff * 2).min(max);
    }
}

type ClientTls = tokio_rustls::client::TlsStream<TcpStream>;

/// Mutual TLS to the relay's peer listener, ALPN `agentd-relay/1`, the
/// relay proved by its linked key.
async fn dial(state: &Core, link: &Link) -> Result<(ClientTls, SocketAddr), String> {
    let tls = state
        .peer
        .tls()
        .ok_or("the data plane has no identity yet")?;
    let cfg = tls
        .borrow()
        .tunnel(&link.router_id)
        .ok_or_else(|| format!("router {} is not our relay", link.router_id))?;
    let work = async {
        let (stream, v) = connect_tls(link, &tls, cfg).await?;
        if !v.tunnel || v.key != link.key {
            return Err("handshake: the relay did not accept a tunnel".to_string());
        }
        let from = stream
            .get_ref()
            .0
            .peer_addr()
            .map_err(|e| format!("connect: {e}"))?;
        Ok((stream, from))
    };
    timeout(DIAL_TIMEOUT, work)
        .await
        .map_err(|_| format!("no handshake within {} s", DIAL_TIMEOUT.as_secs()))?
}

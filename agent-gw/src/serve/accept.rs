//! The one acceptor of the LAN, public and peer listeners.
//!
//! Admission happens here, before anything is allocated for a
//! connection and before its task is spawned: a TLS listener's handshake
//! slot (in total and per source, `handshake`), then the connection caps
//! shared by every listener (in total and per source, `sources`). A burst
//! accepted in one turn of the loop counts before any of its tasks runs,
//! and a capped source's excess connections are closed here without
//! touching anybody else's.

use std::net::SocketAddr;
use std::rc::Rc;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use agentd::time::Millis;

use crate::front::Ingress;
use crate::handshake::{HandshakeRefusal, HandshakeSlot, Handshakes};
use crate::sources::{Cap, ConnRefusal, ConnSlot};

use super::gateway::Gateway;

/// Which listener, with what it needs to serve a connection.
#[derive(Clone)]
pub enum Listener {
    /// The LAN SDK listener: plain HTTP/1.1.
    Lan,
    /// The public listener: TLS, then h2 or HTTP/1.1 by ALPN.
    Public(TlsAcceptor),
    /// The peer listener: mutual TLS with linked routers, h2.
    Peer,
    /// The listener of one agent's address (when the public listener
    /// does not take it): TLS as the public one, pinned to that agent.
    /// All of them share one set of handshake slots, so more addresses
    /// do not mean more handshakes in progress.
    Agent(TlsAcceptor, Handshakes),
}

impl std::fmt::Debug for Listener {
    // The TLS acceptor has no `Debug` of its own.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Listener {
    fn name(&self) -> &'static str {
        match self {
            Listener::Lan => "LAN listener",
            Listener::Public(_) => "public listener",
            Listener::Peer => "peer listener",
            Listener::Agent(..) => "agent address listener",
        }
    }

    /// The handshake slots of a TLS listener.
    fn handshakes(&self) -> Option<Handshakes> {
        let (total, per_source) = match self {
            Listener::Lan => return None,
            Listener::Agent(_, shared) => return Some(shared.clone()),
            Listener::Public(_) => (
                super::public::MAX_HANDSHAKES,
                super::public::MAX_HANDSHAKES_PER_SOURCE,
            ),
            Listener::Peer => (
                super::peer::MAX_HANDSHAKES,
                super::peer::MAX_HANDSHAKES_PER_SOURCE,
            ),
        };
        Some(Handshakes::new(self.name(), total, per_source))
    }
}

/// Serves connections from `listener` until the task is dropped. Must
/// run inside a `LocalSet`.
pub async fn serve(listener: TcpListener, kind: Listener, gw: Rc<Gateway>) {
    let name = kind.name();
    let mut pacer = agentd::accept::Pacer::new(name);
    let handshakes = kind.handshakes();
    loop {
        let (stream, from) = match pacer.accept(&listener).await {
            Ok(x) => x,
            Err(e) => {
                // Already paced (EMFILE and friends pause, doubling up
                // to a second) and logged by the pacer.
                agentd::log_debug!("{name}: accept failed: {e}");
                continue;
            }
        };
        // On a dual-stack listener an IPv4 client arrives as
        // `::ffff:a.b.c.d`: every per-source rule sees its IPv4 address.
        let from = SocketAddr::new(from.ip().to_canonical(), from.port());
        let Some(ingress) = ingress(&gw, &kind, &stream) else {
            agentd::log_debug!("{name}: connection from {from} to an agent's address closed: the address serves TLS on its own port only, or was released");
            continue;
        };
        let handshake = match handshakes.as_ref().map(|h| h.take(from.ip())) {
            None => None,
            Some(Ok(h)) => Some(h),
            Some(Err(refused)) => {
                drop(stream);
                note_handshake_refusal(&gw, refused);
                continue;
            }
        };
        let slot = match gw.core.conns.admit(from.ip()) {
            Ok(slot) => slot,
            Err(refused) => {
                drop(stream);
                note_refusal(&gw, refused);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::task::spawn_local(connection(
            stream,
            (from, ingress),
            kind.clone(),
            gw.clone(),
            (handshake, slot),
        ));
    }
}

/// One accepted connection, holding its handshake slot until its
/// handshake ends and its connection slot until it closes.
async fn connection(
    stream: TcpStream,
    (from, ingress): (SocketAddr, Ingress),
    kind: Listener,
    gw: Rc<Gateway>,
    (handshake, _slot): (Option<HandshakeSlot>, ConnSlot),
) {
    // The TLS kinds run boxed: their state (TLS session, relay tunnel,
    // h2) is several KiB, and inline it would size the task of every
    // plaintext LAN connection too (see `tests::a_lan_connection_and_its_call_hold_a_few_kib_of_futures`).
    match kind {
        Listener::Lan => {
            super::http::http1_connection(stream, super::http::Link::plain(from, ingress), gw).await
        }
        Listener::Public(acceptor) | Listener::Agent(acceptor, _) => {
            Box::pin(public(acceptor, stream, (from, ingress), gw, handshake)).await
        }
        Listener::Peer => Box::pin(peer(stream, from, gw, handshake)).await,
    }
}

/// A connection to the public listener or an agent's address: TLS, then
/// HTTP/1.1 or h2.
async fn public(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    (from, ingress): (SocketAddr, Ingress),
    gw: Rc<Gateway>,
    handshake: Option<HandshakeSlot>,
) {
    let tls = super::public::handshake(&acceptor, stream, from).await;
    drop(handshake);
    if let Some(tls) = tls {
        super::public::connection(tls, from, gw, ingress).await;
    }
}

/// A connection to the peer listener: a neighbour's link, or a relay
/// client's tunnel.
async fn peer(
    stream: TcpStream,
    from: SocketAddr,
    gw: Rc<Gateway>,
    handshake: Option<HandshakeSlot>,
) {
    let accepted = super::peer::accept(&gw.core, stream, from).await;
    drop(handshake);
    match accepted {
        Some(a) if a.tunnel => super::relay::client_tunnel(gw, a.tls, a.link, from).await,
        Some(a) => super::peer::connection(gw, a.tls, a.link, from).await,
        None => {}
    }
}

/// What a connection to `stream`'s local address may reach, by the
/// listener that took it; `None`: close it. An agent's address (DESIGN
/// §7 "IPv6 /128") is served by TLS listeners only, each call pinned to
/// that agent: never in plaintext on the LAN listener, never as a peer
/// link, and not at all once it was released.
fn ingress(gw: &Gateway, kind: &Listener, stream: &TcpStream) -> Option<Ingress> {
    let pin = {
        let fib = gw.core.fib.borrow();
        match fib.agent_addrs().is_empty() {
            // No agent address here: no syscall per connection.
            true => None,
            false => fib.agent_at(stream.local_addr().ok()?.ip()),
        }
    };
    match (kind, pin) {
        (Listener::Public(_) | Listener::Agent(..), Some(a)) => Some(Ingress::Agent(a)),
        (Listener::Public(_), None) => Some(Ingress::Public),
        (Listener::Lan, None) => Some(Ingress::Lan),
        (Listener::Peer, None) => Some(Ingress::Peer),
        (Listener::Agent(..) | Listener::Lan | Listener::Peer, _) => None,
    }
}

/// Logs a connection refused at accept (rate-limited: a flood of refused
/// connections is a few lines, each counting the refusals it stands for).
pub(crate) fn note_refusal(gw: &Gateway, refused: ConnRefusal) {
    let cap = match refused {
        ConnRefusal::Full { .. } => Cap::Connections,
        ConnRefusal::SourceFull { .. } => Cap::ConnsPerSource,
    };
    note_cap(gw, cap, &refused);
}

/// Logs a connection refused at accept for want of a handshake slot.
fn note_handshake_refusal(gw: &Gateway, refused: HandshakeRefusal) {
    note_cap(gw, Cap::Handshakes, &refused);
}

fn note_cap(gw: &Gateway, cap: Cap, refused: &dyn std::fmt::Display) {
    let line = gw
        .core
        .cap_log
        .borrow_mut()
        .refused(cap, refused, Millis::now());
    if let Some(line) = line {
        agentd::log_warn!("connection {line}");
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use hyper::body::Incoming;
    use hyper::Request;

    use super::*;
    use crate::core::Core;
    use crate::front::Ctx;

    fn owned<A, B, C, D, E, F: Future>(_: fn(A, B, C, D, E) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn borrowing<'a, A: 'a, B: 'a, C, F: Future>(_: impl FnOnce(&'a A, &'a B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn pipeline<'a, I, F: Future>(_: impl FnOnce(&'a Rc<Core>, I) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// What a connection costs while it is open is mostly its task's
    /// future and the future of the request in flight on it: each is as
    /// large as the largest state it can reach. The TLS kinds are boxed,
    /// the A2A endpoint too, and an invocation travels boxed, so that a
    /// plaintext LAN connection with a call in flight holds a few KiB,
    /// not the ~21 KiB it did (12 472 + 8 240 bytes in a release build).
    #[test]
    fn a_lan_connection_and_its_call_hold_a_few_kib_of_futures() {
        let task = owned(connection);
        let request = borrowing::<Gateway, Ctx, Request<Incoming>, _>(crate::serve::http::dispatch);
        let call = pipeline(crate::pipeline::invoke);
        assert!(task <= 2048, "a connection's task future is {task} bytes");
        assert!(request <= 5120, "a request's future is {request} bytes");
        assert!(call <= 3072, "an invocation's future is {call} bytes");
    }
}

//! The agents' own addresses (DESIGN §7 "IPv6 /128"): agentd binds a /128
//! per agent that asks, and the FIB names them ([`agentd::fib::AgentAddr`]).
//! Each is served with the public listener's TLS on its port, every call
//! pinned to its agent (`Ingress::Agent`, set by the acceptor from the
//! connection's local address).
//!
//! Where the public listener is bound to `[::]` on that port it takes
//! every address already; otherwise — public listener off, or bound to
//! one address — this driver binds a listener per agent address and
//! closes it when the address is released. Sockets are bound with
//! `IPV6_FREEBIND`, so an address agentd added a moment ago (still
//! tentative, or not yet seen here) binds at once.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv6Addr, SocketAddr};
use std::rc::Rc;

use agentd::fib::AgentAddr;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::accept::{self, Listener};
use super::gateway::Gateway;

/// Whether the public listener, bound at `public`, takes connections to
/// every agent address on `port`.
pub fn covered_by(public: Option<SocketAddr>, port: u16) -> bool {
    public.is_some_and(|a| a.is_ipv6() && a.ip().is_unspecified() && a.port() == port)
}

/// Keeps one listener per agent address for as long as the gateway
/// runs. Must run inside a `LocalSet`.
pub async fn run(gw: Rc<Gateway>, acceptor: TlsAcceptor, port: u16) {
    let mut serving: HashMap<Ipv6Addr, JoinHandle<()>> = HashMap::new();
    let mut changed = gw.core.agent_addrs_changed.subscribe();
    let handshakes = crate::handshake::Handshakes::new(
        "agent address listeners",
        super::public::MAX_HANDSHAKES,
        super::public::MAX_HANDSHAKES_PER_SOURCE,
    );
    loop {
        let wanted: Vec<Ipv6Addr> = gw
            .core
            .fib
            .borrow()
            .agent_addrs()
            .iter()
            .map(|a| a.addr)
            .collect();
        serving.retain(|addr, task| {
            let keep = wanted.contains(addr);
            if !keep {
                task.abort();
                agentd::log_info!("agent address [{addr}]:{port} released: no longer served");
            }
            keep
        });
        for addr in wanted {
            if serving.contains_key(&addr) {
                continue;
            }
            match bind(addr, port) {
                Ok(l) => {
                    agentd::log_info!("serving agent address [{addr}]:{port}");
                    let kind = Listener::Agent(acceptor.clone(), handshakes.clone());
                    let task = accept::serve(l, kind, gw.clone());
                    serving.insert(addr, tokio::task::spawn_local(task));
                }
                // Tried again at the next change of the set.
                Err(e) => agentd::log_warn!("cannot listen on agent address [{addr}]:{port}: {e}"),
            }
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

/// Resolves once agent address `a` is no longer bound to the same agent
/// (released, or another agent's now): a connection pinned to it closes
/// then, rather than hang on an address that left the link.
pub async fn released(core: &crate::core::Core, a: &AgentAddr) {
    let mut changed = core.agent_addrs_changed.subscribe();
    loop {
        let same = core
            .fib
            .borrow()
            .agent_at(std::net::IpAddr::V6(a.addr))
            .is_some_and(|now| *now == *a);
        if !same || changed.changed().await.is_err() {
            return;
        }
    }
}

/// A listener on `[addr]:port`, bindable before the address is usable.
fn bind(addr: Ipv6Addr, port: u16) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::os::fd::AsRawFd;
    let s = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    s.set_only_v6(true)?;
    s.set_reuse_address(true)?;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket, a c_int option of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_FREEBIND,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    s.set_nonblocking(true)?;
    s.bind(&SocketAddr::from((addr, port)).into())?;
    s.listen(1024)?;
    TcpListener::from_std(s.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unspecified_v6_public_listener_on_the_port_covers() {
        let at = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
        assert!(covered_by(at("[::]:7443"), 7443));
        assert!(!covered_by(at("[::]:8443"), 7443));
        assert!(!covered_by(at("0.0.0.0:7443"), 7443));
        assert!(!covered_by(at("[2001:db8::1]:7443"), 7443));
        assert!(!covered_by(None, 7443));
    }
}

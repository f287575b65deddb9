//! Binding a listener: dual-stack where the host has IPv6. Shared by the
//! serving layer's listeners and the metrics endpoint.

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpListener;

/// Binds the SDK listener. An IPv6 address is bound with `IPV6_V6ONLY`
/// off, so the default `[::]:7446` is dual-stack: IPv4 clients reach it
/// too (as `::ffff:a.b.c.d`), whatever the host's `bindv6only` default. On
/// a host without IPv6, `[::]` falls back to `0.0.0.0` on the same port,
/// with a log line.
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let SocketAddr::V6(v6) = addr else {
        return TcpListener::bind(addr).await;
    };
    match bind_dual_stack(addr) {
        Ok(l) => Ok(l),
        Err(e) if v6.ip().is_unspecified() && means_no_ipv6(&e) => {
            let v4 = SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, v6.port()));
            agentd::log_warn!("cannot listen on {addr} ({e}): no IPv6 here; listening on {v4}");
            TcpListener::bind(v4).await
        }
        Err(e) => Err(e),
    }
}

/// Errors that say the host has no IPv6 (kernel without it, or no
/// IPv6 address at all), as opposed to a port in use.
pub fn means_no_ipv6(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT | libc::EADDRNOTAVAIL)
    )
}

/// Length of the accept queue (what std and tokio use).
const BACKLOG: i32 = 1024;

fn bind_dual_stack(addr: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    s.set_only_v6(false)?;
    // As std/tokio do: a restarted gateway can rebind at once.
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    TcpListener::from_std(s.into())
}

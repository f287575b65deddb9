//! Health probes of local and static route endpoints.
//!
//! The I/O of a probe: one short-lived connection, `GET /healthz` over
//! HTTP/1.1 on the endpoint's host:port (2xx = healthy), or a bare TCP
//! connect for endpoints we cannot speak HTTP to (https). The verdict is
//! only an observation; `health::` decides what to probe when and applies
//! the failure/recovery thresholds per endpoint.
//!
//! A probe is a connection the router makes on a registrant's behalf, so
//! it obeys the same SSRF guard as forwarding: a host name is resolved
//! here and every address checked with [`Guard`] (a name may resolve to
//! the router itself long after its registration was accepted); the probe
//! connects to the checked address, never re-resolving. IP literals were
//! checked when the route was registered or loaded.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::endpoint::{Guard, Refusal};
pub use crate::health::target::{ProbeTarget, TargetError};

/// Why a probe judged an endpoint unhealthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeFailure {
    Timeout,
    Connect(std::io::ErrorKind),
    Io(std::io::ErrorKind),
    /// The peer answered, but not with an HTTP 2xx status line.
    Status(Option<u16>),
    /// The host name resolved nowhere.
    Unresolvable,
    /// The host name resolved to an address the guard refuses; nothing
    /// was sent.
    Refused(Refusal),
}

impl fmt::Display for ProbeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeFailure::Timeout => write!(f, "timed out"),
            ProbeFailure::Connect(k) => write!(f, "connect failed: {k}"),
            ProbeFailure::Io(k) => write!(f, "i/o error: {k}"),
            ProbeFailure::Status(Some(s)) => write!(f, "GET /healthz answered {s}"),
            ProbeFailure::Status(None) => write!(f, "GET /healthz answered no HTTP status line"),
            ProbeFailure::Unresolvable => write!(f, "host name resolved to no address"),
            ProbeFailure::Refused(r) => write!(f, "not probed: endpoint {r}"),
        }
    }
}

/// Status line reads stop here; a health answer needs no more.
const MAX_STATUS_LINE: usize = 256;

/// Runs one probe, bounded by `timeout` in total.
pub async fn probe(
    target: &ProbeTarget,
    guard: &Guard,
    timeout: Duration,
) -> Result<(), ProbeFailure> {
    match tokio::time::timeout(timeout, probe_inner(target, guard)).await {
        Ok(r) => r,
        Err(_) => Err(ProbeFailure::Timeout),
    }
}

/// `authority` as a socket address when its host is an IP literal.
fn literal(authority: &str) -> Option<SocketAddr> {
    authority.parse().ok()
}

/// Where a probe of `authority` may connect: the literal itself, or every
/// address its name resolves to, each checked by `guard`.
async fn checked_addrs(authority: &str, guard: &Guard) -> Result<Vec<SocketAddr>, ProbeFailure> {
    if let Some(addr) = literal(authority) {
        return Ok(vec![addr]);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(authority)
        .await
        .map_err(|_| ProbeFailure::Unresolvable)?
        .collect();
    if addrs.is_empty() {
        return Err(ProbeFailure::Unresolvable);
    }
    let local = crate::endpoint::local_addrs();
    for a in &addrs {
        let ip: IpAddr = a.ip();
        guard
            .check_ip(ip, false, a.port(), &local)
            .map_err(ProbeFailure::Refused)?;
    }
    Ok(addrs)
}

async fn connect(addrs: &[SocketAddr]) -> Result<TcpStream, ProbeFailure> {
    let mut last = std::io::ErrorKind::NotFound;
    for a in addrs {
        match TcpStream::connect(a).await {
            Ok(s) => {
                // Every TCP socket of the suite: one write is one segment.
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = e.kind(),
        }
    }
    Err(ProbeFailure::Connect(last))
}

async fn probe_inner(target: &ProbeTarget, guard: &Guard) -> Result<(), ProbeFailure> {
    let addrs = checked_addrs(target.authority(), guard).await?;
    let mut stream = connect(&addrs).await?;
    let ProbeTarget::Http { authority } = target else {
        return Ok(());
    };
    let req = format!(
        "GET /healthz HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: agentd-health\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(req.as_bytes())
        .await
        .map_err(|e| ProbeFailure::Io(e.kind()))?;
    let mut buf = [0u8; MAX_STATUS_LINE];
    let mut len = 0;
    while len < buf.len() && !buf[..len].contains(&b'\n') {
        let n = stream
            .read(&mut buf[len..])
            .await
            .map_err(|e| ProbeFailure::Io(e.kind()))?;
        if n == 0 {
            break;
        }
        len += n;
    }
    match parse_status(&buf[..len]) {
        Some(code) if (200..300).contains(&code) => Ok(()),
        other => Err(ProbeFailure::Status(other)),
    }
}

/// Status code of an `HTTP/1.x NNN ...` line.
pub fn parse_status(head: &[u8]) -> Option<u16> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_ascii_whitespace();
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse() {
        assert_eq!(parse_status(b"HTTP/1.1 204 No Content\r\n"), Some(204));
        assert_eq!(parse_status(b"HTTP/1.0 503\r\n"), Some(503));
        assert_eq!(parse_status(b"SSH-2.0-x\r\n"), None);
        assert_eq!(parse_status(b""), None);
    }

    fn serve_once(
        answer: &'static [u8],
    ) -> (std::net::SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = vec![0u8; 1024];
            let n = s.read(&mut req).unwrap();
            req.truncate(n);
            s.write_all(answer).unwrap();
            req
        });
        (addr, h)
    }

    /// Tests probe loopback listeners.
    fn open_guard() -> Guard {
        Guard {
            allow_loopback: true,
            own_ports: Vec::new(),
            lan: Default::default(),
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn http_probe_sends_get_healthz_and_accepts_2xx() {
        let (addr, h) = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        let t = ProbeTarget::Http {
            authority: addr.to_string().into(),
        };
        assert_eq!(
            rt().block_on(probe(&t, &open_guard(), Duration::from_secs(5))),
            Ok(())
        );
        let req = h.join().unwrap();
        assert!(
            req.starts_with(b"GET /healthz HTTP/1.1\r\n"),
            "{:?}",
            String::from_utf8_lossy(&req)
        );
    }

    #[test]
    fn http_probe_rejects_error_status() {
        let (addr, h) = serve_once(b"HTTP/1.1 503 Service Unavailable\r\n\r\n");
        let t = ProbeTarget::Http {
            authority: addr.to_string().into(),
        };
        assert_eq!(
            rt().block_on(probe(&t, &open_guard(), Duration::from_secs(5))),
            Err(ProbeFailure::Status(Some(503)))
        );
        h.join().unwrap();
    }

    #[test]
    fn refused_connection_is_a_connect_failure() {
        // Bind then drop to get a loopback port nobody listens on.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let t = ProbeTarget::Tcp {
            authority: addr.to_string().into(),
        };
        assert!(matches!(
            rt().block_on(probe(&t, &open_guard(), Duration::from_secs(5))),
            Err(ProbeFailure::Connect(_))
        ));
    }

    #[test]
    fn a_name_resolving_to_loopback_is_never_probed_unless_allowed() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let t = ProbeTarget::Tcp {
            authority: format!("localhost:{port}").into(),
        };
        let closed = Guard::default();
        let r = rt().block_on(probe(&t, &closed, Duration::from_secs(5)));
        assert!(
            matches!(
                r,
                Err(ProbeFailure::Refused(Refusal::Loopback))
                    | Err(ProbeFailure::Refused(Refusal::OwnAddress))
            ),
            "{r:?}"
        );
        assert!(l.accept().is_err(), "a refused probe must not connect");
        // The guard's listener ports are refused even with loopback open.
        let own = Guard {
            allow_loopback: true,
            own_ports: vec![port],
            lan: Default::default(),
        };
        let r = rt().block_on(probe(&t, &own, Duration::from_secs(5)));
        assert_eq!(r, Err(ProbeFailure::Refused(Refusal::OwnListener)));
        assert!(l.accept().is_err());
        // Allowed (a route granted loopback): probed, and only then.
        let r = rt().block_on(probe(&t, &open_guard(), Duration::from_secs(5)));
        assert_eq!(r, Ok(()));
        let mut accepted = false;
        for _ in 0..100 {
            if l.accept().is_ok() {
                accepted = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(accepted, "the allowed probe connected");
    }
}

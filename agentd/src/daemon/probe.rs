//! Health probes of local and static route endpoints.
//!
//! A probe is one short-lived connection: `GET /healthz` over HTTP/1.1 on
//! the endpoint's host:port (2xx = healthy), or a bare TCP connect for
//! endpoints we cannot speak HTTP to (https). The verdict is only an
//! observation; `health::` applies the failure/recovery thresholds.

use std::fmt;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What to probe, derived once from a route's endpoint URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProbeTarget {
    /// `GET /healthz` on `authority` (`host:port`, IPv6 in brackets).
    Http { authority: String },
    /// TCP connect only.
    Tcp { authority: String },
}

/// Why an endpoint URL cannot be probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    Scheme,
    NoHost,
    BadPort,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TargetError::Scheme => "endpoint is not an http:// or https:// URL",
            TargetError::NoHost => "endpoint has no host",
            TargetError::BadPort => "endpoint port is not a number in 1..65535",
        })
    }
}

impl std::error::Error for TargetError {}

impl ProbeTarget {
    /// `http://host[:port]/...` → HTTP probe; `https://...` → TCP probe
    /// (agentd carries no TLS client for health checks).
    pub fn for_endpoint(url: &str) -> Result<ProbeTarget, TargetError> {
        let (rest, default_port, http) = if let Some(r) = url.strip_prefix("http://") {
            (r, 80, true)
        } else if let Some(r) = url.strip_prefix("https://") {
            (r, 443, false)
        } else {
            return Err(TargetError::Scheme);
        };
        let hostport = rest.split(['/', '?', '#']).next().unwrap_or("");
        let hostport = hostport.rsplit_once('@').map_or(hostport, |(_, h)| h);
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or(TargetError::NoHost)?;
            (format!("[{h}]"), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() || host == "[]" {
            return Err(TargetError::NoHost);
        }
        let port = match port {
            None => default_port,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or(TargetError::BadPort)?,
        };
        let authority = format!("{host}:{port}");
        Ok(if http {
            ProbeTarget::Http { authority }
        } else {
            ProbeTarget::Tcp { authority }
        })
    }

    /// The same endpoint probed by TCP connect only (`health_check 'tcp'`).
    pub fn tcp_only(self) -> ProbeTarget {
        match self {
            ProbeTarget::Http { authority } | ProbeTarget::Tcp { authority } => {
                ProbeTarget::Tcp { authority }
            }
        }
    }

    pub fn authority(&self) -> &str {
        match self {
            ProbeTarget::Http { authority } | ProbeTarget::Tcp { authority } => authority,
        }
    }
}

/// Why a probe judged an endpoint unhealthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeFailure {
    Timeout,
    Connect(std::io::ErrorKind),
    Io(std::io::ErrorKind),
    /// The peer answered, but not with an HTTP 2xx status line.
    Status(Option<u16>),
}

impl fmt::Display for ProbeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeFailure::Timeout => write!(f, "timed out"),
            ProbeFailure::Connect(k) => write!(f, "connect failed: {k}"),
            ProbeFailure::Io(k) => write!(f, "i/o error: {k}"),
            ProbeFailure::Status(Some(s)) => write!(f, "GET /healthz answered {s}"),
            ProbeFailure::Status(None) => write!(f, "GET /healthz answered no HTTP status line"),
        }
    }
}

/// Status line reads stop here; a health answer needs no more.
const MAX_STATUS_LINE: usize = 256;

/// Runs one probe, bounded by `timeout` in total.
pub async fn probe(target: &ProbeTarget, timeout: Duration) -> Result<(), ProbeFailure> {
    match tokio::time::timeout(timeout, probe_inner(target)).await {
        Ok(r) => r,
        Err(_) => Err(ProbeFailure::Timeout),
    }
}

async fn probe_inner(target: &ProbeTarget) -> Result<(), ProbeFailure> {
    let mut stream = TcpStream::connect(target.authority())
        .await
        .map_err(|e| ProbeFailure::Connect(e.kind()))?;
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
    fn endpoint_urls_map_to_probe_targets() {
        assert_eq!(
            ProbeTarget::for_endpoint("http://192.0.2.10:8080/invoke"),
            Ok(ProbeTarget::Http {
                authority: "192.0.2.10:8080".into()
            })
        );
        assert_eq!(
            ProbeTarget::for_endpoint("http://[2001:db8::1]/x"),
            Ok(ProbeTarget::Http {
                authority: "[2001:db8::1]:80".into()
            })
        );
        assert_eq!(
            ProbeTarget::for_endpoint("https://agent.lab.example"),
            Ok(ProbeTarget::Tcp {
                authority: "agent.lab.example:443".into()
            })
        );
        assert_eq!(
            ProbeTarget::for_endpoint("ftp://x"),
            Err(TargetError::Scheme)
        );
        assert_eq!(
            ProbeTarget::for_endpoint("http://:80/"),
            Err(TargetError::NoHost)
        );
        assert_eq!(
            ProbeTarget::for_endpoint("http://h:0/"),
            Err(TargetError::BadPort)
        );
        assert_eq!(
            ProbeTarget::for_endpoint("http://h:99999/"),
            Err(TargetError::BadPort)
        );
    }

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
            authority: addr.to_string(),
        };
        assert_eq!(rt().block_on(probe(&t, Duration::from_secs(5))), Ok(()));
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
            authority: addr.to_string(),
        };
        assert_eq!(
            rt().block_on(probe(&t, Duration::from_secs(5))),
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
            authority: addr.to_string(),
        };
        assert!(matches!(
            rt().block_on(probe(&t, Duration::from_secs(5))),
            Err(ProbeFailure::Connect(_))
        ));
    }
}

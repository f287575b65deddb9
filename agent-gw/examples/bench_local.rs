//! Helpers for `scripts/bench_local.py` (`make bench-local`): the same fast
//! backend and the same load generator measure the direct path and the
//! path through agent-gw, so the difference is the gateway.
//!
//! ```text
//! bench_local backend [IP]       # echo server on IP:<free> (default 127.0.0.1); prints "listening ADDR"
//! bench_local load URL BODY_FILE CONCURRENCY REQUESTS WARMUP
//!                                # prints one JSON object with latencies and throughput
//! bench_local handshake URL N    # N fresh connections one after another: connect
//!                                # and TLS handshake times apart, p50/p99 (JSON)
//! ```
//!
//! With `BENCH_TLS_NAME` and `BENCH_TLS_CA` set, connections are TLS 1.3
//! (HTTP/1.1 by ALPN) to the URL's address, verifying a certificate for
//! that name against that CA — as a caller of an agent's own IPv6 address
//! does (`scripts/bench_ipv6.py`). `BENCH_BEARER` adds `Authorization:
//! Bearer` to every request.
//!
//! Both run on a tokio current-thread runtime, like the daemons: one core
//! each, no work-stealing noise. The load generator keeps one keep-alive
//! HTTP/1.1 connection per concurrent worker (reopened when the server ends
//! it) and sends requests back to back; every response must be 200 or it
//! counts as an error.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    match args.first().map(String::as_str) {
        // An address of its own: `scripts/bench_peer.py` runs the backend
        // inside a router's namespace, reachable from the load generator.
        Some("backend") if args.len() <= 2 => {
            let ip: std::net::IpAddr = args.get(1).map_or("127.0.0.1", String::as_str).parse()?;
            local.block_on(&rt, backend(ip))
        }
        Some("handshake") if args.len() == 3 => {
            local.block_on(&rt, handshakes(args[1].clone(), args[2].parse()?))
        }
        Some("load") if args.len() == 6 => {
            let load = Load {
                url: args[1].clone(),
                body: Bytes::from(std::fs::read(&args[2])?),
                concurrency: args[3].parse()?,
                requests: args[4].parse()?,
                warmup: args[5].parse()?,
            };
            local.block_on(&rt, load.run())
        }
        _ => Err(
            "usage: bench_local backend [IP] | load URL BODY_FILE CONCURRENCY REQUESTS WARMUP | handshake URL N"
                .into(),
        ),
    }
}

/// Echo server: answers every request with its body as JSON, 200.
async fn backend(ip: std::net::IpAddr) -> Result<(), BoxError> {
    let listener = TcpListener::bind(SocketAddr::new(ip, 0)).await?;
    println!("listening {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        tokio::task::spawn_local(async move {
            let service = hyper::service::service_fn(echo);
            // A client closing its connection is the normal end.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn echo(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let mut resp = Response::new(Full::new(body));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

struct Load {
    url: String,
    body: Bytes,
    concurrency: usize,
    requests: usize,
    warmup: usize,
}

impl Load {
    async fn run(self) -> Result<(), BoxError> {
        let uri: hyper::Uri = self.url.parse()?;
        let authority = uri.authority().ok_or("URL without host:port")?.clone();
        let addr: SocketAddr = authority.as_str().parse()?;
        let path = uri.path().to_string();
        let per_worker = self.requests.div_ceil(self.concurrency);
        let started = Instant::now();
        let mut workers = Vec::new();
        for _ in 0..self.concurrency {
            let body = self.body.clone();
            let path = path.clone();
            let host = authority.to_string();
            let warmup = self.warmup;
            workers.push(tokio::task::spawn_local(async move {
                worker(addr, host, path, body, warmup, per_worker).await
            }));
        }
        let mut lat: Vec<Duration> = Vec::with_capacity(self.requests);
        let mut errors = 0u64;
        let mut first_error = String::new();
        let mut measured_from = None::<Instant>;
        let mut measured_to = started;
        for w in workers {
            let r = w.await??;
            errors += r.errors;
            if first_error.is_empty() {
                first_error = r.first_error;
            }
            lat.extend(r.latencies);
            measured_from =
                Some(measured_from.map_or(r.measured_from, |m: Instant| m.min(r.measured_from)));
            measured_to = measured_to.max(r.measured_to);
        }
        lat.sort_unstable();
        let wall = measured_to.duration_since(measured_from.unwrap_or(started));
        let pct = |p: f64| -> f64 {
            if lat.is_empty() {
                return 0.0;
            }
            let i = ((lat.len() as f64 - 1.0) * p).round() as usize;
            lat[i].as_secs_f64() * 1e6
        };
        let out = serde_json::json!({
            "requests": lat.len(),
            "errors": errors,
            "first_error": first_error,
            "concurrency": self.concurrency,
            "body_bytes": self.body.len(),
            "p50_us": pct(0.50),
            "p90_us": pct(0.90),
            "p95_us": pct(0.95),
            "p99_us": pct(0.99),
            "max_us": pct(1.0),
            "wall_s": wall.as_secs_f64(),
            "throughput_rps": if wall.as_secs_f64() > 0.0 { lat.len() as f64 / wall.as_secs_f64() } else { 0.0 },
        });
        println!("{out}");
        Ok(())
    }
}

struct WorkerResult {
    latencies: Vec<Duration>,
    errors: u64,
    first_error: String,
    measured_from: Instant,
    measured_to: Instant,
}

/// TLS of the load (`BENCH_TLS_NAME`, `BENCH_TLS_CA`), if asked for.
fn tls() -> Result<Option<(tokio_rustls::TlsConnector, String)>, BoxError> {
    use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
    let (Ok(name), Ok(ca)) = (
        std::env::var("BENCH_TLS_NAME"),
        std::env::var("BENCH_TLS_CA"),
    ) else {
        return Ok(None);
    };
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&ca)? {
        roots.add(c?)?;
    }
    let mut cfg = tokio_rustls::rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some((
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg)),
        name,
    )))
}

fn bearer() -> Option<String> {
    std::env::var("BENCH_BEARER")
        .ok()
        .map(|t| format!("Bearer {t}"))
}

/// One HTTP/1.1 connection (over TLS with `BENCH_TLS_*`); its driver
/// runs as a local task.
async fn connect(
    addr: SocketAddr,
) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, BoxError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let sender = match tls()? {
        None => {
            let (sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::task::spawn_local(async move {
                let _ = conn.await;
            });
            sender
        }
        Some((connector, name)) => {
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(name)?;
            let tls = connector.connect(name, stream).await?;
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
            tokio::task::spawn_local(async move {
                let _ = conn.await;
            });
            sender
        }
    };
    Ok(sender)
}

/// `n` connections one after another, each closed at once: the TCP
/// connect and the TLS handshake timed apart.
async fn handshakes(url: String, n: usize) -> Result<(), BoxError> {
    let uri: hyper::Uri = url.parse()?;
    let addr: SocketAddr = uri
        .authority()
        .ok_or("URL without host:port")?
        .as_str()
        .parse()?;
    let tls = tls()?;
    let (mut tcp, mut hs) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t0 = Instant::now();
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        tcp.push(t0.elapsed());
        if let Some((connector, name)) = &tls {
            let t1 = Instant::now();
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(name.clone())?;
            let s = connector.connect(name, stream).await?;
            hs.push(t1.elapsed());
            drop(s);
        }
    }
    let pct = |v: &mut Vec<Duration>, p: f64| -> f64 {
        v.sort_unstable();
        v.get(((v.len().max(1) - 1) as f64 * p).round() as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    let out = serde_json::json!({
        "connections": n,
        "tcp_p50_us": pct(&mut tcp, 0.50),
        "tcp_p99_us": pct(&mut tcp, 0.99),
        "tls_p50_us": pct(&mut hs, 0.50),
        "tls_p99_us": pct(&mut hs, 0.99),
    });
    println!("{out}");
    Ok(())
}

async fn worker(
    addr: SocketAddr,
    host: String,
    path: String,
    body: Bytes,
    warmup: usize,
    count: usize,
) -> Result<WorkerResult, BoxError> {
    let mut sender = connect(addr).await?;
    let auth = bearer();
    let mut reconnect = false;
    let mut result = WorkerResult {
        latencies: Vec::with_capacity(count),
        errors: 0,
        first_error: String::new(),
        measured_from: Instant::now(),
        measured_to: Instant::now(),
    };
    for i in 0..warmup + count {
        if i == warmup {
            result.measured_from = Instant::now();
        }
        let mut req = Request::post(path.as_str())
            .header(hyper::header::HOST, host.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/json");
        if let Some(a) = &auth {
            req = req.header(hyper::header::AUTHORIZATION, a.as_str());
        }
        let req = req.body(Full::new(body.clone()))?;
        let t0 = Instant::now();
        // A server may end a keep-alive connection (nginx does after
        // `keepalive_requests`): open a new one, as an HTTP client must.
        if reconnect || sender.ready().await.is_err() {
            sender = connect(addr).await?;
            sender.ready().await?;
            reconnect = false;
        }
        let outcome = match sender.send_request(req).await {
            Ok(resp) => {
                let status = resp.status();
                reconnect = resp
                    .headers()
                    .get(hyper::header::CONNECTION)
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
                match resp.into_body().collect().await {
                    Ok(_) if status == hyper::StatusCode::OK => Ok(()),
                    Ok(b) => Err(format!(
                        "HTTP {status}: {}",
                        String::from_utf8_lossy(&b.to_bytes())
                    )),
                    Err(e) => Err(e.to_string()),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        let dt = t0.elapsed();
        if i >= warmup {
            match outcome {
                Ok(()) => result.latencies.push(dt),
                Err(e) => {
                    result.errors += 1;
                    if result.first_error.is_empty() {
                        result.first_error = e;
                    }
                }
            }
        }
    }
    result.measured_to = Instant::now();
    Ok(result)
}

//! The `hyper2` row of `scripts/bench_peer.py`: the floor of the peer
//! path's design, with none of the gateway in it.
//!
//! The issue fixes the parts of a hop between routers: hyper's h2 client
//! and server, rustls (`ring`) TLS 1.3 with mutual authentication, and an
//! Ed25519 signature made by the sender and checked by the receiver for
//! every call. This pair is those parts and nothing else: no routing, no
//! envelope, no policy, no replay window, no batching (each call signs
//! alone, as at concurrency 1). Its distance to nginx's chain is what the
//! design costs; the distance from it to `peer2` is what the gateway adds.
//!
//! ```text
//! bench_hop back LISTEN CERT KEY CA BACKEND
//!     h2 over mTLS on LISTEN; checks each call's signature and sends it
//!     to BACKEND (host:port) over HTTP/1.1 keep-alive connections
//! bench_hop front LISTEN BACK SERVER_NAME CERT KEY CA
//!     HTTP/1.1 on LISTEN; signs each call and sends it over one warm h2
//!     connection to BACK, verifying SERVER_NAME's certificate
//! bench_hop mid LISTEN NEXT SERVER_NAME CERT KEY CLIENT_CERT CLIENT_KEY CA
//!     h2 over mTLS on LISTEN (CERT, KEY); each call read whole and sent
//!     on over one warm h2 connection to NEXT (CLIENT_CERT, CLIENT_KEY),
//!     as a transit router passes a call: the `hop3` row's middle, the
//!     floor of `peer3` (front → mid → back), unsigned only
//! ```
//!
//! All print "listening ADDR" once ready. A last argument `unsigned`
//! (on every end) leaves the signature out: the transport alone (the
//! `hop2` and `hop3` rows). The h2 settings and the write coalescing are
//! the gateway's own.

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use agent_gw::peer::coalesce::Coalesce;
use agent_gw::peer::{h2_settings, LocalExec};
use bytes::Bytes;
use edkey::Sha256;
use edkey::{Signature, SigningKey, VerifyingKey};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::{self, pki_types};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = Either<Incoming, Full<Bytes>>;

const SIG_HEADER: &str = "x-hop-signature";
const NONCE_HEADER: &str = "x-hop-nonce";
/// Both ends derive the router key from this seed: the floor measures
/// signing and verifying, not key distribution.
const SEED: [u8; 32] = [7; 32];

fn main() -> Result<(), BoxError> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let sign = args.last().map(String::as_str) != Some("unsigned");
    if !sign {
        args.pop();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    match args.first().map(String::as_str) {
        Some("back") if args.len() == 6 => {
            let tls = server_tls(&args[2], &args[3], &args[4])?;
            let backend: SocketAddr = args[5].parse()?;
            local.block_on(&rt, back(args[1].parse()?, tls, backend, sign))
        }
        Some("front") if args.len() == 7 => {
            let tls = client_tls(&args[4], &args[5], &args[6])?;
            let name = pki_types::ServerName::try_from(args[3].clone())?;
            local.block_on(
                &rt,
                front(args[1].parse()?, args[2].parse()?, name, tls, sign),
            )
        }
        Some("mid") if args.len() == 9 && !sign => {
            let server = server_tls(&args[4], &args[5], &args[8])?;
            let client = client_tls(&args[6], &args[7], &args[8])?;
            let name = pki_types::ServerName::try_from(args[3].clone())?;
            local.block_on(
                &rt,
                mid(args[1].parse()?, args[2].parse()?, name, server, client),
            )
        }
        _ => Err(
            "usage: bench_hop back LISTEN CERT KEY CA BACKEND [unsigned] | \
                  front LISTEN BACK SERVER_NAME CERT KEY CA [unsigned] | \
                  mid LISTEN NEXT SERVER_NAME CERT KEY CLIENT_CERT CLIENT_KEY CA unsigned"
                .into(),
        ),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(path: &str) -> Result<Vec<pki_types::CertificateDer<'static>>, BoxError> {
    use pki_types::pem::PemObject;
    Ok(pki_types::CertificateDer::pem_file_iter(path)?.collect::<Result<_, _>>()?)
}

fn key(path: &str) -> Result<pki_types::PrivateKeyDer<'static>, BoxError> {
    use pki_types::pem::PemObject;
    Ok(pki_types::PrivateKeyDer::from_pem_file(path)?)
}

fn roots(ca: &str) -> Result<Arc<rustls::RootCertStore>, BoxError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca)? {
        roots.add(c)?;
    }
    Ok(Arc::new(roots))
}

fn server_tls(cert: &str, key_path: &str, ca: &str) -> Result<Arc<rustls::ServerConfig>, BoxError> {
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots(ca)?, provider())
            .build()?;
    let mut c = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(cert)?, key(key_path)?)?;
    c.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(c))
}

fn client_tls(cert: &str, key_path: &str, ca: &str) -> Result<Arc<rustls::ClientConfig>, BoxError> {
    let mut c = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots(ca)?)
        .with_client_auth_cert(certs(cert)?, key(key_path)?)?;
    c.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(c))
}

fn answer(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Either::Right(Full::new(Bytes::from(text))));
    *r.status_mut() = status;
    r
}

/// What the sender signs: the body's digest and the call's nonce.
fn message(body: &[u8], nonce: u64) -> [u8; 40] {
    let mut m = [0u8; 40];
    m[..32].copy_from_slice(&Sha256::digest(body));
    m[32..].copy_from_slice(&nonce.to_be_bytes());
    m
}

// ---- front: HTTP/1.1 in, h2 over mTLS out ----------------------------------

struct Front {
    h2: hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    key: Option<SigningKey>,
    nonce: Cell<u64>,
    back: String,
}

async fn front(
    listen: SocketAddr,
    back: SocketAddr,
    name: pki_types::ServerName<'static>,
    tls: Arc<rustls::ClientConfig>,
    sign: bool,
) -> Result<(), BoxError> {
    let me = Rc::new(Front::connect(back, name, tls, sign).await?);
    let listener = TcpListener::bind(listen).await?;
    println!("listening {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let me = me.clone();
        tokio::task::spawn_local(async move {
            let svc = hyper::service::service_fn(move |req| {
                let me = me.clone();
                async move { Ok::<_, Infallible>(me.call(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

// ---- mid: h2 over mTLS in and out ------------------------------------------

async fn mid(
    listen: SocketAddr,
    next: SocketAddr,
    name: pki_types::ServerName<'static>,
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
) -> Result<(), BoxError> {
    let me = Rc::new(Front::connect(next, name, client, false).await?);
    serve_h2(listen, server, move |req| {
        let me = me.clone();
        async move { me.call(req).await }
    })
    .await
}

/// Serves h2 over mutual TLS on `listen`, each request answered by `call`.
async fn serve_h2<F, Fut>(
    listen: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    call: F,
) -> Result<(), BoxError>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = Response<Body>> + 'static,
{
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let listener = TcpListener::bind(listen).await?;
    println!("listening {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let (call, acceptor) = (call.clone(), acceptor.clone());
        tokio::task::spawn_local(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let svc = hyper::service::service_fn(move |req| {
                let call = call.clone();
                async move { Ok::<_, Infallible>(call(req).await) }
            });
            let mut b = hyper::server::conn::http2::Builder::new(LocalExec);
            b.timer(TokioTimer::new());
            h2_settings::server(&mut b);
            let _ = b
                .serve_connection(TokioIo::new(Coalesce::new(tls)), svc)
                .await;
        });
    }
}

impl Front {
    /// One warm h2 connection over mutual TLS to `back`.
    async fn connect(
        back: SocketAddr,
        name: pki_types::ServerName<'static>,
        tls: Arc<rustls::ClientConfig>,
        sign: bool,
    ) -> Result<Front, BoxError> {
        let tcp = TcpStream::connect(back).await?;
        tcp.set_nodelay(true)?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await?;
        let mut b = hyper::client::conn::http2::Builder::new(LocalExec);
        b.timer(TokioTimer::new());
        h2_settings::client(&mut b);
        let (h2, conn) = b.handshake(TokioIo::new(Coalesce::new(stream))).await?;
        tokio::task::spawn_local(async move {
            if let Err(e) = conn.await {
                eprintln!("bench_hop: h2 connection ended: {e}");
            }
        });
        Ok(Front {
            h2,
            key: sign.then(|| SigningKey::from_bytes(&SEED)),
            nonce: Cell::new(0),
            back: back.to_string(),
        })
    }

    async fn call(&self, req: Request<Incoming>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return answer(StatusCode::BAD_REQUEST, e.to_string()),
        };
        let uri = format!("https://{}{}", self.back, parts.uri.path());
        let mut r = Request::post(uri).header(hyper::header::CONTENT_TYPE, "application/json");
        if let Some(key) = &self.key {
            let nonce = self.nonce.get();
            self.nonce.set(nonce + 1);
            let sig = key.sign(&message(&body, nonce));
            r = r
                .header(NONCE_HEADER, nonce)
                .header(SIG_HEADER, hex(&sig.to_bytes()));
        }
        let r = match r.version(http::Version::HTTP_2).body(Full::new(body)) {
            Ok(r) => r,
            Err(e) => return answer(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        match self.h2.clone().send_request(r).await {
            Ok(resp) => resp.map(Either::Left),
            Err(e) => answer(StatusCode::BAD_GATEWAY, e.to_string()),
        }
    }
}

fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    b.iter()
        .flat_map(|x| [D[(x >> 4) as usize] as char, D[(x & 15) as usize] as char])
        .collect()
}

fn unhex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    let val = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = val(s[2 * i])? << 4 | val(s[2 * i + 1])?;
    }
    Some(out)
}

// ---- back: h2 over mTLS in, HTTP/1.1 keep-alive out ------------------------

type Http1 = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

struct Back {
    backend: SocketAddr,
    idle: RefCell<Vec<Http1>>,
    key: Option<VerifyingKey>,
}

async fn back(
    listen: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    backend: SocketAddr,
    sign: bool,
) -> Result<(), BoxError> {
    let me = Rc::new(Back {
        backend,
        idle: RefCell::new(Vec::new()),
        key: sign.then(|| SigningKey::from_bytes(&SEED).verifying_key()),
    });
    serve_h2(listen, tls, move |req| {
        let me = me.clone();
        async move { me.call(req).await }
    })
    .await
}

impl Back {
    async fn call(&self, req: Request<Incoming>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return answer(StatusCode::BAD_REQUEST, e.to_string()),
        };
        if let Some(key) = &self.key {
            let h = |n: &str| parts.headers.get(n).map(|v| v.as_bytes());
            let nonce =
                h(NONCE_HEADER).and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok());
            let sig = h(SIG_HEADER).and_then(unhex::<64>);
            let (Some(nonce), Some(sig)) = (nonce, sig) else {
                return answer(StatusCode::FORBIDDEN, "no signature".into());
            };
            let ok = key
                .verify_strict(&message(&body, nonce), &Signature::from_bytes(&sig))
                .is_ok();
            if !ok {
                return answer(StatusCode::FORBIDDEN, "bad signature".into());
            }
        }
        let mut sender = match self.sender().await {
            Ok(s) => s,
            Err(e) => return answer(StatusCode::BAD_GATEWAY, e.to_string()),
        };
        let r = Request::post(parts.uri.path())
            .header(hyper::header::HOST, self.backend.to_string())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body));
        let r = match r {
            Ok(r) => r,
            Err(e) => return answer(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        let resp = match sender.send_request(r).await {
            Ok(resp) => resp,
            Err(e) => return answer(StatusCode::BAD_GATEWAY, e.to_string()),
        };
        // The connection is free again once the body is read.
        let (head, body) = resp.into_parts();
        match body.collect().await {
            Ok(b) => {
                self.idle.borrow_mut().push(sender);
                Response::from_parts(head, Either::Right(Full::new(b.to_bytes())))
            }
            Err(e) => answer(StatusCode::BAD_GATEWAY, e.to_string()),
        }
    }

    async fn sender(&self) -> Result<Http1, BoxError> {
        loop {
            let Some(s) = self.idle.borrow_mut().pop() else {
                break;
            };
            if s.is_ready() {
                return Ok(s);
            }
        }
        let tcp = TcpStream::connect(self.backend).await?;
        tcp.set_nodelay(true)?;
        let (s, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::task::spawn_local(async move {
            let _ = conn.await;
        });
        Ok(s)
    }
}

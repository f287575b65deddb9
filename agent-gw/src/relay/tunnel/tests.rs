//! The tunnel over real loopback TCP: the client router dials, the relay
//! opens streams toward it. (TLS is the listener's and the dialler's, as
//! on the peer data plane; these tests are about HTTP/2 on the tunnel.)

use std::cell::Cell;
use std::convert::Infallible;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use edkey::Sha256;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::LocalSet;

use super::*;

/// A body of `len` bytes made on the fly in 64 KiB chunks (never whole
/// in memory), byte `i` being `i * 31 + seed`.
struct Made {
    len: usize,
    at: usize,
    seed: u8,
}

impl Made {
    fn new(len: usize, seed: u8) -> Made {
        Made { len, at: 0, seed }
    }

    fn digest(len: usize, seed: u8) -> [u8; 32] {
        let mut h = Sha256::new();
        let mut m = Made::new(len, seed);
        while let Some(c) = m.chunk() {
            h.update(&c);
        }
        h.finalize()
    }

    fn chunk(&mut self) -> Option<Bytes> {
        if self.at >= self.len {
            return None;
        }
        let n = (self.len - self.at).min(64 * 1024);
        let c: Vec<u8> = (self.at..self.at + n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(self.seed))
            .collect();
        self.at += n;
        Some(Bytes::from(c))
    }
}

impl Body for Made {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.chunk().map(|c| Ok(Frame::data(c))))
    }
}

type Out =
    http_body_util::Either<Made, http_body_util::Either<Incoming, http_body_util::Full<Bytes>>>;

/// The client router's handler: `/echo` streams the request body back as
/// it arrives, `/big/N` answers N made bytes, `/n/K` answers K, `/hold`
/// waits for a permit of `release`, `/refuse` fails (the stream is reset).
fn handler(
    release: Rc<Semaphore>,
) -> impl hyper::service::Service<Request<Incoming>, Response = Response<Out>, Error = std::io::Error>
       + Clone {
    service_fn(move |req: Request<Incoming>| {
        let release = release.clone();
        async move {
            let path = req.uri().path().to_string();
            let full = |s: String| {
                Response::new(http_body_util::Either::Right(
                    http_body_util::Either::Right(http_body_util::Full::new(Bytes::from(s))),
                ))
            };
            if path == "/echo" {
                return Ok(Response::new(http_body_util::Either::Right(
                    http_body_util::Either::Left(req.into_body()),
                )));
            }
            if let Some(n) = path.strip_prefix("/big/") {
                let n: usize = n.parse().unwrap();
                return Ok(Response::new(http_body_util::Either::Left(Made::new(n, 7))));
            }
            if let Some(k) = path.strip_prefix("/n/") {
                return Ok(full(k.to_string()));
            }
            if path == "/hold" {
                release.acquire().await.unwrap().forget();
                return Ok(full("released".into()));
            }
            Err(std::io::Error::other("refused by the handler"))
        }
    })
}

const LIMITS: ClientLimits = ClientLimits {
    max_streams: 256,
    max_bytes_in_flight: 2 * 1024 * 1024,
};

/// A connected pair: the client router dialled the relay's listener.
async fn dial() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (relay, _) = l.accept().await.unwrap();
    (client, relay)
}

type ReqBody = http_body_util::Either<Made, http_body_util::Empty<Bytes>>;

fn get(path: &str) -> Request<ReqBody> {
    Request::post(format!("http://client{path}"))
        .body(http_body_util::Either::Right(http_body_util::Empty::new()))
        .unwrap()
}

/// Runs `f` with a tunnel open: the client serves [`handler`], the relay
/// drives the connection in the background.
async fn with_tunnel<F, Fut>(limits: ClientLimits, release: Rc<Semaphore>, f: F)
where
    F: FnOnce(Tunnel<ReqBody>) -> Fut,
    Fut: Future<Output = ()>,
{
    let (c, r) = dial().await;
    tokio::task::spawn_local(async move {
        let _ = serve(c, handler(release), Liveness::DEFAULT).await;
    });
    let (tunnel, conn) = open::<_, ReqBody>(r, limits, Liveness::DEFAULT)
        .await
        .unwrap();
    tokio::task::spawn_local(conn);
    f(tunnel).await;
}

async fn text(resp: Response<Incoming>) -> String {
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(b.to_vec()).unwrap()
}

async fn digest_of(resp: Response<Incoming>) -> ([u8; 32], usize) {
    let mut body = resp.into_body();
    let mut h = Sha256::new();
    let mut n = 0;
    while let Some(f) = body.frame().await {
        if let Ok(d) = f.unwrap().into_data() {
            n += d.len();
            h.update(&d);
        }
    }
    (h.finalize(), n)
}

/// Bound on a whole test: a tunnel that stalls (a window never
/// reopened, a call never answered) fails the test instead of hanging it.
const TEST_BOUND: Duration = Duration::from_secs(60);

fn run<F: Future<Output = ()>>(f: F) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(LocalSet::new().run_until(async {
        tokio::time::timeout(TEST_BOUND, f)
            .await
            .expect("the tunnel test finished within its bound")
    }));
}

#[test]
fn the_relay_opens_256_concurrent_calls_toward_the_client_on_its_one_connection() {
    run(with_tunnel(
        LIMITS,
        Rc::new(Semaphore::new(0)),
        |t| async move {
            let calls: Vec<_> = (0..256)
                .map(|k| t.send(get(&format!("/n/{k}"))).unwrap())
                .collect();
            assert_eq!(t.in_flight(), 256);
            let answers = futures_join(calls).await;
            for (k, a) in answers.into_iter().enumerate() {
                let (resp, slot) = a.unwrap();
                assert_eq!(resp.status(), 200);
                assert_eq!(text(resp).await, k.to_string());
                drop(slot);
            }
            assert_eq!(t.in_flight(), 0);
            assert!(!t.is_closed());
        },
    ));
}

#[test]
fn bodies_up_to_16_mib_stream_through_both_ways_exactly() {
    run(with_tunnel(
        LIMITS,
        Rc::new(Semaphore::new(0)),
        |t| async move {
            for (len, seed) in [(1024, 1u8), (64 * 1024, 2), (1 << 20, 3), (16 << 20, 4)] {
                let req = Request::post("http://client/echo")
                    .body(http_body_util::Either::Left(Made::new(len, seed)))
                    .unwrap();
                let (resp, _slot) = t.send(req).unwrap().await.unwrap();
                assert_eq!(resp.status(), 200);
                assert_eq!(
                    digest_of(resp).await,
                    (Made::digest(len, seed), len),
                    "{len} B echoed"
                );
                let (resp, _slot) = t.send(get(&format!("/big/{len}"))).unwrap().await.unwrap();
                assert_eq!(
                    digest_of(resp).await,
                    (Made::digest(len, 7), len),
                    "{len} B answered"
                );
            }
        },
    ));
}

#[test]
fn an_unread_answer_stalls_only_its_own_stream() {
    run(with_tunnel(
        LIMITS,
        Rc::new(Semaphore::new(0)),
        |t| async move {
            // 16 MiB the relay never reads: the client can push one stream
            // window of it, then waits; the connection keeps flowing.
            let (big, _big_slot) = t.send(get("/big/16777216")).unwrap().await.unwrap();
            assert_eq!(big.status(), 200);
            for k in 0..50 {
                let (resp, _slot) = t.send(get(&format!("/n/{k}"))).unwrap().await.unwrap();
                assert_eq!(text(resp).await, k.to_string());
            }
            // The stalled answer is still whole once read.
            assert_eq!(digest_of(big).await, (Made::digest(16 << 20, 7), 16 << 20));
        },
    ));
}

#[test]
fn a_refused_call_resets_only_its_own_stream() {
    run(with_tunnel(
        LIMITS,
        Rc::new(Semaphore::new(0)),
        |t| async move {
            let refused = t.send(get("/refuse")).unwrap().await;
            assert!(refused.is_err(), "the handler's failure resets the stream");
            assert!(!t.is_closed(), "the tunnel stays up");
            let (resp, slot) = t.send(get("/n/after")).unwrap().await.unwrap();
            assert_eq!(text(resp).await, "after");
            drop(slot);
            assert_eq!(t.in_flight(), 0, "the refused call gave its slot back");
        },
    ));
}

#[test]
fn calls_over_the_client_stream_limit_are_refused_before_anything_is_sent() {
    let limits = ClientLimits {
        max_streams: 2,
        ..LIMITS
    };
    let release = Rc::new(Semaphore::new(0));
    let r = release.clone();
    run(with_tunnel(limits, release, |t| async move {
        let a = t.send(get("/hold")).unwrap();
        let b = t.send(get("/hold")).unwrap();
        let busy = t
            .send(get("/n/3"))
            .err()
            .expect("the third call is refused");
        assert_eq!(busy, TunnelBusy { max_streams: 2 });
        // Both held calls are on their way to the handler; release them.
        r.add_permits(2);
        let (a, b) = (a.await, b.await);
        assert_eq!(text(a.unwrap().0).await, "released");
        assert_eq!(text(b.unwrap().0).await, "released");
        let (resp, _slot) = t.send(get("/n/4")).unwrap().await.unwrap();
        assert_eq!(text(resp).await, "4");
    }));
}

/// A stream that turns into a black hole on request: reads and writes
/// never complete (a relay or client that died without closing, or a
/// path that drops everything).
struct Freezable<T> {
    inner: T,
    frozen: Rc<Cell<bool>>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Freezable<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.frozen.get() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Freezable<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.frozen.get() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.frozen.get() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.frozen.get() {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

const QUICK: Liveness = Liveness {
    interval: Duration::from_millis(100),
    timeout: Duration::from_millis(200),
};

/// Bound on waiting for a dead end to be noticed (it takes about
/// interval + timeout; the bound only keeps a broken build from hanging).
const NOTICED_WITHIN: Duration = Duration::from_secs(20);

#[test]
fn a_relay_that_goes_silent_ends_the_clients_tunnel_by_ping() {
    run(async {
        let (c, r) = dial().await;
        let frozen = Rc::new(Cell::new(false));
        let relay_io = Freezable {
            inner: r,
            frozen: frozen.clone(),
        };
        let (tunnel, conn) = open::<_, ReqBody>(relay_io, LIMITS, QUICK).await.unwrap();
        tokio::task::spawn_local(conn);
        let served = tokio::task::spawn_local(serve(c, handler(Rc::new(Semaphore::new(0))), QUICK));
        let (resp, _slot) = tunnel.send(get("/n/1")).unwrap().await.unwrap();
        assert_eq!(text(resp).await, "1");
        // Idle for several PING rounds: a live relay answers them.
        tokio::time::sleep(QUICK.interval * 5).await;
        assert!(!served.is_finished(), "an idle but live tunnel stays up");
        frozen.set(true);
        let ended = tokio::time::timeout(NOTICED_WITHIN, served)
            .await
            .expect("the client noticed the silent relay")
            .unwrap();
        assert!(ended.is_err(), "a PING timeout is an error: {ended:?}");
    });
}

#[test]
fn a_client_that_goes_silent_fails_the_relays_calls_by_ping() {
    run(async {
        let (c, r) = dial().await;
        let frozen = Rc::new(Cell::new(false));
        let client_io = Freezable {
            inner: c,
            frozen: frozen.clone(),
        };
        tokio::task::spawn_local(serve(client_io, handler(Rc::new(Semaphore::new(0))), QUICK));
        let (tunnel, conn) = open::<_, ReqBody>(r, LIMITS, QUICK).await.unwrap();
        let conn = tokio::task::spawn_local(conn);
        let (resp, slot) = tunnel.send(get("/n/1")).unwrap().await.unwrap();
        assert_eq!(text(resp).await, "1");
        drop(slot);
        frozen.set(true);
        // A call in flight when the client died fails; it does not wait
        // for its deadline.
        let pending = tunnel.send(get("/n/2")).unwrap();
        let failed = tokio::time::timeout(NOTICED_WITHIN, pending)
            .await
            .expect("the call failed once the PING went unanswered");
        assert!(failed.is_err());
        let ended = tokio::time::timeout(NOTICED_WITHIN, conn)
            .await
            .unwrap()
            .unwrap();
        assert!(ended.is_err(), "{ended:?}");
        assert!(tunnel.is_closed());
        assert_eq!(tunnel.in_flight(), 0);
    });
}

/// Awaits every future, concurrently, in order.
async fn futures_join<F>(fs: Vec<F>) -> Vec<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let handles: Vec<_> = fs
        .into_iter()
        .map(|f| tokio::task::spawn_local(f))
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

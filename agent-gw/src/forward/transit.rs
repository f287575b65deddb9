//! A request body passed through a transit router as it arrives.
//!
//! A router between the caller's router and the handler's (a relay, a
//! reflector's path) needs nothing from the body: the link says whom the
//! call acts for, the route header where it goes, the hop-limit header
//! how far it may still go. So it forwards the neighbour's body frame by
//! frame instead of reading it whole, and memory per call stays within
//! the two HTTP/2 windows whatever the body's size; a slow next hop slows
//! only this stream, through flow control.
//!
//! A streamed body can be sent once. It may go to another path only while
//! no byte of it has left (`available`); after that a failure is the
//! caller's router's to retry, which still holds the whole body.
//!
//! The bounds a whole read applies hold here too, checked as the bytes
//! pass: at most `limit` bytes, and — on a signed link — the SHA-256 the
//! sender's assertion claims, compared at the end. A body that breaks
//! either ends in an error instead of its end of stream, so the next hop
//! sees a reset stream and dispatches nothing. A body that came over a
//! link of our domain and goes on to a signed one is hashed as it passes:
//! its assertion follows it in the trailers (`peer::outbound`).

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use edkey::Sha256;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

use crate::api::error::{ApiError, ErrorCode};
use crate::body::{Body, BoxError};

/// Why a streamed body was cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransitError {
    /// More than `limit` bytes arrived.
    TooLarge { limit: usize },
    /// The body does not hash to what the sender's assertion signed.
    DigestMismatch,
    /// The sender's body broke off.
    Read(String),
}

impl fmt::Display for TransitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransitError::TooLarge { limit } => {
                write!(f, "request body exceeds the limit of {limit} bytes")
            }
            TransitError::DigestMismatch => f.write_str(
                "the request body does not match the SHA-256 its forwarding assertion signed",
            ),
            TransitError::Read(e) => write!(f, "request body could not be read: {e}"),
        }
    }
}

impl std::error::Error for TransitError {}

impl TransitError {
    /// The typed refusal for the sender: nothing was dispatched anywhere
    /// (no next hop can act on a body that never ended).
    pub fn to_api_error(&self) -> ApiError {
        let code = match self {
            TransitError::TooLarge { .. } => ErrorCode::PayloadTooLarge,
            TransitError::DigestMismatch => ErrorCode::Other {
                code: "assertion_refused",
                status: 403,
            },
            TransitError::Read(_) => ErrorCode::InvalidJson,
        };
        let e = ApiError::new(code, self.to_string()).rejected();
        match self {
            TransitError::DigestMismatch => e.reason("assertion_digest"),
            _ => e,
        }
    }
}

/// What a body in transit is hashed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Nothing (unsigned links all the way).
    Nothing,
    /// The digest the sender's assertion signed.
    Expect([u8; 32]),
    /// Its digest, for an assertion to a signed next hop.
    Compute,
}

/// The body of one call in transit, shared by the attempts that may send
/// it (cheap to clone; all clones are the one body).
#[derive(Clone)]
pub struct Transit(Rc<Inner>);

struct Inner {
    /// Taken out when the body ended or broke.
    body: RefCell<Option<Body>>,
    /// A byte of it was handed to a connection.
    touched: Cell<bool>,
    limit: usize,
    seen: Cell<usize>,
    check: Check,
    hasher: RefCell<Sha256>,
    /// The digest of the whole body, once it ended.
    done: Cell<Option<[u8; 32]>>,
    failed: RefCell<Option<TransitError>>,
}

impl fmt::Debug for Transit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transit")
            .field("touched", &self.0.touched.get())
            .field("seen", &self.0.seen.get())
            .field("failed", &self.0.failed.borrow())
            .finish()
    }
}

impl Transit {
    /// `body` passed on, cut after `limit` bytes, hashed as `check` says.
    pub fn new(body: Body, limit: usize, check: Check) -> Transit {
        Transit(Rc::new(Inner {
            body: RefCell::new(Some(body)),
            touched: Cell::new(false),
            limit,
            seen: Cell::new(0),
            check,
            hasher: RefCell::new(Sha256::new()),
            done: Cell::new(None),
            failed: RefCell::new(None),
        }))
    }

    /// Nothing of it has left yet: another path may still take it.
    pub fn available(&self) -> bool {
        !self.0.touched.get() && self.0.failed.borrow().is_none() && self.0.body.borrow().is_some()
    }

    /// What the sender signed it as (a signed link), for an assertion to
    /// the next hop over the same bytes.
    pub fn digest(&self) -> Option<[u8; 32]> {
        match self.0.check {
            Check::Expect(d) => Some(d),
            Check::Nothing | Check::Compute => None,
        }
    }

    /// The digest of the whole body once it passed (`Check::Compute`
    /// or `Check::Expect`); `None` before its end.
    pub fn computed(&self) -> Option<[u8; 32]> {
        self.0.done.get()
    }

    /// Why the body was cut, if it was.
    pub fn failure(&self) -> Option<TransitError> {
        self.0.failed.borrow().clone()
    }

    /// Bytes passed on so far.
    pub fn seen(&self) -> usize {
        self.0.seen.get()
    }

    fn fail(&self, e: TransitError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.body.borrow_mut().take();
        *self.0.failed.borrow_mut() = Some(e.clone());
        Poll::Ready(Some(Err(Box::new(e))))
    }

    /// The next frame to send on (trailers are not relayed).
    pub fn poll_frame(&self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(e) = self.failure() {
            return Poll::Ready(Some(Err(Box::new(e))));
        }
        loop {
            let polled = {
                let mut slot = self.0.body.borrow_mut();
                let Some(body) = slot.as_mut() else {
                    return Poll::Ready(None);
                };
                std::pin::Pin::new(body).poll_frame(cx)
            };
            match polled {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return self.fail(TransitError::Read(e.to_string())),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let seen = self.0.seen.get().saturating_add(data.len());
                    if seen > self.0.limit {
                        return self.fail(TransitError::TooLarge {
                            limit: self.0.limit,
                        });
                    }
                    self.0.seen.set(seen);
                    self.0.touched.set(true);
                    if self.0.check != Check::Nothing {
                        self.0.hasher.borrow_mut().update(&data);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Poll::Ready(None) => {
                    if self.0.check != Check::Nothing {
                        let got: [u8; 32] = self.0.hasher.replace(Sha256::new()).finalize();
                        if matches!(self.0.check, Check::Expect(want) if want != got) {
                            return self.fail(TransitError::DigestMismatch);
                        }
                        self.0.done.set(Some(got));
                    }
                    self.0.body.borrow_mut().take();
                    return Poll::Ready(None);
                }
            }
        }
    }

    pub fn size_hint(&self) -> SizeHint {
        match self.0.body.borrow().as_ref() {
            Some(b) if !self.0.touched.get() => b.size_hint(),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::collections::VecDeque;

    /// A body that yields its frames one by one.
    struct Frames(VecDeque<Result<Frame<Bytes>, BoxError>>);

    impl HttpBody for Frames {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.get_mut().0.pop_front())
        }
    }

    fn chunks(parts: &[&'static [u8]]) -> Body {
        Body::new(Frames(
            parts
                .iter()
                .map(|p| Ok(Frame::data(Bytes::from_static(p))))
                .collect(),
        ))
    }

    struct Reader(Transit);

    impl HttpBody for Reader {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            self.0.poll_frame(cx)
        }
    }

    async fn read(t: &Transit) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut r = Reader(t.clone());
        while let Some(f) = r.frame().await {
            let f = f.map_err(|e| e.to_string())?;
            out.extend_from_slice(&f.into_data().unwrap_or_default());
        }
        Ok(out)
    }

    #[tokio::test]
    async fn a_body_passes_through_whole_and_can_be_sent_only_once() {
        let t = Transit::new(chunks(&[b"hello ", b"world"]), 64, Check::Nothing);
        assert!(t.available());
        assert_eq!(read(&t).await.unwrap(), b"hello world");
        assert!(!t.available(), "sent once: no other path may take it");
        assert_eq!(t.seen(), 11);
        assert_eq!(t.failure(), None);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_cut_with_a_typed_error() {
        let t = Transit::new(chunks(&[b"12345", b"67890"]), 8, Check::Nothing);
        let e = read(&t).await.unwrap_err();
        assert!(e.contains("limit of 8"), "{e}");
        assert_eq!(t.failure(), Some(TransitError::TooLarge { limit: 8 }));
        assert_eq!(t.failure().unwrap().to_api_error().code.status(), 413);
        assert!(!t.available());
    }

    #[tokio::test]
    async fn a_signed_body_must_hash_to_what_was_signed() {
        let good: [u8; 32] = Sha256::digest(b"signed bytes");
        let t = Transit::new(chunks(&[b"signed ", b"bytes"]), 64, Check::Expect(good));
        assert_eq!(t.computed(), None, "not before its end");
        assert_eq!(read(&t).await.unwrap(), b"signed bytes");
        assert_eq!(t.digest(), Some(good));
        assert_eq!(t.computed(), Some(good));

        let t = Transit::new(chunks(&[b"signed ", b"bytes"]), 64, Check::Compute);
        assert_eq!(t.digest(), None, "nothing signed it to us");
        assert_eq!(read(&t).await.unwrap(), b"signed bytes");
        assert_eq!(
            t.computed(),
            Some(good),
            "hashed for the next hop's assertion"
        );

        let t = Transit::new(chunks(&[b"signed ", b"bytez"]), 64, Check::Expect(good));
        let e = read(&t).await.unwrap_err();
        assert!(e.contains("SHA-256"), "{e}");
        let api = t.failure().unwrap().to_api_error();
        assert_eq!(api.code.status(), 403);
    }

    #[tokio::test]
    async fn a_broken_sender_body_ends_in_an_error_not_an_end_of_stream() {
        let frames = Frames(VecDeque::from([
            Ok(Frame::data(Bytes::from_static(b"part"))),
            Err("peer reset".into()),
        ]));
        let t = Transit::new(Body::new(frames), 64, Check::Nothing);
        let e = read(&t).await.unwrap_err();
        assert!(e.contains("peer reset"), "{e}");
        assert!(matches!(t.failure(), Some(TransitError::Read(_))));
    }
}

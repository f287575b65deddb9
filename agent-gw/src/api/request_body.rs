//! Bounded request-body reading, with the API's errors.
//!
//! Bodies are read frame by frame and refused the moment they pass the
//! limit, so an oversized request never makes the gateway buffer more than
//! `limit` bytes (and a declared `Content-Length` above the limit is refused
//! before a single body byte is read).

use bytes::{Bytes, BytesMut};
use http::header;
use http_body_util::BodyExt;

use super::error::{ApiError, ErrorCode};

/// A header that is there but not a decimal integer; the caller names the
/// header in its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotDecimal;

/// A header value that must be a decimal integer (blanks around it
/// allowed): `Ok(None)` when the header is absent.
pub fn decimal(value: Option<&http::HeaderValue>) -> Result<Option<u64>, NotDecimal> {
    match value {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Some)
            .ok_or(NotDecimal),
    }
}

/// The declared `Content-Length`, if any. A malformed value is an error.
pub fn content_length(headers: &http::HeaderMap) -> Result<Option<u64>, ApiError> {
    decimal(headers.get(header::CONTENT_LENGTH)).map_err(|NotDecimal| {
        ApiError::new(ErrorCode::InvalidField, "Content-Length is not a number")
    })
}

/// Reads a whole request body of at most `limit` bytes.
pub async fn read_limited<B>(
    headers: &http::HeaderMap,
    body: B,
    limit: usize,
) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    Ok(read_with_trailers(headers, body, limit).await?.0)
}

/// [`read_limited`], keeping the trailers that followed the body, if
/// any (bounded by the connection's header-list limit).
pub async fn read_with_trailers<B>(
    headers: &http::HeaderMap,
    mut body: B,
    limit: usize,
) -> Result<(Bytes, Option<http::HeaderMap>), ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let too_large = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("request body exceeds the limit of {limit} bytes"),
        )
        .close()
    };
    let declared = content_length(headers)?;
    if let Some(n) = declared {
        if n > limit as u64 {
            return Err(too_large());
        }
    }
    // The usual body arrives as one frame: keep those bytes as they are
    // and copy only when a second frame has to be joined to them.
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    let mut len = 0usize;
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            ApiError::new(
                ErrorCode::InvalidJson,
                format!("request body could not be read: {e}"),
            )
        })?;
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(t);
                }
                continue;
            }
        };
        if len + data.len() > limit {
            return Err(too_large());
        }
        len += data.len();
        match (&mut joined, first.take()) {
            (Some(buf), _) => buf.extend_from_slice(&data),
            (None, None) => first = Some(data),
            (None, Some(head)) => {
                let mut buf = BytesMut::with_capacity(declared.map_or(len, |n| n as usize));
                buf.extend_from_slice(&head);
                buf.extend_from_slice(&data);
                joined = Some(buf);
            }
        }
    }
    let bytes = match (joined, first) {
        (Some(buf), _) => buf.freeze(),
        (None, Some(head)) => head,
        (None, None) => Bytes::new(),
    };
    Ok((bytes, trailers))
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use http::HeaderMap;
    use http_body_util::Full;
    use hyper::body::{Body as HttpBody, Frame};

    use super::*;

    fn headers(len: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(l) = len {
            h.insert(header::CONTENT_LENGTH, l.parse().unwrap());
        }
        h
    }

    #[tokio::test(flavor = "current_thread")]
    async fn declared_length_over_limit_is_refused_before_reading() {
        let e = read_limited(
            &headers(Some("100")),
            Full::new(Bytes::from_static(b"{}")),
            10,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::PayloadTooLarge);
        assert!(e.close);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn undeclared_body_over_limit_is_refused() {
        let body = Full::new(Bytes::from(vec![b'x'; 11]));
        let e = read_limited(&headers(None), body, 10).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::PayloadTooLarge);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn body_at_limit_is_read() {
        let body = Full::new(Bytes::from(vec![b'x'; 10]));
        assert_eq!(
            read_limited(&headers(Some("10")), body, 10)
                .await
                .unwrap()
                .len(),
            10
        );
    }

    /// A body of several frames, as a trickling client sends it.
    struct Frames(std::collections::VecDeque<Bytes>);

    impl HttpBody for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn frames_are_joined_in_order_and_bounded_in_total() {
        let parts = || {
            Frames(
                ["{\"a\"", ":1", "}"]
                    .map(|s: &'static str| Bytes::from_static(s.as_bytes()))
                    .into(),
            )
        };
        let got = read_limited(&headers(None), parts(), 16).await.unwrap();
        assert_eq!(&got[..], b"{\"a\":1}");
        let e = read_limited(&headers(None), parts(), 6).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::PayloadTooLarge);
    }

    #[test]
    fn malformed_content_length_is_an_error() {
        assert_eq!(
            content_length(&headers(Some("ten"))).unwrap_err().code,
            ErrorCode::InvalidField
        );
    }
}

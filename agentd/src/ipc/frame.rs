//! Framing of the agentd IPC stream: a `u32` big-endian payload length, then
//! that many bytes of postcard.
//!
//! The decoder is sans-IO: the connection task pushes whatever bytes the
//! socket produced and pulls whole frames out. The length is checked against
//! [`MAX_FRAME_LEN`] as soon as the four header bytes are in, so a peer
//! announcing a huge frame is refused before anything is buffered for it,
//! and the buffer never holds more than one frame plus one read chunk.
//! Large payloads (FIB snapshots, route listings) are split into several
//! frames by their producers instead of raising the bound.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

/// Largest accepted payload. Big enough for a chunk of a few hundred routes,
/// small enough that a misbehaving peer cannot make us allocate much.
pub const MAX_FRAME_LEN: usize = 256 * 1024;

/// Why a frame could not be produced or understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The length prefix (or an encoded message) exceeds the bound.
    TooLarge { len: usize, max: usize },
    /// The payload is not a valid postcard encoding of the expected message.
    Decode(postcard::Error),
    /// The message could not be serialised (a serde-level failure).
    Encode(postcard::Error),
    /// The stream ended inside a frame.
    Truncated { buffered: usize, needed: usize },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the {max}-byte limit")
            }
            FrameError::Decode(e) => write!(f, "frame payload does not decode: {e}"),
            FrameError::Encode(e) => write!(f, "message does not encode: {e}"),
            FrameError::Truncated { buffered, needed } => {
                write!(
                    f,
                    "stream ended inside a frame ({buffered} of {needed} bytes received)"
                )
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Appends one frame holding `msg` to `out`. On error `out` is left as it
/// was, so a caller can report the failure and keep using its buffer. An
/// oversized message is cut off while encoding, never fully materialised.
pub fn encode_into<T: Serialize + ?Sized>(msg: &T, out: &mut Vec<u8>) -> Result<(), FrameError> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    let limit = start + HEADER_LEN + MAX_FRAME_LEN;
    let result = postcard::serialize_with_flavor(
        msg,
        Append {
            out: &mut *out,
            limit,
        },
    );
    if let Err(e) = result {
        out.truncate(start);
        return Err(match e {
            postcard::Error::SerializeBufferFull => FrameError::TooLarge {
                len: postcard::experimental::serialized_size(msg).unwrap_or(usize::MAX),
                max: MAX_FRAME_LEN,
            },
            e => FrameError::Encode(e),
        });
    }
    let len = (out.len() - start - HEADER_LEN) as u32;
    out[start..start + HEADER_LEN].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// postcard output that appends to a borrowed buffer up to a limit.
struct Append<'a> {
    out: &'a mut Vec<u8>,
    limit: usize,
}

impl postcard::ser_flavors::Flavor for Append<'_> {
    type Output = ();

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.try_extend(&[data])
    }

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        if self.out.len() + data.len() > self.limit {
            return Err(postcard::Error::SerializeBufferFull);
        }
        self.out.extend_from_slice(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// One frame holding `msg`, as a fresh buffer.
pub fn encode<T: Serialize + ?Sized>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::new();
    encode_into(msg, &mut out)?;
    Ok(out)
}

/// Decodes one frame payload (without its length prefix) as `T`. Trailing
/// bytes after the message are refused: a frame holds exactly one message.
pub fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    match postcard::take_from_bytes::<T>(payload) {
        Ok((msg, [])) => Ok(msg),
        Ok((_, _rest)) => Err(FrameError::Decode(postcard::Error::DeserializeBadEncoding)),
        Err(e) => Err(FrameError::Decode(e)),
    }
}

/// Incremental frame splitter for one byte stream.
///
/// After a `TooLarge` error the stream has lost its framing; the decoder
/// keeps returning that error and the connection must be closed.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    max: usize,
    failed: Option<FrameError>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new()
    }
}

impl FrameDecoder {
    pub fn new() -> FrameDecoder {
        FrameDecoder::with_max(MAX_FRAME_LEN)
    }

    /// A decoder with a smaller bound (never larger than [`MAX_FRAME_LEN`]).
    pub fn with_max(max: usize) -> FrameDecoder {
        FrameDecoder {
            buf: Vec::new(),
            pos: 0,
            max: max.min(MAX_FRAME_LEN),
            failed: None,
        }
    }

    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        // Reclaim consumed space before growing, so the buffer stays near
        // one frame plus one read regardless of how long the stream runs.
        if self.pos > 0 && (self.pos == self.buf.len() || self.pos >= self.buf.capacity() / 2) {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next complete frame payload, `None` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let avail = &self.buf[self.pos..];
        let Some(header) = avail.get(..HEADER_LEN) else {
            return Ok(None);
        };
        let mut len_bytes = [0u8; HEADER_LEN];
        len_bytes.copy_from_slice(header);
        let len = u32::from_be_bytes(len_bytes) as usize;
        if len > self.max {
            let e = FrameError::TooLarge { len, max: self.max };
            self.failed = Some(e.clone());
            self.buf = Vec::new();
            self.pos = 0;
            return Err(e);
        }
        if avail.len() < HEADER_LEN + len {
            // Reserve once for the whole frame instead of growing per read.
            self.buf.reserve(HEADER_LEN + len - avail.len());
            return Ok(None);
        }
        let start = self.pos + HEADER_LEN;
        self.pos = start + len;
        Ok(Some(&self.buf[start..start + len]))
    }

    /// The next complete frame decoded as `T`. A decode error leaves the
    /// framing intact (the bad frame is consumed), but callers on an
    /// untrusted stream should still treat it as fatal for the connection.
    pub fn next_message<T: DeserializeOwned>(&mut self) -> Result<Option<T>, FrameError> {
        match self.next_frame()? {
            Some(payload) => decode_payload(payload).map(Some),
            None => Ok(None),
        }
    }

    /// Call at end of stream: an error if a partial frame is left over.
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let buffered = self.buffered();
        if buffered == 0 {
            return Ok(());
        }
        let needed = match self.buf[self.pos..].get(..HEADER_LEN) {
            Some(h) => HEADER_LEN + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize,
            None => HEADER_LEN,
        };
        Err(FrameError::Truncated { buffered, needed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_messages_split_at_every_byte() {
        let msgs: Vec<(u64, String)> = (0..5).map(|i| (i, "x".repeat(i as usize * 7))).collect();
        let mut wire = Vec::new();
        for m in &msgs {
            encode_into(m, &mut wire).unwrap();
        }
        for split in 0..wire.len() {
            let mut d = FrameDecoder::new();
            let mut got = Vec::new();
            for part in [&wire[..split], &wire[split..]] {
                d.push(part);
                while let Some(m) = d.next_message::<(u64, String)>().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got, msgs, "split at {split}");
            d.finish().unwrap();
        }
    }

    #[test]
    fn oversized_length_is_refused_before_buffering_the_body() {
        let mut d = FrameDecoder::with_max(16);
        d.push(&17u32.to_be_bytes());
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge { len: 17, max: 16 })
        );
        // Stays failed: framing is lost.
        d.push(&[0; 64]);
        assert_eq!(d.buffered(), 0);
        assert!(matches!(d.next_frame(), Err(FrameError::TooLarge { .. })));
        assert!(d.finish().is_err());
    }

    #[test]
    fn max_length_header_from_the_wire_is_too_large() {
        let mut d = FrameDecoder::new();
        d.push(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge {
                len: u32::MAX as usize,
                max: MAX_FRAME_LEN
            })
        );
    }

    #[test]
    fn encoding_refuses_messages_over_the_limit() {
        let big = vec![7u8; MAX_FRAME_LEN + 1];
        let mut out = vec![1, 2, 3];
        let err = encode_into(&big, &mut out).unwrap_err();
        assert!(
            matches!(
                err,
                FrameError::TooLarge {
                    max: MAX_FRAME_LEN,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(out, [1, 2, 3], "buffer restored");
    }

    #[test]
    fn truncated_stream_reports_what_was_missing() {
        let wire = encode(&"hello".to_string()).unwrap();
        let mut d = FrameDecoder::new();
        d.push(&wire[..wire.len() - 2]);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(
            d.finish(),
            Err(FrameError::Truncated {
                buffered: wire.len() - 2,
                needed: wire.len()
            })
        );
        let mut d = FrameDecoder::new();
        d.push(&[0, 0]);
        assert_eq!(
            d.finish(),
            Err(FrameError::Truncated {
                buffered: 2,
                needed: HEADER_LEN
            })
        );
    }

    #[test]
    fn garbage_payload_is_a_typed_decode_error_and_framing_survives() {
        let mut d = FrameDecoder::new();
        // A bool that is neither 0 nor 1, then a valid frame.
        d.push(&[0, 0, 0, 1, 9]);
        d.push(&encode(&true).unwrap());
        assert_eq!(
            d.next_message::<bool>(),
            Err(FrameError::Decode(postcard::Error::DeserializeBadBool))
        );
        assert_eq!(d.next_message::<bool>(), Ok(Some(true)));
    }

    #[test]
    fn trailing_bytes_inside_a_frame_are_refused() {
        let mut d = FrameDecoder::new();
        d.push(&[0, 0, 0, 2, 1, 1]);
        assert!(matches!(
            d.next_message::<bool>(),
            Err(FrameError::Decode(_))
        ));
    }

    #[test]
    fn buffer_is_reclaimed_over_a_long_stream() {
        let frame = encode(&vec![1u8; 1000]).unwrap();
        let mut d = FrameDecoder::new();
        for _ in 0..10_000 {
            d.push(&frame);
            assert!(d.next_frame().unwrap().is_some());
        }
        assert!(
            d.buf.capacity() < 8 * frame.len(),
            "capacity {}",
            d.buf.capacity()
        );
    }
}

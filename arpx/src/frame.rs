//! Framing: a `u32` big-endian body length, then the postcard encoding of
//! one [`Message`]. Every frame is bounded (`arpx.max_frame` bytes of
//! body), every decoded message is validated, and every failure is a typed
//! [`FrameError`] that maps onto the `Close` code a session answers with.
//!
//! Updates and withdraws are batched to fit the bound ([`batch_updates`],
//! [`batch_withdraws`]) so a big table never needs a big frame.

use std::fmt;

use crate::message::{CloseCode, Invalid, Message, RouteAd, Update, Withdraw};

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;
/// The default `arpx.max_frame`.
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024;

/// Why bytes from a peer are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The length prefix announces more than the bound; the body is not
    /// read.
    TooLarge { len: usize, max: usize },
    /// The body is not a postcard `Message`.
    Decode(postcard::Error),
    /// The body holds a message and then more bytes.
    Trailing(usize),
    /// A message that breaks the wire rules.
    Invalid(Invalid),
}

impl FrameError {
    /// The `Close` code a session answers this with.
    pub fn close_code(&self) -> CloseCode {
        match self {
            FrameError::TooLarge { .. } => CloseCode::FrameTooLarge,
            FrameError::Decode(_) | FrameError::Trailing(_) => CloseCode::Decode,
            FrameError::Invalid(_) => CloseCode::InvalidMessage,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the limit of {max}")
            }
            FrameError::Decode(e) => write!(f, "undecodable frame: {e}"),
            FrameError::Trailing(n) => write!(f, "{n} bytes after the message"),
            FrameError::Invalid(e) => write!(f, "invalid message: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

impl From<Invalid> for FrameError {
    fn from(e: Invalid) -> FrameError {
        FrameError::Invalid(e)
    }
}

/// A message of ours that does not fit the frame bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge {
    pub len: usize,
    pub max: usize,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "message of {} bytes exceeds the frame limit of {}",
            self.len, self.max
        )
    }
}

impl std::error::Error for TooLarge {}

/// The postcard body of `msg`.
pub fn encode_body(msg: &Message) -> Vec<u8> {
    crate::wire::encode(msg)
}

/// One whole frame (length prefix and body), or `TooLarge`. Every route
/// change sends one to every peer: it is sized before it is encoded, and
/// encoded once into an allocation of its size (`crate::wire`).
pub fn encode(msg: &Message, max_frame: usize) -> Result<Vec<u8>, TooLarge> {
    let len = crate::wire::size(msg);
    if len > max_frame || len > u32::MAX as usize {
        return Err(TooLarge {
            len,
            max: max_frame,
        });
    }
    Ok(crate::wire::encode_sized(
        &(len as u32).to_be_bytes(),
        msg,
        len,
    ))
}

/// The body length a header announces, checked against the bound before
/// any body byte is read.
pub fn body_len(header: [u8; HEADER_LEN], max_frame: usize) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > max_frame {
        Err(FrameError::TooLarge {
            len,
            max: max_frame,
        })
    } else {
        Ok(len)
    }
}

/// Decodes and validates one body.
pub fn decode_body(body: &[u8]) -> Result<Message, FrameError> {
    let (msg, rest) = postcard::take_from_bytes::<Message>(body).map_err(FrameError::Decode)?;
    if !rest.is_empty() {
        return Err(FrameError::Trailing(rest.len()));
    }
    msg.validate()?;
    Ok(msg)
}

/// Splits a byte stream into messages, holding at most one frame's worth
/// of bytes (header plus `max_frame`) plus what the last read added.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    max_frame: usize,
    failed: bool,
}

impl FrameReader {
    pub fn new(max_frame: usize) -> FrameReader {
        FrameReader {
            buf: Vec::new(),
            max_frame,
            failed: false,
        }
    }

    /// Appends bytes read from the transport.
    pub fn feed(&mut self, bytes: &[u8]) {
        if !self.failed {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next complete message, `None` if more bytes are needed. After
    /// an error the stream is unusable (framing is lost) and every later
    /// call returns `None`.
    pub fn next_message(&mut self) -> Option<Result<Message, FrameError>> {
        if self.failed || self.buf.len() < HEADER_LEN {
            return None;
        }
        let header = [self.buf[0], self.buf[1], self.buf[2], self.buf[3]];
        let len = match body_len(header, self.max_frame) {
            Ok(len) => len,
            Err(e) => return Some(self.fail(e)),
        };
        if self.buf.len() < HEADER_LEN + len {
            return None;
        }
        let result = decode_body(&self.buf[HEADER_LEN..HEADER_LEN + len]);
        self.buf.drain(..HEADER_LEN + len);
        Some(match result {
            Ok(msg) => Ok(msg),
            Err(e) => self.fail(e),
        })
    }

    /// Bytes buffered and not yet returned as messages.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn fail(&mut self, e: FrameError) -> Result<Message, FrameError> {
        self.failed = true;
        self.buf = Vec::new();
        Err(e)
    }
}

/// Bytes postcard uses for `n` as a varint.
fn varint_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// What a batch's message adds to its items: variant tag, seq varint (at
/// most 10 bytes) and list length varint (at most 5), conservatively.
const BATCH_OVERHEAD: usize = 1 + 10 + 5;

/// Packs `items` into as few messages as fit `max_frame`, numbering them
/// from `first_seq`. An item that alone exceeds the bound is returned in
/// the error list, not sent (the caller counts and logs it).
///
/// Usually (one route's change, a snapshot chunk) every item fits one
/// frame, and the items go in the vector they came in; otherwise each
/// message's vector is allocated once, at the size its items need.
fn batch<T>(
    items: Vec<T>,
    first_seq: u64,
    max_frame: usize,
    size: impl Fn(&T) -> usize,
    make: impl Fn(u64, Vec<T>) -> Message,
) -> (Vec<Message>, Vec<(T, TooLarge)>) {
    let lens: Vec<usize> = items.iter().map(size).collect();
    let fits = |len: usize| BATCH_OVERHEAD.saturating_add(len) <= max_frame;
    let total = lens
        .iter()
        .fold(BATCH_OVERHEAD, |t, &l| t.saturating_add(l));
    if total <= max_frame {
        let out = if items.is_empty() {
            Vec::new()
        } else {
            vec![make(first_seq, items)]
        };
        return (out, Vec::new());
    }
    let mut out = Vec::new();
    let mut refused = Vec::new();
    let mut current: Vec<T> = Vec::new();
    let mut current_len = BATCH_OVERHEAD;
    let mut seq = first_seq;
    for (i, item) in items.into_iter().enumerate() {
        let len = lens[i];
        if !fits(len) {
            refused.push((
                item,
                TooLarge {
                    len: BATCH_OVERHEAD.saturating_add(len),
                    max: max_frame,
                },
            ));
            continue;
        }
        if current_len + len > max_frame {
            out.push(make(seq, std::mem::take(&mut current)));
            seq += 1;
            current_len = BATCH_OVERHEAD;
        }
        if current.is_empty() {
            current.reserve_exact(frame_items(&lens[i..], max_frame));
        }
        current_len += len;
        current.push(item);
    }
    if !current.is_empty() {
        out.push(make(seq, current));
    }
    (out, refused)
}

/// How many items of `lens` the frame that starts with the first holds
/// (items no frame holds are skipped, not counted).
fn frame_items(lens: &[usize], max_frame: usize) -> usize {
    let mut total = BATCH_OVERHEAD;
    let mut n = 0;
    for &len in lens {
        if BATCH_OVERHEAD.saturating_add(len) > max_frame {
            continue;
        }
        if total + len > max_frame {
            break;
        }
        total += len;
        n += 1;
    }
    n
}

/// Updates carrying `routes`, each within `max_frame`.
pub fn batch_updates(
    routes: Vec<RouteAd>,
    first_seq: u64,
    max_frame: usize,
) -> (Vec<Message>, Vec<(RouteAd, TooLarge)>) {
    batch(
        routes,
        first_seq,
        max_frame,
        |r| postcard::experimental::serialized_size(r).unwrap_or(usize::MAX / 2),
        |seq, routes| Message::Update(Update { seq, routes }),
    )
}

/// Withdraws carrying `route_ids`, each within `max_frame`.
pub fn batch_withdraws(
    route_ids: Vec<String>,
    first_seq: u64,
    max_frame: usize,
) -> (Vec<Message>, Vec<(String, TooLarge)>) {
    batch(
        route_ids,
        first_seq,
        max_frame,
        |id| varint_len(id.len() as u64) + id.len(),
        |seq, route_ids| Message::Withdraw(Withdraw { seq, route_ids }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Close, Open};
    use crate::testing::ad;

    fn open() -> Message {
        Message::Open(Open {
            version: 1,
            router_id: "router-a".into(),
            domain: "lab.example".into(),
            boot_epoch: 7,
            heartbeat_ms: 1000,
            reflector_client: false,
        })
    }

    #[test]
    fn frames_round_trip_through_the_reader_byte_by_byte() {
        let msgs = [
            open(),
            Message::Heartbeat,
            Message::SnapshotBegin { version: 3 },
            Message::Update(Update {
                seq: 1,
                routes: vec![ad("r1", &["router-a"])],
            }),
            Message::SnapshotEnd { version: 3 },
            Message::Close(Close::new(CloseCode::AdminShutdown, "bye")),
        ];
        let mut stream = Vec::new();
        for m in &msgs {
            stream.extend(encode(m, DEFAULT_MAX_FRAME).unwrap());
        }
        let mut r = FrameReader::new(DEFAULT_MAX_FRAME);
        let mut got = Vec::new();
        for b in stream {
            r.feed(&[b]);
            while let Some(m) = r.next_message() {
                got.push(m.unwrap());
            }
        }
        assert_eq!(got, msgs);
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn an_oversized_header_fails_before_the_body_arrives() {
        let mut r = FrameReader::new(1024);
        r.feed(&2000u32.to_be_bytes());
        let e = r.next_message().unwrap().unwrap_err();
        assert_eq!(
            e,
            FrameError::TooLarge {
                len: 2000,
                max: 1024
            }
        );
        assert_eq!(e.close_code(), CloseCode::FrameTooLarge);
        r.feed(&[0; 16]);
        assert_eq!(
            r.next_message(),
            None,
            "a failed stream yields nothing more"
        );
    }

    #[test]
    fn garbage_trailing_bytes_and_invalid_content_are_typed() {
        assert_eq!(
            decode_body(&[0xff, 0xff]).unwrap_err().close_code(),
            CloseCode::Decode
        );
        let mut body = encode_body(&Message::Heartbeat);
        body.push(0);
        assert_eq!(decode_body(&body), Err(FrameError::Trailing(1)));
        let mut bad = ad("r1", &["router-a"]);
        bad.tenant = "no spaces".into();
        let body = encode_body(&Message::Update(Update {
            seq: 1,
            routes: vec![bad],
        }));
        let e = decode_body(&body).unwrap_err();
        assert_eq!(e.close_code(), CloseCode::InvalidMessage);
        assert_eq!(
            e.to_string(),
            "invalid message: route.tenant has invalid syntax"
        );
    }

    #[test]
    fn a_frame_is_one_allocation_of_its_size_with_postcards_bytes() {
        let msgs = [
            Message::Heartbeat,
            Message::Update(Update {
                seq: 7,
                routes: vec![ad("r1", &["router-a", "router-b"]), ad("r2", &["router-a"])],
            }),
        ];
        for msg in &msgs {
            let frame = encode(msg, DEFAULT_MAX_FRAME).unwrap();
            let body = postcard::to_allocvec(msg).unwrap();
            assert_eq!(frame[..HEADER_LEN], (body.len() as u32).to_be_bytes());
            assert_eq!(frame[HEADER_LEN..], body[..]);
            assert_eq!(frame.capacity(), frame.len());
            let alone = encode_body(msg);
            assert_eq!(alone, body);
            assert_eq!(alone.capacity(), alone.len());
        }
    }

    #[test]
    fn our_own_oversized_message_is_refused_not_sent() {
        let msg = Message::Update(Update {
            seq: 1,
            routes: (0..100)
                .map(|i| ad(&format!("r{i}"), &["router-a"]))
                .collect(),
        });
        let e = encode(&msg, 1024).unwrap_err();
        assert!(e.len > 1024);
    }

    #[test]
    fn batches_fit_the_bound_keep_order_and_number_consecutively() {
        let routes: Vec<_> = (0..500)
            .map(|i| ad(&format!("route-{i}"), &["router-a", "router-b"]))
            .collect();
        let (msgs, refused) = batch_updates(routes.clone(), 41, 2048);
        assert!(refused.is_empty());
        assert!(msgs.len() > 1);
        let mut seqs = Vec::new();
        let mut all = Vec::new();
        for m in &msgs {
            let frame = encode(m, 2048).expect("every batch fits");
            assert!(frame.len() <= HEADER_LEN + 2048);
            let Message::Update(u) = m else { panic!() };
            assert_eq!(u.routes.capacity(), u.routes.len(), "sized once");
            seqs.push(u.seq);
            all.extend(u.routes.iter().cloned());
        }
        assert_eq!(seqs, (41..41 + msgs.len() as u64).collect::<Vec<_>>());
        assert_eq!(all, routes);

        let ids: Vec<String> = (0..3000).map(|i| format!("route-{i}")).collect();
        let (msgs, refused) = batch_withdraws(ids.clone(), 1, 1024);
        assert!(refused.is_empty());
        let mut back = Vec::new();
        for m in &msgs {
            assert!(encode(m, 1024).is_ok());
            let Message::Withdraw(w) = m else { panic!() };
            back.extend(w.route_ids.iter().cloned());
        }
        assert_eq!(back, ids);
    }

    #[test]
    fn items_that_fit_one_frame_go_in_the_vector_they_came_in() {
        let routes: Vec<_> = (0..3)
            .map(|i| ad(&format!("r{i}"), &["router-a"]))
            .collect();
        let at = routes.as_ptr();
        let (msgs, refused) = batch_updates(routes, 1, DEFAULT_MAX_FRAME);
        assert!(refused.is_empty());
        let [Message::Update(u)] = &msgs[..] else {
            panic!("one update: {msgs:?}")
        };
        assert_eq!(u.routes.as_ptr(), at);
        assert_eq!(u.routes.len(), 3);
        assert!(batch_updates(Vec::new(), 1, DEFAULT_MAX_FRAME).0.is_empty());
    }

    #[test]
    fn an_item_too_big_for_any_frame_is_handed_back() {
        let mut big = ad("big", &["router-a"]);
        big.allowed_sources = (0..60)
            .map(|i| format!("agent://lab/source-{i:040}"))
            .collect();
        let small = ad("small", &["router-a"]);
        let (msgs, refused) = batch_updates(vec![big, small.clone()], 1, 1024);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].0.route_id, "big");
        assert_eq!(
            msgs,
            vec![Message::Update(Update {
                seq: 1,
                routes: vec![small]
            })]
        );
    }
}

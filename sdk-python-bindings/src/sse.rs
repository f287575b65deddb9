//! Server-sent events: an incremental, bounded decoder and the encoder.
//!
//! The decoder follows the WHATWG event-stream rules that matter here
//! (`\n`, `\r\n` and `\r` line ends, `field: value` with one optional
//! space, comments, dispatch on a blank line, events without data are not
//! dispatched) and bounds line and event sizes because a stream is
//! untrusted and unbounded by nature. Comments are surfaced because the
//! Nexus protocol marks a finished stream with `: nexus-stream-complete`.

use std::fmt;

/// The comment that marks a completed stream (Nexus compatible).
pub const COMPLETE_MARKER: &str = "nexus-stream-complete";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
    pub retry_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseItem {
    Event(SseEvent),
    /// A comment line without its leading `:` (and one optional space).
    Comment(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseError {
    LineTooLong(usize),
    EventTooLarge(usize),
    NotUtf8,
    /// Encoder: an event name or id contained a line break.
    BadField(&'static str),
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::LineTooLong(n) => write!(f, "SSE line exceeds {n} bytes"),
            SseError::EventTooLarge(n) => write!(f, "SSE event exceeds {n} bytes"),
            SseError::NotUtf8 => write!(f, "SSE stream is not UTF-8"),
            SseError::BadField(name) => write!(f, "SSE {name} contains a line break"),
        }
    }
}

impl std::error::Error for SseError {}

#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    after_cr: bool,
    data: Vec<String>,
    data_len: usize,
    id: Option<String>,
    event: Option<String>,
    retry: Option<u64>,
    max_line: usize,
    max_event: usize,
}

impl SseDecoder {
    pub fn new(max_line: usize, max_event: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            after_cr: false,
            data: Vec::new(),
            data_len: 0,
            id: None,
            event: None,
            retry: None,
            max_line,
            max_event,
        }
    }

    /// Consumes `bytes`, appending complete items to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseItem>) -> Result<(), SseError> {
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, out)?;
                }
                _ => {
                    if self.line.len() >= self.max_line {
                        return Err(SseError::LineTooLong(self.max_line));
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseItem>) -> Result<(), SseError> {
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        if line.is_empty() {
            if !self.data.is_empty() {
                out.push(SseItem::Event(SseEvent {
                    id: self.id.take(),
                    event: self.event.take(),
                    data: self.data.join("\n"),
                    retry_ms: self.retry.take(),
                }));
            }
            self.data.clear();
            self.data_len = 0;
            self.id = None;
            self.event = None;
            self.retry = None;
            return Ok(());
        }
        if let Some(comment) = line.strip_prefix(':') {
            out.push(SseItem::Comment(
                comment.strip_prefix(' ').unwrap_or(comment).to_string(),
            ));
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data_len += value.len() + 1;
                if self.data_len > self.max_event {
                    return Err(SseError::EventTooLarge(self.max_event));
                }
                self.data.push(value.to_string());
            }
            "event" => self.event = Some(value.to_string()),
            // An id containing NUL is ignored, as the spec says.
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            "retry" => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Frames one event. `data` may span lines; each becomes a `data:` line.
pub fn encode_event(id: Option<u64>, event: Option<&str>, data: &str) -> Result<Vec<u8>, SseError> {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(e) = event {
        if e.contains(['\r', '\n']) {
            return Err(SseError::BadField("event name"));
        }
        out.push_str("event: ");
        out.push_str(e);
        out.push('\n');
    }
    if let Some(id) = id {
        out.push_str(&format!("id: {id}\n"));
    }
    let normalized = data.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Ok(out.into_bytes())
}

/// The completion comment, framed.
pub fn encode_complete() -> Vec<u8> {
    format!(": {COMPLETE_MARKER}\n\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseItem> {
        let mut d = SseDecoder::new(1024, 4096);
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out).unwrap();
        }
        out
    }

    fn ev(id: Option<&str>, event: Option<&str>, data: &str) -> SseItem {
        SseItem::Event(SseEvent {
            id: id.map(Into::into),
            event: event.map(Into::into),
            data: data.into(),
            retry_ms: None,
        })
    }

    #[test]
    fn decodes_events_split_across_arbitrary_chunks() {
        let stream = b"id: 1\nevent: token\ndata: a\ndata: b\n\nid: 2\ndata:c\r\n\r\n: nexus-stream-complete\n\n";
        let whole = decode_all(&[stream]);
        assert_eq!(
            whole,
            vec![
                ev(Some("1"), Some("token"), "a\nb"),
                ev(Some("2"), None, "c"),
                SseItem::Comment(COMPLETE_MARKER.into())
            ]
        );
        // Byte-by-byte feeding yields the same items.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(decode_all(&bytes), whole);
    }

    #[test]
    fn lone_cr_ends_lines_and_crlf_split_across_chunks_is_one_break() {
        assert_eq!(decode_all(&[b"data: x\r\r"]), vec![ev(None, None, "x")]);
        assert_eq!(
            decode_all(&[b"data: x\r", b"\n\r", b"\n"]),
            vec![ev(None, None, "x")]
        );
    }

    #[test]
    fn events_without_data_are_not_dispatched_and_retry_is_parsed() {
        let out = decode_all(&[b"id: 5\n\nretry: 250\ndata\n\n"]);
        assert_eq!(
            out,
            vec![SseItem::Event(SseEvent {
                id: None,
                event: None,
                data: String::new(),
                retry_ms: Some(250)
            })]
        );
    }

    #[test]
    fn oversized_lines_and_events_are_errors() {
        let mut d = SseDecoder::new(8, 16);
        let mut out = Vec::new();
        assert_eq!(
            d.feed(b"data: 123456789", &mut out),
            Err(SseError::LineTooLong(8))
        );
        let mut d = SseDecoder::new(64, 16);
        assert_eq!(
            d.feed(b"data: 1234567\ndata: 1234567\ndata: 1\n", &mut out),
            Err(SseError::EventTooLarge(16))
        );
        let mut d = SseDecoder::new(64, 64);
        assert_eq!(d.feed(b"data: \xff\n", &mut out), Err(SseError::NotUtf8));
    }

    #[test]
    fn encoder_round_trips_through_the_decoder() {
        let mut bytes = encode_event(Some(7), Some("delta"), "line1\r\nline2\rline3").unwrap();
        bytes.extend(encode_complete());
        assert_eq!(
            decode_all(&[&bytes]),
            vec![
                ev(Some("7"), Some("delta"), "line1\nline2\nline3"),
                SseItem::Comment(COMPLETE_MARKER.into())
            ]
        );
        assert_eq!(
            encode_event(None, Some("a\nb"), "x"),
            Err(SseError::BadField("event name"))
        );
        assert_eq!(encode_event(None, None, "").unwrap(), b"data: \n\n");
    }
}

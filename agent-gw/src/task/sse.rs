//! Server-sent events: the encoder for what agent-gw sends callers, and a
//! bounded incremental parser for what upstream handlers send us.
//!
//! The parser follows the WHATWG event-stream rules (LF, CRLF or lone CR
//! line ends; `data` lines joined with `\n`; a blank line dispatches;
//! comments ignored; unknown fields ignored) with two additions: every line
//! and every event is size-bounded with a typed error, and the Nexus
//! completion comment `: nexus-stream-complete` is surfaced so a finished
//! stream can be told from a dropped connection.

use std::fmt;

/// Comment a Nexus agent sends after its last event; the Nexus SDK resumes
/// a stream that ends without it.
pub const COMPLETE_COMMENT: &str = "nexus-stream-complete";

/// Appends one event: `id: N`, optional `event: X`, one `data:` line per
/// line of `data`, blank line. `event` must not contain line breaks (the
/// parser guarantees that for everything it produced).
pub fn encode_event(out: &mut Vec<u8>, id: u64, event: Option<&str>, data: &str) {
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.to_string().as_bytes());
    out.push(b'\n');
    if let Some(ev) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(ev.as_bytes());
        out.push(b'\n');
    }
    // Split on every line-end form so a CR inside data cannot start a new
    // field at the receiver.
    let mut rest = data;
    loop {
        let cut = rest.find(['\r', '\n']);
        let (line, next) = match cut {
            Some(i) => {
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                (&rest[..i], Some(&rest[i + skip..]))
            }
            None => (rest, None),
        };
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
        match next {
            Some(n) => rest = n,
            None => break,
        }
    }
    out.push(b'\n');
}

/// Appends a comment line (`: text`), e.g. keep-alives and the completion marker.
pub fn encode_comment(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b": ");
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// One parsed upstream item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    Event {
        event: Option<String>,
        id: Option<String>,
        data: String,
        retry: Option<u64>,
    },
    /// `: nexus-stream-complete` seen.
    Complete,
}

/// Why an upstream event stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseError {
    LineTooLong {
        max: usize,
    },
    EventTooLarge {
        max: usize,
    },
    /// A line is not UTF-8 (SSE is UTF-8 only).
    InvalidUtf8,
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::LineTooLong { max } => write!(f, "upstream SSE line exceeds {max} bytes"),
            SseError::EventTooLarge { max } => write!(f, "upstream SSE event exceeds {max} bytes"),
            SseError::InvalidUtf8 => f.write_str("upstream SSE stream is not UTF-8"),
        }
    }
}

impl std::error::Error for SseError {}

/// Incremental parser: [`push`](SseParser::push) bytes as they arrive,
/// then drain [`next_item`](SseParser::next_item) until `Ok(None)`.
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Read position in `buf` (consumed prefix is compacted lazily).
    pos: usize,
    /// The previous chunk ended in CR: a leading LF now belongs to it.
    skip_lf: bool,
    started: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    max_line: usize,
    max_event: usize,
    failed: Option<SseError>,
}

impl SseParser {
    pub fn new(max_line: usize, max_event: usize) -> SseParser {
        SseParser {
            buf: Vec::new(),
            pos: 0,
            skip_lf: false,
            started: false,
            data: String::new(),
            has_data: false,
            event: None,
            id: None,
            retry: None,
            max_line,
            max_event,
            failed: None,
        }
    }

    /// Adds received bytes. Unparsed input is bounded by `max_line`, which
    /// [`next_item`](SseParser::next_item) enforces.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            // A failed parser reads nothing more; keep it from buffering.
            return;
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 4096 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Next complete item, `Ok(None)` when more input is needed. After an
    /// error the parser stays failed.
    pub fn next_item(&mut self) -> Result<Option<SseItem>, SseError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let r = self.step();
        if let Err(e) = r {
            self.failed = Some(e);
        }
        r
    }

    fn step(&mut self) -> Result<Option<SseItem>, SseError> {
        loop {
            if self.skip_lf && self.pos < self.buf.len() {
                if self.buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                self.skip_lf = false;
            }
            let rest = &self.buf[self.pos..];
            let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                if rest.len() > self.max_line {
                    return Err(SseError::LineTooLong { max: self.max_line });
                }
                return Ok(None);
            };
            if end > self.max_line {
                return Err(SseError::LineTooLong { max: self.max_line });
            }
            let cr = rest[end] == b'\r';
            let mut line = &rest[..end];
            if !self.started {
                self.started = true;
                line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
            }
            let line = std::str::from_utf8(line)
                .map_err(|_| SseError::InvalidUtf8)?
                .to_owned();
            self.pos += end + 1;
            if cr {
                // A CRLF split across two chunks must not count as two ends.
                self.skip_lf = true;
            }
            if let Some(item) = self.line(&line)? {
                return Ok(Some(item));
            }
        }
    }

    fn line(&mut self, line: &str) -> Result<Option<SseItem>, SseError> {
        if line.is_empty() {
            let event = self.event.take();
            let id = self.id.take();
            let retry = self.retry.take();
            if !self.has_data {
                return Ok(None);
            }
            self.has_data = false;
            let data = std::mem::take(&mut self.data);
            return Ok(Some(SseItem::Event {
                event,
                id,
                data,
                retry,
            }));
        }
        if let Some(comment) = line.strip_prefix(':') {
            if comment.trim() == COMPLETE_COMMENT {
                return Ok(Some(SseItem::Complete));
            }
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                let extra = value.len() + usize::from(self.has_data);
                if self.data.len() + extra > self.max_event {
                    return Err(SseError::EventTooLarge {
                        max: self.max_event,
                    });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            "retry" => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Result<Vec<SseItem>, SseError> {
        let mut p = SseParser::new(1024, 4096);
        let mut out = Vec::new();
        for c in chunks {
            p.push(c);
            while let Some(item) = p.next_item()? {
                out.push(item);
            }
        }
        Ok(out)
    }

    fn ev(event: Option<&str>, id: Option<&str>, data: &str) -> SseItem {
        SseItem::Event {
            event: event.map(Into::into),
            id: id.map(Into::into),
            data: data.into(),
            retry: None,
        }
    }

    #[test]
    fn encoder_splits_multiline_data_and_parser_reads_it_back() {
        let mut out = Vec::new();
        encode_event(&mut out, 7, Some("progress"), "a\nb\r\nc\rd");
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "id: 7\nevent: progress\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
        );
        encode_comment(&mut out, COMPLETE_COMMENT);
        assert_eq!(
            parse_all(&[&out]).unwrap(),
            vec![
                ev(Some("progress"), Some("7"), "a\nb\nc\nd"),
                SseItem::Complete
            ]
        );
    }

    #[test]
    fn empty_data_is_one_empty_data_line() {
        let mut out = Vec::new();
        encode_event(&mut out, 1, None, "");
        assert_eq!(out, b"id: 1\ndata: \n\n");
        assert_eq!(parse_all(&[&out]).unwrap(), vec![ev(None, Some("1"), "")]);
    }

    #[test]
    fn handles_every_line_end_and_chunk_boundary() {
        let text = b"\xef\xbb\xbfdata: x\r\n\r\nevent: e\rdata:y\r\rdata\n\n: keepalive\n\n";
        let whole = parse_all(&[text]).unwrap();
        assert_eq!(
            whole,
            vec![
                ev(None, None, "x"),
                ev(Some("e"), None, "y"),
                ev(None, None, "")
            ]
        );
        for split in 0..text.len() {
            let (a, b) = text.split_at(split);
            assert_eq!(parse_all(&[a, b]).unwrap(), whole, "split at {split}");
        }
    }

    #[test]
    fn events_without_data_are_not_dispatched_and_fields_reset() {
        let items = parse_all(&[b"event: lone\nid: 3\n\ndata: z\n\n"]).unwrap();
        assert_eq!(items, vec![ev(None, None, "z")]);
    }

    #[test]
    fn retry_and_unknown_fields() {
        let items = parse_all(&[b"retry: 1500\nfoo: bar\nid: a\0b\ndata: q\n\n"]).unwrap();
        assert_eq!(
            items,
            vec![SseItem::Event {
                event: None,
                id: None,
                data: "q".into(),
                retry: Some(1500)
            }]
        );
    }

    #[test]
    fn bounds_lines_and_events_with_typed_errors() {
        let long = vec![b'a'; 2000];
        assert_eq!(
            parse_all(&[&long]),
            Err(SseError::LineTooLong { max: 1024 })
        );
        let mut many = Vec::new();
        for _ in 0..10 {
            many.extend_from_slice(b"data: ");
            many.extend_from_slice(&[b'b'; 500]);
            many.push(b'\n');
        }
        assert_eq!(
            parse_all(&[&many]),
            Err(SseError::EventTooLarge { max: 4096 })
        );
        assert_eq!(parse_all(&[b"data: \xff\n\n"]), Err(SseError::InvalidUtf8));
    }

    #[test]
    fn stays_failed_after_an_error() {
        let mut p = SseParser::new(8, 64);
        p.push(b"data: 0123456789\n");
        assert!(p.next_item().is_err());
        p.push(b"\ndata: ok\n\n");
        assert_eq!(p.next_item(), Err(SseError::LineTooLong { max: 8 }));
    }
}

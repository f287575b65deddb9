//! HTTP/1.1 message heads: bounded reading and parsing of request and
//! response heads, and the body framing they imply (RFC 9112 §6).
//!
//! Both the served handler endpoint and the router client read heads from
//! the network, so the head size and header count are bounded and every
//! violation is a typed error. Ambiguous framing (both `Content-Length` and
//! `Transfer-Encoding`, conflicting lengths, unknown codings) is refused
//! rather than guessed: that is the classic request-smuggling hole.

use std::fmt;
use std::io::{self, BufRead};

/// Largest head accepted (request line + headers).
pub const MAX_HEAD: usize = 16 * 1024;
/// Most header fields accepted.
pub const MAX_HEADERS: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadError {
    TooLarge,
    TooManyHeaders,
    /// The connection closed before a complete head (0 bytes: clean close).
    Truncated(usize),
    NotUtf8,
    BadStartLine(String),
    BadHeader(String),
    BadContentLength(String),
    /// A `Transfer-Encoding` other than a lone `chunked`.
    UnsupportedEncoding(String),
    /// Both `Content-Length` and `Transfer-Encoding`.
    AmbiguousFraming,
}

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadError::TooLarge => write!(f, "HTTP head exceeds {MAX_HEAD} bytes"),
            HeadError::TooManyHeaders => write!(f, "HTTP head has more than {MAX_HEADERS} fields"),
            HeadError::Truncated(n) => {
                write!(f, "connection closed after {n} bytes of an HTTP head")
            }
            HeadError::NotUtf8 => write!(f, "HTTP head is not valid text"),
            HeadError::BadStartLine(l) => write!(f, "malformed HTTP start line {l:?}"),
            HeadError::BadHeader(l) => write!(f, "malformed HTTP header line {l:?}"),
            HeadError::BadContentLength(v) => write!(f, "invalid Content-Length {v:?}"),
            HeadError::UnsupportedEncoding(v) => write!(f, "unsupported Transfer-Encoding {v:?}"),
            HeadError::AmbiguousFraming => {
                write!(f, "both Content-Length and Transfer-Encoding present")
            }
        }
    }
}

impl std::error::Error for HeadError {}

/// Header fields in arrival order; names compared case-insensitively.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// True when a comma-separated header contains `token`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.all(name).flat_map(|v| v.split(',')).any(|t| {
            let t = t.split(';').next().unwrap_or("").trim();
            t.eq_ignore_ascii_case(token)
        })
    }
}

/// How the body after a head is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Length(u64),
    Chunked,
    /// Until the connection closes (responses only).
    UntilClose,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    pub target: String,
    pub headers: Headers,
    pub framing: Framing,
    /// HTTP/1.0 or `Connection: close`.
    pub close: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub headers: Headers,
    pub framing: Framing,
}

/// Reads one head (through the blank line) without consuming body bytes.
/// Returns `Truncated(0)` when the peer closed before sending anything.
pub fn read_head<R: BufRead>(r: &mut R) -> Result<Vec<u8>, ReadHeadError> {
    let mut head = Vec::with_capacity(512);
    loop {
        let start = head.len();
        let limit = (MAX_HEAD + 1 - head.len()) as u64;
        let n = io::Read::take(&mut *r, limit)
            .read_until(b'\n', &mut head)
            .map_err(ReadHeadError::Io)?;
        if head.len() > MAX_HEAD {
            return Err(ReadHeadError::Head(HeadError::TooLarge));
        }
        if n == 0 || !head.ends_with(b"\n") {
            return Err(ReadHeadError::Head(HeadError::Truncated(head.len())));
        }
        let line = &head[start..];
        // Tolerate leading empty lines before a request line (RFC 9112 §2.2).
        if (line == b"\r\n" || line == b"\n") && start == 0 {
            head.clear();
            continue;
        }
        if line == b"\r\n" || line == b"\n" {
            return Ok(head);
        }
    }
}

#[derive(Debug)]
pub enum ReadHeadError {
    Io(io::Error),
    Head(HeadError),
}

impl fmt::Display for ReadHeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadHeadError::Io(e) => write!(f, "reading HTTP head: {e}"),
            ReadHeadError::Head(e) => e.fmt(f),
        }
    }
}

fn lines(head: &[u8]) -> Result<Vec<&str>, HeadError> {
    if head.len() > MAX_HEAD {
        return Err(HeadError::TooLarge);
    }
    let text = std::str::from_utf8(head).map_err(|_| HeadError::NotUtf8)?;
    Ok(text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .take_while(|l| !l.is_empty())
        .collect())
}

fn parse_fields(lines: &[&str]) -> Result<Headers, HeadError> {
    if lines.len() > MAX_HEADERS {
        return Err(HeadError::TooManyHeaders);
    }
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(HeadError::BadHeader(clip(line)));
        };
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(token) {
            return Err(HeadError::BadHeader(clip(line)));
        }
        if value.bytes().any(|b| b == b'\r' || b == 0) {
            return Err(HeadError::BadHeader(clip(line)));
        }
        out.push((name.to_string(), value.trim().to_string()));
    }
    Ok(Headers(out))
}

fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Body framing from the fields; `default` applies without either field.
fn framing(h: &Headers, default: Framing) -> Result<Framing, HeadError> {
    let te: Vec<&str> = h.all("transfer-encoding").collect();
    let cl: Vec<&str> = h.all("content-length").collect();
    if !te.is_empty() {
        if !cl.is_empty() {
            return Err(HeadError::AmbiguousFraming);
        }
        let joined = te.join(",");
        if joined.trim().eq_ignore_ascii_case("chunked") {
            return Ok(Framing::Chunked);
        }
        return Err(HeadError::UnsupportedEncoding(clip(&joined)));
    }
    let mut length: Option<u64> = None;
    for v in cl.iter().flat_map(|v| v.split(',')) {
        let v = v.trim();
        let n: u64 = match v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() && v.len() <= 18 {
            true => v
                .parse()
                .map_err(|_| HeadError::BadContentLength(clip(v)))?,
            false => return Err(HeadError::BadContentLength(clip(v))),
        };
        if length.is_some_and(|l| l != n) {
            return Err(HeadError::BadContentLength(clip(v)));
        }
        length = Some(n);
    }
    Ok(length.map(Framing::Length).unwrap_or(default))
}

pub fn parse_request_head(head: &[u8]) -> Result<RequestHead, HeadError> {
    let lines = lines(head)?;
    let Some((first, rest)) = lines.split_first() else {
        return Err(HeadError::BadStartLine(String::new()));
    };
    let parts: Vec<&str> = first.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(HeadError::BadStartLine(clip(first)));
    };
    let method_ok = !method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase());
    if !method_ok || !target.starts_with('/') || !(version == "HTTP/1.1" || version == "HTTP/1.0") {
        return Err(HeadError::BadStartLine(clip(first)));
    }
    let headers = parse_fields(rest)?;
    let framing = framing(&headers, Framing::Length(0))?;
    let close = version == "HTTP/1.0" || headers.has_token("connection", "close");
    Ok(RequestHead {
        method: method.to_string(),
        target: target.to_string(),
        headers,
        framing,
        close,
    })
}

/// Parses a response head. `head_request` / 1xx / 204 / 304 responses have
/// no body whatever the fields say.
pub fn parse_response_head(head: &[u8], head_request: bool) -> Result<ResponseHead, HeadError> {
    let lines = lines(head)?;
    let Some((first, rest)) = lines.split_first() else {
        return Err(HeadError::BadStartLine(String::new()));
    };
    let mut parts = first.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let code = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") || code.len() != 3 {
        return Err(HeadError::BadStartLine(clip(first)));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| HeadError::BadStartLine(clip(first)))?;
    if !(100..=599).contains(&status) {
        return Err(HeadError::BadStartLine(clip(first)));
    }
    let headers = parse_fields(rest)?;
    let no_body = head_request || status < 200 || status == 204 || status == 304;
    let framing = if no_body {
        Framing::Length(0)
    } else {
        framing(&headers, Framing::UntilClose)?
    };
    Ok(ResponseHead {
        status,
        headers,
        framing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_head_with_length_and_keep_alive() {
        let h = parse_request_head(b"POST /invoke HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nAccept: text/event-stream\r\n\r\n").unwrap();
        assert_eq!((h.method.as_str(), h.target.as_str()), ("POST", "/invoke"));
        assert_eq!(h.framing, Framing::Length(12));
        assert!(!h.close);
        assert!(h.headers.has_token("accept", "TEXT/EVENT-STREAM"));
    }

    #[test]
    fn request_framing_ambiguities_are_refused() {
        let both = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(parse_request_head(both), Err(HeadError::AmbiguousFraming));
        let two = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert!(matches!(
            parse_request_head(two),
            Err(HeadError::BadContentLength(_))
        ));
        let neg = b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n";
        assert!(matches!(
            parse_request_head(neg),
            Err(HeadError::BadContentLength(_))
        ));
        let gz = b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert!(matches!(
            parse_request_head(gz),
            Err(HeadError::UnsupportedEncoding(_))
        ));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n";
        assert_eq!(
            parse_request_head(chunked).unwrap().framing,
            Framing::Chunked
        );
    }

    #[test]
    fn malformed_request_lines_and_fields() {
        assert!(matches!(
            parse_request_head(b"GET http://x/ HTTP/1.1\r\n\r\n"),
            Err(HeadError::BadStartLine(_))
        ));
        assert!(matches!(
            parse_request_head(b"get / HTTP/1.1\r\n\r\n"),
            Err(HeadError::BadStartLine(_))
        ));
        assert!(matches!(
            parse_request_head(b"GET / HTTP/2\r\n\r\n"),
            Err(HeadError::BadStartLine(_))
        ));
        assert!(matches!(
            parse_request_head(b"GET / HTTP/1.1\r\nNoColon\r\n\r\n"),
            Err(HeadError::BadHeader(_))
        ));
        assert!(matches!(
            parse_request_head(b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"),
            Err(HeadError::BadHeader(_))
        ));
        assert!(parse_request_head(b"GET / HTTP/1.0\r\n\r\n").unwrap().close);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        let head = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(
            parse_request_head(head.as_bytes()),
            Err(HeadError::TooManyHeaders)
        );
    }

    #[test]
    fn response_heads_and_bodyless_statuses() {
        let r = parse_response_head(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!((r.status, r.framing), (200, Framing::UntilClose));
        let r = parse_response_head(
            b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(r.framing, Framing::Length(0));
        let r = parse_response_head(b"HTTP/1.1 404\r\nContent-Length: 2\r\n\r\n", false).unwrap();
        assert_eq!((r.status, r.framing), (404, Framing::Length(2)));
        assert!(matches!(
            parse_response_head(b"HTTP/1.1 99 x\r\n\r\n", false),
            Err(HeadError::BadStartLine(_))
        ));
        assert!(matches!(
            parse_response_head(b"SSH-2.0\r\n\r\n", false),
            Err(HeadError::BadStartLine(_))
        ));
    }

    #[test]
    fn read_head_stops_at_blank_line_and_bounds_size() {
        let mut r = io::BufReader::new(&b"\r\nGET / HTTP/1.1\r\nA: b\r\n\r\nBODY"[..]);
        let head = read_head(&mut r).unwrap();
        assert_eq!(head, b"GET / HTTP/1.1\r\nA: b\r\n\r\n");
        let mut rest = Vec::new();
        io::Read::read_to_end(&mut r, &mut rest).unwrap();
        assert_eq!(rest, b"BODY");
        let mut r = io::BufReader::new(&b""[..]);
        assert!(matches!(
            read_head(&mut r),
            Err(ReadHeadError::Head(HeadError::Truncated(0)))
        ));
        let big = vec![b'a'; MAX_HEAD + 10];
        let mut r = io::BufReader::new(&big[..]);
        assert!(matches!(
            read_head(&mut r),
            Err(ReadHeadError::Head(HeadError::TooLarge))
        ));
    }
}

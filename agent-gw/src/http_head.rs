//! Why an HTTP/1 request head is refused with 400 `malformed_request`:
//! one typed fault per cause, each with its own message and reason code,
//! so a client learns what it got wrong rather than a list of everything
//! that could be.
//!
//! Two sources of faults:
//!
//! - hyper's parser refuses the head itself ([`HeadFault::of_hyper`],
//!   used by `http_guard` when it replaces hyper's bare answer). hyper
//!   exposes no kind for a parse error, only its text, which is what is
//!   matched here; `tests/http_errors.rs` drives the real parser through
//!   every fault, so a hyper that words one differently fails there
//!   instead of silently falling back to the generic message.
//! - hyper accepts any number of `Host` lines; RFC 9112 §3.2 asks a
//!   server to refuse an HTTP/1.1 request without one, and any request
//!   with more than one or with an invalid value ([`check_host`]). An
//!   HTTP/1.0 request without `Host` is served: HTTP/1.0 predates the
//!   header, and §3.2 requires it of HTTP/1.1 requests only. HTTP/2
//!   requests carry `:authority` instead and are not checked here.

use std::fmt;

/// Largest request head (and read buffer) per connection, on every
/// listener and on the peer links' h2 header lists.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

use http::{HeaderMap, Version};

use crate::api::error::{ApiError, ErrorCode, Outcome};

/// What is wrong with a request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadFault {
    /// The request line's method is not an HTTP token.
    Method,
    /// The request target is not a valid URI (or the line ends after
    /// it: hyper cannot tell the two apart).
    Target,
    /// The request line does not end in `HTTP/1.0` or `HTTP/1.1`.
    Version,
    /// A header line is not `name: value`.
    HeaderLine,
    /// `Content-Length` is not one decimal number.
    ContentLength,
    /// `Transfer-Encoding` does not end in `chunked`.
    TransferEncoding,
    /// `Transfer-Encoding` on an HTTP/1.0 request.
    TransferEncodingHttp10,
    /// The `Host` header is missing, repeated or invalid.
    Host(HostFault),
}

/// What is wrong with a request's `Host` header (RFC 9112 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostFault {
    /// An HTTP/1.1 request without one.
    Missing,
    /// More than one `Host` line (how many).
    Repeated(usize),
    /// A value that is not `host[:port]`.
    Invalid,
}

impl HeadFault {
    /// The fault behind hyper's refusal of a head, if it is one of the
    /// 400 faults above (too large and too long targets have their own
    /// statuses; anything else is not a head fault).
    pub fn of_hyper(e: &hyper::Error) -> Option<HeadFault> {
        if !e.is_parse() {
            return None;
        }
        let text = e.to_string();
        const KNOWN: [(&str, HeadFault); 7] = [
            ("invalid HTTP method parsed", HeadFault::Method),
            ("invalid URI", HeadFault::Target),
            ("invalid HTTP version parsed", HeadFault::Version),
            ("invalid HTTP header parsed", HeadFault::HeaderLine),
            ("invalid content-length parsed", HeadFault::ContentLength),
            (
                "invalid transfer-encoding parsed",
                HeadFault::TransferEncoding,
            ),
            (
                "unexpected transfer-encoding parsed",
                HeadFault::TransferEncodingHttp10,
            ),
        ];
        KNOWN
            .iter()
            .find(|(prefix, _)| text.starts_with(prefix))
            .map(|(_, f)| *f)
    }

    /// The reason code the JSON error carries.
    pub fn code(self) -> &'static str {
        match self {
            HeadFault::Method => "bad_method",
            HeadFault::Target => "bad_target",
            HeadFault::Version => "bad_version",
            HeadFault::HeaderLine => "bad_header_line",
            HeadFault::ContentLength => "bad_content_length",
            HeadFault::TransferEncoding => "bad_transfer_encoding",
            HeadFault::TransferEncodingHttp10 => "transfer_encoding_http10",
            HeadFault::Host(HostFault::Missing) => "missing_host",
            HeadFault::Host(HostFault::Repeated(_)) => "repeated_host",
            HeadFault::Host(HostFault::Invalid) => "bad_host",
        }
    }

    /// The 400 answer; the connection is closed after it (the rest of
    /// the request cannot be trusted to be framed as the client meant).
    pub fn into_error(self) -> ApiError {
        ApiError::new(
            ErrorCode::MalformedRequest,
            format!("{self}; the connection is closed"),
        )
        .reason(self.code())
        .outcome(Outcome::Rejected)
        .close()
    }
}

impl fmt::Display for HeadFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadFault::Method => f.write_str(
                "the request method is not an HTTP token (request line `METHOD target HTTP/1.1`)",
            ),
            HeadFault::Target => f.write_str(
                "the request target is not a valid URI, or the request line ends right after it (request line `METHOD target HTTP/1.1`, the target a path such as /healthz without control characters)",
            ),
            HeadFault::Version => f.write_str(
                "the request line does not end in HTTP/1.1 or HTTP/1.0 (request line `METHOD target HTTP/1.1`)",
            ),
            HeadFault::HeaderLine => f.write_str(
                "a header line is not `name: value` (a name outside the token characters, a control character in a value, or a continuation (obs-fold) line)",
            ),
            HeadFault::ContentLength => {
                f.write_str("Content-Length is not one decimal number (or its lines disagree)")
            }
            HeadFault::TransferEncoding => {
                f.write_str("Transfer-Encoding does not end in chunked")
            }
            HeadFault::TransferEncodingHttp10 => {
                f.write_str("Transfer-Encoding is not allowed on an HTTP/1.0 request")
            }
            HeadFault::Host(HostFault::Missing) => {
                f.write_str("an HTTP/1.1 request needs a Host header (RFC 9112 §3.2)")
            }
            HeadFault::Host(HostFault::Repeated(n)) => write!(
                f,
                "the request has {n} Host header lines; exactly one is allowed (RFC 9112 §3.2)"
            ),
            HeadFault::Host(HostFault::Invalid) => {
                f.write_str("the Host header is not `host[:port]` (RFC 9112 §3.2)")
            }
        }
    }
}

/// Checks the `Host` header of an HTTP/1 request (RFC 9112 §3.2): exactly
/// one on HTTP/1.1, at most one on HTTP/1.0, and a `host[:port]` value
/// (an empty one is `host` with an empty reg-name, as the grammar
/// allows).
pub fn check_host(version: Version, headers: &HeaderMap) -> Result<(), HostFault> {
    if version != Version::HTTP_11 && version != Version::HTTP_10 {
        return Ok(());
    }
    let mut lines = headers.get_all(http::header::HOST).iter();
    let Some(value) = lines.next() else {
        return if version == Version::HTTP_11 {
            Err(HostFault::Missing)
        } else {
            Ok(())
        };
    };
    let more = lines.count();
    if more > 0 {
        return Err(HostFault::Repeated(more + 1));
    }
    if host_value_ok(value.as_bytes()) {
        Ok(())
    } else {
        Err(HostFault::Invalid)
    }
}

/// A Host value is `host[:port]` (an empty one is `host` with an empty
/// reg-name, as the grammar allows).
pub fn host_value_ok(v: &[u8]) -> bool {
    v.is_empty() || plain_host(v) || full_host_check(v)
}

/// `name[:port]` of letters, digits, dots and hyphens, with one to five
/// port digits: the shape nearly every Host value has, all of which
/// [`full_host_check`] accepts too. Checked without it, which copies the
/// value to parse it, on every request.
fn plain_host(v: &[u8]) -> bool {
    let (host, port) = match v.iter().position(|&b| b == b':') {
        Some(i) => (&v[..i], Some(&v[i + 1..])),
        None => (v, None),
    };
    !host.is_empty()
        && host
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && port.is_none_or(|p| (1..=5).contains(&p.len()) && p.iter().all(u8::is_ascii_digit))
}

/// `host[:port]` by the URI grammar: `Authority` also takes userinfo
/// (`user@host`), which a Host value never has, and does not look at the
/// port's characters. Public for the differential fuzz target.
#[doc(hidden)]
pub fn full_host_check(v: &[u8]) -> bool {
    !v.contains(&b'@') && http::uri::Authority::try_from(v).is_ok() && port_ok(v)
}

/// The part after the host is nothing or `:` and at most five digits
/// (`port = *DIGIT`; more digits than 65535 has is no port).
fn port_ok(v: &[u8]) -> bool {
    let rest = match v.strip_prefix(b"[") {
        Some(inner) => match inner.iter().position(|&b| b == b']') {
            Some(i) => &inner[i + 1..],
            None => return false,
        },
        None => match v.iter().position(|&b| b == b':') {
            Some(i) => &v[i..],
            None => &[],
        },
    };
    match rest.split_first() {
        None => true,
        Some((b':', digits)) => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn heads(hosts: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in hosts {
            h.append(http::header::HOST, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn http11_needs_exactly_one_valid_host() {
        let v = Version::HTTP_11;
        assert_eq!(check_host(v, &heads(&["gw:7446"])), Ok(()));
        assert_eq!(check_host(v, &heads(&["[2001:db8::1]:7446"])), Ok(()));
        assert_eq!(check_host(v, &heads(&["192.0.2.1"])), Ok(()));
        assert_eq!(check_host(v, &heads(&[""])), Ok(()));
        assert_eq!(check_host(v, &heads(&[])), Err(HostFault::Missing));
        assert_eq!(
            check_host(v, &heads(&["a", "a"])),
            Err(HostFault::Repeated(2))
        );
        for bad in [
            "user@gw",
            "gw:port",
            "gw/x",
            "gw:7446:1",
            "[::1",
            "[::1]x",
            "gw:123456",
        ] {
            assert_eq!(
                check_host(v, &heads(&[bad])),
                Err(HostFault::Invalid),
                "{bad}"
            );
        }
    }

    #[test]
    fn http10_may_omit_host_but_not_repeat_it() {
        let v = Version::HTTP_10;
        assert_eq!(check_host(v, &heads(&[])), Ok(()));
        assert_eq!(
            check_host(v, &heads(&["a", "b", "c"])),
            Err(HostFault::Repeated(3))
        );
        assert_eq!(check_host(Version::HTTP_2, &heads(&[])), Ok(()));
    }

    #[test]
    fn each_fault_names_itself() {
        let e = HeadFault::Host(HostFault::Repeated(2)).into_error();
        assert_eq!(e.code, ErrorCode::MalformedRequest);
        let body = e.body_json();
        assert_eq!(body["error"]["reason"], "repeated_host");
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(
            msg.starts_with("the request has 2 Host header lines"),
            "{msg}"
        );
        assert!(!msg.contains("request line"), "{msg}");
    }

    /// Every value the quick check takes, the full one takes too: all
    /// strings of up to five characters over the quick check's alphabet.
    #[test]
    fn the_quick_host_check_takes_nothing_the_full_one_refuses() {
        let alphabet = b"aZ09.-:";
        let mut taken = 0;
        let mut v: Vec<u8> = Vec::new();
        for len in 1..=5u32 {
            for mut n in 0..alphabet.len().pow(len) {
                v.clear();
                for _ in 0..len {
                    v.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                if plain_host(&v) {
                    taken += 1;
                    assert!(full_host_check(&v), "{:?}", String::from_utf8_lossy(&v));
                }
            }
        }
        assert!(taken > 1000, "{taken}");
        for (v, quick) in [
            (&b"gw:7446"[..], true),
            (b"router-a.lan", true),
            (b"192.0.2.1:80", true),
            (b"[2001:db8::1]:7446", false),
            (b"gw:", false),
            (b"gw:123456", false),
            (b":80", false),
            (b"a:b", false),
            (b"a b", false),
            (b"user@gw", false),
        ] {
            assert_eq!(plain_host(v), quick, "{:?}", String::from_utf8_lossy(v));
        }
    }
}

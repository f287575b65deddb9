//! Requests refused by the HTTP layer itself (before any endpoint) still
//! get the gateway's JSON error shape with `X-Agentd-Outcome`, and the
//! connection closes; keep-alive, pipelining and `Expect: 100-continue`
//! traffic is unaffected by the socket wrapper that makes this so.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::*;

/// One response parsed from raw bytes.
#[derive(Debug)]
struct Raw {
    status: u16,
    /// Lower-cased `name: value` lines.
    headers: Vec<(String, String)>,
    body: String,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// Splits `text` into the responses it holds (Content-Length framing).
fn parse_all(mut text: &str) -> Vec<Raw> {
    let mut out = Vec::new();
    while let Some((head, rest)) = text.split_once("\r\n\r\n") {
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap()[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap();
                (n.trim().to_ascii_lowercase(), v.trim().to_string())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse().unwrap());
        out.push(Raw {
            status,
            headers,
            body: rest[..len].to_string(),
        });
        text = &rest[len..];
    }
    out
}

/// Sends `request` on a fresh connection and reads until the gateway
/// closes it (bounded: 5 s, or the test fails as "not closed").
async fn exchange(gw: SocketAddr, request: &[u8]) -> Vec<Raw> {
    let text = tokio::time::timeout(Duration::from_secs(5), raw_exchange(gw, request))
        .await
        .expect("the gateway did not close the connection");
    parse_all(&text)
}

/// Asserts `request` is refused with `status` and `code` in the JSON shape
/// and the connection closed.
async fn refused(gw: SocketAddr, request: &[u8], status: u16, code: &str) -> String {
    refused_error(gw, request, status, code).await["message"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A 400 `malformed_request` for `request` with reason `reason`; its
/// message.
async fn malformed(gw: SocketAddr, request: &[u8], reason: &str) -> String {
    let e = refused_error(gw, request, 400, "malformed_request").await;
    assert_eq!(
        e["reason"],
        reason,
        "{}: {e}",
        String::from_utf8_lossy(request)
    );
    e["message"].as_str().unwrap().to_string()
}

/// Like [`refused`], the whole `error` object.
async fn refused_error(
    gw: SocketAddr,
    request: &[u8],
    status: u16,
    code: &str,
) -> serde_json::Value {
    let answers = exchange(gw, request).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    let r = &answers[0];
    assert_eq!(r.status, status, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    assert_eq!(r.header("x-agentd-outcome"), Some("rejected"), "{r:?}");
    assert_eq!(r.header("connection"), Some("close"), "{r:?}");
    let e = &r.json()["error"];
    assert_eq!(e["code"], code, "{r:?}");
    assert_eq!(e["outcome"], "rejected");
    e.clone()
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n";

#[test]
fn an_oversized_request_head_is_431_in_the_json_shape() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let mut req = String::from("GET /healthz HTTP/1.1\r\nhost: gw\r\n");
        // 40 KiB of headers against the 16 KiB head bound.
        for i in 0..40 {
            req.push_str(&format!("x-pad-{i}: {}\r\n", "p".repeat(1000)));
        }
        req.push_str("\r\n");
        let msg = refused(gw, req.as_bytes(), 431, "header_too_large").await;
        assert!(msg.contains("16384"), "{msg}");
        // Just over the bound: refused although the read buffer (sized for
        // a whole request with its body) holds it whole.
        let mut req = String::from("GET /healthz HTTP/1.1\r\nhost: gw\r\n");
        req.push_str(&format!("x-pad: {}\r\n\r\n", "p".repeat(16 * 1024)));
        refused(gw, req.as_bytes(), 431, "header_too_large").await;
        // A head that never ends is refused at the bound too, long before
        // it would fill that buffer (the connection stays open: only the
        // refusal ends the exchange).
        let mut req = String::from("GET /healthz HTTP/1.1\r\nhost: gw\r\n");
        for i in 0..40 {
            req.push_str(&format!("x-pad-{i}: {}\r\n", "p".repeat(1000)));
        }
        refused(gw, req.as_bytes(), 431, "header_too_large").await;
        // Too many header lines is the same refusal.
        let mut req = String::from("GET /healthz HTTP/1.1\r\nhost: gw\r\n");
        for i in 0..120 {
            req.push_str(&format!("x-{i}: 1\r\n"));
        }
        req.push_str("\r\n");
        refused(gw, req.as_bytes(), 431, "header_too_large").await;
    });
}

#[test]
fn bad_content_length_is_400_in_the_json_shape() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let two = b"POST /agent/v1/route HTTP/1.1\r\nhost: gw\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}";
        let msg = malformed(gw, two, "bad_content_length").await;
        assert!(
            msg.starts_with("Content-Length is not one decimal number"),
            "{msg}"
        );
        let word = b"POST /agent/v1/route HTTP/1.1\r\nhost: gw\r\ncontent-length: two\r\n\r\n{}";
        malformed(gw, word, "bad_content_length").await;
        let signed = b"POST /agent/v1/route HTTP/1.1\r\nhost: gw\r\ncontent-length: +2\r\n\r\n{}";
        malformed(gw, signed, "bad_content_length").await;
    });
}

#[test]
fn a_transfer_encoding_other_than_chunked_is_400_in_the_json_shape() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let gzip = b"POST /agent/v1/route HTTP/1.1\r\nhost: gw\r\ntransfer-encoding: gzip\r\n\r\n";
        let msg = malformed(gw, gzip, "bad_transfer_encoding").await;
        assert!(
            msg.starts_with("Transfer-Encoding does not end in chunked"),
            "{msg}"
        );
        let http10 =
            b"POST /agent/v1/route HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n";
        let msg = malformed(gw, http10, "transfer_encoding_http10").await;
        assert!(msg.contains("HTTP/1.0"), "{msg}");
    });
}

#[test]
fn chunked_with_content_length_is_framed_by_chunked_and_closes() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        // The smuggling shape: Content-Length says 3 bytes, chunked says
        // 2 then the end. Framed by Transfer-Encoding alone, and (hyper's
        // own rule, RFC 9112 §6.3) the connection is not reused, so
        // nothing after the body is read as another request.
        let req = b"POST /agent/v1/route HTTP/1.1\r\nhost: gw\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n";
        let answers = exchange(gw, req).await;
        assert_eq!(
            answers.len(),
            1,
            "the trailing request was served: {answers:?}"
        );
        let r = &answers[0];
        assert_eq!(r.header("connection"), Some("close"), "{r:?}");
        // The body `{}` was read whole (a route lookup without intent).
        assert_eq!(r.json()["error"]["code"], "invalid_field", "{r:?}");
    });
}

#[test]
fn an_obs_folded_header_is_400_in_the_json_shape() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let folded = b"GET /healthz HTTP/1.1\r\nhost: gw\r\nx-long: first\r\n  continued\r\n\r\n";
        let msg = malformed(gw, folded, "bad_header_line").await;
        assert!(
            msg.starts_with("a header line is not `name: value`"),
            "{msg}"
        );
        assert!(msg.contains("obs-fold"), "{msg}");
    });
}

#[test]
fn a_malformed_request_line_is_400_in_the_json_shape() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        for (line, reason, says) in [
            (
                &b"GET /healthz\r\nhost: gw\r\n\r\n"[..],
                "bad_target",
                "the request target is not a valid URI, or the request line ends right after it",
            ),
            (
                b"GET /healthz HTTP/7.1\r\nhost: gw\r\n\r\n",
                "bad_version",
                "the request line does not end in HTTP/1.1",
            ),
            (
                b"G(T /healthz HTTP/1.1\r\nhost: gw\r\n\r\n",
                "bad_method",
                "the request method is not an HTTP token",
            ),
            (
                b"GET /hea lthz HTTP/1.1\r\nhost: gw\r\n\r\n",
                "bad_version",
                "the request line does not end in HTTP/1.1",
            ),
            (
                b"GET /he\x7fal HTTP/1.1\r\nhost: gw\r\n\r\n",
                "bad_target",
                "the request target is not a valid URI",
            ),
        ] {
            let msg = malformed(gw, line, reason).await;
            assert!(msg.starts_with(says), "{msg}");
        }
    });
}

/// RFC 9112 §3.2: an HTTP/1.1 request without `Host`, and any request
/// with two, or with a value that is not `host[:port]`, is a 400; an
/// HTTP/1.0 request may omit it.
#[test]
fn host_must_be_there_once_and_valid() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let two = b"GET /healthz HTTP/1.1\r\nhost: gw\r\nhost: other\r\n\r\n";
        let msg = malformed(gw, two, "repeated_host").await;
        assert!(
            msg.starts_with("the request has 2 Host header lines; exactly one is allowed"),
            "{msg}"
        );
        let none = b"GET /healthz HTTP/1.1\r\nx-a: 1\r\n\r\n";
        let msg = malformed(gw, none, "missing_host").await;
        assert!(
            msg.starts_with("an HTTP/1.1 request needs a Host header"),
            "{msg}"
        );
        let two10 = b"GET /healthz HTTP/1.0\r\nhost: gw\r\nhost: gw\r\n\r\n";
        malformed(gw, two10, "repeated_host").await;
        let bad = b"GET /healthz HTTP/1.1\r\nhost: user@gw\r\n\r\n";
        let msg = malformed(gw, bad, "bad_host").await;
        assert!(
            msg.starts_with("the Host header is not `host[:port]`"),
            "{msg}"
        );
        // HTTP/1.0 predates Host.
        let answers = exchange(gw, b"GET /healthz HTTP/1.0\r\n\r\n").await;
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0].status, 200, "{answers:?}");
        // One Host with a port, and an IPv6 literal, are served.
        for ok in [
            &b"GET /healthz HTTP/1.1\r\nhost: gw:7446\r\nconnection: close\r\n\r\n"[..],
            b"GET /healthz HTTP/1.1\r\nhost: [2001:db8::1]:7446\r\nconnection: close\r\n\r\n",
        ] {
            let answers = exchange(gw, ok).await;
            assert_eq!(answers[0].status, 200, "{answers:?}");
        }
    });
}

/// No refusal claims a fault the request does not have: a bad header
/// line is not described as a bad request line, and so on.
#[test]
fn each_malformed_cause_has_its_own_message() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let mut seen = std::collections::HashSet::new();
        for (req, reason) in [
            (&b"G(T / HTTP/1.1\r\nhost: gw\r\n\r\n"[..], "bad_method"),
            (b"GET / HTTP/7.1\r\nhost: gw\r\n\r\n", "bad_version"),
            (b"GET /\x01 HTTP/1.1\r\nhost: gw\r\n\r\n", "bad_target"),
            (b"GET / HTTP/1.1\r\nho st: gw\r\n\r\n", "bad_header_line"),
            (
                b"POST / HTTP/1.1\r\nhost: gw\r\ncontent-length: x\r\n\r\n",
                "bad_content_length",
            ),
            (b"GET / HTTP/1.1\r\n\r\n", "missing_host"),
        ] {
            let msg = malformed(gw, req, reason).await;
            let is_line_fault = matches!(reason, "bad_method" | "bad_version" | "bad_target");
            assert_eq!(
                msg.contains("request line"),
                is_line_fault,
                "{reason}: {msg}"
            );
            assert!(
                seen.insert(msg.clone()),
                "{reason} shares its message: {msg}"
            );
        }
    });
}

#[test]
fn a_bad_request_pipelined_behind_a_good_one_gets_both_answers_in_order() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let mut req = HEALTHZ.to_vec();
        req.extend_from_slice(HEALTHZ);
        req.extend_from_slice(
            b"POST /agent/v1/route HTTP/1.1\r\nhost: gw\r\ncontent-length: x\r\n\r\n",
        );
        let answers = exchange(gw, &req).await;
        assert_eq!(answers.len(), 3, "{answers:?}");
        for ok in &answers[..2] {
            assert_eq!(ok.status, 200, "{ok:?}");
            assert_eq!(ok.json()["status"], "ok");
        }
        assert_eq!(answers[2].status, 400);
        assert_eq!(answers[2].json()["error"]["code"], "malformed_request");
        assert_eq!(answers[2].header("x-agentd-outcome"), Some("rejected"));
    });
}

#[test]
fn keep_alive_and_expect_continue_are_unaffected() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let mut s = TcpStream::connect(gw).await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        // Three sequential requests on one connection, each answered.
        for _ in 0..3 {
            s.write_all(HEALTHZ).await.unwrap();
            let text = read_one(&mut s, &mut buf).await;
            let r = &parse_all(&text)[0];
            assert_eq!(r.status, 200, "{r:?}");
            assert!(r.header("connection").is_none(), "{r:?}");
        }
        // Expect: 100-continue: the interim answer passes, then the final.
        s.write_all(b"POST /agent/v1/route HTTP/1.1\r\nhost: gw\r\nexpect: 100-continue\r\ncontent-length: 2\r\n\r\n")
            .await
            .unwrap();
        let interim = read_some(&mut s, &mut buf).await;
        assert!(interim.starts_with("HTTP/1.1 100 Continue"), "{interim:?}");
        s.write_all(b"{}").await.unwrap();
        let text = if interim.contains("\r\n\r\nHTTP/1.1 ") {
            interim.split_once("\r\n\r\n").unwrap().1.to_string()
        } else {
            read_one(&mut s, &mut buf).await
        };
        let r = &parse_all(&text)[0];
        assert_eq!(r.status, 400, "{r:?}");
        assert_eq!(r.json()["error"]["code"], "invalid_field");
        // Still open: one more request on the same connection.
        s.write_all(HEALTHZ).await.unwrap();
        let text = read_one(&mut s, &mut buf).await;
        assert_eq!(parse_all(&text)[0].status, 200);
    });
}

/// Reads what is available (one read, bounded 5 s).
async fn read_some(s: &mut TcpStream, buf: &mut [u8]) -> String {
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(buf))
        .await
        .expect("no answer")
        .unwrap();
    assert!(n > 0, "connection closed");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Reads until one whole response (Content-Length framed) arrived.
async fn read_one(s: &mut TcpStream, buf: &mut [u8]) -> String {
    let mut text = String::new();
    loop {
        text.push_str(&read_some(s, buf).await);
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .to_ascii_lowercase()
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if rest.len() >= len {
                return text;
            }
        }
    }
}

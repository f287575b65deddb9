//! A small blocking HTTP/1.1 client for the LAN SDK API.
//!
//! One connection per request (`Connection: close`): SDK traffic is a few
//! registrations, renewals and invocations per second at most, and a fresh
//! connection makes "was it delivered?" unambiguous — a connect failure
//! means the router never saw the request, which the lease keeper and the
//! caller treat differently from a failure after sending.

use std::fmt;
use std::io::{self, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::body::{read_to_vec, BodyError, BodyReader};
use super::head::{
    parse_response_head, read_head, HeadError, Headers, ReadHeadError, ResponseHead,
};
use crate::router_url::HttpUrl;

#[derive(Debug)]
pub enum ClientError {
    /// No connection could be made: the request was not delivered.
    Connect(String, io::Error),
    /// Name resolution failed (also not delivered).
    Resolve(String, io::Error),
    /// The request may have been delivered but no complete answer came.
    Io(io::Error),
    Head(HeadError),
    Body(BodyError),
}

impl ClientError {
    /// True when the router provably never received the request.
    pub fn not_delivered(&self) -> bool {
        matches!(self, ClientError::Connect(..) | ClientError::Resolve(..))
    }

    pub fn is_timeout(&self) -> bool {
        match self {
            ClientError::Io(e) | ClientError::Connect(_, e) => {
                matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                )
            }
            ClientError::Body(BodyError::Io(e)) => matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            ),
            _ => false,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect(a, e) => write!(f, "cannot connect to {a}: {e}"),
            ClientError::Resolve(a, e) => write!(f, "cannot resolve {a}: {e}"),
            ClientError::Io(e) => write!(f, "connection failed after sending: {e}"),
            ClientError::Head(e) => write!(f, "bad response: {e}"),
            ClientError::Body(e) => write!(f, "bad response body: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// One request to send.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: &'a str,
    pub url: &'a HttpUrl,
    /// Path (and query) appended to the URL's own path.
    pub target: &'a str,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// Connect timeout, and the write timeout.
    pub timeout: Duration,
    /// Timeout of each read; `None` blocks (long streams).
    pub read_timeout: Option<Duration>,
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Headers,
    pub body: Vec<u8>,
}

/// An open response whose body is still on the wire.
pub type OpenBody = BodyReader<BufReader<TcpStream>>;

fn connect(url: &HttpUrl, timeout: Duration) -> Result<TcpStream, ClientError> {
    let authority = url.authority();
    let addrs: Vec<_> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| ClientError::Resolve(authority.clone(), e))?
        .collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no addresses");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(ClientError::Connect(authority, last))
}

/// Sends the request and reads the response head.
pub fn open(req: &Request<'_>) -> Result<(ResponseHead, OpenBody), ClientError> {
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: agentd-sdk-python/{}\r\n",
        req.method,
        req.url.target(req.target),
        req.url.authority(),
        env!("CARGO_PKG_VERSION"),
    );
    for (name, value) in req.headers {
        if name.contains([':', '\r', '\n']) || value.contains(['\r', '\n']) {
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("header {name:?} contains a line break or colon"),
            )));
        }
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let has_body = !req.body.is_empty() || matches!(req.method, "POST" | "PUT" | "PATCH");
    if has_body {
        head.push_str(&format!("Content-Length: {}\r\n", req.body.len()));
    }
    head.push_str("\r\n");
    let stream = connect(req.url, req.timeout)?;
    stream.set_nodelay(true).map_err(ClientError::Io)?;
    stream
        .set_write_timeout(Some(req.timeout))
        .map_err(ClientError::Io)?;
    stream
        .set_read_timeout(req.read_timeout)
        .map_err(ClientError::Io)?;
    let mut writer = &stream;
    let mut wire = head.into_bytes();
    wire.extend_from_slice(req.body);
    writer.write_all(&wire).map_err(ClientError::Io)?;
    writer.flush().map_err(ClientError::Io)?;
    let mut reader = BufReader::new(stream);
    let raw = read_head(&mut reader).map_err(|e| match e {
        ReadHeadError::Io(e) => ClientError::Io(e),
        ReadHeadError::Head(HeadError::Truncated(n)) => ClientError::Io(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("connection closed after {n} bytes of the response head"),
        )),
        ReadHeadError::Head(h) => ClientError::Head(h),
    })?;
    let head = parse_response_head(&raw, req.method == "HEAD").map_err(ClientError::Head)?;
    let body = BodyReader::new(reader, head.framing);
    Ok((head, body))
}

/// Sends the request and reads the whole response (at most `max_body`).
pub fn send(req: &Request<'_>, max_body: usize) -> Result<Response, ClientError> {
    let (head, mut body) = open(req)?;
    let body = read_to_vec(&mut body, max_body).map_err(ClientError::Body)?;
    Ok(Response {
        status: head.status,
        headers: head.headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;
    use std::thread;

    fn url(port: u16) -> HttpUrl {
        HttpUrl {
            host: "127.0.0.1".into(),
            port,
            path: "/p".into(),
        }
    }

    fn req<'a>(u: &'a HttpUrl, headers: &'a [(String, String)], body: &'a [u8]) -> Request<'a> {
        Request {
            method: "POST",
            url: u,
            target: "/agent/v1/x",
            headers,
            body,
            timeout: Duration::from_secs(5),
            read_timeout: Some(Duration::from_secs(5)),
        }
    }

    #[test]
    fn sends_a_request_and_reads_a_chunked_reply_from_a_real_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let head = read_head(&mut r).unwrap();
            let mut body = [0u8; 4];
            r.read_exact(&mut body).unwrap();
            (&s).write_all(
                b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            )
            .unwrap();
            (String::from_utf8(head).unwrap(), body)
        });
        let u = url(port);
        let h = [("Authorization".to_string(), "Bearer t".to_string())];
        let resp = send(&req(&u, &h, b"ping"), 1024).unwrap();
        assert_eq!((resp.status, resp.body.as_slice()), (201, &b"ok"[..]));
        let (head, body) = server.join().unwrap();
        assert!(
            head.starts_with("POST /p/agent/v1/x HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains("Authorization: Bearer t\r\n"));
        assert!(head.contains("Content-Length: 4\r\n"));
        assert_eq!(&body, b"ping");
    }

    #[test]
    fn refused_connection_is_not_delivered() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let u = url(port);
        let err = send(&req(&u, &[], b"{}"), 1024).unwrap_err();
        assert!(err.not_delivered(), "{err}");
    }

    #[test]
    fn close_after_request_is_a_delivery_failure() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s);
            read_head(&mut r).unwrap();
        });
        let u = url(port);
        let err = send(&req(&u, &[], b""), 1024).unwrap_err();
        server.join().unwrap();
        assert!(!err.not_delivered(), "{err}");
    }

    #[test]
    fn header_injection_is_refused() {
        // Port 1 is never contacted: the header is refused before connecting.
        let u = url(1);
        let h = [("X".to_string(), "a\r\nEvil: 1".to_string())];
        assert!(
            matches!(send(&req(&u, &h, b""), 16), Err(ClientError::Io(e)) if e.kind() == io::ErrorKind::InvalidInput)
        );
    }
}

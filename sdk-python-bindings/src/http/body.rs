//! HTTP/1.1 message bodies: a `Read` adapter for the three framings, with a
//! bounded chunked decoder, plus a helper that reads a whole body up to a
//! limit.

use std::io::{self, BufRead, Read};

use super::head::Framing;

/// Longest chunk-size line (size + extensions) accepted.
const MAX_CHUNK_LINE: usize = 1024;

#[derive(Debug)]
enum State {
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    UntilClose,
    Done,
}

/// Reads exactly one body from `inner`, leaving the connection positioned
/// at the next message when the framing allows reuse.
#[derive(Debug)]
pub struct BodyReader<R> {
    inner: R,
    state: State,
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

impl<R: BufRead> BodyReader<R> {
    pub fn new(inner: R, framing: Framing) -> Self {
        let state = match framing {
            Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::ChunkSize,
            Framing::UntilClose => State::UntilClose,
        };
        BodyReader { inner, state }
    }

    /// True once the whole body was read (the connection may be reused).
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    pub fn into_inner(self) -> R {
        self.inner
    }

    fn line(&mut self) -> io::Result<String> {
        let mut buf = Vec::new();
        let n = self
            .inner
            .by_ref()
            .take(MAX_CHUNK_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "body ended inside chunked framing",
            ));
        }
        if !buf.ends_with(b"\n") {
            return Err(invalid("chunked framing line too long"));
        }
        let s = String::from_utf8(buf).map_err(|_| invalid("chunked framing is not text"))?;
        Ok(s.trim_end_matches(['\r', '\n']).to_string())
    }
}

impl<R: BufRead> Read for BodyReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.state {
                State::Done => return Ok(0),
                State::Length(left) => {
                    let want = out.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    let n = self.inner.read(&mut out[..want])?;
                    if n == 0 && want > 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "body shorter than Content-Length",
                        ));
                    }
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::Done
                    } else {
                        State::Length(left)
                    };
                    return Ok(n);
                }
                State::UntilClose => {
                    let n = self.inner.read(out)?;
                    if n == 0 {
                        self.state = State::Done;
                    }
                    return Ok(n);
                }
                State::ChunkSize => {
                    let line = self.line()?;
                    let size = line.split(';').next().unwrap_or("").trim();
                    if size.is_empty() || size.len() > 15 {
                        return Err(invalid("invalid chunk size"));
                    }
                    let n =
                        u64::from_str_radix(size, 16).map_err(|_| invalid("invalid chunk size"))?;
                    self.state = if n == 0 {
                        State::Trailers
                    } else {
                        State::ChunkData(n)
                    };
                }
                State::ChunkData(left) => {
                    let want = out.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    let n = self.inner.read(&mut out[..want])?;
                    if n == 0 && want > 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "body ended inside a chunk",
                        ));
                    }
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::ChunkDataEnd
                    } else {
                        State::ChunkData(left)
                    };
                    return Ok(n);
                }
                State::ChunkDataEnd => {
                    if !self.line()?.is_empty() {
                        return Err(invalid("chunk data not followed by CRLF"));
                    }
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    // Trailer fields are read and dropped, at most 64 lines.
                    let mut count = 0;
                    while !self.line()?.is_empty() {
                        count += 1;
                        if count > 64 {
                            return Err(invalid("too many trailer fields"));
                        }
                    }
                    self.state = State::Done;
                }
            }
        }
    }
}

#[derive(Debug)]
pub enum BodyError {
    TooLarge(usize),
    Io(io::Error),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge(n) => write!(f, "body exceeds {n} bytes"),
            BodyError::Io(e) => write!(f, "reading body: {e}"),
        }
    }
}

impl std::error::Error for BodyError {}

/// Reads the whole body, refusing more than `max` bytes.
pub fn read_to_vec<R: Read>(body: &mut R, max: usize) -> Result<Vec<u8>, BodyError> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = body.read(&mut buf).map_err(BodyError::Io)?;
        if n == 0 {
            return Ok(out);
        }
        if out.len() + n > max {
            return Err(BodyError::TooLarge(max));
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(framing: Framing, wire: &[u8]) -> (io::Result<Vec<u8>>, Vec<u8>) {
        let mut r = BodyReader::new(io::BufReader::new(wire), framing);
        let mut out = Vec::new();
        let res = r.read_to_end(&mut out).map(|_| out);
        let mut rest = Vec::new();
        r.into_inner().read_to_end(&mut rest).unwrap();
        (res, rest)
    }

    #[test]
    fn length_framing_stops_at_the_length() {
        let (body, rest) = read(Framing::Length(3), b"abcNEXT");
        assert_eq!(body.unwrap(), b"abc");
        assert_eq!(rest, b"NEXT");
        assert!(read(Framing::Length(5), b"abc").0.is_err());
    }

    #[test]
    fn chunked_framing_with_extensions_and_trailers() {
        let (body, rest) = read(
            Framing::Chunked,
            b"3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\nNEXT",
        );
        assert_eq!(body.unwrap(), b"abcde");
        assert_eq!(rest, b"NEXT");
    }

    #[test]
    fn broken_chunked_framing_is_an_error() {
        for wire in [
            &b"zz\r\nab\r\n0\r\n\r\n"[..],
            b"3\r\nabcX\r\n0\r\n\r\n",
            b"3\r\nab",
            b"ffffffffffffffff\r\n",
        ] {
            assert!(
                read(Framing::Chunked, wire).0.is_err(),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn read_to_vec_enforces_the_limit() {
        let mut r = BodyReader::new(io::BufReader::new(&b"abcdef"[..]), Framing::UntilClose);
        assert!(matches!(
            read_to_vec(&mut r, 5),
            Err(BodyError::TooLarge(5))
        ));
        let mut r = BodyReader::new(io::BufReader::new(&b"abcdef"[..]), Framing::UntilClose);
        assert_eq!(read_to_vec(&mut r, 6).unwrap(), b"abcdef");
    }
}

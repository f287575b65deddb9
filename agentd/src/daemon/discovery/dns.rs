//! The DNS exchange of unicast DNS-SD: one question to the resolver,
//! one answer back, as a task of its own (the event loop never waits on
//! the network). Its result comes back as `Input::DnsAnswered`.
//!
//! UDP first, from a fresh socket connected to the resolver (the kernel
//! then drops datagrams from any other address, and Linux picks a
//! random source port) with a random id: an answer counts only when its
//! id and question are ours ([`answer::decode`]), anything else is
//! ignored while the try's time runs. Two tries of `timeout` each; a
//! truncated answer (TC) is asked again once over TCP, bounded in size
//! ([`answer::MAX_MESSAGE`]) and time (one `timeout` for connect, one
//! for the answer).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::{timeout_at, Instant};

use crate::discovery::unicast::answer::{self, Answer, DnsError, MAX_MESSAGE};
use crate::discovery::unicast::browse::Ask;
use crate::discovery::unicast::query;

/// UDP tries before giving up.
pub const UDP_TRIES: u32 = 2;

/// One question to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsQuery {
    pub ask: Ask,
    pub resolver: SocketAddr,
    pub timeout: Duration,
}

/// A random query id from the OS CSPRNG: with the random source port,
/// the id is what an off-path forger must guess (RFC 5452 §9.2).
fn random_id() -> Result<u16, DnsError> {
    let mut id = [0u8; 2];
    getrandom::getrandom(&mut id).map_err(|e| DnsError::Io {
        reason: format!("no random query id: {e}"),
    })?;
    Ok(u16::from_ne_bytes(id))
}

fn io(e: std::io::Error) -> DnsError {
    DnsError::Io {
        reason: e.to_string(),
    }
}

/// Asks `q` and waits for its answer (bounded, see the module).
pub async fn exchange(q: &DnsQuery) -> Result<Answer, DnsError> {
    let id = random_id()?;
    let wire = query::encode(id, &q.ask.question, q.ask.require_ad).map_err(|e| {
        DnsError::BadQuestion {
            reason: e.to_string(),
        }
    })?;
    match udp(q, id, &wire).await {
        Err(DnsError::Truncated) => tcp(q, id, &wire).await,
        other => other,
    }
}

async fn udp(q: &DnsQuery, id: u16, wire: &[u8]) -> Result<Answer, DnsError> {
    let local: SocketAddr = match q.resolver.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(local).await.map_err(io)?;
    sock.connect(q.resolver).await.map_err(io)?;
    // Room for one byte more than we accept: a larger datagram shows
    // as too large instead of silently cut.
    let mut buf = vec![0u8; MAX_MESSAGE + 1];
    for _ in 0..UDP_TRIES {
        sock.send(wire).await.map_err(io)?;
        let deadline = Instant::now() + q.timeout;
        loop {
            let n = match timeout_at(deadline, sock.recv(&mut buf)).await {
                Err(_) => break,
                // ICMP port unreachable shows as ECONNREFUSED on a
                // connected socket: the resolver is not there.
                Ok(Err(e)) => return Err(io(e)),
                Ok(Ok(n)) => n,
            };
            match answer::decode(&buf[..n], id, &q.ask.question, q.ask.require_ad) {
                Err(DnsError::NotOurs) => continue,
                other => return other,
            }
        }
    }
    Err(DnsError::Timeout { tries: UDP_TRIES })
}

async fn tcp(q: &DnsQuery, id: u16, wire: &[u8]) -> Result<Answer, DnsError> {
    let deadline = Instant::now() + q.timeout;
    let mut s = timeout_at(deadline, TcpStream::connect(q.resolver))
        .await
        .map_err(|_| DnsError::Timeout { tries: 1 })?
        .map_err(io)?;
    let deadline = Instant::now() + q.timeout;
    let exchange = async {
        let len = u16::try_from(wire.len()).map_err(|_| DnsError::BadQuestion {
            reason: "question too long".into(),
        })?;
        let mut out = Vec::with_capacity(wire.len() + 2);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(wire);
        s.write_all(&out).await.map_err(io)?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await.map_err(io)?;
        let len = usize::from(u16::from_be_bytes(len));
        if len > MAX_MESSAGE {
            return Err(DnsError::TooLarge { len });
        }
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).await.map_err(io)?;
        match answer::decode(&body, id, &q.ask.question, q.ask.require_ad) {
            // Over TCP the one answer must be ours.
            Err(DnsError::NotOurs) => Err(DnsError::Malformed {
                reason: "the TCP answer is not for our question".into(),
            }),
            other => other,
        }
    };
    timeout_at(deadline, exchange)
        .await
        .map_err(|_| DnsError::Timeout { tries: 1 })?
}

#[cfg(test)]
mod tests {
    //! Against a resolver stand-in on loopback: real sockets, answers
    //! built with hickory-proto as a resolver would send them.

    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    use hickory_proto::rr::rdata::PTR;
    use hickory_proto::rr::{Name, RData, Record};
    use tokio::net::TcpListener;

    use super::*;
    use crate::discovery::unicast::answer::{Data, Kind, Question};

    const SVC: &str = "_arpx._tcp.lab.example";

    fn ask() -> Ask {
        Ask {
            round: 1,
            question: Question {
                name: SVC.into(),
                kind: Kind::Ptr,
            },
            require_ad: false,
        }
    }

    /// The answer to `query` (its id and question), TC set or not.
    fn reply(query: &[u8], id_delta: u16, tc: bool) -> Vec<u8> {
        let q = Message::from_vec(query).unwrap();
        let mut m = Message::new(
            q.metadata.id.wrapping_add(id_delta),
            MessageType::Response,
            OpCode::Query,
        );
        m.add_query(Query::query(
            Name::from_ascii(format!("{SVC}.")).unwrap(),
            q.queries[0].query_type(),
        ));
        m.metadata.truncation = tc;
        if !tc {
            let to = Name::from_ascii(format!("router-b.{SVC}.")).unwrap();
            m.add_answer(Record::from_rdata(
                Name::from_ascii(format!("{SVC}.")).unwrap(),
                60,
                RData::PTR(PTR(to)),
            ));
        }
        m.to_vec().unwrap()
    }

    fn query(resolver: SocketAddr, ms: u64) -> DnsQuery {
        DnsQuery {
            ask: ask(),
            resolver,
            timeout: Duration::from_millis(ms),
        }
    }

    fn the_ptr(a: &Answer) -> &Data {
        &a.records[0].data
    }

    /// Input: a forged answer (another id) first, then the real one.
    /// Output: the forged one is ignored, the real one taken.
    #[tokio::test]
    async fn an_answer_with_another_id_is_ignored() {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let stand_in = tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let (n, from) = server.recv_from(&mut buf).await.unwrap();
            server
                .send_to(&reply(&buf[..n], 1, false), from)
                .await
                .unwrap();
            server
                .send_to(&reply(&buf[..n], 0, false), from)
                .await
                .unwrap();
        });
        let a = exchange(&query(addr, 5_000)).await.unwrap();
        assert_eq!(the_ptr(&a), &Data::Ptr(format!("router-b.{SVC}")));
        stand_in.await.unwrap();
    }

    /// A UDP and a TCP socket of a stand-in server on one loopback port.
    async fn udp_and_tcp() -> (std::net::SocketAddr, UdpSocket, TcpListener) {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let udp = UdpSocket::bind(addr).await.unwrap();
        (addr, udp, tcp)
    }

    /// Answers the first UDP query truncated (TC) and accepts the TCP
    /// connection the client then opens.
    async fn truncate_then_accept(udp: UdpSocket, tcp: TcpListener) -> tokio::net::TcpStream {
        let mut buf = [0u8; 2048];
        let (n, from) = udp.recv_from(&mut buf).await.unwrap();
        udp.send_to(&reply(&buf[..n], 0, true), from).await.unwrap();
        tcp.accept().await.unwrap().0
    }

    /// Input: a truncated UDP answer, the full one over TCP on the same
    /// port. Output: the TCP answer.
    #[tokio::test]
    async fn a_truncated_answer_is_asked_again_over_tcp() {
        let (addr, udp, tcp) = udp_and_tcp().await;
        let stand_in = tokio::spawn(async move {
            let mut s = truncate_then_accept(udp, tcp).await;
            let mut len = [0u8; 2];
            s.read_exact(&mut len).await.unwrap();
            let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut q).await.unwrap();
            let r = reply(&q, 0, false);
            s.write_all(&(r.len() as u16).to_be_bytes()).await.unwrap();
            s.write_all(&r).await.unwrap();
        });
        let a = exchange(&query(addr, 5_000)).await.unwrap();
        assert_eq!(the_ptr(&a), &Data::Ptr(format!("router-b.{SVC}")));
        stand_in.await.unwrap();
    }

    /// Input: a TCP answer announcing more than MAX_MESSAGE bytes.
    /// Output: `TooLarge`, without reading it.
    #[tokio::test]
    async fn a_tcp_answer_is_bounded() {
        let (addr, udp, tcp) = udp_and_tcp().await;
        let stand_in = tokio::spawn(async move {
            let mut s = truncate_then_accept(udp, tcp).await;
            s.write_all(&u16::MAX.to_be_bytes()).await.unwrap();
            // Hold the connection until the client has decided.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
        });
        assert_eq!(
            exchange(&query(addr, 5_000)).await,
            Err(DnsError::TooLarge {
                len: usize::from(u16::MAX)
            })
        );
        stand_in.await.unwrap();
    }

    /// Input: a resolver that never answers. Output: `Timeout` after
    /// both tries, each of which reached it.
    #[tokio::test]
    async fn silence_is_a_timeout_after_every_try() {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let r = exchange(&query(addr, 100)).await;
        assert_eq!(r, Err(DnsError::Timeout { tries: UDP_TRIES }));
        let mut buf = [0u8; 2048];
        for _ in 0..UDP_TRIES {
            let (n, _) = server.recv_from(&mut buf).await.unwrap();
            assert_eq!(Message::from_vec(&buf[..n]).unwrap().queries.len(), 1);
        }
    }
}

//! Real mutual TLS over loopback sockets (tokio-rustls): the trust rule of
//! router-pki in both directions, and what a refusal says.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use edkey::SigningKey;
use router_pki::cert::{self, Validity};
use router_pki::tls::{
    self, client_config, peer_identity, server_config, DomainCa, PeerIdentity, PeerTrust, Trust,
    TrustError,
};
use router_pki::{Fingerprint, RouterIdentity};
use rustls_pki_types::UnixTime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(10);

struct Domain {
    key: SigningKey,
    der: Vec<u8>,
    name: &'static str,
}

fn domain(name: &'static str, seed: u8) -> Domain {
    let key = SigningKey::from_bytes(&[seed; 32]);
    let der = cert::init_domain(name, &key, Validity::days_from(SystemTime::now(), 30)).unwrap();
    Domain { key, der, name }
}

impl Domain {
    fn ca(&self) -> DomainCa {
        DomainCa::from_der(self.der.clone(), Some(self.name)).unwrap()
    }

    /// A router identity whose certificate this CA issued for `cert_name`.
    fn router(&self, router_id: &str, cert_name: &str, seed: u8) -> RouterIdentity {
        let key = SigningKey::from_bytes(&[seed; 32]);
        let der = cert::issue_router(
            &self.key,
            &self.der,
            cert_name,
            Some(self.name),
            &key.verifying_key(),
            Validity::days_from(SystemTime::now(), 30),
        )
        .unwrap();
        // Tests run in parallel and may make the same router twice: each
        // file gets a directory of its own.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "router-pki-hs-{}-{router_id}-{seed}-{n}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("router.pem");
        std::fs::write(&path, cert::cert_pem(&der)).unwrap();
        // The file is checked to name `router_id`; a deliberately wrong
        // name needs the check skipped, so load under the cert's name.
        let id = RouterIdentity::new(key, Some(&path), cert_name).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        id
    }
}

fn self_signed(router_id: &str, seed: u8) -> RouterIdentity {
    RouterIdentity::new(SigningKey::from_bytes(&[seed; 32]), None, router_id).unwrap()
}

fn peer(router_id: &str, pin: Option<Fingerprint>) -> PeerTrust {
    PeerTrust {
        router_id: router_id.into(),
        pin,
    }
}

fn now() -> UnixTime {
    UnixTime::now()
}

/// Each side's result: the identity it verified, or the error it saw.
struct Outcome {
    server: Result<PeerIdentity, String>,
    client: Result<PeerIdentity, String>,
    /// Our own verifier's refusal, if one side had it.
    server_trust: Option<TrustError>,
    client_trust: Option<TrustError>,
    /// The suite the client's connection negotiated.
    suite: Option<rustls::CipherSuite>,
}

fn trust_of(e: &std::io::Error) -> Option<TrustError> {
    TrustError::find(e).cloned()
}

/// `client` (as router `client_id`'s config) dials a listener of `server`,
/// expecting the server to be `expected`; both exchange one message.
async fn handshake(
    server: &RouterIdentity,
    server_trust: Trust,
    client: &RouterIdentity,
    client_trust: Trust,
    expected: &str,
) -> Outcome {
    let server_trust = Arc::new(server_trust);
    let client_trust = Arc::new(client_trust);
    let scfg = server_config(server, server_trust.clone(), &[tls::ALPN_ARPX]).unwrap();
    let ccfg = client_config(client, client_trust.clone(), expected, &[tls::ALPN_ARPX]).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = async {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut s = match tokio_rustls::TlsAcceptor::from(scfg).accept(tcp).await {
            Ok(s) => s,
            Err(e) => return (Err(e.to_string()), trust_of(&e)),
        };
        let mut buf = [0u8; 4];
        if let Err(e) = s.read_exact(&mut buf).await {
            return (Err(e.to_string()), trust_of(&e));
        }
        let _ = s.write_all(b"pong").await;
        let _ = s.flush().await;
        let id = peer_identity(s.get_ref().1, &server_trust, None, now());
        (id.map_err(|e| e.to_string()), None)
    };
    let suite = std::cell::Cell::new(None);
    let dial = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = tls::server_name(expected).unwrap();
        let mut s = match tokio_rustls::TlsConnector::from(ccfg)
            .connect(name, tcp)
            .await
        {
            Ok(s) => s,
            Err(e) => return (Err(e.to_string()), trust_of(&e)),
        };
        let mut buf = [0u8; 4];
        let io = async {
            s.write_all(b"ping").await?;
            s.flush().await?;
            s.read_exact(&mut buf).await
        };
        if let Err(e) = io.await {
            return (Err(e.to_string()), trust_of(&e));
        }
        assert_eq!(s.get_ref().1.alpn_protocol(), Some(tls::ALPN_ARPX));
        suite.set(s.get_ref().1.negotiated_cipher_suite().map(|c| c.suite()));
        let id = peer_identity(s.get_ref().1, &client_trust, Some(expected), now());
        (id.map_err(|e| e.to_string()), None)
    };
    let ((server, server_trust), (client, client_trust)) =
        tokio::time::timeout(LIMIT, async { tokio::join!(accept, dial) })
            .await
            .expect("handshake finished in time");
    Outcome {
        server,
        client,
        server_trust,
        client_trust,
        suite: suite.get(),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn ca_mode_handshake_reports_both_identities() {
    rt().block_on(async {
        let lab = domain("lab.example", 1);
        let a = lab.router("router-a", "router-a", 10);
        let b = lab.router("router-b", "router-b", 11);
        let out = handshake(
            &b,
            Trust::new(Some(lab.ca()), vec![peer("router-a", None)]),
            &a,
            Trust::new(Some(lab.ca()), vec![peer("router-b", None)]),
            "router-b",
        )
        .await;
        let seen_by_b = out.server.unwrap();
        assert_eq!(seen_by_b.router_id, "router-a");
        assert_eq!(seen_by_b.public_key, a.verifying_key().to_bytes());
        assert_eq!(seen_by_b.fingerprint, a.fingerprint());
        assert!(!seen_by_b.pinned);
        let seen_by_a = out.client.unwrap();
        assert_eq!(seen_by_a.router_id, "router-b");
        assert_eq!(seen_by_a.public_key, b.verifying_key().to_bytes());
        // Links negotiate the first suite of the provider's order, the
        // one this CPU runs fastest.
        assert_eq!(out.suite, Some(tls::preferred_suite()));
    });
}

#[test]
fn pin_mode_handshake_with_self_signed_certificates() {
    rt().block_on(async {
        let a = self_signed("router-a", 20);
        let b = self_signed("router-b", 21);
        let out = handshake(
            &b,
            Trust::new(None, vec![peer("router-a", Some(a.fingerprint()))]),
            &a,
            Trust::new(None, vec![peer("router-b", Some(b.fingerprint()))]),
            "router-b",
        )
        .await;
        let seen_by_b = out.server.unwrap();
        assert_eq!(
            (
                seen_by_b.router_id.as_str(),
                seen_by_b.fingerprint,
                seen_by_b.pinned
            ),
            ("router-a", a.fingerprint(), true)
        );
        let seen_by_a = out.client.unwrap();
        assert_eq!(
            (seen_by_a.router_id.as_str(), seen_by_a.public_key),
            ("router-b", b.verifying_key().to_bytes())
        );
    });
}

#[test]
fn inbound_peer_is_told_apart_among_several_configured_ones() {
    rt().block_on(async {
        let lab = domain("lab.example", 2);
        let a = lab.router("router-a", "router-a", 30);
        let b = lab.router("router-b", "router-b", 31);
        let c = self_signed("router-c", 32);
        let server_trust = Trust::new(
            Some(lab.ca()),
            vec![
                peer("router-c", Some(c.fingerprint())),
                peer("router-a", None),
                peer("router-d", None),
            ],
        );
        let out = handshake(
            &b,
            server_trust,
            &a,
            Trust::new(Some(lab.ca()), vec![peer("router-b", None)]),
            "router-b",
        )
        .await;
        assert_eq!(out.server.unwrap().router_id, "router-a");
    });
}

#[test]
fn certificate_from_another_domains_ca_is_refused() {
    rt().block_on(async {
        let lab = domain("lab.example", 3);
        let other = domain("other.example", 4);
        let a = lab.router("router-a", "router-a", 40);
        let b = other.router("router-b", "router-b", 41);
        let out = handshake(
            &b,
            Trust::new(Some(other.ca()), vec![peer("router-a", None)]),
            &a,
            Trust::new(Some(lab.ca()), vec![peer("router-b", None)]),
            "router-b",
        )
        .await;
        let err = out.client_trust.expect("client refused the server");
        assert!(matches!(&err, TrustError::NotChained { domain, .. } if domain == "lab.example"));
        assert_eq!(
            err.to_string(),
            "peer router-b: certificate does not chain to the domain CA lab.example (issued by another CA)"
        );
        assert!(out.client.is_err() && out.server.is_err());
    });
}

#[test]
fn unpinned_self_signed_key_is_refused() {
    rt().block_on(async {
        let lab = domain("lab.example", 5);
        let a = lab.router("router-a", "router-a", 50);
        let b = self_signed("router-b", 51);
        let out = handshake(
            &b,
            Trust::new(None, vec![peer("router-a", Some(a.fingerprint()))]),
            &a,
            Trust::new(Some(lab.ca()), vec![peer("router-b", None)]),
            "router-b",
        )
        .await;
        assert!(matches!(
            out.client_trust,
            Some(TrustError::NotChained { .. })
        ));
        // Without a domain CA an unpinned peer cannot be trusted at all.
        let out = handshake(
            &b,
            Trust::new(None, vec![peer("router-a", Some(a.fingerprint()))]),
            &a,
            Trust::new(None, vec![peer("router-b", None)]),
            "router-b",
        )
        .await;
        assert_eq!(
            out.client_trust.unwrap().to_string(),
            "peer router-b: no key_fingerprint pinned and no domain CA configured"
        );
    });
}

#[test]
fn pinned_key_mismatch_is_refused_even_with_a_valid_ca_chain() {
    rt().block_on(async {
        let lab = domain("lab.example", 6);
        let a = lab.router("router-a", "router-a", 60);
        let b = lab.router("router-b", "router-b", 61);
        let wrong = self_signed("router-b", 62).fingerprint();
        let out = handshake(
            &b,
            Trust::new(Some(lab.ca()), vec![peer("router-a", None)]),
            &a,
            Trust::new(Some(lab.ca()), vec![peer("router-b", Some(wrong))]),
            "router-b",
        )
        .await;
        assert_eq!(
            out.client_trust.unwrap().to_string(),
            format!(
                "peer router-b: certificate key {} is not the pinned {wrong}",
                b.fingerprint()
            )
        );
        // Inbound too: the server's pin for router-a does not match.
        let out = handshake(
            &b,
            Trust::new(Some(lab.ca()), vec![peer("router-a", Some(wrong))]),
            &a,
            Trust::new(Some(lab.ca()), vec![peer("router-b", None)]),
            "router-b",
        )
        .await;
        assert!(matches!(
            out.server_trust,
            Some(TrustError::PinMismatch { ref router_id, .. }) if router_id == "router-a"
        ));
        assert!(out.client.is_err(), "the client learns of the refusal");
    });
}

#[test]
fn certificate_for_another_router_id_is_refused() {
    rt().block_on(async {
        let lab = domain("lab.example", 7);
        let a = lab.router("router-a", "router-a", 70);
        // router-b presents a valid certificate of the domain, for router-c.
        let b = lab.router("router-b", "router-c", 71);
        let out = handshake(
            &b,
            Trust::new(Some(lab.ca()), vec![peer("router-a", None)]),
            &a,
            Trust::new(Some(lab.ca()), vec![peer("router-b", None)]),
            "router-b",
        )
        .await;
        assert_eq!(
            out.client_trust.unwrap().to_string(),
            "peer router-b: certificate is not valid for router-b"
        );
        // Inbound: a client with router-c's certificate is no configured peer.
        let out = handshake(
            &a,
            Trust::new(Some(lab.ca()), vec![peer("router-b", None)]),
            &b,
            Trust::new(Some(lab.ca()), vec![peer("router-a", None)]),
            "router-a",
        )
        .await;
        let err = out.server_trust.unwrap();
        assert!(matches!(err, TrustError::UnknownPeer { .. }), "{err}");
        assert!(err.to_string().contains("router-c"), "{err}");
    });
}

/// A ClientHello offering TLS 1.2 only (no supported_versions extension),
/// with TLS 1.2 suites and Ed25519 signatures.
fn tls12_client_hello() -> Vec<u8> {
    let mut ext = Vec::new();
    // supported_groups: x25519
    ext.extend_from_slice(&[0x00, 0x0a, 0x00, 0x04, 0x00, 0x02, 0x00, 0x1d]);
    // ec_point_formats: uncompressed
    ext.extend_from_slice(&[0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]);
    // signature_algorithms: ed25519, ecdsa_secp256r1_sha256
    ext.extend_from_slice(&[0x00, 0x0d, 0x00, 0x06, 0x00, 0x04, 0x08, 0x07, 0x04, 0x03]);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[0x42; 32]); // random
    body.push(0); // session id
    body.extend_from_slice(&[0x00, 0x04, 0xc0, 0x2b, 0xcc, 0xa9]); // ECDHE suites (1.2)
    body.extend_from_slice(&[0x01, 0x00]); // null compression
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut hs = vec![0x01, 0x00];
    hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[test]
fn tls12_only_client_is_refused_with_protocol_version_alert() {
    rt().block_on(async {
        let b = self_signed("router-b", 80);
        let trust = Arc::new(Trust::new(None, vec![peer("router-a", None)]));
        let scfg = server_config(&b, trust, &[tls::ALPN_ARPX]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = async {
            let (tcp, _) = listener.accept().await.unwrap();
            tokio_rustls::TlsAcceptor::from(scfg)
                .accept(tcp)
                .await
                .map(|_| ())
        };
        let dial = async {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            tcp.write_all(&tls12_client_hello()).await.unwrap();
            let mut reply = Vec::new();
            let _ = tcp.read_to_end(&mut reply).await;
            reply
        };
        let (server, reply) = tokio::time::timeout(LIMIT, async { tokio::join!(accept, dial) })
            .await
            .expect("refused in time");
        let err = server.unwrap_err();
        let inner = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>());
        assert_eq!(
            inner,
            Some(&rustls::Error::PeerIncompatible(
                rustls::PeerIncompatible::SupportedVersionsExtensionRequired
            )),
            "{err}"
        );
        // A fatal alert (level 2), protocol_version (70), and no ServerHello.
        assert_eq!(reply.first(), Some(&0x15), "an alert record: {reply:02x?}");
        assert_eq!(&reply[5..7], &[2, 70]);
    });
}

/// A client router dials a relay it knows only by address
/// (`client_config_unlisted`); the relay has no peer section for it.
/// Returns what each side verified.
async fn relay_handshake(
    relay: &RouterIdentity,
    relay_trust: Trust,
    client: &RouterIdentity,
    client_trust: Trust,
) -> (Result<PeerIdentity, String>, Result<PeerIdentity, String>) {
    let relay_trust = Arc::new(relay_trust);
    let client_trust = Arc::new(client_trust);
    let scfg = server_config(relay, relay_trust.clone(), &[b"agentd-relay/1"]).unwrap();
    let ccfg =
        tls::client_config_unlisted(client, client_trust.clone(), &[b"agentd-relay/1"]).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = async {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut s = tokio_rustls::TlsAcceptor::from(scfg)
            .accept(tcp)
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
        s.write_all(b"pong").await.map_err(|e| e.to_string())?;
        s.flush().await.map_err(|e| e.to_string())?;
        peer_identity(s.get_ref().1, &relay_trust, None, now()).map_err(|e| e.to_string())
    };
    let dial = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        // The SNI is only for logs: the relay is judged by the rule.
        let name = tls::server_name("relay").unwrap();
        let mut s = tokio_rustls::TlsConnector::from(ccfg)
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(b"ping").await.map_err(|e| e.to_string())?;
        s.flush().await.map_err(|e| e.to_string())?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
        tls::peer_identity_unlisted(s.get_ref().1, &client_trust, now()).map_err(|e| e.to_string())
    };
    tokio::time::timeout(LIMIT, async { tokio::join!(accept, dial) })
        .await
        .expect("handshake finished in time")
}

fn domain_routers() -> tls::Unlisted {
    tls::Unlisted {
        domain: true,
        pins: Vec::new(),
    }
}

#[test]
fn a_relay_and_its_client_of_one_domain_know_each_other_without_peer_sections() {
    rt().block_on(async {
        let lab = domain("lab.example", 1);
        let relay = lab.router("relay-a", "relay-a", 30);
        let b = lab.router("router-b", "router-b", 31);
        let (seen_by_relay, seen_by_b) = relay_handshake(
            &relay,
            Trust::new(Some(lab.ca()), Vec::new()).with_unlisted(domain_routers()),
            &b,
            Trust::new(Some(lab.ca()), Vec::new()).with_unlisted(domain_routers()),
        )
        .await;
        let seen_by_relay = seen_by_relay.unwrap();
        assert_eq!(seen_by_relay.router_id, "router-b");
        assert_eq!(seen_by_relay.public_key, b.verifying_key().to_bytes());
        let seen_by_b = seen_by_b.unwrap();
        assert_eq!(seen_by_b.router_id, "relay-a");
        assert_eq!(seen_by_b.public_key, relay.verifying_key().to_bytes());
    });
}

#[test]
fn a_relay_refuses_a_client_of_another_domain_and_a_client_refuses_such_a_relay() {
    rt().block_on(async {
        let lab = domain("lab.example", 1);
        let other = domain("other.example", 2);
        let relay = lab.router("relay-a", "relay-a", 30);
        let stranger = other.router("router-s", "router-s", 32);
        // The relay trusts its own domain only.
        let (seen_by_relay, _) = relay_handshake(
            &relay,
            Trust::new(Some(lab.ca()), Vec::new()).with_unlisted(domain_routers()),
            &stranger,
            Trust::new(Some(lab.ca()), Vec::new()).with_unlisted(domain_routers()),
        )
        .await;
        assert!(seen_by_relay.is_err(), "{seen_by_relay:?}");
        // A client of the other domain does not take our relay for one of
        // its own.
        let b = other.router("router-b", "router-b", 33);
        let (_, seen_by_b) = relay_handshake(
            &relay,
            Trust::new(Some(lab.ca()), Vec::new()).with_unlisted(domain_routers()),
            &b,
            Trust::new(Some(other.ca()), Vec::new()).with_unlisted(domain_routers()),
        )
        .await;
        let err = seen_by_b.unwrap_err();
        assert!(err.contains("issued by another CA"), "{err}");
    });
}

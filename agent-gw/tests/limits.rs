//! Admission limits and bad input against a real gateway: oversized bodies,
//! per-tenant rate limits, the in-flight cap, malformed and duplicate-key
//! JSON. Each refusal is typed and leaves other calls untouched.

mod common;

use agent_gw::limits::Rate;
use common::*;

#[test]
fn oversized_body_gets_413_while_concurrent_calls_succeed() {
    run(async {
        let (b, gw, _state) = echo_gateway(lab_config()).await;

        // 200 KiB declared and sent: refused from the header, unread.
        let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(200 * 1024));
        let raw = format!(
            "POST /agent/v1/invoke HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
            big.len(),
            big
        );
        let oversized =
            tokio::task::spawn_local(async move { raw_exchange(gw, raw.as_bytes()).await });
        let normal: Vec<_> = (0..8)
            .map(|i| {
                tokio::task::spawn_local(async move {
                    invoke(gw, "demo.echo", &[], &i.to_string()).await
                })
            })
            .collect();
        let answer = oversized.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer:.200}");
        assert!(
            answer.contains(r#""code":"payload_too_large""#),
            "{answer:.400}"
        );
        for n in normal {
            assert_eq!(n.await.unwrap().status, 200);
        }
        assert_eq!(b.count(), 8);

        // Chunked, no length: refused once the limit is crossed.
        let mut chunked = String::from(
            "POST /agent/v1/invoke HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        );
        for _ in 0..20 {
            chunked.push_str(&format!("{:x}\r\n{}\r\n", 8192, "y".repeat(8192)));
        }
        chunked.push_str("0\r\n\r\n");
        let answer = raw_exchange(gw, chunked.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer:.200}");
        // The gateway still serves.
        let r = invoke(gw, "demo.echo", &[], "1").await;
        assert_eq!(r.status, 200);
    });
}

#[test]
fn configured_size_limit_applies() {
    run(async {
        let b = backend("a", Mode::Echo).await;
        let cfg = agent_gw::config::GatewayConfig {
            max_request_bytes: 512,
            ..lab_config()
        };
        let (gw, _state) = gateway_with(
            cfg,
            vec![route("r-a", "demo.echo", &b.endpoint(), 1, false)],
        )
        .await;
        let fits = envelope("demo.echo", "lab", &format!(r#""{}""#, "a".repeat(200)));
        assert_eq!(post(gw, "/agent/v1/invoke", &[], &fits).await.status, 200);
        let too_big = envelope("demo.echo", "lab", &format!(r#""{}""#, "a".repeat(600)));
        let r = post(gw, "/agent/v1/invoke", &[], &too_big).await;
        assert_eq!(r.status, 413);
        assert_eq!(r.error_code(), "payload_too_large");
        assert_eq!(r.json()["error"]["outcome"], "rejected");
    });
}

#[test]
fn tenant_over_its_rate_gets_429_and_others_are_unaffected() {
    run(async {
        let b = backend("a", Mode::Echo).await;
        let mut cfg = lab_config();
        cfg.rate = Rate {
            per_second: 1,
            burst: 2,
        };
        cfg.tenant_rates.insert(
            "other".into(),
            Rate {
                per_second: 1,
                burst: 5,
            },
        );
        let (gw, _state) = gateway_with(
            cfg,
            vec![route("r-a", "demo.echo", &b.endpoint(), 1, false)],
        )
        .await;
        let env = envelope("demo.echo", "lab", "{}");
        assert_eq!(post(gw, "/agent/v1/invoke", &[], &env).await.status, 200);
        assert_eq!(post(gw, "/agent/v1/invoke", &[], &env).await.status, 200);
        let r = post(gw, "/agent/v1/invoke", &[], &env).await;
        assert_eq!(r.status, 429);
        assert_eq!(r.error_code(), "rate_limited");
        assert!(r.headers.contains_key("retry-after"));
        assert_eq!(b.count(), 2, "the refused call never reached the handler");
        // Another tenant has its own (overridden) bucket.
        let other = envelope("demo.echo", "other", "{}");
        for _ in 0..5 {
            assert_eq!(post(gw, "/agent/v1/invoke", &[], &other).await.status, 200);
        }
        assert_eq!(post(gw, "/agent/v1/invoke", &[], &other).await.status, 429);
    });
}

#[test]
fn in_flight_cap_refuses_with_503_until_a_slot_frees() {
    run(async {
        let b = backend("hold", Mode::Hold).await;
        let cfg = agent_gw::config::GatewayConfig {
            max_inflight: 1,
            ..lab_config()
        };
        let (gw, state) = gateway_with(
            cfg,
            vec![route("r-h", "demo.hold", &b.endpoint(), 1, false)],
        )
        .await;
        let env = envelope("demo.hold", "lab", "{}");
        let held = {
            let env = env.clone();
            tokio::task::spawn_local(async move { post(gw, "/agent/v1/invoke", &[], &env).await })
        };
        // The first call is inside the handler once it has arrived there.
        b.arrived.notified().await;
        assert_eq!(b.count(), 1);
        let r = post(gw, "/agent/v1/invoke", &[], &env).await;
        assert_eq!(r.status, 503);
        assert_eq!(r.error_code(), "overloaded");
        b.release.notify_waiters();
        assert_eq!(held.await.unwrap().status, 200);
        assert_eq!(state.inflight.current(), 0);
    });
}

#[test]
fn bad_json_is_typed_and_leaves_other_calls_alone() {
    run(async {
        let (b, gw, _state) = echo_gateway(lab_config()).await;
        let cases = [
            (r#"{"version":"1.0","#.to_string(), "invalid_json"),
            ("[1,2]".to_string(), "invalid_json"),
            (
                envelope("demo.echo", "lab", r#"{"a":1,"a":2}"#),
                "duplicate_key",
            ),
            (
                envelope("demo.echo", "lab", "{}").replacen(
                    r#""tenant":"lab""#,
                    r#""tenant":"lab","tenant":"x""#,
                    1,
                ),
                "duplicate_key",
            ),
            (envelope("demo.echo", "lab", "null"), "invalid_field"),
            (
                envelope("demo.echo", "lab", "{}")
                    .replace(r#""hop_limit":8"#, r#""hop_limit":"8""#),
                "invalid_field",
            ),
        ];
        for (body, code) in &cases {
            let r = post(gw, "/agent/v1/invoke", &[], body).await;
            assert_eq!(r.status, 400, "{body}");
            assert_eq!(&r.error_code(), code, "{body}");
        }
        let r = post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", "abc")],
            &envelope("demo.echo", "lab", "{}"),
        )
        .await;
        assert_eq!(r.error_code(), "invalid_cursor");
        let r = post(
            gw,
            "/agent/v1/register",
            &[],
            r#"{"intent":"x","intent":"y"}"#,
        )
        .await;
        assert_eq!(r.error_code(), "duplicate_key");
        assert_eq!(b.count(), 0);
        assert_eq!(invoke(gw, "demo.echo", &[], "{}").await.status, 200);
    });
}

#[test]
fn unknown_paths_and_methods_are_typed() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let r = send(gw, "GET", "/agent/v1/nothing", &[], b"").await;
        assert_eq!(
            (r.status.as_u16(), r.error_code().as_str()),
            (404, "not_found")
        );
        let r = send(gw, "GET", "/agent/v1/invoke", &[], b"").await;
        assert_eq!(
            (r.status.as_u16(), r.error_code().as_str()),
            (405, "method_not_allowed")
        );
        assert_eq!(r.headers["allow"], "POST");
        let r = send(gw, "GET", "/healthz", &[], b"").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["control_plane"], "down");
        let r = send(gw, "GET", "/agent/v1/authentication", &[], b"").await;
        assert_eq!(r.json()["authentication"]["required"], false);
    });
}

#[test]
fn a_client_trickling_its_body_is_cut_off_and_frees_its_slot() {
    run(async {
        let cfg = agent_gw::config::GatewayConfig {
            body_read_timeout_ms: 200,
            max_inflight: 1,
            ..lab_config()
        };
        let b = backend("a", Mode::Echo).await;
        let (gw, state) = gateway_with(
            cfg,
            vec![route("r-a", "demo.echo", &b.endpoint(), 1, false)],
        )
        .await;
        // Promise 1000 bytes, send 10, then nothing.
        let answer = raw_exchange_open(
            gw,
            b"POST /agent/v1/invoke HTTP/1.1\r\nhost: gw\r\ncontent-length: 1000\r\n\r\n{\"version\"",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains(r#""code":"request_timeout""#), "{answer}");
        assert_eq!(state.inflight.current(), 0);
        assert_eq!(invoke(gw, "demo.echo", &[], "{}").await.status, 200);
    });
}

#[test]
fn connections_beyond_the_cap_are_closed_and_the_slot_comes_back() {
    run(async {
        use tokio::io::AsyncReadExt;
        let cfg = agent_gw::config::GatewayConfig {
            max_connections: 1,
            ..lab_config()
        };
        let (gw, _state) = start_gateway(cfg).await;
        // Accepted in order: `held` takes the only slot.
        let held = tokio::net::TcpStream::connect(gw).await.unwrap();
        let mut extra = tokio::net::TcpStream::connect(gw).await.unwrap();
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), extra.read(&mut buf)).await;
        assert!(
            matches!(n, Ok(Ok(0)) | Ok(Err(_))),
            "the extra connection must be closed: {n:?}"
        );
        drop(held);
        // Bounded: once the held connection is gone its slot is free again.
        let mut served = false;
        for _ in 0..100 {
            let mut c = tokio::net::TcpStream::connect(gw).await.unwrap();
            use tokio::io::AsyncWriteExt;
            c.write_all(b"GET /healthz HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut out = Vec::new();
            let _ = c.read_to_end(&mut out).await;
            if out.starts_with(b"HTTP/1.1 200") {
                served = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(served);
    });
}

/// Connects from a chosen loopback source address.
async fn connect_from(src: &str, gw: std::net::SocketAddr) -> tokio::net::TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(std::net::SocketAddr::new(src.parse().unwrap(), 0))
        .unwrap();
    sock.connect(gw).await.unwrap()
}

/// Whether the gateway closed `s` (EOF or reset) within 5 s.
async fn closed_by_gateway(s: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 16];
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[test]
fn a_source_at_its_connection_share_cannot_lock_out_another() {
    run(async {
        let cfg = agent_gw::config::GatewayConfig {
            max_connections: 16,
            max_conns_per_source: 4,
            ..lab_config()
        };
        let (b, gw, state) = {
            let b = backend("echo", Mode::Echo).await;
            let (gw, state) = gateway_with(
                cfg,
                vec![route("r-e", "demo.echo", &b.endpoint(), 1, false)],
            )
            .await;
            (b, gw, state)
        };
        // Source A: four half-open connections (no request head at all)
        // take its share; they count against it.
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(connect_from("127.0.0.2", gw).await);
        }
        let a: std::net::IpAddr = "127.0.0.2".parse().unwrap();
        for _ in 0..2000 {
            if state.conns.open_from(a) == 4 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(state.conns.open_from(a), 4);
        // A fifth is closed at accept.
        let mut extra = connect_from("127.0.0.2", gw).await;
        assert!(
            closed_by_gateway(&mut extra).await,
            "A's excess connection stays open"
        );
        // Source B is served, on and on.
        let env = envelope("demo.echo", "lab", "{}");
        for _ in 0..8 {
            let r = send_from(
                "127.0.0.3".parse().unwrap(),
                gw,
                "POST",
                "/agent/v1/invoke",
                &[],
                env.as_bytes(),
            )
            .await;
            assert_eq!(r.status, 200);
        }
        assert_eq!(b.count(), 8);
        // A's held connections are untouched and still usable.
        let r = send_on(
            held.pop().unwrap(),
            "POST",
            "/agent/v1/invoke",
            &[],
            env.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200);
        drop(held);
        // Its share comes back when its connections close.
        let mut served = false;
        for _ in 0..100 {
            let r = send_from(a, gw, "GET", "/healthz", &[], b"").await;
            if r.status == 200 {
                served = true;
                break;
            }
        }
        assert!(served);
    });
}

#[test]
fn slow_calls_of_one_source_cannot_take_every_inflight_slot() {
    run(async {
        let b = backend("hold", Mode::Hold).await;
        let cfg = agent_gw::config::GatewayConfig {
            max_inflight: 8,
            max_inflight_per_source: 3,
            ..lab_config()
        };
        let (gw, state) = gateway_with(
            cfg,
            vec![route("r-h", "demo.hold", &b.endpoint(), 1, false)],
        )
        .await;
        let env = envelope("demo.hold", "lab", "{}");
        let a: std::net::IpAddr = "127.0.0.2".parse().unwrap();
        let held: Vec<_> = (0..3)
            .map(|_| {
                let env = env.clone();
                tokio::task::spawn_local(async move {
                    send_from(a, gw, "POST", "/agent/v1/invoke", &[], env.as_bytes()).await
                })
            })
            .collect();
        for _ in 0..2000 {
            if state.inflight.current_from(a) == 3 && b.count() == 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(state.inflight.current_from(a), 3);
        // A's fourth: typed refusal naming the per-source share.
        let r = send_from(a, gw, "POST", "/agent/v1/invoke", &[], env.as_bytes()).await;
        assert_eq!(r.status, 503);
        assert_eq!(r.error_code(), "overloaded");
        assert_eq!(r.json()["error"]["reason"], "source_inflight");
        assert_eq!(r.headers["retry-after"], "1");
        // B still gets its calls in (they are held too, then released).
        let bsrc: std::net::IpAddr = "127.0.0.3".parse().unwrap();
        let b_calls: Vec<_> = (0..3)
            .map(|_| {
                let env = env.clone();
                tokio::task::spawn_local(async move {
                    send_from(bsrc, gw, "POST", "/agent/v1/invoke", &[], env.as_bytes()).await
                })
            })
            .collect();
        // All six inside the handler (waiting for `release`) before it is
        // given: `notify_waiters` wakes only calls already waiting.
        for _ in 0..2000 {
            if state.inflight.current_from(bsrc) == 3 && b.count() == 6 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(state.inflight.current_from(bsrc), 3);
        assert_eq!(b.count(), 6);
        b.release.notify_waiters();
        for h in held.into_iter().chain(b_calls) {
            assert_eq!(h.await.unwrap().status, 200);
        }
        assert_eq!(state.inflight.current(), 0);
    });
}

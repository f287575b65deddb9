//! A stream follower that stops reading (a real loopback socket with a
//! tiny receive buffer that is never read) is detached after
//! `stream_drain_timeout_ms`: its connection is closed, its in-flight slot
//! is released, and the producer keeps running so the stream can be
//! resumed. Bounded: the handler writes a fixed number of events.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};
use tokio::time::{timeout, Instant};

/// Events the handler writes, and the size of each one's data.
const EVENTS: usize = 1000;
const EVENT_BYTES: usize = 16 * 1024;

/// An SSE handler that writes `EVENTS` large events as fast as the
/// gateway takes them, then ends; `written` counts what it wrote.
async fn flooding_sse_backend() -> (String, Rc<Cell<usize>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let written = Rc::new(Cell::new(0usize));
    let w = written.clone();
    tokio::task::spawn_local(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let w = w.clone();
            tokio::task::spawn_local(async move {
                if read_request(&mut s).await.is_none() {
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let data = "x".repeat(EVENT_BYTES);
                for _ in 0..EVENTS {
                    if s.write_all(format!("data: {data}\n\n").as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                    w.set(w.get() + 1);
                }
            });
        }
    });
    (endpoint_of(addr), written)
}

async fn poll_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < end, "{what} not reached within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn a_follower_that_stops_reading_is_detached_and_the_stream_keeps_running() {
    run(async {
        let (sse, written) = flooding_sse_backend().await;
        let echo = backend("a", Mode::Echo).await;
        let mut cfg = lab_config();
        // One in-flight slot: the stalled stream holds it until detached.
        cfg.max_inflight = 1;
        cfg.stream_drain_timeout_ms = 300;
        let (gw, state) = gateway_with(
            cfg,
            vec![
                route("r-s", "demo.stream", &sse, 1, false),
                route("r-a", "demo.echo", &echo.endpoint(), 1, false),
            ],
        )
        .await;

        // The caller: a 4 KiB receive buffer it never reads.
        let sock = TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        let mut client = sock.connect(gw).await.unwrap();
        let body = envelope("demo.stream", "lab", "{}");
        let req = format!(
            "POST /agent/v1/invoke-stream HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        client.write_all(req.as_bytes()).await.unwrap();

        // Detached within a bound, while the producer still had events to
        // write (it was held back by this follower).
        poll_until(
            "the stalled follower to be detached",
            Duration::from_secs(30),
            || state.stream_stats.get().stalled_detached == 1,
        )
        .await;
        assert!(
            written.get() < EVENTS,
            "the follower never held the producer back"
        );

        // The slot is free again: a sync call on the only slot succeeds.
        let r = invoke(gw, "demo.echo", &[], r#"{"n":1}"#).await;
        assert_eq!(
            r.status.as_u16(),
            200,
            "{}",
            String::from_utf8_lossy(&r.body)
        );

        // The producer keeps running to the end without the follower.
        poll_until(
            "the producer to write every event",
            Duration::from_secs(30),
            || written.get() == EVENTS,
        )
        .await;
        // The caller's connection was closed: draining what the kernel
        // buffered ends in EOF (or a reset), within a bound.
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let closed = timeout(Duration::from_secs(10), async {
            loop {
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        assert!(
            closed.is_ok(),
            "the gateway did not close the stalled connection"
        );
        let text = String::from_utf8_lossy(&got[..got.len().min(4096)]).into_owned();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        let task_id = text
            .lines()
            .find_map(|l| l.strip_prefix("x-nexus-task-id: "))
            .unwrap()
            .trim()
            .to_string();
        let token = text
            .lines()
            .find_map(|l| l.strip_prefix("x-nexus-task-token: "))
            .unwrap()
            .trim()
            .to_string();

        // The task finished and kept its history: a resume from its last
        // event answers at once with the completion marker.
        let doc = settle(gw, &task_id, &token, &[]).await;
        assert_eq!(doc["status"], "completed", "{doc}");
        let last = doc["last_seq"].as_u64().unwrap();
        assert_eq!(last, EVENTS as u64);
        let resumed = post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", &last.to_string())],
            &body,
        )
        .await;
        assert_eq!(
            resumed.status.as_u16(),
            200,
            "{}",
            String::from_utf8_lossy(&resumed.body)
        );
        assert!(
            String::from_utf8_lossy(&resumed.body).contains(": nexus-stream-complete"),
            "{}",
            String::from_utf8_lossy(&resumed.body)
        );
    });
}

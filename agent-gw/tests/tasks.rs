//! Tasks and streams through a real gateway on loopback: async task
//! status/result/cancel (the handler sees its connection close), a full
//! task table, stream resume after a client disconnect, typed resume
//! errors, lost history, idle-stream cancellation.

mod common;

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::time::timeout;

use agent_gw::config::GatewayConfig;

const WAIT: Duration = Duration::from_secs(5);

/// A handler that takes the request and never answers; it reports when the
/// gateway closes the connection.
struct Holding {
    addr: SocketAddr,
    arrived: Rc<Notify>,
    closed: Rc<Notify>,
    requests: Rc<Cell<usize>>,
}

async fn holding_backend() -> Holding {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (arrived, closed, requests) = (
        Rc::new(Notify::new()),
        Rc::new(Notify::new()),
        Rc::new(Cell::new(0)),
    );
    let (a, c, r) = (arrived.clone(), closed.clone(), requests.clone());
    tokio::task::spawn_local(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let (a, c, r) = (a.clone(), c.clone(), r.clone());
            tokio::task::spawn_local(async move {
                if read_request(&mut s).await.is_some() {
                    r.set(r.get() + 1);
                    a.notify_one();
                    let mut b = [0u8; 64];
                    // Any EOF or error: the gateway let go of the call.
                    while matches!(s.read(&mut b).await, Ok(n) if n > 0) {}
                    c.notify_one();
                }
            });
        }
    });
    Holding {
        addr,
        arrived,
        closed,
        requests,
    }
}

/// An SSE handler whose events the test writes, one connection at a time.
struct SseBackend {
    addr: SocketAddr,
    events: mpsc::UnboundedSender<Option<&'static str>>,
    requests: Rc<Cell<usize>>,
}

async fn sse_backend() -> SseBackend {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel::<Option<&'static str>>();
    let rx = Rc::new(RefCell::new(Some(rx)));
    let requests = Rc::new(Cell::new(0));
    let r = requests.clone();
    tokio::task::spawn_local(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let (rx, r) = (rx.clone(), r.clone());
            tokio::task::spawn_local(async move {
                if read_request(&mut s).await.is_none() {
                    return;
                }
                r.set(r.get() + 1);
                let Some(mut rx) = rx.borrow_mut().take() else {
                    return;
                };
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                s.write_all(head.as_bytes()).await.unwrap();
                // `None` ends the stream (connection closed after it).
                while let Some(Some(ev)) = rx.recv().await {
                    if s.write_all(ev.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    SseBackend {
        addr,
        events: tx,
        requests,
    }
}

/// Writes a POST on a fresh connection (closed by the server after the
/// answer) and returns the socket to read the answer from.
async fn open_post(gw: SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> TcpStream {
    let mut s = TcpStream::connect(gw).await.unwrap();
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nhost: gw\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// Reads until `done(text)` holds or the peer closes (bounded by `WAIT`).
async fn read_until(s: &mut TcpStream, done: impl Fn(&str) -> bool) -> String {
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    timeout(WAIT, async {
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
            if done(&String::from_utf8_lossy(&out)) {
                break;
            }
        }
    })
    .await
    .expect("stream read timed out");
    String::from_utf8_lossy(&out).into_owned()
}

/// The `id:` lines of an SSE text (chunk-size lines never start with "id: ").
fn event_ids(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|n| n.trim().parse().unwrap())
        .collect()
}

fn stream_envelope(task_id: &str, payload: &str) -> String {
    envelope("demo.stream", "lab", payload)
        .replace(r#""task_id":"t-1""#, &format!(r#""task_id":"{task_id}""#))
}

#[test]
fn async_task_reports_status_result_and_events_only_to_its_token_holder() {
    run(async {
        let (b, gw, state) = echo_gateway(lab_config()).await;
        let r = invoke(
            gw,
            "demo.echo",
            &[("prefer", "respond-async")],
            r#"{"n":7}"#,
        )
        .await;
        assert_eq!(r.json()["status"], "running");
        let (id, token) = task_handle(&r);
        let doc = settle(gw, &id, &token, &[]).await;
        assert_eq!(doc["status"], "completed", "{doc}");
        assert_eq!(doc["result"]["echo"]["payload"]["n"], 7);
        assert_eq!(doc["route_id"], "r-a");
        // The handler got a plain synchronous call (no Prefer relayed).
        assert!(b.seen.borrow()[0].headers.get("prefer").is_none());
        let ev = task_request(gw, "GET", &id, "/events?after=1", &token).await;
        let events = ev.json()["events"].as_array().unwrap().clone();
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0]["seq"].as_u64(), events[0]["event"].as_str()),
            (Some(2), Some("result"))
        );
        let bad = task_request(gw, "GET", &id, "/events?after=x", &token).await;
        assert_eq!(
            (bad.status.as_u16(), bad.error_code()),
            (400, "invalid_cursor".into())
        );
        // Wrong token and unknown id look the same.
        let wrong = send(
            gw,
            "GET",
            &format!("/agent/v1/tasks/{id}"),
            &[("x-nexus-task-token", &"0".repeat(64))],
            b"",
        )
        .await;
        assert_eq!(
            (wrong.status.as_u16(), wrong.error_code()),
            (404, "not_found".into())
        );
        let unknown = send(
            gw,
            "GET",
            &format!("/agent/v1/tasks/{}", "ab".repeat(16)),
            &[("x-nexus-task-token", &token)],
            b"",
        )
        .await;
        assert_eq!(
            (unknown.status.as_u16(), unknown.error_code()),
            (404, "not_found".into())
        );
        // Fetching the result releases the task: its slot and bytes free
        // at once; status still answers (without the result), the result
        // and events are gone with a typed 410, and only for the holder.
        let res = task_request(gw, "GET", &id, "/result", &token).await;
        assert_eq!(res.json()["result"]["backend"], "a");
        let st = task_request(gw, "GET", &id, "", &token).await;
        assert_eq!(st.status.as_u16(), 200);
        let st = st.json();
        assert_eq!(
            (st["status"].as_str(), st["result_released"].as_bool()),
            (Some("completed"), Some(true)),
            "{st}"
        );
        assert!(st.get("result").is_none(), "{st}");
        for suffix in ["/result", "/events?after=0"] {
            let again = task_request(gw, "GET", &id, suffix, &token).await;
            assert_eq!(
                (again.status.as_u16(), again.error_code()),
                (410, "result_released".into()),
                "{suffix}"
            );
        }
        let wrong = send(
            gw,
            "GET",
            &format!("/agent/v1/tasks/{id}"),
            &[("x-nexus-task-token", &"0".repeat(64))],
            b"",
        )
        .await;
        assert_eq!(wrong.status.as_u16(), 404);
        assert_eq!(state.tasks.borrow_mut().len(), 0, "the slot is free");
        assert_eq!(state.budget.ledger().used(), 0, "the bytes are free");
    });
}

#[test]
fn cancelling_an_async_task_closes_the_handlers_connection() {
    run(async {
        let h = holding_backend().await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![route("r-h", "demo.slow", &endpoint_of(h.addr), 1, false)],
        )
        .await;
        let r = invoke(gw, "demo.slow", &[("prefer", "respond-async")], "{}").await;
        let (id, token) = task_handle(&r);
        timeout(WAIT, h.arrived.notified())
            .await
            .expect("handler never got the call");
        let running = task_request(gw, "GET", &id, "", &token).await;
        assert_eq!(running.json()["status"], "running");
        let c = task_request(gw, "DELETE", &id, "", &token).await;
        assert_eq!(
            (c.status.as_u16(), c.json()["status"].as_str()),
            (200, Some("cancelled"))
        );
        timeout(WAIT, h.closed.notified())
            .await
            .expect("cancel did not reach the handler");
        // A result request for a cancelled task answers its final status.
        let res = task_request(gw, "GET", &id, "/result", &token).await;
        assert_eq!(res.json()["status"], "cancelled");
    });
}

#[test]
fn an_async_answer_stalling_mid_body_fails_the_task_at_the_deadline() {
    run(async {
        let addr = stalling_backend().await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![route("r-st", "demo.stall", &endpoint_of(addr), 1, false)],
        )
        .await;
        let r = invoke(
            gw,
            "demo.stall",
            &[("prefer", "respond-async"), ("x-agentd-timeout-ms", "300")],
            "{}",
        )
        .await;
        let (id, token) = task_handle(&r);
        let doc = settle(gw, &id, &token, &[]).await;
        assert_eq!(doc["status"], "failed", "{doc}");
        assert_eq!(doc["error"]["code"], "deadline_exceeded");
    });
}

#[test]
fn full_task_table_refuses_before_dispatch_and_keeps_existing_tasks_readable() {
    run(async {
        let h = holding_backend().await;
        let (gw, state) = start_gateway(GatewayConfig {
            task_capacity: 1,
            ..lab_config()
        })
        .await;
        load_fib(
            &state,
            1,
            vec![route("r-h", "demo.slow", &endpoint_of(h.addr), 1, false)],
        );
        let env = envelope("demo.slow", "lab", "{}");
        let (id, token) =
            task_handle(&post(gw, "/agent/v1/invoke", &[("prefer", "respond-async")], &env).await);
        timeout(WAIT, h.arrived.notified()).await.unwrap();
        let full = post(gw, "/agent/v1/invoke", &[("prefer", "respond-async")], &env).await;
        assert_eq!(
            (full.status.as_u16(), full.error_code()),
            (503, "task_table_full".into())
        );
        assert_eq!(full.json()["error"]["outcome"], "rejected");
        // Streams share the table.
        let s_env = stream_envelope("s-full", "{}").replace("demo.stream", "demo.slow");
        let s = post(gw, "/agent/v1/invoke-stream", &[], &s_env).await;
        assert_eq!(s.error_code(), "task_table_full");
        assert_eq!(h.requests.get(), 1, "refused work was dispatched");
        let st = task_request(gw, "GET", &id, "", &token).await;
        assert_eq!(st.json()["status"], "running");
    });
}

#[test]
fn stream_resume_after_disconnect_delivers_no_duplicate_and_no_missed_events() {
    run(async {
        let b = sse_backend().await;
        let (gw, state) = gateway_with(
            lab_config(),
            vec![route("r-s", "demo.stream", &endpoint_of(b.addr), 1, false)],
        )
        .await;
        let env = stream_envelope("s-1", r#"{"q":"x"}"#);
        let mut s = open_post(
            gw,
            "/agent/v1/invoke-stream",
            &[("accept", "text/event-stream")],
            &env,
        )
        .await;
        b.events.send(Some("id: 41\ndata: one\n\n")).unwrap();
        b.events
            .send(Some("event: progress\ndata: two\ndata: lines\n\n"))
            .unwrap();
        let first = read_until(&mut s, |t| event_ids(t).len() >= 2).await;
        assert!(first.starts_with("HTTP/1.1 200"), "{first}");
        assert!(first
            .to_ascii_lowercase()
            .contains("content-type: text/event-stream"));
        assert!(first.contains("data: two\ndata: lines\n"), "{first}");
        let task_id = first
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("x-nexus-task-id: ")
                    .map(str::to_string)
            })
            .expect("stream names its task");
        assert_eq!(event_ids(&first), [1, 2]);
        // The caller goes away; the handler keeps producing.
        drop(s);
        b.events.send(Some("data: three\n\n")).unwrap();
        b.events
            .send(Some("data: four\n\n: nexus-stream-complete\n\n"))
            .unwrap();
        // Wait until the gateway has the complete stream.
        let id = agent_gw::task::TaskId::parse(&task_id).unwrap();
        for _ in 0..1000 {
            let done = state
                .tasks
                .borrow_mut()
                .task(&id)
                .is_some_and(|t| t.state().is_terminal());
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut s = open_post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", "2")],
            &env,
        )
        .await;
        let rest = read_until(&mut s, |t| t.contains(": nexus-stream-complete")).await;
        assert!(rest.starts_with("HTTP/1.1 200"), "{rest}");
        assert_eq!(event_ids(&rest), [3, 4]);
        assert!(rest.contains("data: three") && rest.contains("data: four"));
        // The body field works as the cursor too (nexilume sends both).
        let resumed = format!(r#"{},"resume_from_event_id":3}}"#, &env[..env.len() - 1]);
        let mut s = open_post(gw, "/agent/v1/invoke-stream", &[], &resumed).await;
        let tail = read_until(&mut s, |t| t.contains(": nexus-stream-complete")).await;
        assert_eq!(event_ids(&tail), [4]);
        assert_eq!(b.requests.get(), 1, "the producer was restarted");
    });
}

#[test]
fn stream_resume_errors_are_typed_and_never_restart_the_producer() {
    run(async {
        let b = sse_backend().await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![route("r-s", "demo.stream", &endpoint_of(b.addr), 1, false)],
        )
        .await;
        let env = stream_envelope("s-2", r#"{"q":"x"}"#);
        let mut s = open_post(gw, "/agent/v1/invoke-stream", &[], &env).await;
        b.events.send(Some("data: a\n\n")).unwrap();
        read_until(&mut s, |t| event_ids(t).len() == 1).await;
        let code = |r: &Reply| (r.status.as_u16(), r.error_code());
        let r = post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", "abc")],
            &env,
        )
        .await;
        assert_eq!(code(&r), (400, "invalid_cursor".into()));
        let r = post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", "9")],
            &env,
        )
        .await;
        assert_eq!(code(&r), (400, "invalid_cursor".into()));
        let changed = stream_envelope("s-2", r#"{"q":"y"}"#);
        let r = post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", "1")],
            &changed,
        )
        .await;
        assert_eq!(code(&r), (409, "stream_changed".into()));
        // Same task_id, different content, no cursor: refused, not restarted.
        let r = post(gw, "/agent/v1/invoke-stream", &[], &changed).await;
        assert_eq!(code(&r), (409, "stream_changed".into()));
        let r = post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", "1")],
            &stream_envelope("s-none", "{}"),
        )
        .await;
        assert_eq!(code(&r), (404, "not_found".into()));
        assert_eq!(b.requests.get(), 1);
    });
}

#[test]
fn stream_history_lost_is_reported() {
    run(async {
        let b = sse_backend().await;
        let cfg = GatewayConfig {
            stream_history_events: 2,
            ..lab_config()
        };
        let (gw, _state) = gateway_with(
            cfg,
            vec![route("r-s", "demo.stream", &endpoint_of(b.addr), 1, false)],
        )
        .await;
        let env = stream_envelope("s-3", "{}");
        let mut s = open_post(gw, "/agent/v1/invoke-stream", &[], &env).await;
        for ev in ["data: 1\n\n", "data: 2\n\n", "data: 3\n\n", "data: 4\n\n"] {
            b.events.send(Some(ev)).unwrap();
        }
        read_until(&mut s, |t| event_ids(t).contains(&4)).await;
        let r = post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", "1")],
            &env,
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.error_code()),
            (409, "history_lost".into())
        );
        b.events.send(None).unwrap();
    });
}

#[test]
fn an_abandoned_stream_is_cancelled_after_task_ttl_without_any_request() {
    run(async {
        // The handler sends one event, then keeps the stream open and
        // reports when the gateway closes the connection.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let closed = Rc::new(Notify::new());
        let c = closed.clone();
        tokio::task::spawn_local(async move {
            let (mut s, _) = l.accept().await.unwrap();
            read_request(&mut s).await.unwrap();
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: 1\n\n";
            s.write_all(head.as_bytes()).await.unwrap();
            let mut b = [0u8; 64];
            while matches!(s.read(&mut b).await, Ok(n) if n > 0) {}
            c.notify_one();
        });
        let cfg = GatewayConfig {
            task_ttl_s: 1,
            ..lab_config()
        };
        let state = agent_gw::core::Core::new(cfg);
        let listener = agent_gw::serve::http::bind(state.cfg.sdk_listen)
            .await
            .unwrap();
        let gw = listener.local_addr().unwrap();
        // server::run's timer driver, without its FIB follower.
        tokio::task::spawn_local(agent_gw::task::live::expiry_driver(state.tasks.clone()));
        tokio::task::spawn_local(agent_gw::serve::serve_lan(
            listener,
            agent_gw::serve::Gateway::new(state.clone()),
        ));
        load_fib(
            &state,
            1,
            vec![route("r-a", "demo.stream", &endpoint_of(addr), 1, false)],
        );
        let mut s = open_post(
            gw,
            "/agent/v1/invoke-stream",
            &[],
            &stream_envelope("s-idle", "{}"),
        )
        .await;
        read_until(&mut s, |t| event_ids(t) == [1]).await;
        drop(s);
        timeout(WAIT, closed.notified())
            .await
            .expect("the abandoned producer still holds the handler connection");
        let r = post(
            gw,
            "/agent/v1/invoke-stream",
            &[("last-event-id", "1")],
            &stream_envelope("s-idle", "{}"),
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.error_code()),
            (410, "task_expired".into())
        );
    });
}

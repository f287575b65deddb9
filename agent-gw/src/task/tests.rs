//! Task table behaviour: admission and refusal, access, state machine,
//! expiry by timer with time as input, resume rules, and the live
//! producer/follower pieces driven over in-memory bodies.

use super::live::{produce_stream, run_async, SseLimits};
use super::*;
use crate::api::error::ErrorCode;
use agentd::time::Millis;
use bytes::Bytes;
use hyper::body::Frame;

fn cfg(capacity: usize) -> TaskConfig {
    TaskConfig {
        capacity,
        ttl_ms: 1_000,
        history_events: 4,
        history_bytes: 1 << 20,
        // Shares are tested on their own; here one client may use it all.
        tenant_share_percent: 100,
        source_share_percent: 100,
        ..crate::config::GatewayConfig::default().task_config()
    }
}

fn new_task(kind: TaskKind, tenant: &str, key: Option<StreamKey>) -> NewTask {
    NewTask {
        kind,
        tenant: tenant.into(),
        subject: format!("agent://{tenant}/caller"),
        capability: "demo.echo".into(),
        route_id: Some(agentd::route::RouteId::new("r-1").unwrap()),
        request_digest: [1; 32],
        stream_key: key,
        source: std::net::IpAddr::from([192, 0, 2, 1]),
        deadline: None,
        body_bytes: 0,
    }
}

const T0: Millis = Millis(10_000);

#[test]
fn full_table_refuses_new_work_and_keeps_existing_tasks_readable() {
    let mut t = TaskTable::new(cfg(2));
    let a = t
        .try_insert(new_task(TaskKind::Async, "lab", None), T0)
        .unwrap();
    let _b = t
        .try_insert(new_task(TaskKind::Async, "lab", None), T0)
        .unwrap();
    assert_eq!(
        t.try_insert(new_task(TaskKind::Async, "lab", None), T0)
            .unwrap_err(),
        TaskError::Full {
            capacity: 2,
            retry_at: None
        }
    );
    assert_eq!(
        TaskError::Full {
            capacity: 2,
            retry_at: None
        }
        .code(),
        "task_table_full"
    );
    // Accepted tasks are not evicted, however long they run.
    let later = Millis(T0.0 + 10_000_000);
    assert!(t
        .try_insert(new_task(TaskKind::Async, "lab", None), later)
        .is_err());
    assert_eq!(
        t.get(&a.id, a.token.to_hex().as_bytes(), Some("lab"))
            .unwrap()
            .state(),
        TaskState::Pending
    );
}

#[test]
fn finished_tasks_expire_ttl_after_completion_and_free_their_slot() {
    let mut t = TaskTable::new(cfg(1));
    let a = t
        .try_insert(new_task(TaskKind::Async, "lab", None), T0)
        .unwrap();
    t.start(&a.id);
    let done = Millis(T0.0 + 500);
    t.complete(
        &a.id,
        Some(TaskResult {
            status: 200,
            content_type: None,
            body: b"{\"ok\":1}".to_vec(),
        }),
        done,
    );
    assert_eq!(t.next_expiry(), Some(Millis(done.0 + 1_000)));
    assert_eq!(t.expire(Millis(done.0 + 999)), 0);
    let tok = a.token.to_hex();
    assert_eq!(
        t.get(&a.id, tok.as_bytes(), None)
            .unwrap()
            .status_json(done)["result"]["ok"],
        1
    );
    // Still full until the deadline; admission at the deadline expires first.
    assert!(t
        .try_insert(new_task(TaskKind::Async, "lab", None), Millis(done.0 + 999))
        .is_err());
    assert!(t
        .try_insert(
            new_task(TaskKind::Async, "lab", None),
            Millis(done.0 + 1_000)
        )
        .is_ok());
    assert_eq!(
        t.get(&a.id, tok.as_bytes(), None).unwrap_err(),
        TaskError::Expired
    );
    let never = TaskId::random().unwrap();
    assert_eq!(
        t.get(&never, tok.as_bytes(), None).unwrap_err(),
        TaskError::NotFound
    );
}

#[test]
fn wrong_token_or_tenant_reads_as_not_found() {
    let mut t = TaskTable::new(cfg(4));
    let a = t
        .try_insert(new_task(TaskKind::Async, "lab", None), T0)
        .unwrap();
    let other = TaskToken::random().unwrap().to_hex();
    assert_eq!(
        t.get(&a.id, other.as_bytes(), None).unwrap_err(),
        TaskError::NotFound
    );
    assert_eq!(
        t.get(&a.id, a.token.to_hex().as_bytes(), Some("ops"))
            .unwrap_err(),
        TaskError::NotFound
    );
    assert!(t
        .get(&a.id, a.token.to_hex().as_bytes(), Some("lab"))
        .is_ok());
}

#[test]
fn cancel_signals_the_producer_and_wins_over_a_late_result() {
    let mut t = TaskTable::new(cfg(4));
    let a = t
        .try_insert(new_task(TaskKind::Async, "lab", None), T0)
        .unwrap();
    t.start(&a.id);
    assert!(!a.cancel.is_cancelled());
    assert_eq!(t.cancel(&a.id, T0), Some(TaskState::Cancelled));
    assert!(a.cancel.is_cancelled());
    t.complete(&a.id, None, T0);
    let task = t.task(&a.id).unwrap();
    assert_eq!(task.state(), TaskState::Cancelled);
    let names: Vec<_> = task
        .history()
        .after(0)
        .unwrap()
        .map(|e| e.event.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["task_started".into(), "cancelled".into()] as [Box<str>; 2]
    );
    // Cancelling a finished task keeps its outcome.
    let b = t
        .try_insert(new_task(TaskKind::Async, "lab", None), T0)
        .unwrap();
    t.fail(
        &b.id,
        TaskFailure::new(ErrorCode::UpstreamUnknown, "handler vanished"),
        T0,
    );
    assert_eq!(t.cancel(&b.id, T0), Some(TaskState::Failed));
    assert!(!b.cancel.is_cancelled());
    assert_eq!(
        t.task(&b.id).unwrap().status_json(T0)["error"]["code"],
        "upstream_unknown"
    );
}

#[test]
fn resume_checks_stream_identity_digest_and_cursor() {
    let mut t = TaskTable::new(cfg(4));
    let key = StreamKey::new("lab", "agent://lab/caller", "demo.echo", "client-task-1");
    let s = t
        .try_insert(new_task(TaskKind::Stream, "lab", Some(key)), T0)
        .unwrap();
    for i in 0..6 {
        t.push_event(&s.id, Some("progress"), &i.to_string());
    }
    // history_events = 4: events 3..=6 retained.
    assert_eq!(t.resume(&key, &[1; 32], 2), Ok(s.id));
    assert_eq!(
        t.resume(&key, &[1; 32], 1),
        Err(TaskError::HistoryLost {
            cursor: 1,
            oldest: 3
        })
    );
    assert_eq!(
        t.resume(&key, &[1; 32], 7),
        Err(TaskError::BadCursor { cursor: 7, last: 6 })
    );
    assert_eq!(t.resume(&key, &[2; 32], 4), Err(TaskError::RequestMismatch));
    let unknown = StreamKey::new("lab", "agent://lab/caller", "demo.echo", "client-task-2");
    assert_eq!(t.resume(&unknown, &[1; 32], 4), Err(TaskError::NotFound));
    // A second stream with the same key while the first lives is refused.
    assert_eq!(
        t.try_insert(new_task(TaskKind::Stream, "lab", Some(key)), T0)
            .unwrap_err(),
        TaskError::Duplicate
    );
    // After completion + ttl the key reports expiry, not absence.
    t.complete(&s.id, None, T0);
    t.expire(Millis(T0.0 + 1_000));
    assert_eq!(t.resume(&key, &[1; 32], 4), Err(TaskError::Expired));
    assert!(t
        .try_insert(new_task(TaskKind::Stream, "lab", Some(key)), T0)
        .is_ok());
}

#[test]
fn batches_report_finish_only_after_the_last_event() {
    let mut t = TaskTable::new(cfg(4));
    let s = t
        .try_insert(new_task(TaskKind::Stream, "lab", None), T0)
        .unwrap();
    t.push_event(&s.id, None, "a");
    t.push_event(&s.id, None, "b");
    t.complete(&s.id, None, T0);
    assert!(t.push_event(&s.id, None, "late").is_none());
    let b = t.batch(&s.id, 0, 1).unwrap();
    assert_eq!((b.events.len(), b.finished), (1, None));
    let b = t.batch(&s.id, 1, 16).unwrap();
    assert_eq!(
        (b.events[0].id, b.finished),
        (2, Some(TaskState::Completed))
    );
}

#[test]
fn cursors_parse_strictly() {
    assert_eq!(parse_cursor(b"42"), Ok(42));
    assert_eq!(parse_cursor(b" 7 "), Ok(7));
    for bad in [&b""[..], b"-1", b"1e3", b"abc", b"99999999999999999999999"] {
        assert!(
            matches!(parse_cursor(bad), Err(TaskError::BadCursor { .. })),
            "{bad:?}"
        );
    }
}

type FrameResult = Result<Frame<Bytes>, std::io::Error>;

/// An upstream body fed by the test through a channel.
struct ChanBody(tokio::sync::mpsc::Receiver<FrameResult>);

impl hyper::body::Body for ChanBody {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<FrameResult>> {
        self.0.poll_recv(cx)
    }
}

fn body_channel() -> (tokio::sync::mpsc::Sender<FrameResult>, ChanBody) {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    (tx, ChanBody(rx))
}

#[tokio::test(flavor = "current_thread")]
async fn follower_resumes_without_duplicates_while_the_producer_keeps_running() {
    tokio::task::LocalSet::new()
        .run_until(follower_resumes_without_duplicates_while_the_producer_keeps_running_local())
        .await;
}

async fn follower_resumes_without_duplicates_while_the_producer_keeps_running_local() {
    let tasks = SharedTasks::new(TaskTable::new(TaskConfig {
        history_events: 64,
        ..cfg(4)
    }));
    let admitted = tasks
        .borrow_mut()
        .try_insert(new_task(TaskKind::Stream, "lab", None), T0)
        .unwrap();
    let id = admitted.id;
    let (tx, body) = body_channel();
    let producer = tokio::task::spawn_local(produce_stream(
        tasks.clone(),
        id,
        admitted.cancel,
        async move { Ok(body) },
        SseLimits::default(),
        || T0,
    ));
    tx.send(Ok(Frame::data(Bytes::from_static(
        b"id: 900\ndata: one\n\ndata: two\n",
    ))))
    .await
    .unwrap();
    tx.send(Ok(Frame::data(Bytes::from_static(
        b"\nevent: x\ndata: three\n\n",
    ))))
    .await
    .unwrap();
    let mut f = Follower::new(&tasks, id, 0).unwrap();
    let mut seen = String::new();
    while f.cursor() < 3 {
        seen.push_str(std::str::from_utf8(&f.next_chunk().await.unwrap()).unwrap());
    }
    assert_eq!(
        seen,
        "id: 1\ndata: one\n\nid: 2\ndata: two\n\nid: 3\nevent: x\ndata: three\n\n"
    );
    // The caller disconnects (follower dropped); the producer goes on.
    drop(f);
    tx.send(Ok(Frame::data(Bytes::from_static(
        b"data: four\n\n: nexus-stream-complete\n\n",
    ))))
    .await
    .unwrap();
    producer.await.unwrap();
    let mut f = Follower::new(&tasks, id, 3).unwrap();
    let mut rest = String::new();
    while let Some(c) = f.next_chunk().await {
        rest.push_str(std::str::from_utf8(&c).unwrap());
    }
    assert_eq!(rest, "id: 4\ndata: four\n\n: nexus-stream-complete\n\n");
    assert_eq!(
        tasks.borrow_mut().task(&id).unwrap().state(),
        TaskState::Completed
    );
}

#[tokio::test(flavor = "current_thread")]
async fn cancel_drops_the_upstream_future_and_ends_followers() {
    tokio::task::LocalSet::new()
        .run_until(cancel_drops_the_upstream_future_and_ends_followers_local())
        .await;
}

async fn cancel_drops_the_upstream_future_and_ends_followers_local() {
    let tasks = SharedTasks::new(TaskTable::new(cfg(4)));
    let admitted = tasks
        .borrow_mut()
        .try_insert(new_task(TaskKind::Async, "lab", None), T0)
        .unwrap();
    let id = admitted.id;
    // The "upstream request" holds a guard whose drop we observe.
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
    struct Guard(Option<tokio::sync::oneshot::Sender<()>>);
    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }
    let guard = Guard(Some(dropped_tx));
    let work = async move {
        let _g = guard;
        std::future::pending::<Result<TaskResult, TaskFailure>>().await
    };
    let runner =
        tokio::task::spawn_local(run_async(tasks.clone(), id, admitted.cancel, work, || T0));
    tokio::task::yield_now().await;
    assert_eq!(
        tasks.borrow_mut().task(&id).unwrap().state(),
        TaskState::Running
    );
    assert_eq!(
        tasks.borrow_mut().cancel(&id, T0),
        Some(TaskState::Cancelled)
    );
    runner.await.unwrap();
    dropped_rx.await.expect("upstream future was dropped");
    let mut f = Follower::new(&tasks, id, 0).unwrap();
    let mut all = String::new();
    while let Some(c) = f.next_chunk().await {
        all.push_str(std::str::from_utf8(&c).unwrap());
    }
    assert!(all.contains("event: cancelled"), "{all}");
    assert!(all.ends_with(": nexus-stream-complete\n\n"));
}

#[tokio::test(flavor = "current_thread")]
async fn broken_or_invalid_upstream_streams_fail_the_task_with_a_typed_code() {
    let tasks = SharedTasks::new(TaskTable::new(cfg(4)));
    let a = tasks
        .borrow_mut()
        .try_insert(new_task(TaskKind::Stream, "lab", None), T0)
        .unwrap();
    let (tx, body) = body_channel();
    tx.send(Ok(Frame::data(Bytes::from_static(b"data: ok\n\n"))))
        .await
        .unwrap();
    tx.send(Err(std::io::Error::other("reset"))).await.unwrap();
    produce_stream(
        tasks.clone(),
        a.id,
        a.cancel,
        async move { Ok(body) },
        SseLimits::default(),
        || T0,
    )
    .await;
    let doc = tasks.borrow_mut().task(&a.id).unwrap().status_json(T0);
    assert_eq!(
        (doc["status"].as_str(), doc["error"]["code"].as_str()),
        (Some("failed"), Some("upstream_unknown"))
    );

    let b = tasks
        .borrow_mut()
        .try_insert(new_task(TaskKind::Stream, "lab", None), T0)
        .unwrap();
    let (tx, body) = body_channel();
    tx.send(Ok(Frame::data(Bytes::from(vec![b'x'; 100]))))
        .await
        .unwrap();
    drop(tx);
    let limits = SseLimits {
        max_line: 64,
        max_event: 64,
    };
    produce_stream(
        tasks.clone(),
        b.id,
        b.cancel,
        async move { Ok(body) },
        limits,
        || T0,
    )
    .await;
    assert_eq!(
        tasks.borrow_mut().task(&b.id).unwrap().status_json(T0)["error"]["code"],
        "upstream_error"
    );
}

#[test]
fn streams_nobody_follows_for_ttl_are_cancelled_and_removed() {
    let mut t = TaskTable::new(cfg(4));
    let key = StreamKey::new("lab", "agent://lab/caller", "demo.echo", "idle-1");
    let s = t
        .try_insert(new_task(TaskKind::Stream, "lab", Some(key)), T0)
        .unwrap();
    let f = t.attach(&s.id, 0).unwrap();
    t.push_event(&s.id, None, "a");
    // Followed: never idle, however long it runs.
    t.expire(Millis(T0.0 + 50_000));
    assert!(t.task(&s.id).is_some());
    t.detach(&s.id, f, Millis(T0.0 + 50_000));
    assert_eq!(t.next_expiry(), Some(Millis(T0.0 + 51_000)));
    // A reconnect before the deadline resets it.
    let g = t.attach(&s.id, 1).unwrap();
    t.detach(&s.id, g, Millis(T0.0 + 50_500));
    t.expire(Millis(T0.0 + 51_000));
    assert!(t.task(&s.id).is_some());
    assert!(!s.cancel.is_cancelled());
    t.expire(Millis(T0.0 + 51_500));
    assert!(t.task(&s.id).is_none());
    assert!(s.cancel.is_cancelled(), "the producer was not told to stop");
    assert_eq!(t.resume(&key, &[1; 32], 1), Err(TaskError::Expired));
    // A stream nobody ever followed is idle from admission.
    let lone = t
        .try_insert(new_task(TaskKind::Stream, "lab", None), T0)
        .unwrap();
    t.expire(Millis(T0.0 + 1_000));
    assert!(t.task(&lone.id).is_none());
    // A finished stream is not idle-cancelled; it expires ttl after finishing.
    let done = t
        .try_insert(new_task(TaskKind::Stream, "lab", None), T0)
        .unwrap();
    t.complete(&done.id, None, Millis(T0.0 + 10));
    t.expire(Millis(T0.0 + 1_005));
    assert_eq!(
        t.task(&done.id).map(|t| t.state()),
        Some(TaskState::Completed)
    );
    t.expire(Millis(T0.0 + 1_010));
    assert!(t.task(&done.id).is_none());
}

#[test]
fn a_producer_may_not_evict_events_an_attached_follower_has_not_taken() {
    let mut t = TaskTable::new(TaskConfig {
        history_events: 2,
        ..cfg(4)
    });
    let s = t
        .try_insert(new_task(TaskKind::Stream, "lab", None), T0)
        .unwrap();
    t.push_event(&s.id, None, "1");
    t.push_event(&s.id, None, "2");
    // Nobody attached: the bound just drops the oldest.
    assert_eq!(t.room_for(&s.id, None, "3"), Some(true));
    let f = t.attach(&s.id, 0).unwrap();
    assert_eq!(t.room_for(&s.id, None, "3"), Some(false));
    let drained = t.drain_signal(&s.id).unwrap();
    t.advance(&s.id, f, 1);
    assert!(drained.has_changed().unwrap());
    assert_eq!(t.room_for(&s.id, None, "3"), Some(true));
    t.push_event(&s.id, None, "3");
    assert_eq!(t.room_for(&s.id, None, "4"), Some(false));
    // The follower leaving frees the producer too.
    t.detach(&s.id, f, T0);
    assert_eq!(t.room_for(&s.id, None, "4"), Some(true));
}

#[tokio::test(flavor = "current_thread")]
async fn a_live_follower_gets_every_event_even_beyond_the_history_bound() {
    tokio::task::LocalSet::new()
        .run_until(a_live_follower_gets_every_event_even_beyond_the_history_bound_local())
        .await;
}

async fn a_live_follower_gets_every_event_even_beyond_the_history_bound_local() {
    let tasks = SharedTasks::new(TaskTable::new(TaskConfig {
        history_events: 4,
        ..cfg(4)
    }));
    let a = tasks
        .borrow_mut()
        .try_insert(new_task(TaskKind::Stream, "lab", None), T0)
        .unwrap();
    let id = a.id;
    let mut f = Follower::new(&tasks, id, 0).unwrap();
    let (tx, body) = body_channel();
    // Ten events in one write, more than the history holds.
    let burst: String = (1..=10).map(|i| format!("data: {i}\n\n")).collect();
    tx.send(Ok(Frame::data(Bytes::from(burst)))).await.unwrap();
    drop(tx);
    let producer = tokio::task::spawn_local(produce_stream(
        tasks.clone(),
        id,
        a.cancel,
        async move { Ok(body) },
        SseLimits::default(),
        || T0,
    ));
    let mut all = String::new();
    while let Some(c) = f.next_chunk().await {
        all.push_str(std::str::from_utf8(&c).unwrap());
    }
    producer.await.unwrap();
    let ids: Vec<u64> = all
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(ids, (1..=10).collect::<Vec<u64>>(), "{all}");
    assert!(all.ends_with(": nexus-stream-complete\n\n"));
}

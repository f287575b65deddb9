//! Fair shares and the byte budget in the task table: per-tenant and
//! per-source slot shares with truthful retry times, admission against the
//! budget, release of fetched results, and a stream degrading its own
//! history (never another task's, never a connected follower's events).

use std::net::IpAddr;

use agentd::time::Millis;

use super::*;
use crate::budget::{Budget, BudgetConfig, Scope};

const T0: Millis = Millis(10_000);
const TTL: u64 = 1_000;

fn cfg(capacity: usize, tenant: u64, source: u64) -> TaskConfig {
    TaskConfig {
        capacity,
        ttl_ms: TTL,
        history_events: 64,
        history_bytes: 1 << 20,
        tenant_share_percent: tenant,
        source_share_percent: source,
        result_reserve: 1000,
        stream_reserve: 100,
    }
}

fn budget(limit: usize, tenant: u64, source: u64) -> Budget {
    Budget::new(BudgetConfig {
        limit,
        tenant_share_percent: tenant,
        source_share_percent: source,
    })
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([192, 0, 2, last])
}

fn task(kind: TaskKind, tenant: &str, source: IpAddr, deadline: Option<Millis>) -> NewTask {
    NewTask {
        kind,
        tenant: tenant.into(),
        subject: format!("agent://{tenant}/caller"),
        capability: "demo.echo".into(),
        route_id: None,
        request_digest: [1; 32],
        stream_key: None,
        source,
        deadline,
        body_bytes: 0,
    }
}

fn result(n: usize) -> Option<TaskResult> {
    Some(TaskResult {
        status: 200,
        content_type: None,
        body: vec![b'x'; n],
    })
}

#[test]
fn one_source_cannot_take_more_than_its_share_of_the_table() {
    let mut t = TaskTable::new(cfg(8, 100, 25));
    let deadline = Some(Millis(T0.0 + 5_000));
    let mut mine = Vec::new();
    for _ in 0..2 {
        mine.push(
            t.try_insert(task(TaskKind::Async, "lab", ip(1), deadline), T0)
                .unwrap(),
        );
    }
    // Both still running: the slot frees at the latest deadline + ttl.
    let e = t
        .try_insert(task(TaskKind::Async, "lab", ip(1), deadline), T0)
        .unwrap_err();
    assert_eq!(
        e,
        TaskError::Share {
            scope: Scope::Source,
            held: 2,
            limit: 2,
            retry_at: Some(Millis(T0.0 + 5_000 + TTL)),
        }
    );
    assert_eq!((e.status(), e.code()), (429, "share_exceeded"));
    // One finishes: its expiry is the true moment a slot frees.
    t.complete(&mine[0].id, result(1), Millis(T0.0 + 100));
    let e = t
        .try_insert(task(TaskKind::Async, "lab", ip(1), deadline), T0)
        .unwrap_err();
    assert_eq!(e.retry_at(), Some(Some(Millis(T0.0 + 100 + TTL))));
    // Another address of the same tenant is still served.
    assert!(t
        .try_insert(task(TaskKind::Async, "lab", ip(2), deadline), T0)
        .is_ok());
    // Fetching frees the slot at once, long before the expiry.
    assert!(t.release(&mine[0].id));
    assert!(t
        .try_insert(task(TaskKind::Async, "lab", ip(1), deadline), T0)
        .is_ok());
    assert_eq!(t.stats().refused_source_share, 2);
}

#[test]
fn one_tenant_cannot_take_more_than_its_share_of_the_table() {
    let mut t = TaskTable::new(cfg(4, 50, 100));
    for last in 1..=2 {
        t.try_insert(task(TaskKind::Async, "a", ip(last), None), T0)
            .unwrap();
    }
    let e = t
        .try_insert(task(TaskKind::Async, "a", ip(3), None), T0)
        .unwrap_err();
    assert!(
        matches!(
            e,
            TaskError::Share {
                scope: Scope::Tenant,
                held: 2,
                limit: 2,
                retry_at: None
            }
        ),
        "{e:?}"
    );
    t.try_insert(task(TaskKind::Async, "b", ip(3), None), T0)
        .unwrap();
}

#[test]
fn a_full_table_says_when_its_first_slot_frees() {
    let mut t = TaskTable::new(cfg(2, 100, 100));
    let a = t
        .try_insert(task(TaskKind::Async, "lab", ip(1), None), T0)
        .unwrap();
    let _b = t
        .try_insert(task(TaskKind::Async, "lab", ip(2), None), T0)
        .unwrap();
    let e = t
        .try_insert(task(TaskKind::Async, "lab", ip(3), None), T0)
        .unwrap_err();
    assert_eq!(e.retry_at(), Some(None), "nothing will free by itself");
    t.complete(&a.id, result(1), Millis(T0.0 + 200));
    let e = t
        .try_insert(task(TaskKind::Async, "lab", ip(3), None), T0)
        .unwrap_err();
    assert_eq!(e.retry_at(), Some(Some(Millis(T0.0 + 200 + TTL))));
}

#[test]
fn admission_reserves_the_largest_result_and_completion_keeps_only_the_answer() {
    let b = budget(4 * (TASK_OVERHEAD + 1000), 100, 100);
    let mut t = TaskTable::with_budget(cfg(64, 100, 100), b.clone());
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(
            t.try_insert(task(TaskKind::Async, "lab", ip(1), None), T0)
                .unwrap()
                .id,
        );
    }
    assert_eq!(b.ledger().used(), 4 * (TASK_OVERHEAD + 1000));
    let e = t
        .try_insert(task(TaskKind::Async, "lab", ip(2), None), T0)
        .unwrap_err();
    let TaskError::Budget(r) = e else {
        panic!("{e:?}")
    };
    assert_eq!(
        (r.scope, e.status(), e.code()),
        (Scope::Total, 503, "overloaded")
    );
    // A completed task keeps its answer (within its reserve), nothing more.
    t.complete(&ids[0], result(10), Millis(T0.0 + 1));
    assert_eq!(
        b.ledger().used(),
        3 * (TASK_OVERHEAD + 1000) + TASK_OVERHEAD + 10
    );
    // Still no room for a new reserve; the refusal names the expiry of
    // that result as the moment enough frees (the others have no end).
    let e = t
        .try_insert(task(TaskKind::Async, "lab", ip(2), None), T0)
        .unwrap_err();
    assert_eq!(e.retry_at(), Some(Some(Millis(T0.0 + 1 + TTL))));
    // Expiry, release and removal all give the bytes back.
    t.fail(
        &ids[1],
        TaskFailure::new(crate::api::error::ErrorCode::UpstreamUnknown, "x"),
        Millis(T0.0 + 2),
    );
    assert!(t.release(&ids[1]));
    t.remove(&ids[2]);
    t.expire(Millis(T0.0 + 1 + TTL));
    assert_eq!(t.len(), 1);
    assert_eq!(b.ledger().used(), TASK_OVERHEAD + 1000);
}

#[test]
fn budget_refusal_names_when_the_held_bytes_free() {
    let b = budget(2 * (TASK_OVERHEAD + 1000) + 200, 100, 100);
    let mut t = TaskTable::with_budget(cfg(64, 100, 100), b);
    let a = t
        .try_insert(
            task(TaskKind::Async, "lab", ip(1), Some(Millis(T0.0 + 500))),
            T0,
        )
        .unwrap();
    let s = t
        .try_insert(task(TaskKind::Stream, "lab", ip(1), None), T0)
        .unwrap();
    // Followed, the stream has no known end.
    t.attach(&s.id, 0).unwrap();
    let again = || task(TaskKind::Async, "lab", ip(2), None);
    // The running async task frees by its deadline + ttl at the latest.
    let e = t.try_insert(again(), T0).unwrap_err();
    assert_eq!(e.retry_at(), Some(Some(Millis(T0.0 + 500 + TTL))));
    t.complete(&a.id, result(5), Millis(T0.0 + 50));
    // Completed: the answer is small now, so the room is there at once.
    assert!(t.try_insert(again(), T0).is_ok());
}

#[test]
fn released_tasks_answer_status_only_to_their_caller_and_never_count() {
    let mut t = TaskTable::new(cfg(4, 100, 100));
    let a = t
        .try_insert(task(TaskKind::Async, "lab", ip(1), None), T0)
        .unwrap();
    assert!(!t.release(&a.id), "a running task cannot be released");
    t.complete(&a.id, result(3), T0);
    assert!(t.release(&a.id));
    assert_eq!(t.len(), 0);
    let token = a.token.to_hex();
    assert_eq!(
        t.get(&a.id, token.as_bytes(), Some("lab")).unwrap_err(),
        TaskError::Released
    );
    let doc = t
        .released_status(&a.id, token.as_bytes(), Some("lab"), T0)
        .unwrap();
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["result_released"], true);
    assert_eq!(doc["result_status"], 200);
    // A wrong token or another tenant learns nothing.
    assert_eq!(
        t.get(&a.id, b"00", Some("lab")).unwrap_err(),
        TaskError::NotFound
    );
    assert!(t
        .released_status(&a.id, token.as_bytes(), Some("other"), T0)
        .is_none());
}

#[test]
fn a_stream_over_the_budget_degrades_its_own_history_not_others() {
    // Room for two streams' reserves and a little more.
    let limit = 2 * (TASK_OVERHEAD + 100) + 150;
    let b = budget(limit, 100, 100);
    let mut t = TaskTable::with_budget(cfg(8, 100, 100), b.clone());
    let s = t
        .try_insert(task(TaskKind::Stream, "lab", ip(1), None), T0)
        .unwrap();
    let other = t
        .try_insert(task(TaskKind::Stream, "lab", ip(2), None), T0)
        .unwrap();
    t.push_event(&other.id, None, "keep");
    // 40 events of 32 + 8 bytes each: far more than the budget allows.
    for i in 0..40 {
        assert_eq!(t.room_for(&s.id, None, "01234567"), Some(true));
        t.push_event(&s.id, None, "01234567").unwrap();
        assert!(
            b.ledger().used() <= limit,
            "event {i}: {}",
            b.ledger().used()
        );
    }
    let h = t.task(&s.id).unwrap().history();
    assert_eq!(h.last_id(), 40);
    assert!(
        h.len() < 40 && h.bytes() <= 100 + 150,
        "{} bytes",
        h.bytes()
    );
    assert!(t.stats().history_degraded > 0);
    // Later resumes learn it; the other stream lost nothing.
    assert!(matches!(
        t.batch(&s.id, 0, 64),
        Err(TaskError::HistoryLost { .. })
    ));
    assert_eq!(t.task(&other.id).unwrap().history().len(), 1);
}

#[test]
fn a_degraded_stream_still_waits_for_its_connected_follower() {
    let limit = TASK_OVERHEAD + 100;
    let b = budget(limit, 100, 100);
    let mut t = TaskTable::with_budget(cfg(8, 100, 100), b);
    let s = t
        .try_insert(task(TaskKind::Stream, "lab", ip(1), None), T0)
        .unwrap();
    let f = t.attach(&s.id, 0).unwrap();
    // Two 40-byte events fit the 100-byte reserve; a third would drop
    // event 1, which the follower has not taken: the producer must wait.
    t.push_event(&s.id, None, "01234567");
    t.push_event(&s.id, None, "01234567");
    assert_eq!(t.room_for(&s.id, None, "01234567"), Some(false));
    t.advance(&s.id, f, 1);
    assert_eq!(t.room_for(&s.id, None, "01234567"), Some(true));
    t.push_event(&s.id, None, "01234567");
    assert_eq!(t.batch(&s.id, 1, 64).unwrap().events.len(), 2);
}

#[test]
fn an_ipv6_host_cannot_multiply_its_share_by_cycling_its_64() {
    let mut t = TaskTable::new(cfg(8, 100, 25));
    let deadline = Some(Millis(T0.0 + 5_000));
    let in_64 = |n: u16| IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, n]);
    for n in 1..=2 {
        t.try_insert(task(TaskKind::Async, "lab", in_64(n), deadline), T0)
            .unwrap();
    }
    // A third address of the same /64 is the same source.
    let e = t
        .try_insert(task(TaskKind::Async, "lab", in_64(3), deadline), T0)
        .unwrap_err();
    assert_eq!((e.status(), e.code()), (429, "share_exceeded"));
    assert_eq!(t.source_len(in_64(99)), 2);
    // Another /64 is another source.
    let other = IpAddr::from([0x2001, 0xdb8, 0, 2, 0, 0, 0, 1]);
    assert!(t
        .try_insert(task(TaskKind::Async, "lab", other, deadline), T0)
        .is_ok());
}

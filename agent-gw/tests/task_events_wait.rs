//! `GET /agent/v1/tasks/{id}/events?after=N&wait_ms=M`: a follower of a
//! task (another router's A2A front end) gets the task's next step when
//! it happens, in one request.

mod common;

use common::{backend, gateway_with, lab_config, route, run, send, task_handle, Mode};

/// Input: an async task whose handler holds the call; an events request
/// after the task's first event with `wait_ms`, and the handler released
/// while it waits. Output: that one request answers with the `result`
/// event and status `completed` (without `wait_ms` it answers at once
/// with no events); a bad `wait_ms` is 400 `invalid_cursor`.
#[test]
fn events_with_wait_ms_answer_at_the_next_step() {
    run(async {
        let hold = backend("hold", Mode::Hold).await;
        let (gw, state) = gateway_with(
            lab_config(),
            vec![route("r-h", "demo.hold", &hold.endpoint(), 1, false)],
        )
        .await;
        let r = common::post(
            gw,
            "/agent/v1/invoke",
            &[("prefer", "respond-async")],
            &common::envelope("demo.hold", "lab", "{}"),
        )
        .await;
        let (id, token) = task_handle(&r);
        hold.arrived.notified().await;
        let path = |q: &str| format!("/agent/v1/tasks/{id}/events{q}");
        let tok = [("x-nexus-task-token", token.as_str())];
        let now = send(gw, "GET", &path("?after=1"), &tok, b"").await.json();
        assert_eq!(now["events"].as_array().map(Vec::len), Some(0), "{now}");
        assert_eq!(now["status"], "running");

        let (p, t) = (path("?after=1&wait_ms=8000"), token.clone());
        let waiting = tokio::task::spawn_local(async move {
            send(gw, "GET", &p, &[("x-nexus-task-token", &t)], b"").await
        });
        let tid = agent_gw::task::TaskId::parse(&id).unwrap();
        let mut waited = false;
        for _ in 0..5000 {
            let n = state
                .tasks
                .borrow_mut()
                .task(&tid)
                .map_or(0, |t| t.watchers());
            if n > 0 {
                waited = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert!(waited, "the events request waits for the task's next step");
        hold.release.notify_one();
        let doc = waiting.await.unwrap().json();
        assert_eq!(doc["status"], "completed", "{doc}");
        assert_eq!(doc["events"][0]["event"], "result", "{doc}");

        let bad = send(gw, "GET", &path("?wait_ms=x"), &tok, b"").await;
        assert_eq!(bad.status, 400);
        assert_eq!(bad.error_code(), "invalid_cursor");
    });
}

//! `GET /agent/v1/tasks/{id}/events?after=N&wait_ms=M`: a follower of a
//! task (another router's A2A front end) gets the task's next step when
//! it happens, in one request.

mod common;

use std::net::SocketAddr;
use std::rc::Rc;

use agent_gw::core::Core;
use common::{backend, gateway_with, lab_config, route, run, send, task_handle, Backend, Mode};

/// A gateway with a held async task: (its handler, the gateway, its
/// state, the task id and token).
async fn held_task() -> (Backend, SocketAddr, Rc<Core>, String, String) {
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
    (hold, gw, state, id, token)
}

/// Whether task `id` got a watcher (a waiting events request) before
/// `request` answered. Polls the table (bounded: 5 s).
async fn watched<T>(state: &Core, id: &str, request: &tokio::task::JoinHandle<T>) -> bool {
    let tid = agent_gw::task::TaskId::parse(id).unwrap();
    for _ in 0..5000 {
        let n = state
            .tasks
            .borrow_mut()
            .task(&tid)
            .map_or(0, |t| t.watchers());
        if n > 0 {
            return true;
        }
        if request.is_finished() {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    false
}

/// Input: an async task whose handler holds the call; an events request
/// after the task's first event with `wait_ms`, and the handler released
/// while it waits. Output: that one request answers with the `result`
/// event and status `completed` (without `wait_ms` it answers at once
/// with no events); a bad `wait_ms` is 400 `invalid_cursor`.
#[test]
fn events_with_wait_ms_answer_at_the_next_step() {
    run(async {
        let (hold, gw, state, id, token) = held_task().await;
        let path = |q: &str| format!("/agent/v1/tasks/{id}/events{q}");
        let tok = [("x-nexus-task-token", token.as_str())];
        let now = send(gw, "GET", &path("?after=1"), &tok, b"").await.json();
        assert_eq!(now["events"].as_array().map(Vec::len), Some(0), "{now}");
        assert_eq!(now["status"], "running");

        let (p, t) = (path("?after=1&wait_ms=8000"), token.clone());
        let waiting = tokio::task::spawn_local(async move {
            send(gw, "GET", &p, &[("x-nexus-task-token", &t)], b"").await
        });
        assert!(
            watched(&state, &id, &waiting).await,
            "the events request waits for the task's next step"
        );
        hold.release.notify_one();
        let doc = waiting.await.unwrap().json();
        assert_eq!(doc["status"], "completed", "{doc}");
        assert_eq!(doc["events"][0]["event"], "result", "{doc}");

        let bad = send(gw, "GET", &path("?wait_ms=x"), &tok, b"").await;
        assert_eq!(bad.status, 400);
        assert_eq!(bad.error_code(), "invalid_cursor");
    });
}

/// The same over the peer data plane, as another router's A2A front end
/// follows a task that lives here. Input: a held async task, and its
/// events with `wait_ms` asked by a neighbour (signed assertion, pinned
/// to the task's route). Output: the request waits for the task's next
/// step (a watcher on the task) and answers with the `result` event once
/// the handler answers — it does not answer at once, which made the
/// following router ask again and again for the whole task.
#[test]
fn a_neighbour_asking_for_events_with_wait_ms_waits_too() {
    use bytes::Bytes;
    use edkey::Sha256;
    use edkey::SigningKey;
    use http_body_util::{BodyExt, Full};

    use agent_gw::front::neighbour as inbound;
    use agent_gw::peer::assertion::{Assertion, Claims};
    use agent_gw::peer::outbound::unix_ms;
    use agent_gw::peer::{LocalExec, ASSERTION_HEADER};

    run(async {
        let (hold, _gw, state, id, token) = held_task().await;

        let key = SigningKey::from_bytes(&[9; 32]);
        let plane = common::peer_plane(
            state.clone(),
            inbound::Peer {
                router_id: "router-c".into(),
                key: key.verifying_key(),
                addr: "127.0.0.1:7447".parse().unwrap(),
                signed: true,
            },
        )
        .await;
        let tcp = tokio::net::TcpStream::connect(plane).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http2::Builder::new(LocalExec)
            .handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::task::spawn_local(conn);
        let claims = Claims {
            source: "router-c".into(),
            target: "router".into(),
            origin: "router-c".into(),
            caller: "agent://lab/caller".into(),
            tenant: "lab".into(),
            capability: "demo.hold".into(),
            body_sha256: Sha256::digest(b""),
            nonce: agent_gw::peer::replay::nonce(9, 1),
            expires_ms: unix_ms() + 20_000,
        };
        let req = http::Request::get(format!(
            "http://router/agent/v1/tasks/{id}/events?after=1&wait_ms=8000"
        ))
        .header(ASSERTION_HEADER, Assertion::sign(claims, &key).encode())
        .header("x-agentd-route-id", "r-h")
        .header("x-nexus-task-token", token.as_str())
        .body(Full::new(Bytes::new()))
        .unwrap();
        let waiting = tokio::task::spawn_local(async move {
            let resp = sender.send_request(req).await.unwrap();
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (status, body)
        });
        assert!(
            watched(&state, &id, &waiting).await,
            "the neighbour's events request waits for the next step"
        );
        hold.release.notify_one();
        let (status, body) = waiting.await.unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, 200, "{doc}");
        assert_eq!(doc["status"], "completed", "{doc}");
        assert_eq!(doc["events"][0]["event"], "result", "{doc}");
    });
}

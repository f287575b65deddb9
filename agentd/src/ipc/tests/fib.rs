//! FIB subscriptions over the real socket: snapshot then deltas, and a
//! subscriber that cannot keep up (frame and byte bounds, stalls).

use super::*;

#[tokio::test(flavor = "current_thread")]
async fn fib_subscription_gets_snapshot_then_deltas() {
    let h = Harness::start(ServerConfig::default());
    let admin = h.client().await;
    let a = admin.register(registration("a")).await.unwrap();
    let b = admin.register(registration("b")).await.unwrap();
    let gw = h.client().await;
    let mut fib = gw.subscribe_fib().await.unwrap();
    assert_eq!(
        gw.subscribe_fib().await.unwrap_err(),
        ClientError::AlreadySubscribed
    );
    assert_eq!(
        fib.next().await,
        Some(Ok(FibEvent::SnapshotBegin { generation: 2 }))
    );
    let Some(Ok(FibEvent::SnapshotChunk(routes))) = fib.next().await else {
        panic!("expected a chunk")
    };
    let ids: Vec<_> = routes.iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids, [a.route_id.clone(), b.route_id.clone()]);
    assert_eq!(
        fib.next().await,
        Some(Ok(FibEvent::SnapshotEnd {
            generation: 2,
            policy: Box::default(),
            peers_down: vec![],
            links: vec![],
            agent_addrs: vec![],
        }))
    );

    let c = admin.register(registration("c")).await.unwrap();
    let Some(Ok(FibEvent::Delta {
        base: 2,
        generation: 3,
        changes,
    })) = fib.next().await
    else {
        panic!("expected delta 2→3")
    };
    assert!(matches!(&changes[..], [FibChange::Upsert(r)] if r.id == c.route_id));
    let generation = admin.unregister(a.route_id.clone(), None).await.unwrap();
    assert_eq!(
        generation, 4,
        "the reply names the generation of the removal"
    );
    assert_eq!(
        fib.next().await,
        Some(Ok(FibEvent::Delta {
            base: 3,
            generation: 4,
            changes: vec![FibChange::Remove(a.route_id)]
        }))
    );
    assert_eq!(admin.status().await.unwrap().fib_subscribers, 1);
}

fn big_registration(name: &str, schema_bytes: usize) -> Registration {
    let mut reg = registration(name);
    reg.contract = Some(Contract {
        effect: Effect::Read,
        idempotent: true,
        input_schema: Some("s".repeat(schema_bytes).into()),
        description: None,
    });
    reg
}

#[tokio::test(flavor = "current_thread")]
async fn subscriber_that_cannot_take_the_snapshot_is_disconnected() {
    let mut h = Harness::start(ServerConfig {
        outbound_queue: 4,
        ..ServerConfig::default()
    });
    let admin = h.client().await;
    // Routes of ~40 KiB each: every one needs its own snapshot chunk, so
    // the 8-route snapshot cannot fit a 4-frame queue.
    for i in 0..8 {
        admin
            .register(big_registration(&format!("big{i}"), 40_000))
            .await
            .unwrap();
    }
    let gw = h.client().await;
    assert_eq!(gw.subscribe_fib().await.unwrap_err(), ClientError::Closed);
    assert_eq!(gw.status().await.unwrap_err(), ClientError::Closed);
    assert_eq!(h.next_disconnect().await, Disconnect::QueueFull);
    // Everyone else is still served.
    assert_eq!(admin.status().await.unwrap().routes, 8);
}

#[tokio::test(flavor = "current_thread")]
async fn subscriber_over_the_byte_bound_is_disconnected_like_over_the_frame_bound() {
    // Plenty of frames, but only 128 KiB: eight ~40 KiB routes make a
    // snapshot of about 320 KiB in 8 frames.
    let mut h = Harness::start(ServerConfig {
        outbound_queue: 1024,
        outbound_bytes: 128 * 1024,
        ..ServerConfig::default()
    });
    let admin = h.client().await;
    for i in 0..8 {
        admin
            .register(big_registration(&format!("big{i}"), 40_000))
            .await
            .unwrap();
    }
    let gw = h.client().await;
    assert_eq!(gw.subscribe_fib().await.unwrap_err(), ClientError::Closed);
    assert_eq!(h.next_disconnect().await, Disconnect::QueueFull);
    // Small replies on other connections stay within the bound.
    assert_eq!(admin.status().await.unwrap().routes, 8);
    let small = h.client().await;
    for _ in 0..100 {
        assert!(small.status().await.is_ok());
    }
}

#[test]
fn byte_bound_grows_with_the_route_table() {
    use crate::ipc::server::DEFAULT_OUTBOUND_BYTES;
    assert_eq!(
        ServerConfig::outbound_bytes_for(100),
        DEFAULT_OUTBOUND_BYTES
    );
    assert_eq!(ServerConfig::outbound_bytes_for(100_000), 100_000 * 1024);
}

#[tokio::test(flavor = "current_thread")]
async fn stalled_subscriber_is_dropped_and_resubscribing_gets_a_fresh_snapshot() {
    let mut h = Harness::start(ServerConfig {
        outbound_queue: 128,
        ..ServerConfig::default()
    });
    let admin = h.client().await;
    let gw = h.client().await;
    let mut fib = gw.subscribe_fib().await.unwrap();
    // The gateway reads nothing while 400 routes of ~10 KiB arrive: its
    // client buffer, the socket and then the server queue fill up.
    const N: usize = 400;
    for i in 0..N {
        admin
            .register(big_registration(&format!("r{i}"), 10_000))
            .await
            .unwrap();
    }
    assert_eq!(h.next_disconnect().await, Disconnect::QueueFull);
    // What did arrive is a clean prefix: snapshot, then gapless deltas,
    // then the end of the connection.
    let mut events = Vec::new();
    while let Some(ev) = fib.next().await {
        events.push(ev);
    }
    assert_eq!(events.pop(), Some(Err(ClientError::Closed)));
    assert_eq!(events[0], Ok(FibEvent::SnapshotBegin { generation: 0 }));
    assert!(matches!(
        events[1],
        Ok(FibEvent::SnapshotEnd { generation: 0, .. })
    ));
    let mut gen = 0;
    for ev in &events[2..] {
        let Ok(FibEvent::Delta {
            base, generation, ..
        }) = ev
        else {
            panic!("{ev:?}")
        };
        assert_eq!((*base, *generation), (gen, gen + 1));
        gen += 1;
    }
    assert!(gen < N as u64, "dropped before the end, got {gen} deltas");
    drop((gw, fib));

    let gw = h.client().await;
    let mut fib = gw.subscribe_fib().await.unwrap();
    assert_eq!(
        fib.next().await,
        Some(Ok(FibEvent::SnapshotBegin {
            generation: N as u64
        }))
    );
    let mut routes = 0;
    let mut chunks = 0;
    loop {
        match fib.next().await {
            Some(Ok(FibEvent::SnapshotChunk(c))) => {
                routes += c.len();
                chunks += 1;
            }
            Some(Ok(FibEvent::SnapshotEnd { generation, .. })) => {
                assert_eq!(generation, N as u64);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(routes, N);
    assert!(chunks > 1, "a 4 MB snapshot spans several frames");
}

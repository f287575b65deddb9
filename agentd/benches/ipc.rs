//! IPC and FIB benchmark: what a request and a FIB resync cost.
//!
//! * `frame_*` — postcard framing of a registration request and of one
//!   FIB snapshot chunk (encode, and decode through `FrameDecoder`).
//! * `replica_snapshot` — a FibReplica absorbing a full snapshot of N
//!   routes produced by the FibExporter (what agent-gw pays on resync).
//! * `round_trip_status` — one `Status` call over a real Unix socket to a
//!   server whose "daemon" answers at once (client + server + framing).
//!
//! Run: `cargo bench -p agentd --bench ipc`.

use std::hint::black_box;
use std::path::PathBuf;

use agentd::fib::export::{FibExporter, FibSink};
use agentd::fib::replica::FibReplica;
use agentd::fib::FibEvent;
use agentd::ipc::client::Client;
use agentd::ipc::frame::{self, FrameDecoder};
use agentd::ipc::message::{Registration, Request, RequestBody, ResponseBody};
use agentd::ipc::server::{IpcServer, ServerConfig, ServerEvent};
use agentd::policy::Policy;
use agentd::route::{Access, Attributes, Lease, Route, RouteId, RouteSource};
use agentd::table::RouteTable;
use agentd::time::Millis;
use divan::Bencher;

fn main() {
    divan::main();
}

fn route(i: usize) -> Route {
    Route {
        id: RouteId::new(&format!("route-{i:08}")).unwrap(),
        capability: format!("cap.n{}", i % 1000).into(),
        version: 1,
        origin: format!("agent://lab/agent-{i}").into(),
        endpoint: format!("http://192.0.2.{}:8080/invoke", i % 250).into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes {
            latency_ms: 5,
            cost_micros: 10,
            load_permille: 100,
            trust: 90,
        },
        access: Access::default().into(),
        contract: None,
        source: RouteSource::Local,
        path: Box::default(),
        next_hop: None,
        lease: Lease::Until(Millis(10_000_000)),
        healthy: true,
        allow_loopback: false,
        owner: None,
        proof: Default::default(),
        disputed: false,
    }
}

fn register() -> Request {
    Request {
        id: 42,
        body: RequestBody::Register(Registration {
            route_id: None,
            capability: "demo.echo".into(),
            version: 1,
            origin: "agent://lab/echo".into(),
            endpoint: "http://192.0.2.10:8080/invoke".into(),
            tenant: "lab".into(),
            region: "local".into(),
            attrs: Attributes::default(),
            access: Access::default(),
            contract: None,
            lease_seconds: Some(30),
            caller: None,
            owner: None,
            public_ipv6: false,
        }),
    }
}

#[divan::bench]
fn frame_encode_register(b: Bencher) {
    let req = register();
    let mut out = Vec::new();
    b.bench_local(|| {
        out.clear();
        frame::encode_into(black_box(&req), &mut out).unwrap();
    });
}

#[divan::bench]
fn frame_decode_register(b: Bencher) {
    let wire = frame::encode(&register()).unwrap();
    let mut d = FrameDecoder::new();
    b.bench_local(|| {
        d.push(black_box(&wire));
        black_box(d.next_message::<Request>().unwrap().unwrap());
    });
}

/// One snapshot chunk of 200 routes (~40 KiB).
#[divan::bench]
fn frame_decode_snapshot_chunk(b: Bencher) {
    let ev = FibEvent::SnapshotChunk((0..200).map(route).collect());
    let wire = frame::encode(&ev).unwrap();
    let mut d = FrameDecoder::new();
    b.counter(divan::counter::BytesCount::new(wire.len()))
        .bench_local(|| {
            d.push(black_box(&wire));
            black_box(d.next_message::<FibEvent>().unwrap().unwrap());
        });
}

#[derive(Debug, Default)]
struct Queue(Vec<FibEvent>);

impl FibSink for Queue {
    fn offer(&mut self, event: FibEvent) -> bool {
        self.0.push(event);
        true
    }
}

#[divan::bench(args = [1_000, 10_000])]
fn replica_snapshot(b: Bencher, n: usize) {
    let mut rib = RouteTable::new(n);
    for i in 0..n {
        rib.upsert(route(i)).unwrap();
    }
    let mut ex = FibExporter::new();
    let id = ex
        .subscribe(Queue::default(), &rib, &Policy::default(), &[], &[])
        .unwrap();
    let events = ex.unsubscribe(id).unwrap().0;
    b.with_inputs(|| events.clone())
        .bench_local_values(|events| {
            let mut r = FibReplica::new(n);
            for ev in events {
                r.apply(ev, Millis(0)).unwrap();
            }
            r
        });
}

#[divan::bench]
fn round_trip_status(b: Bencher) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("agentd-ipc-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join("agentd.sock");
    let client = rt.block_on(async {
        let server = IpcServer::bind(&path, ServerConfig::default()).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(server.run(tx));
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                if let ServerEvent::Request(req) = ev {
                    req.reply.send(Ok(ResponseBody::Status(Box::default())));
                }
            }
        });
        Client::connect(&path, "bench").await.unwrap()
    });
    b.bench_local(|| rt.block_on(client.call(RequestBody::Status)).unwrap());
    drop(client);
    let _ = std::fs::remove_dir_all(&dir);
}

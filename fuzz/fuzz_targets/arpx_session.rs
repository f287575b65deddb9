//! Arbitrary messages on an established ARPX session: whatever a peer
//! sends, the instance answers with outputs or a typed Close, never a
//! panic, and its invariants hold after every input: at most `max_routes`
//! paths from the peer, none longer than `max_path`, none containing us,
//! every one ending at the peer that sent it.
//!
//! The input is a sequence of chunks `[op, len, body…]`. `body` goes
//! through `frame::decode_body`; what decodes is fed as a frame. With bit 0
//! of `op` set the message is made plausible first (routes re-signed with
//! a consistent key per origin, the path ending at the peer, the next
//! sequence number), so the route rules behind the signature check are
//! reached too. Other bits inject timers, a transport loss with
//! reconnect, or local route changes.
#![no_main]

use arpx::instance::{ConnId, Input, Instance, Output, PeerConfig, Timer};
use arpx::message::Message;
use arpx::testing::{config, key, local, open, router, tls_key};
use libfuzzer_sys::fuzz_target;

const MAX_ROUTES: usize = 16;
const MAX_PATH: usize = 4;

struct Rig {
    inst: Instance,
    now: u64,
    conn: u64,
    seq: u64,
    out: Vec<Output>,
}

impl Rig {
    fn feed(&mut self, input: Input) {
        self.out.clear();
        self.inst.handle(self.now, input, &mut self.out);
        self.check();
    }

    fn connect(&mut self) {
        self.conn += 1;
        self.seq = 0;
        self.feed(Input::Connected {
            conn: ConnId(self.conn),
            peer: router(1),
            peer_key: tls_key(1),
            outbound: true,
        });
        self.frame(open(1));
        self.frame(Message::SnapshotBegin { version: 1 });
        self.frame(Message::SnapshotEnd { version: 1 });
    }

    fn frame(&mut self, msg: Message) {
        self.feed(Input::Frame {
            conn: ConnId(self.conn),
            msg,
        });
    }

    fn check(&self) {
        let mut n = 0;
        for ad in self.inst.paths_of("router-a") {
            n += 1;
            assert!(ad.path.len() <= MAX_PATH, "path over max_path held");
            assert!(!ad.path.iter().any(|h| h == "router-b"), "path through us held");
            assert_eq!(ad.sender(), "router-a", "path not ending at its peer held");
        }
        assert!(n <= MAX_ROUTES, "{n} paths held over max_routes");
        for o in &self.out {
            if let Output::Send { msg, .. } = o {
                assert_eq!(msg.validate(), Ok(()), "we sent an invalid message");
            }
        }
    }
}

/// Makes `msg` plausible: consistent origin keys, path ending at the
/// peer, the next sequence number.
fn plausible(msg: &mut Message, seq: &mut u64) {
    match msg {
        Message::Update(u) => {
            for ad in &mut u.routes {
                if ad.sender() != "router-a" && ad.path.len() < arpx::message::MAX_PATH_WIRE {
                    ad.path.push("router-a".into());
                }
                let n = if ad.origin_router == "router-a" {
                    1
                } else {
                    3 + (ad.origin_router.len() % 4) as u8
                };
                arpx::sign::sign(ad, &key(n));
            }
            *seq += 1;
            u.seq = *seq;
        }
        Message::Withdraw(w) => {
            *seq += 1;
            w.seq = *seq;
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut cfg = config(2);
    cfg.max_path = MAX_PATH;
    let mut rig = Rig {
        inst: Instance::new(cfg),
        now: 0,
        conn: 0,
        seq: 0,
        out: Vec::new(),
    };
    rig.feed(Input::ConfigurePeers(vec![PeerConfig {
        router_id: router(1),
        max_routes: MAX_ROUTES,
        export_tenants: Vec::new(),
        reflector_client: false,
        max_trust: 50,
        max_proof: arpx::message::OriginProof::Jwt,
        export: true,
        relay_client: false,
    }]));
    rig.feed(Input::UpsertLocal(local("echo-1")));
    rig.connect();
    let mut rest = data;
    while rest.len() >= 2 {
        let (op, len) = (rest[0], rest[1] as usize);
        let body = &rest[2..];
        let len = len.min(body.len());
        let (body, tail) = body.split_at(len);
        rest = tail;
        rig.now += u64::from(op >> 4) * 250;
        match (op >> 1) & 7 {
            1 => rig.feed(Input::Timer(Timer::Hold(ConnId(rig.conn)))),
            2 => rig.feed(Input::Timer(Timer::Graceful(router(1)))),
            3 => {
                rig.feed(Input::Disconnected {
                    conn: ConnId(rig.conn),
                    error: "fuzz".into(),
                });
                rig.connect();
            }
            4 => rig.feed(Input::WithdrawLocal("echo-1".into())),
            5 => rig.feed(Input::UpsertLocal(local("echo-1"))),
            6 => rig.feed(Input::Written {
                conn: ConnId(rig.conn),
            }),
            _ => {}
        }
        match arpx::frame::decode_body(body) {
            Ok(mut msg) => {
                if op & 1 == 1 {
                    plausible(&mut msg, &mut rig.seq);
                    if msg.validate().is_err() {
                        continue;
                    }
                }
                rig.frame(msg);
            }
            Err(error) => rig.feed(Input::FrameError {
                conn: ConnId(rig.conn),
                error,
            }),
        }
        if rig.inst.peers(rig.now)[0].state == arpx::instance::PeerState::Idle {
            rig.connect();
        }
    }
});

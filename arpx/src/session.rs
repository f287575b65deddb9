//! One ARPX session (one connection), sans-IO: the Open exchange, the
//! heartbeat and hold timers, per-direction sequence numbers and the
//! snapshot framing. It knows nothing of routes beyond carrying them: the
//! [`Instance`](crate::instance::Instance) applies what a message says and
//! decides what to send.
//!
//! Each received message either yields an [`Event`] or a [`Close`] the
//! session must end with; wire outputs (frames, timers) go straight into
//! the caller's output list.
//!
//! ```text
//!  Connected ──send Open──▶ OpenSent ──Open ok──▶ Open{rx: AwaitBegin}
//!                                                   │ SnapshotBegin{V}
//!                                                   ▼
//!                                           Open{rx: InSnapshot(V)}
//!                                                   │ SnapshotEnd{V}
//!                                                   ▼
//!                                           Open{rx: Synced} (deltas)
//! ```

use crate::frame::{batch_updates, batch_withdraws, TooLarge};
use crate::instance::{ConnId, Output, PeerState, Timer};
use crate::message::{Close, CloseCode, Message, Open, RouteAd, PROTOCOL_VERSION};

/// What a session needs of the instance's configuration.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub router_id: String,
    pub domain: String,
    pub boot_epoch: u64,
    pub heartbeat_ms: u32,
    pub miss_limit: u32,
    pub max_frame: usize,
}

impl SessionConfig {
    /// How long we wait for the peer's Open: the hold time the peer would
    /// get if it heartbeats as often as we do.
    fn open_wait_ms(&self) -> u64 {
        u64::from(self.heartbeat_ms).saturating_mul(u64::from(self.miss_limit))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rx {
    /// Opens exchanged, the peer's SnapshotBegin is next.
    AwaitBegin,
    InSnapshot(u64),
    Synced,
}

/// What a received message means for the instance.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// Nothing beyond the session (a heartbeat, a snapshot begin).
    None,
    /// The peer's Open passed the checks: send our snapshot.
    Established(Open),
    /// Advertisements to apply; `snapshot` while inside the peer's
    /// snapshot.
    Routes {
        routes: Vec<RouteAd>,
        snapshot: bool,
    },
    Withdrawn(Vec<String>),
    /// The peer's snapshot is complete: sweep and make its paths eligible.
    SnapshotEnd,
    /// The peer ended the session.
    PeerClosed(Close),
}

#[derive(Debug)]
pub struct Session {
    pub conn: ConnId,
    pub peer: String,
    pub outbound: bool,
    /// The peer's Open, once received.
    pub open: Option<Open>,
    /// When the current state began.
    pub since_ms: u64,
    rx: Rx,
    hold_ms: u64,
    last_rx_ms: u64,
    rx_seq: u64,
    tx_seq: u64,
    heartbeat_ms: u64,
}

fn close(code: CloseCode, reason: impl Into<String>) -> Close {
    Close::new(code, reason)
}

impl Session {
    /// A new connection: sends our Open and waits for the peer's.
    pub fn start(
        cfg: &SessionConfig,
        conn: ConnId,
        peer: String,
        outbound: bool,
        reflector_client: bool,
        now: u64,
        out: &mut Vec<Output>,
    ) -> Session {
        out.push(Output::Send {
            conn,
            msg: Message::Open(Open {
                version: PROTOCOL_VERSION,
                router_id: cfg.router_id.clone(),
                domain: cfg.domain.clone(),
                boot_epoch: cfg.boot_epoch,
                heartbeat_ms: cfg.heartbeat_ms,
                reflector_client,
            }),
        });
        out.push(Output::SetTimer {
            timer: Timer::OpenWait(conn),
            at_ms: now.saturating_add(cfg.open_wait_ms()),
        });
        Session {
            conn,
            peer,
            outbound,
            open: None,
            since_ms: now,
            rx: Rx::AwaitBegin,
            hold_ms: cfg.open_wait_ms(),
            last_rx_ms: now,
            rx_seq: 0,
            tx_seq: 0,
            heartbeat_ms: u64::from(cfg.heartbeat_ms),
        }
    }

    pub fn state(&self) -> PeerState {
        match (&self.open, self.rx) {
            (None, _) => PeerState::OpenSent,
            (Some(_), Rx::Synced) => PeerState::Established,
            (Some(_), _) => PeerState::Snapshot,
        }
    }

    /// Opens exchanged: we may send routes.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The peer's snapshot completed.
    pub fn is_synced(&self) -> bool {
        self.rx == Rx::Synced
    }

    /// One received message (already wire-validated).
    pub fn on_message(
        &mut self,
        cfg: &SessionConfig,
        now: u64,
        msg: Message,
        out: &mut Vec<Output>,
    ) -> Result<Event, Close> {
        self.last_rx_ms = now;
        if self.open.is_none() {
            return match msg {
                Message::Open(open) => self.on_open(cfg, now, open, out),
                Message::Close(c) => Ok(Event::PeerClosed(c)),
                other => Err(close(
                    CloseCode::UnexpectedMessage,
                    format!("{} before open", other.kind()),
                )),
            };
        }
        match msg {
            Message::Heartbeat => Ok(Event::None),
            Message::Open(_) => Err(close(CloseCode::UnexpectedMessage, "second open")),
            Message::SnapshotBegin { version } => match self.rx {
                Rx::AwaitBegin => {
                    self.rx = Rx::InSnapshot(version);
                    self.since_ms = now;
                    Ok(Event::None)
                }
                _ => Err(close(
                    CloseCode::UnexpectedMessage,
                    "second snapshot in one session",
                )),
            },
            Message::SnapshotEnd { version } => match self.rx {
                Rx::InSnapshot(begun) if begun == version => {
                    self.rx = Rx::Synced;
                    self.since_ms = now;
                    Ok(Event::SnapshotEnd)
                }
                Rx::InSnapshot(begun) => Err(close(
                    CloseCode::UnexpectedMessage,
                    format!("snapshot end {version} does not match begin {begun}"),
                )),
                _ => Err(close(
                    CloseCode::UnexpectedMessage,
                    "snapshot end without a snapshot",
                )),
            },
            Message::Update(u) => {
                if self.rx == Rx::AwaitBegin {
                    return Err(close(
                        CloseCode::UnexpectedMessage,
                        "update before the snapshot",
                    ));
                }
                self.check_seq(u.seq)?;
                Ok(Event::Routes {
                    routes: u.routes,
                    snapshot: matches!(self.rx, Rx::InSnapshot(_)),
                })
            }
            Message::Withdraw(w) => {
                match self.rx {
                    Rx::AwaitBegin => {
                        return Err(close(
                            CloseCode::UnexpectedMessage,
                            "withdraw before the snapshot",
                        ))
                    }
                    Rx::InSnapshot(_) => {
                        return Err(close(
                            CloseCode::UnexpectedMessage,
                            "withdraw inside a snapshot",
                        ))
                    }
                    Rx::Synced => {}
                }
                self.check_seq(w.seq)?;
                Ok(Event::Withdrawn(w.route_ids))
            }
            Message::Close(c) => Ok(Event::PeerClosed(c)),
        }
    }

    fn on_open(
        &mut self,
        cfg: &SessionConfig,
        now: u64,
        open: Open,
        out: &mut Vec<Output>,
    ) -> Result<Event, Close> {
        if open.version != PROTOCOL_VERSION {
            return Err(close(
                CloseCode::UnsupportedVersion,
                format!(
                    "version {} is not supported (this router speaks {PROTOCOL_VERSION})",
                    open.version
                ),
            ));
        }
        if open.router_id != self.peer {
            return Err(close(
                CloseCode::IdentityMismatch,
                format!(
                    "open names router {} but the certificate is router {}",
                    open.router_id, self.peer
                ),
            ));
        }
        self.hold_ms = u64::from(open.heartbeat_ms).saturating_mul(u64::from(cfg.miss_limit));
        self.since_ms = now;
        out.push(Output::CancelTimer(Timer::OpenWait(self.conn)));
        out.push(Output::SetTimer {
            timer: Timer::Heartbeat(self.conn),
            at_ms: now.saturating_add(self.heartbeat_ms),
        });
        out.push(Output::SetTimer {
            timer: Timer::Hold(self.conn),
            at_ms: now.saturating_add(self.hold_ms),
        });
        self.open = Some(open.clone());
        Ok(Event::Established(open))
    }

    fn check_seq(&mut self, seq: u64) -> Result<(), Close> {
        let want = self.rx_seq.saturating_add(1);
        if seq != want {
            return Err(close(
                CloseCode::SequenceGap,
                format!("sequence number {seq}, expected {want}"),
            ));
        }
        self.rx_seq = want;
        Ok(())
    }

    /// A timer of this connection fired.
    pub fn on_timer(
        &mut self,
        now: u64,
        timer: &Timer,
        out: &mut Vec<Output>,
    ) -> Result<(), Close> {
        match timer {
            Timer::Heartbeat(_) if self.open.is_some() => {
                out.push(Output::Send {
                    conn: self.conn,
                    msg: Message::Heartbeat,
                });
                out.push(Output::SetTimer {
                    timer: Timer::Heartbeat(self.conn),
                    at_ms: now.saturating_add(self.heartbeat_ms),
                });
                Ok(())
            }
            Timer::Hold(_) if self.open.is_some() => {
                let deadline = self.last_rx_ms.saturating_add(self.hold_ms);
                if now >= deadline {
                    return Err(close(
                        CloseCode::HoldExpired,
                        format!("no frame for {} ms", now.saturating_sub(self.last_rx_ms)),
                    ));
                }
                out.push(Output::SetTimer {
                    timer: Timer::Hold(self.conn),
                    at_ms: deadline,
                });
                Ok(())
            }
            Timer::OpenWait(_) if self.open.is_none() => Err(close(
                CloseCode::HoldExpired,
                format!("no open within {} ms", self.hold_ms),
            )),
            _ => Ok(()),
        }
    }

    fn send(&mut self, msgs: Vec<Message>, out: &mut Vec<Output>) {
        for msg in msgs {
            self.tx_seq += 1;
            out.push(Output::Send {
                conn: self.conn,
                msg,
            });
        }
    }

    /// Sends `routes` in frame-sized Updates; returns the number of
    /// messages and the routes too large for any frame (not sent).
    pub fn send_updates(
        &mut self,
        cfg: &SessionConfig,
        routes: Vec<RouteAd>,
        out: &mut Vec<Output>,
    ) -> (usize, Vec<(RouteAd, TooLarge)>) {
        if routes.is_empty() {
            return (0, Vec::new());
        }
        let (msgs, refused) = batch_updates(routes, self.tx_seq + 1, cfg.max_frame);
        let n = msgs.len();
        self.send(msgs, out);
        (n, refused)
    }

    /// Opens our snapshot; its routes follow as updates (the instance
    /// sends them a chunk at a time), then [`Session::end_snapshot`].
    pub fn begin_snapshot(&mut self, version: u64, out: &mut Vec<Output>) {
        out.push(Output::Send {
            conn: self.conn,
            msg: Message::SnapshotBegin { version },
        });
    }

    /// Closes our snapshot.
    pub fn end_snapshot(&mut self, version: u64, out: &mut Vec<Output>) {
        out.push(Output::Send {
            conn: self.conn,
            msg: Message::SnapshotEnd { version },
        });
    }

    /// Sends withdraws of `route_ids`; returns the number of messages.
    pub fn send_withdraws(
        &mut self,
        cfg: &SessionConfig,
        route_ids: Vec<String>,
        out: &mut Vec<Output>,
    ) -> usize {
        if route_ids.is_empty() {
            return 0;
        }
        // A route id is far below any frame bound (`arpx.max_frame` ≥ 1 KiB).
        let (msgs, _) = batch_withdraws(route_ids, self.tx_seq + 1, cfg.max_frame);
        let n = msgs.len();
        self.send(msgs, out);
        n
    }

    /// Ends the session with `close`: sends it, then disconnects.
    pub fn close(self, close: Close, out: &mut Vec<Output>) {
        out.push(Output::Send {
            conn: self.conn,
            msg: Message::Close(close),
        });
        out.push(Output::Disconnect { conn: self.conn });
        self.end(out);
    }

    /// Ends the session without a word (the transport is gone).
    pub fn end(self, out: &mut Vec<Output>) {
        out.push(Output::CancelTimer(Timer::Heartbeat(self.conn)));
        out.push(Output::CancelTimer(Timer::Hold(self.conn)));
        out.push(Output::CancelTimer(Timer::OpenWait(self.conn)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Update, Withdraw};
    use crate::testing::{ad, open};

    fn cfg() -> SessionConfig {
        SessionConfig {
            router_id: "router-b".into(),
            domain: String::new(),
            boot_epoch: 5,
            heartbeat_ms: 1000,
            miss_limit: 3,
            max_frame: crate::frame::DEFAULT_MAX_FRAME,
        }
    }

    fn started() -> (Session, Vec<Output>) {
        let mut out = Vec::new();
        let s = Session::start(
            &cfg(),
            ConnId(1),
            "router-a".into(),
            true,
            false,
            0,
            &mut out,
        );
        (s, out)
    }

    fn opened() -> Session {
        let (mut s, mut out) = started();
        let mut peer_open = open(1);
        if let Message::Open(o) = &mut peer_open {
            o.heartbeat_ms = 500;
        }
        s.on_message(&cfg(), 0, peer_open, &mut out).unwrap();
        s
    }

    fn code(r: Result<Event, Close>) -> CloseCode {
        r.unwrap_err().code
    }

    fn update(seq: u64) -> Message {
        Message::Update(Update {
            seq,
            routes: vec![ad("r1", &["router-a"])],
        })
    }

    #[test]
    fn start_sends_our_open_first() {
        let (s, out) = started();
        assert!(matches!(&out[0], Output::Send { msg: Message::Open(o), .. }
            if o.router_id == "router-b" && o.boot_epoch == 5 && o.heartbeat_ms == 1000));
        assert_eq!(s.state(), PeerState::OpenSent);
    }

    #[test]
    fn an_open_of_another_version_is_refused_as_unsupported() {
        let (mut s, mut out) = started();
        let mut o = open(1);
        if let Message::Open(o) = &mut o {
            o.version = crate::message::PROTOCOL_VERSION + 1;
        }
        assert_eq!(
            code(s.on_message(&cfg(), 0, o, &mut out)),
            CloseCode::UnsupportedVersion
        );
    }

    #[test]
    fn an_open_naming_another_router_than_the_certificate_is_refused() {
        let (mut s, mut out) = started();
        let r = s.on_message(&cfg(), 0, open(3), &mut out);
        let close = r.unwrap_err();
        assert_eq!(close.code, CloseCode::IdentityMismatch);
        assert!(close.reason.contains("router-c"), "{}", close.reason);
    }

    #[test]
    fn anything_before_the_open_is_unexpected() {
        let (mut s, mut out) = started();
        assert_eq!(
            code(s.on_message(&cfg(), 0, Message::Heartbeat, &mut out)),
            CloseCode::UnexpectedMessage
        );
    }

    #[test]
    fn the_hold_time_is_the_peers_heartbeat_times_our_miss_limit() {
        let (mut s, mut out) = started();
        let mut o = open(1);
        if let Message::Open(o) = &mut o {
            o.heartbeat_ms = 500;
        }
        out.clear();
        s.on_message(&cfg(), 100, o, &mut out).unwrap();
        assert!(out.contains(&Output::SetTimer {
            timer: Timer::Hold(ConnId(1)),
            at_ms: 1600
        }));
        assert!(out.contains(&Output::CancelTimer(Timer::OpenWait(ConnId(1)))));
    }

    #[test]
    fn any_frame_pushes_the_hold_deadline_without_rearming_per_frame() {
        let mut s = opened();
        let mut out = Vec::new();
        s.on_message(&cfg(), 1000, Message::Heartbeat, &mut out)
            .unwrap();
        assert!(out.is_empty(), "a frame arms nothing");
        s.on_timer(1500, &Timer::Hold(ConnId(1)), &mut out).unwrap();
        assert_eq!(
            out,
            vec![Output::SetTimer {
                timer: Timer::Hold(ConnId(1)),
                at_ms: 2500
            }]
        );
        let close = s
            .on_timer(2500, &Timer::Hold(ConnId(1)), &mut out)
            .unwrap_err();
        assert_eq!(close.code, CloseCode::HoldExpired);
    }

    #[test]
    fn the_heartbeat_timer_sends_a_heartbeat_and_rearms() {
        let mut s = opened();
        let mut out = Vec::new();
        s.on_timer(1000, &Timer::Heartbeat(ConnId(1)), &mut out)
            .unwrap();
        assert_eq!(
            out,
            vec![
                Output::Send {
                    conn: ConnId(1),
                    msg: Message::Heartbeat
                },
                Output::SetTimer {
                    timer: Timer::Heartbeat(ConnId(1)),
                    at_ms: 2000
                }
            ]
        );
    }

    #[test]
    fn an_overdue_open_ends_the_session() {
        let (mut s, mut out) = started();
        let close = s
            .on_timer(3000, &Timer::OpenWait(ConnId(1)), &mut out)
            .unwrap_err();
        assert_eq!(close.code, CloseCode::HoldExpired);
    }

    #[test]
    fn updates_need_the_snapshot_begin_first() {
        let mut s = opened();
        let mut out = Vec::new();
        assert_eq!(
            code(s.on_message(&cfg(), 1, update(1), &mut out)),
            CloseCode::UnexpectedMessage
        );
    }

    #[test]
    fn a_withdraw_inside_a_snapshot_is_unexpected() {
        let mut s = opened();
        let mut out = Vec::new();
        s.on_message(&cfg(), 1, Message::SnapshotBegin { version: 9 }, &mut out)
            .unwrap();
        let w = Message::Withdraw(Withdraw {
            seq: 1,
            route_ids: vec!["r1".into()],
        });
        assert_eq!(
            code(s.on_message(&cfg(), 1, w, &mut out)),
            CloseCode::UnexpectedMessage
        );
    }

    #[test]
    fn a_snapshot_end_must_match_its_begin() {
        let mut s = opened();
        let mut out = Vec::new();
        s.on_message(&cfg(), 1, Message::SnapshotBegin { version: 9 }, &mut out)
            .unwrap();
        let r = s.on_message(&cfg(), 1, Message::SnapshotEnd { version: 8 }, &mut out);
        assert_eq!(code(r), CloseCode::UnexpectedMessage);
    }

    #[test]
    fn sequence_numbers_run_from_the_snapshot_into_the_deltas_and_a_gap_closes() {
        let mut s = opened();
        let mut out = Vec::new();
        s.on_message(&cfg(), 1, Message::SnapshotBegin { version: 9 }, &mut out)
            .unwrap();
        let ev = s.on_message(&cfg(), 1, update(1), &mut out).unwrap();
        assert!(matches!(ev, Event::Routes { snapshot: true, .. }));
        let ev = s
            .on_message(&cfg(), 1, Message::SnapshotEnd { version: 9 }, &mut out)
            .unwrap();
        assert_eq!(ev, Event::SnapshotEnd);
        assert!(s.is_synced());
        let ev = s.on_message(&cfg(), 1, update(2), &mut out).unwrap();
        assert!(matches!(
            ev,
            Event::Routes {
                snapshot: false,
                ..
            }
        ));
        let close = s.on_message(&cfg(), 1, update(4), &mut out).unwrap_err();
        assert_eq!(close.code, CloseCode::SequenceGap);
        assert_eq!(close.reason, "sequence number 4, expected 3");
    }

    #[test]
    fn our_sequence_numbers_start_at_one_and_skip_snapshot_markers() {
        let mut s = opened();
        let mut out = Vec::new();
        s.begin_snapshot(3, &mut out);
        s.send_updates(&cfg(), vec![ad("r1", &["router-b"])], &mut out);
        s.end_snapshot(3, &mut out);
        s.send_withdraws(&cfg(), vec!["r1".into()], &mut out);
        let seqs: Vec<u64> = out
            .iter()
            .filter_map(|o| match o {
                Output::Send {
                    msg: Message::Update(u),
                    ..
                } => Some(u.seq),
                Output::Send {
                    msg: Message::Withdraw(w),
                    ..
                } => Some(w.seq),
                _ => None,
            })
            .collect();
        assert_eq!(seqs, vec![1, 2]);
    }

    #[test]
    fn a_close_in_any_state_is_the_peers_word() {
        let (mut s, mut out) = started();
        let c = Close::new(CloseCode::Collision, "lost");
        assert_eq!(
            s.on_message(&cfg(), 0, Message::Close(c.clone()), &mut out),
            Ok(Event::PeerClosed(c))
        );
    }
}

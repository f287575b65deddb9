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
                        format!("no frame for {} ms", now - self.last_rx_ms),
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

    /// Sends our snapshot: Begin{version}, the routes, End{version}.
    pub fn send_snapshot(
        &mut self,
        cfg: &SessionConfig,
        version: u64,
        routes: Vec<RouteAd>,
        out: &mut Vec<Output>,
    ) -> (usize, Vec<(RouteAd, TooLarge)>) {
        out.push(Output::Send {
            conn: self.conn,
            msg: Message::SnapshotBegin { version },
        });
        let sent = self.send_updates(cfg, routes, out);
        out.push(Output::Send {
            conn: self.conn,
            msg: Message::SnapshotEnd { version },
        });
        sent
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

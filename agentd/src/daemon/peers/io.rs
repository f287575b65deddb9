//! The ARPX driver's I/O as data. [`super::Peers`] decides on the
//! daemon's loop and only says what it wants done: listen, dial, serve a
//! verified session, cut or release a connection. The daemon's effect
//! driver hands each [`PeerIo`] to the [`PeerTasks`] it owns, which
//! binds sockets and spawns the tasks of [`super::tasks`] and keeps their
//! handles. So the loop never binds, spawns or aborts anything itself,
//! and a test of the loop reads these requests back without a runtime.
//!
//! Everything the tasks find out comes back the usual way: a
//! [`PeerEvent`] into the loop's input channel, or frames into the
//! connection's inbox queue.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use arpx::instance::ConnId;
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinHandle};

use super::inbox::InboxSender;
use super::tasks::{self, PeerEvent, Stream, WriterEnd};
use super::tls::TlsContext;
use crate::daemon::input::Input;

/// What the ARPX driver asks to be done outside the loop.
pub enum PeerIo {
    /// Bind `addr` (replacing any listener) and accept; the outcome comes
    /// back as [`PeerEvent::Listening`] with `serial`.
    Listen {
        serial: u64,
        addr: SocketAddr,
        tls: watch::Receiver<Arc<TlsContext>>,
    },
    /// Close the listener.
    StopListening,
    /// One dial attempt (replacing any running for `peer`); `relay`: to
    /// relay number `relay` of `relay.server`, by address.
    Dial {
        peer: String,
        relay: Option<usize>,
        address: String,
        port: u16,
        tls: Arc<TlsContext>,
    },
    /// Abandon `peer`'s dial, if one runs.
    StopDial { peer: String },
    /// Run the reader and writer of a verified session.
    Serve(Box<Serve>),
    /// End a connection at once, nothing flushed.
    Cut { conn: ConnId },
    /// The driver queued `conn`'s Close: its writer flushes and ends by
    /// itself. Kept only so the daemon's exit can wait for it.
    Release { conn: ConnId },
}

/// A verified session to serve.
#[derive(Debug)]
pub struct Serve {
    pub conn: ConnId,
    pub stream: Stream,
    /// Bytes the handshake read past TLS.
    pub prefix: Vec<u8>,
    pub max_frame: usize,
    pub inbox: InboxSender,
    pub writer: WriterEnd,
}

impl fmt::Debug for PeerIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerIo::Listen { serial, addr, .. } => write!(f, "Listen({serial}: {addr})"),
            PeerIo::StopListening => write!(f, "StopListening"),
            PeerIo::Dial {
                peer,
                address,
                port,
                ..
            } => write!(f, "Dial({peer} at {address} port {port})"),
            PeerIo::StopDial { peer } => write!(f, "StopDial({peer})"),
            PeerIo::Serve(s) => write!(f, "Serve({})", s.conn.0),
            PeerIo::Cut { conn } => write!(f, "Cut({})", conn.0),
            PeerIo::Release { conn } => write!(f, "Release({})", conn.0),
        }
    }
}

/// The running tasks of the ARPX driver, by what they serve. Owned by
/// the daemon's effect driver, next to the loop.
#[derive(Debug, Default)]
pub struct PeerTasks {
    listener: Option<AbortHandle>,
    dials: HashMap<String, AbortHandle>,
    /// Per connection: its reader, and its writer (which ends the reader).
    conns: HashMap<ConnId, (AbortHandle, JoinHandle<()>)>,
    /// Writers flushing their Close (finished ones are pruned as new
    /// ones come).
    closing: Vec<JoinHandle<()>>,
}

impl PeerTasks {
    /// Carries out one request; returns at once (a bind is one system
    /// call, its outcome is reported like every other).
    pub fn perform(&mut self, io: PeerIo, inputs: &mpsc::Sender<Input>) {
        match io {
            PeerIo::Listen { serial, addr, tls } => {
                if let Some(old) = self.listener.take() {
                    old.abort();
                }
                let bound = match tasks::spawn_listener(serial, addr, tls, inputs.clone()) {
                    Ok((local, task)) => {
                        self.listener = Some(task);
                        Ok(local)
                    }
                    Err(e) => Err(e.to_string()),
                };
                report(inputs, PeerEvent::Listening { serial, bound });
            }
            PeerIo::StopListening => {
                if let Some(old) = self.listener.take() {
                    old.abort();
                }
            }
            PeerIo::Dial {
                peer,
                relay,
                address,
                port,
                tls,
            } => {
                let task =
                    tasks::spawn_dial(peer.clone(), relay, address, port, tls, inputs.clone());
                if let Some(old) = self.dials.insert(peer, task) {
                    old.abort();
                }
            }
            PeerIo::StopDial { peer } => {
                if let Some(task) = self.dials.remove(&peer) {
                    task.abort();
                }
            }
            PeerIo::Serve(s) => {
                let Serve {
                    conn,
                    stream,
                    prefix,
                    max_frame,
                    inbox,
                    writer,
                } = *s;
                let tasks = tasks::spawn_connection(stream, prefix, max_frame, inbox, writer);
                if let Some((reader, writer)) = self.conns.insert(conn, tasks) {
                    // Connection numbers are never reused; cut rather
                    // than leak if one ever were.
                    reader.abort();
                    writer.abort();
                }
            }
            PeerIo::Cut { conn } => {
                if let Some((reader, writer)) = self.conns.remove(&conn) {
                    reader.abort();
                    writer.abort();
                }
            }
            PeerIo::Release { conn } => {
                if let Some((_, writer)) = self.conns.remove(&conn) {
                    self.closing.retain(|w| !w.is_finished());
                    self.closing.push(writer);
                }
            }
        }
    }

    /// At exit, after the driver stopped: every connection writer still
    /// running (flushing its Close), for a bounded wait. Stops the rest.
    pub fn finish(&mut self) -> Vec<JoinHandle<()>> {
        if let Some(l) = self.listener.take() {
            l.abort();
        }
        for (_, d) in self.dials.drain() {
            d.abort();
        }
        let mut writers = std::mem::take(&mut self.closing);
        writers.extend(self.conns.drain().map(|(_, (_, writer))| writer));
        writers
    }
}

/// Sends a task's outcome into the loop without blocking the caller.
fn report(inputs: &mpsc::Sender<Input>, ev: PeerEvent) {
    let inputs = inputs.clone();
    tokio::spawn(async move {
        let _ = inputs.send(Input::Peer(ev)).await;
    });
}

//! Pacing of a listener whose `accept()` fails.
//!
//! When the process is out of file descriptors (`EMFILE`, or the system
//! out of them, `ENFILE`) or the kernel out of socket memory, the
//! connection stays in the kernel's accept queue and the listening socket
//! stays readable: a loop that retries at once spins on one core until a
//! descriptor frees up, starving the very work that would free one. A
//! listener therefore pauses after such an error, the pause doubling with
//! every failure in a row up to [`MAX_PAUSE`], and starts over at the
//! first accept that works.
//!
//! Errors that concern one connection only (it was reset or aborted
//! while in the queue, a signal interrupted the call) are retried at once:
//! the next connection in the queue is unaffected.
//!
//! agentd's ARPX listener and every listener of agent-gw use the one
//! [`Pacer`]; the policy ([`AcceptBackoff`]) is plain data, tested
//! without sockets.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// The pause after the first failure of a streak.
pub const FIRST_PAUSE: Duration = Duration::from_millis(25);
/// The longest pause: a listener out of descriptors tries again at least
/// this often, so it recovers within this long once one frees up.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);

/// What to do after `accept()` failed with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterError {
    /// The error was about one queued connection: accept again now.
    Retry,
    /// A shortage (descriptors, memory) or an error not known to be
    /// harmless: wait this long before the next accept.
    Pause(Duration),
}

/// How an error of `accept()` is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// About one connection; the listener is fine.
    OneConnection,
    /// The process or system ran short of something that frees up later.
    Shortage,
    /// Anything else (the listener may be broken).
    Other,
}

/// Sorts an `accept()` error.
pub fn classify(e: &io::Error) -> ErrorKind {
    use io::ErrorKind::*;
    if matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    ) {
        return ErrorKind::Shortage;
    }
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock | TimedOut
    ) || matches!(e.raw_os_error(), Some(libc::EPROTO | libc::EPERM))
    {
        // EPROTO: a protocol error on the queued connection (Linux
        // accept(2) "Error handling"); EPERM: a firewall rule refused it.
        return ErrorKind::OneConnection;
    }
    ErrorKind::Other
}

/// The backoff policy: how long to pause after each error of a streak.
/// Sans-IO: the caller sleeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcceptBackoff {
    /// Errors that paused since the last accept that worked.
    streak: u32,
}

impl AcceptBackoff {
    pub fn new() -> AcceptBackoff {
        AcceptBackoff::default()
    }

    /// An accept failed with `kind`: what to do next.
    pub fn failed(&mut self, kind: ErrorKind) -> AfterError {
        if kind == ErrorKind::OneConnection {
            return AfterError::Retry;
        }
        let pause = FIRST_PAUSE
            .saturating_mul(1u32 << self.streak.min(16))
            .min(MAX_PAUSE);
        self.streak = self.streak.saturating_add(1);
        AfterError::Pause(pause)
    }

    /// An accept worked. Returns how many paused errors the streak that
    /// it ends had (0: there was none).
    pub fn accepted(&mut self) -> u32 {
        std::mem::take(&mut self.streak)
    }

    /// Paused errors in the current streak.
    pub fn streak(&self) -> u32 {
        self.streak
    }
}

/// A listener's accept loop step with the backoff applied and logged:
/// the first error of a streak is logged (naming the listener), the rest
/// are counted, and the accept that ends the streak says how many there
/// were.
#[derive(Debug)]
pub struct Pacer {
    /// Names the listener in log lines ("ARPX listener", "LAN listener").
    what: &'static str,
    backoff: AcceptBackoff,
}

impl Pacer {
    pub fn new(what: &'static str) -> Pacer {
        Pacer {
            what,
            backoff: AcceptBackoff::new(),
        }
    }

    /// Accepts the next connection. Errors about one connection are
    /// retried at once; shortages pause (see the module) and are retried.
    /// Any other error is returned after its pause, so a caller that
    /// keeps going cannot spin either.
    pub async fn accept(&mut self, listener: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
        loop {
            match listener.accept().await {
                Ok(x) => {
                    let failures = self.backoff.accepted();
                    if failures > 0 {
                        crate::log_notice!(
                            "{}: accepting again after {failures} failed accept(s)",
                            self.what
                        );
                    }
                    return Ok(x);
                }
                Err(e) => {
                    let kind = classify(&e);
                    match self.backoff.failed(kind) {
                        AfterError::Retry => continue,
                        AfterError::Pause(pause) => {
                            if self.backoff.streak() == 1 {
                                crate::log_warn!(
                                    "{}: accept failed: {e}; pausing accepts (up to {} ms each) until it works again",
                                    self.what,
                                    MAX_PAUSE.as_millis()
                                );
                            }
                            tokio::time::sleep(pause).await;
                            if kind == ErrorKind::Other {
                                return Err(e);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(code: i32) -> io::Error {
        io::Error::from_raw_os_error(code)
    }

    #[test]
    fn descriptor_and_memory_shortages_pause_and_one_bad_connection_does_not() {
        for code in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
            assert_eq!(classify(&os(code)), ErrorKind::Shortage, "{code}");
        }
        for code in [libc::ECONNABORTED, libc::EINTR, libc::EPROTO, libc::EPERM] {
            assert_eq!(classify(&os(code)), ErrorKind::OneConnection, "{code}");
        }
        assert_eq!(classify(&os(libc::EBADF)), ErrorKind::Other);
        assert_eq!(classify(&os(libc::EINVAL)), ErrorKind::Other);
    }

    #[test]
    fn pauses_double_up_to_the_cap_and_start_over_after_an_accept() {
        let mut b = AcceptBackoff::new();
        let pauses: Vec<AfterError> = (0..8).map(|_| b.failed(ErrorKind::Shortage)).collect();
        let ms: Vec<u128> = pauses
            .iter()
            .map(|p| match p {
                AfterError::Pause(d) => d.as_millis(),
                AfterError::Retry => panic!("a shortage must pause"),
            })
            .collect();
        assert_eq!(ms, [25, 50, 100, 200, 400, 800, 1000, 1000]);
        // Many more failures never overflow past the cap.
        for _ in 0..100 {
            assert_eq!(b.failed(ErrorKind::Other), AfterError::Pause(MAX_PAUSE));
        }
        assert_eq!(b.accepted(), 108);
        assert_eq!(b.accepted(), 0);
        assert_eq!(
            b.failed(ErrorKind::Shortage),
            AfterError::Pause(FIRST_PAUSE)
        );
    }

    #[test]
    fn an_error_about_one_connection_neither_pauses_nor_counts() {
        let mut b = AcceptBackoff::new();
        assert_eq!(
            b.failed(ErrorKind::Shortage),
            AfterError::Pause(FIRST_PAUSE)
        );
        assert_eq!(b.failed(ErrorKind::OneConnection), AfterError::Retry);
        assert_eq!(b.streak(), 1);
        assert_eq!(
            b.failed(ErrorKind::Shortage),
            AfterError::Pause(FIRST_PAUSE * 2)
        );
    }

    /// A real listener whose socket was shut down under it: accept(2)
    /// then fails with EINVAL at once, every time (an `Other` error). The
    /// pacer hands it back only after its pause, doubling, so a caller
    /// that keeps going does not spin. (Lower bounds only: a slow machine
    /// can only make the pauses look longer.)
    #[tokio::test]
    async fn an_unknown_error_comes_back_only_after_a_growing_pause() {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let listener = TcpListener::from_std(std_listener).unwrap();
        // Shut the socket down under tokio: accept then fails with EINVAL.
        {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid descriptor; shutdown does not close it.
            unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
        }
        let mut pacer = Pacer::new("test listener");
        let start = std::time::Instant::now();
        let err = pacer.accept(&listener).await.unwrap_err();
        assert_eq!(classify(&err), ErrorKind::Other, "{err}");
        assert!(start.elapsed() >= FIRST_PAUSE);
        let err = pacer.accept(&listener).await.unwrap_err();
        assert_eq!(classify(&err), ErrorKind::Other, "{err}");
        assert!(start.elapsed() >= FIRST_PAUSE * 3);
        assert_eq!(pacer.backoff.streak(), 2);
    }
}

//! Host-name lookups of handler endpoints, bounded in time and in how
//! many run at once.
//!
//! A lookup is a blocking `getaddrinfo` on a thread of the runtime's
//! blocking pool, and a timeout cannot stop it: a resolver that does not
//! answer would cost a thread per new connection for as long as it keeps
//! them waiting. So each lookup takes a slot first (waiting for one counts
//! against its time bound), the slot moves into the blocking thread and
//! comes back when `getaddrinfo` returns, not when the caller stops
//! waiting. A literal address never gets here.

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use agentd::endpoint::{Endpoint, Host};
use tokio::sync::Semaphore;

use crate::forward::target::ResolveError;

/// Most host-name lookups running at once, so most threads of the
/// blocking pool they hold.
pub const MAX_LOOKUPS: usize = 4;

/// The lookup slots. A slot moves into the blocking thread and comes back
/// when `getaddrinfo` returns, not when the caller stops waiting: a lookup
/// that outlived its caller's timeout still holds it.
static LOOKUPS: Semaphore = Semaphore::const_new(MAX_LOOKUPS);

/// A blocking host-name lookup (the system resolver; tests put their own).
pub type LookupFn = fn(&str, u16) -> io::Result<Vec<SocketAddr>>;

fn system_lookup(name: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    Ok((name, port).to_socket_addrs()?.collect())
}

/// Resolves `ep`'s host with the system resolver in the process's
/// lookup slots, within `within`.
pub async fn resolve(ep: &Endpoint, within: Duration) -> Result<Vec<IpAddr>, ResolveError> {
    resolve_with(ep, &LOOKUPS, system_lookup, within).await
}

/// [`resolve`] with its slots, lookup and time bound given. Waiting for a
/// slot counts against `within`.
pub async fn resolve_with(
    ep: &Endpoint,
    slots: &'static Semaphore,
    lookup: LookupFn,
    within: Duration,
) -> Result<Vec<IpAddr>, ResolveError> {
    let name = match &ep.host {
        Host::Ip(ip) => return Ok(vec![*ip]),
        Host::Name(name) => name.to_string(),
    };
    let port = ep.port;
    let run = async move {
        let slot = slots
            .acquire()
            .await
            .map_err(|_| io::Error::other("the resolver is shut down"))?;
        tokio::task::spawn_blocking(move || {
            let r = lookup(&name, port);
            drop(slot);
            r
        })
        .await
        .map_err(io::Error::other)?
    };
    match tokio::time::timeout(within, run).await {
        Ok(Ok(addrs)) => Ok(addrs.iter().map(SocketAddr::ip).collect()),
        Ok(Err(e)) => Err(ResolveError::Lookup(e.to_string())),
        Err(_) => Err(ResolveError::Lookup(format!(
            "no answer within {} ms",
            within.as_millis()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::{Condvar, Mutex};

    /// A resolver that answers only once the test opens its gate; it
    /// counts the lookups that reached it and the most running at once.
    struct Gate {
        entered: AtomicUsize,
        running: AtomicUsize,
        most: AtomicUsize,
        open: Mutex<bool>,
        opened: Condvar,
    }

    impl Gate {
        const fn new() -> Gate {
            Gate {
                entered: AtomicUsize::new(0),
                running: AtomicUsize::new(0),
                most: AtomicUsize::new(0),
                open: Mutex::new(false),
                opened: Condvar::new(),
            }
        }

        fn lookup(&self) -> io::Result<Vec<SocketAddr>> {
            self.entered.fetch_add(1, SeqCst);
            let now = self.running.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.opened.wait(open).unwrap();
            }
            drop(open);
            self.running.fetch_sub(1, SeqCst);
            Ok(vec!["192.0.2.7:8080".parse().unwrap()])
        }

        fn open(&self) {
            *self.open.lock().unwrap() = true;
            self.opened.notify_all();
        }

        fn entered(&self) -> usize {
            self.entered.load(SeqCst)
        }
    }

    /// Opens the gate when dropped: a failing test must not leave
    /// threads waiting on it (the runtime waits for them on drop).
    struct OpenOnDrop(&'static Gate);

    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.0.open();
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Polls `cond` (bounded: 5 s, or the test fails).
    async fn wait_until(what: &str, cond: impl Fn() -> bool) {
        for _ in 0..5000 {
            if cond() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("{what}");
    }

    fn named() -> Endpoint {
        Endpoint::parse("http://handler.lan:8080/x").unwrap()
    }

    fn answer() -> Result<Vec<IpAddr>, ResolveError> {
        Ok(vec!["192.0.2.7".parse().unwrap()])
    }

    static GATE_MANY: Gate = Gate::new();
    static SLOTS_MANY: Semaphore = Semaphore::const_new(2);
    fn lookup_many(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
        GATE_MANY.lookup()
    }

    #[test]
    fn a_resolver_that_does_not_answer_holds_only_the_slots_threads() {
        rt().block_on(async {
            let _open = OpenOnDrop(&GATE_MANY);
            let calls: Vec<_> = (0..20)
                .map(|_| {
                    tokio::spawn(async {
                        resolve_with(&named(), &SLOTS_MANY, lookup_many, Duration::from_secs(30))
                            .await
                    })
                })
                .collect();
            wait_until("two lookups to start", || GATE_MANY.entered() >= 2).await;
            // Every caller has run up to its slot by now: the other
            // eighteen wait for one, not on a thread.
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
            assert_eq!(GATE_MANY.entered(), 2);
            GATE_MANY.open();
            for c in calls {
                assert_eq!(c.await.unwrap(), answer());
            }
            assert_eq!(GATE_MANY.entered(), 20);
            assert_eq!(GATE_MANY.most.load(SeqCst), 2);
        });
    }

    static GATE_LATE: Gate = Gate::new();
    static SLOTS_LATE: Semaphore = Semaphore::const_new(1);
    fn lookup_late(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
        GATE_LATE.lookup()
    }

    #[test]
    fn a_lookup_whose_caller_gave_up_keeps_its_slot_until_it_returns() {
        rt().block_on(async {
            let _open = OpenOnDrop(&GATE_LATE);
            let short = Duration::from_millis(50);
            let first = resolve_with(&named(), &SLOTS_LATE, lookup_late, short).await;
            assert_eq!(
                first,
                Err(ResolveError::Lookup("no answer within 50 ms".into()))
            );
            wait_until("the first lookup to start", || GATE_LATE.entered() == 1).await;
            // Its thread still runs: the next caller starts no second
            // one and gives up in its own time.
            let second = resolve_with(&named(), &SLOTS_LATE, lookup_late, short).await;
            assert!(matches!(second, Err(ResolveError::Lookup(_))), "{second:?}");
            assert_eq!(GATE_LATE.entered(), 1);
            GATE_LATE.open();
            let third =
                resolve_with(&named(), &SLOTS_LATE, lookup_late, Duration::from_secs(5)).await;
            assert_eq!(third, answer());
            assert_eq!(GATE_LATE.entered(), 2);
        });
    }

    static SLOTS_NONE: Semaphore = Semaphore::const_new(1);
    fn never(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
        panic!("a literal address reached the resolver")
    }

    #[test]
    fn a_literal_address_never_reaches_the_resolver() {
        rt().block_on(async {
            for (url, ip) in [
                ("http://192.0.2.9:80/x", "192.0.2.9"),
                ("http://[2001:db8::9]:80/x", "2001:db8::9"),
            ] {
                let ep = Endpoint::parse(url).unwrap();
                let got = resolve_with(&ep, &SLOTS_NONE, never, Duration::from_secs(1)).await;
                assert_eq!(got, Ok(vec![ip.parse().unwrap()]), "{url}");
            }
        });
    }
}

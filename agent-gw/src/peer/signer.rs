//! The sender's batch signer: the calls that leave for one router in one
//! event-loop turn share one Ed25519 signature (see `assertion`).
//!
//! A call queues its claims and waits; the first call of a turn spawns
//! the signing task, which runs after the tasks already woken in that
//! turn (the event loop is single-threaded and runs them in order), so
//! everything they queued is signed together. No timer: at concurrency 1
//! a batch is one call, signed as soon as the event loop gets to it;
//! under load (the last batch had several calls) the signer waits one
//! more event-loop turn, and the batch is whatever arrived by then.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use edkey::SigningKey;
use tokio::sync::oneshot;

use crate::peer::assertion::{sign_batch, Assertion, Claims};
use crate::peer::merkle::MAX_BATCH;

#[derive(Debug, Default)]
pub struct BatchSigner {
    queue: RefCell<Vec<Pending>>,
    scheduled: Cell<bool>,
    /// The last turn signed more than one call: the sender is busy.
    loaded: Cell<bool>,
    /// Batches signed and assertions issued (for the benchmark's
    /// "calls per signature").
    pub batches: Cell<u64>,
    pub signed: Cell<u64>,
}

#[derive(Debug)]
struct Pending {
    claims: Claims,
    ttl_ms: u64,
    done: oneshot::Sender<Assertion>,
}

impl BatchSigner {
    /// `claims` signed in this turn's batch to its target, valid for
    /// `ttl_ms` from the moment of signing (source and expiry are set by
    /// the signer). `None` only if the signer went away.
    pub async fn sign(
        self: &Rc<Self>,
        claims: Claims,
        ttl_ms: u64,
        key: Rc<SigningKey>,
        router_id: Rc<str>,
    ) -> Option<Assertion> {
        let (done, rx) = oneshot::channel();
        self.queue.borrow_mut().push(Pending {
            claims,
            ttl_ms,
            done,
        });
        if !self.scheduled.replace(true) {
            let me = self.clone();
            let gather = self.loaded.get();
            tokio::task::spawn_local(async move {
                if gather {
                    // Under load, one more turn of the event loop (the I/O
                    // driver is polled before a yielded task runs again)
                    // lets the calls whose bytes are already here join
                    // this batch: measured 5 → 7 calls per signature at
                    // concurrency 16. Idle (the last batch was one call),
                    // the signature is not held back.
                    tokio::task::yield_now().await;
                }
                me.run(&key, &router_id)
            });
        }
        rx.await.ok()
    }

    /// Signs everything queued, one batch per (target, ttl), at most
    /// [`MAX_BATCH`] calls each.
    fn run(&self, key: &SigningKey, router_id: &str) {
        self.scheduled.set(false);
        let mut queue = std::mem::take(&mut *self.queue.borrow_mut());
        self.loaded.set(queue.len() > 1);
        let now = crate::peer::outbound::unix_ms();
        while !queue.is_empty() {
            let (target, ttl) = (queue[0].claims.target.clone(), queue[0].ttl_ms);
            let (mut batch, rest): (Vec<Pending>, Vec<Pending>) = queue
                .into_iter()
                .partition(|p| p.claims.target == target && p.ttl_ms == ttl);
            queue = rest;
            while !batch.is_empty() {
                let tail = batch.split_off(batch.len().min(MAX_BATCH));
                let (claims, senders): (Vec<Claims>, Vec<_>) =
                    batch.into_iter().map(|p| (p.claims, p.done)).unzip();
                let signed = sign_batch(key, router_id, &target, now.saturating_add(ttl), claims);
                self.batches.set(self.batches.get() + 1);
                self.signed.set(self.signed.get() + signed.len() as u64);
                for (a, s) in signed.into_iter().zip(senders) {
                    // A caller that hung up meanwhile no longer wants it.
                    let _ = s.send(a);
                }
                batch = tail;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::assertion::{verify, Expect, ReplayCache, RootCache};
    use std::future::{ready, Future};
    use tokio::task::{spawn_local, JoinHandle};

    fn claims(target: &str, nonce: u8) -> Claims {
        Claims {
            source: String::new(),
            target: target.into(),
            origin: "router-c".into(),
            caller: "agent://lab/caller".into(),
            tenant: "lab".into(),
            capability: "demo.echo".into(),
            body_sha256: [7; 32],
            nonce: [nonce; 16],
            expires_ms: 0,
        }
    }

    /// Router C's signer, as its calls use it.
    struct Sender {
        signer: Rc<BatchSigner>,
        key: Rc<SigningKey>,
        id: Rc<str>,
    }

    impl Sender {
        fn new() -> Sender {
            Sender {
                signer: Rc::new(BatchSigner::default()),
                key: Rc::new(SigningKey::from_bytes(&[3; 32])),
                id: "router-c".into(),
            }
        }

        /// A call to `target` in a task of its own, asking for its
        /// assertion once `arrived` is ready.
        fn call(
            &self,
            target: &'static str,
            nonce: u8,
            arrived: impl Future<Output = ()> + 'static,
        ) -> JoinHandle<Assertion> {
            let (s, k, id) = (self.signer.clone(), self.key.clone(), self.id.clone());
            spawn_local(async move {
                arrived.await;
                s.sign(claims(target, nonce), 30_000, k, id)
                    .await
                    .expect("signed")
            })
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn calls_of_one_turn_share_a_signature_per_target_and_each_verifies() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let c = Sender::new();
                let calls = [
                    ("router-b", 1),
                    ("router-b", 2),
                    ("router-d", 3),
                    ("router-b", 4),
                ];
                let handles: Vec<_> = calls
                    .iter()
                    .map(|&(t, n)| c.call(t, n, ready(())))
                    .collect();
                let mut got = Vec::new();
                for h in handles {
                    got.push(h.await.unwrap());
                }
                assert_eq!(c.signer.batches.get(), 2, "one batch per target");
                assert_eq!(c.signer.signed.get(), 4);
                let b: Vec<_> = got
                    .iter()
                    .filter(|a| a.claims.target == "router-b")
                    .collect();
                assert!(b.iter().all(|a| a.proof.size == 3));
                let vk = c.key.verifying_key();
                let now = crate::peer::outbound::unix_ms();
                let (mut roots, mut replay) = (RootCache::new(8), ReplayCache::new(8));
                for a in &got {
                    assert_eq!(a.claims.source, "router-c");
                    let e = Expect {
                        peer: "router-c",
                        peer_key: &vk,
                        us: &a.claims.target,
                        capability: "demo.echo",
                        body_sha256: Some([7; 32]),
                        now_ms: now,
                        ttl_ms: 30_000,
                        skew_ms: 1000,
                    };
                    verify(a, &e, &mut roots, &mut replay).unwrap();
                }
                // The batch of three is kept; a batch of one (router-d's)
                // has no other call to carry its root and is not.
                assert_eq!(roots.len(), 1, "one verified root per batch of several");
                assert_eq!(roots.checked(), 2, "one verification per batch");
                // The next turn is a new batch.
                let a = c.call("router-b", 9, ready(())).await.unwrap();
                assert_eq!(a.proof.size, 1);
                assert_eq!(c.signer.batches.get(), 3);
            })
            .await;
    }

    /// Under load the signer waits one more turn, so a call whose bytes
    /// are already here (its task woken by the I/O driver) still joins;
    /// idle, it does not wait.
    #[tokio::test(flavor = "current_thread")]
    async fn a_busy_signer_gathers_calls_already_arrived_and_an_idle_one_does_not() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let c = Sender::new();
                // A call now, and one whose request is in a socket the
                // event loop has not polled yet: the size of the batch
                // the first call got.
                let round = || async {
                    let (mut tx, mut rx) = tokio::net::UnixStream::pair().unwrap();
                    tx.write_all(b"x").await.unwrap();
                    let late = c.call("router-b", 2, async move {
                        rx.read_exact(&mut [0; 1]).await.unwrap();
                    });
                    let now = c.call("router-b", 1, ready(()));
                    let a = now.await.unwrap();
                    late.await.unwrap();
                    a.proof.size
                };
                assert_eq!(round().await, 1, "idle: the first call is not held back");
                // Load: a turn that signed several calls at once.
                let many: Vec<_> = (10..14).map(|n| c.call("router-b", n, ready(()))).collect();
                for h in many {
                    assert_eq!(h.await.unwrap().proof.size, 4);
                }
                assert_eq!(round().await, 2, "busy: the call already arrived joins");
            })
            .await;
    }
}

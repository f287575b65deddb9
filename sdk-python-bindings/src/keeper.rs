//! The lease keeper: one Rust thread that registers, renews, re-registers
//! and finally withdraws all of an agent's routes.
//!
//! It never touches Python, so a handler holding the GIL for minutes
//! cannot make a lease lapse. Scheduling decisions come from the pure
//! `renew::LeaseMachine` (one per registration); this file only reads the
//! clock, performs the HTTP calls and sleeps on a condvar that `close()`
//! signals.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use agentd::time::Millis;

use crate::call::{CallError, Client};
use crate::renew::{Action, LeaseMachine, Outcome, RenewConfig};
use crate::wire::LeaseReply;

/// One registration as the router should receive it: a JSON object
/// (without `route_id`) and the lease it asks for.
#[derive(Clone, Debug)]
pub struct Registration {
    pub body: Vec<u8>,
    pub lease_seconds: u64,
}

/// A snapshot of one registration's lease, for callers and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseStatus {
    pub route_id: Option<String>,
    pub generation: u64,
    pub lease_seconds: u64,
    pub renewals: u64,
    pub reregistrations: u64,
    pub failures: u32,
    pub last_error: Option<String>,
}

#[derive(Debug)]
struct Slot {
    reg: Registration,
    machine: LeaseMachine,
    last_error: Option<String>,
}

#[derive(Debug)]
struct Shared {
    client: Arc<Client>,
    timeout: Duration,
    slots: Mutex<Vec<Slot>>,
    stop: Mutex<bool>,
    wake: Condvar,
}

#[derive(Debug)]
pub struct Keeper {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// xorshift64*: jitter only needs to differ between agents and calls.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Rng(t ^ (u64::from(std::process::id()) << 32) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn perform(
    client: &Client,
    action: &Action,
    reg: &Registration,
    timeout: Duration,
) -> (Outcome, Option<String>) {
    let result = match action {
        Action::Register => client.call("POST", "/agent/v1/register", &[], &reg.body, timeout),
        Action::Renew { route_id } => {
            let body =
                serde_json::json!({"route_id": route_id, "lease_seconds": reg.lease_seconds});
            client.call(
                "POST",
                "/agent/v1/renew",
                &[],
                body.to_string().as_bytes(),
                timeout,
            )
        }
    };
    match result {
        Ok(resp) => match LeaseReply::decode(&resp.body) {
            Ok(reply) => (Outcome::Leased(reply), None),
            Err(e) => (
                Outcome::Refused {
                    status: resp.status,
                },
                Some(e.to_string()),
            ),
        },
        Err(CallError::Status { status: 404, .. }) if matches!(action, Action::Renew { .. }) => (
            Outcome::NotFound,
            Some("renew: router no longer knows the route (404); re-registering".into()),
        ),
        Err(e @ CallError::Transport { .. }) => (Outcome::Unreachable, Some(e.to_string())),
        Err(e @ CallError::Status { status, .. }) => {
            (Outcome::Refused { status }, Some(e.to_string()))
        }
        Err(e @ CallError::Decode(_)) => (Outcome::Refused { status: 0 }, Some(e.to_string())),
    }
}

impl Keeper {
    /// Registers every registration once, synchronously, so the caller
    /// learns about a refusal (bad token, no router) at start. On failure
    /// the routes already registered are withdrawn again.
    pub fn start(
        client: Arc<Client>,
        regs: Vec<Registration>,
        timeout: Duration,
    ) -> Result<Keeper, CallError> {
        let now = Millis::now();
        let mut rng = Rng::seeded();
        let mut slots: Vec<Slot> = Vec::with_capacity(regs.len());
        for reg in regs {
            let cfg = RenewConfig {
                requested_lease_ms: reg.lease_seconds.saturating_mul(1000),
                ..RenewConfig::default()
            };
            let mut machine = LeaseMachine::new(cfg, now);
            let action = machine.poll(now).unwrap_or(Action::Register);
            let result = client.call("POST", "/agent/v1/register", &[], &reg.body, timeout);
            let failure = match result {
                Ok(resp) => match LeaseReply::decode(&resp.body) {
                    Ok(reply) => {
                        machine.on_outcome(Millis::now(), Outcome::Leased(reply), rng.next());
                        None
                    }
                    Err(e) => Some(CallError::Decode(e.to_string())),
                },
                Err(e) => Some(e),
            };
            debug_assert_eq!(action, Action::Register);
            slots.push(Slot {
                reg,
                machine,
                last_error: None,
            });
            if let Some(err) = failure {
                slots.pop();
                for s in &mut slots {
                    let _ = unregister(&client, s, timeout);
                }
                return Err(err);
            }
        }
        let shared = Arc::new(Shared {
            client,
            timeout,
            slots: Mutex::new(slots),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let s = shared.clone();
        let thread = thread::Builder::new()
            .name("agentd-sdk-lease".into())
            .spawn(move || run(&s, rng))
            .map_err(|e| CallError::Decode(format!("cannot start the lease thread: {e}")))?;
        Ok(Keeper {
            shared,
            thread: Some(thread),
        })
    }

    pub fn status(&self) -> Vec<LeaseStatus> {
        let slots = self.shared.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .map(|s| {
                let lease = s.machine.lease();
                LeaseStatus {
                    route_id: lease.map(|l| l.route_id.clone()),
                    generation: lease.map_or(0, |l| l.generation),
                    lease_seconds: lease.map_or(0, |l| l.lease_ms / 1000),
                    renewals: s.machine.renewals,
                    reregistrations: s.machine.reregistrations,
                    failures: s.machine.failures(),
                    last_error: s.last_error.clone(),
                }
            })
            .collect()
    }

    /// Stops the thread and withdraws every live route. Returns the
    /// withdrawal errors (the routes then expire with their leases).
    pub fn close(&mut self) -> Vec<CallError> {
        let Some(thread) = self.thread.take() else {
            return Vec::new();
        };
        *self.shared.stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.shared.wake.notify_all();
        let _ = thread.join();
        let mut slots = self.shared.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut errors = Vec::new();
        for s in slots.iter_mut() {
            if let Err(e) = unregister(&self.shared.client, s, self.shared.timeout) {
                errors.push(e);
            }
        }
        errors
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.close();
    }
}

fn unregister(client: &Client, slot: &mut Slot, timeout: Duration) -> Result<(), CallError> {
    let Some(lease) = slot.machine.lease() else {
        return Ok(());
    };
    let body = serde_json::json!({"route_id": lease.route_id}).to_string();
    let result = client.call(
        "POST",
        "/agent/v1/unregister",
        &[],
        body.as_bytes(),
        timeout,
    );
    slot.machine.withdrawn();
    match result {
        Ok(_) | Err(CallError::Status { status: 404, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn run(shared: &Shared, mut rng: Rng) {
    loop {
        let now = Millis::now();
        // Pick due actions under the lock, perform them without it.
        let mut due: Vec<(usize, Action, Registration)> = Vec::new();
        let mut next = now.saturating_add_ms(60_000);
        {
            let mut slots = shared.slots.lock().unwrap_or_else(|p| p.into_inner());
            for (i, s) in slots.iter_mut().enumerate() {
                if let Some(a) = s.machine.poll(now) {
                    due.push((i, a, s.reg.clone()));
                } else {
                    next = next.min(s.machine.due());
                }
            }
        }
        for (i, action, reg) in due {
            if *shared.stop.lock().unwrap_or_else(|p| p.into_inner()) {
                break;
            }
            let (outcome, error) = perform(&shared.client, &action, &reg, shared.timeout);
            let mut slots = shared.slots.lock().unwrap_or_else(|p| p.into_inner());
            let s = &mut slots[i];
            s.machine.on_outcome(Millis::now(), outcome, rng.next());
            if error.is_some() {
                s.last_error = error;
            }
            next = next.min(s.machine.due());
        }
        let stop = shared.stop.lock().unwrap_or_else(|p| p.into_inner());
        if *stop {
            return;
        }
        let wait = Duration::from_millis(next.saturating_sub(Millis::now()));
        let (stop, _) = shared
            .wake
            .wait_timeout(stop, wait)
            .unwrap_or_else(|p| p.into_inner());
        if *stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Mode, TokenSource};
    use crate::call::Router;
    use crate::http::body::{read_to_vec, BodyReader};
    use crate::http::head::{parse_request_head, read_head};
    use crate::router_url::HttpUrl;
    use std::io::{BufReader, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// A recording HTTP peer: answers register/renew/unregister from a
    /// script and reports each request's path and body.
    fn peer(
        script: Vec<(u16, &'static str)>,
    ) -> (u16, mpsc::Receiver<(String, String)>, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, rx) = mpsc::channel();
        let h = thread::spawn(move || {
            for (status, body) in script {
                let (s, _) = l.accept().unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let head = parse_request_head(&read_head(&mut r).unwrap()).unwrap();
                let req_body =
                    read_to_vec(&mut BodyReader::new(&mut r, head.framing), 1 << 16).unwrap();
                tx.send((head.target, String::from_utf8(req_body).unwrap()))
                    .unwrap();
                let resp = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                (&s).write_all(resp.as_bytes()).unwrap();
            }
        });
        (port, rx, h)
    }

    fn client(port: u16) -> Arc<Client> {
        Arc::new(Client {
            router: Router {
                url: HttpUrl {
                    host: "127.0.0.1".into(),
                    port,
                    path: String::new(),
                },
            },
            tokens: TokenSource::new(Mode::None),
        })
    }

    #[test]
    fn registers_at_start_and_withdraws_on_close() {
        let (port, rx, h) = peer(vec![
            (
                200,
                r#"{"route_id":"r1","generation":1,"lease_seconds":30}"#,
            ),
            (
                200,
                r#"{"route_id":"r1","generation":1,"lease_seconds":0,"removed":true}"#,
            ),
        ]);
        let reg = Registration {
            body: br#"{"intent":"demo.echo"}"#.to_vec(),
            lease_seconds: 30,
        };
        let mut k = Keeper::start(client(port), vec![reg], Duration::from_secs(5)).unwrap();
        assert_eq!(k.status()[0].route_id.as_deref(), Some("r1"));
        assert!(k.close().is_empty());
        h.join().unwrap();
        let got: Vec<_> = rx.try_iter().collect();
        assert_eq!(
            got[0],
            (
                "/agent/v1/register".to_string(),
                r#"{"intent":"demo.echo"}"#.to_string()
            )
        );
        assert_eq!(
            got[1],
            (
                "/agent/v1/unregister".to_string(),
                r#"{"route_id":"r1"}"#.to_string()
            )
        );
        assert_eq!(k.status()[0].route_id, None);
    }

    #[test]
    fn a_refused_registration_fails_start_with_the_router_code() {
        let (port, _rx, h) = peer(vec![(
            401,
            r#"{"error":{"code":"token_expired","message":"token expired","outcome":"rejected"}}"#,
        )]);
        let reg = Registration {
            body: b"{}".to_vec(),
            lease_seconds: 30,
        };
        let err = Keeper::start(client(port), vec![reg], Duration::from_secs(5)).unwrap_err();
        h.join().unwrap();
        assert_eq!(
            err,
            CallError::Status {
                status: 401,
                code: "token_expired".into(),
                message: "token expired".into(),
                detail: crate::wire::ErrorDetail {
                    outcome: Some("rejected".into()),
                    ..Default::default()
                },
            }
        );
    }
}

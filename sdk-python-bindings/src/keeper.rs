//! The lease keeper: one Rust thread that registers, renews, re-registers
//! and finally withdraws all of an agent's routes.
//!
//! It never touches Python, so a handler holding the GIL for minutes
//! cannot make a lease lapse. Scheduling decisions come from the pure
//! `renew::LeaseMachine` (one per registration); this file only reads the
//! clock, performs the HTTP calls and sleeps on a condvar that `close()`
//! signals.
//!
//! Each register (and re-register) reply may also offer the agent a public
//! IPv6 address with its TLS endpoint (`wire::PublicIpv6`); the keeper
//! keeps the latest answer per registration so `status()` can tell the
//! agent where callers outside the mesh reach it. A re-registration may
//! move or withdraw that address, hence "latest"; renew replies do not
//! carry it and leave it as it is.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use agentd::time::Millis;

use crate::call::{CallError, Client};
use crate::renew::{Action, LeaseMachine, Outcome, RenewConfig};
use crate::wire::{LeaseReply, PublicEndpoint, PublicIpv6, PublicIpv6Status};

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
    /// The agent's public IPv6 address (`public_ipv6` of the last register
    /// reply), while a lease is held.
    pub public_ipv6: Option<String>,
    /// Where callers outside the mesh reach it (`public_endpoint`).
    pub public_endpoint: Option<PublicEndpoint>,
    /// `https://[address]:port` of `public_endpoint`.
    pub public_url: Option<String>,
    /// The router's report on the request (`public_ipv6_status`).
    pub public_ipv6_status: Option<PublicIpv6Status>,
}

#[derive(Debug)]
struct Slot {
    reg: Registration,
    machine: LeaseMachine,
    last_error: Option<String>,
    /// The public-IPv6 answer of the last register reply.
    public: PublicIpv6,
}

/// The public-IPv6 answer of a register reply, and the problem to report
/// as `last_error` when part of it was invalid and ignored.
fn public_answer(body: &[u8]) -> (PublicIpv6, Option<String>) {
    let (public, problem) = PublicIpv6::decode(body);
    let problem =
        problem.map(|e| format!("register reply: public IPv6 answer ignored in part: {e}"));
    (public, problem)
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

/// What one lease action produced: the outcome for the machine, an error to
/// report, and — for a register reply — the public-IPv6 answer.
type Performed = (Outcome, Option<String>, Option<PublicIpv6>);

fn perform(client: &Client, action: &Action, reg: &Registration, timeout: Duration) -> Performed {
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
            Ok(reply) if matches!(action, Action::Register) => {
                let (public, problem) = public_answer(&resp.body);
                (Outcome::Leased(reply), problem, Some(public))
            }
            Ok(reply) => (Outcome::Leased(reply), None, None),
            Err(e) => (
                Outcome::Refused {
                    status: resp.status,
                },
                Some(e.to_string()),
                None,
            ),
        },
        Err(CallError::Status { status: 404, .. }) if matches!(action, Action::Renew { .. }) => (
            Outcome::NotFound,
            Some("renew: router no longer knows the route (404); re-registering".into()),
            None,
        ),
        Err(e @ CallError::Transport { .. }) => (Outcome::Unreachable, Some(e.to_string()), None),
        Err(e @ CallError::Status { status, .. }) => {
            (Outcome::Refused { status }, Some(e.to_string()), None)
        }
        Err(e @ CallError::Decode(_)) => {
            (Outcome::Refused { status: 0 }, Some(e.to_string()), None)
        }
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
            let mut public = PublicIpv6::default();
            let mut last_error = None;
            let failure = match result {
                Ok(resp) => match LeaseReply::decode(&resp.body) {
                    Ok(reply) => {
                        machine.on_outcome(Millis::now(), Outcome::Leased(reply), rng.next());
                        (public, last_error) = public_answer(&resp.body);
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
                last_error,
                public,
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
                // The answer describes the live route; none without a lease
                // (withdrawn, or forgotten by the router until re-registered).
                let public = lease.map(|_| &s.public);
                let endpoint = public.and_then(|p| p.endpoint.clone());
                LeaseStatus {
                    route_id: lease.map(|l| l.route_id.clone()),
                    generation: lease.map_or(0, |l| l.generation),
                    lease_seconds: lease.map_or(0, |l| l.lease_ms / 1000),
                    renewals: s.machine.renewals,
                    reregistrations: s.machine.reregistrations,
                    failures: s.machine.failures(),
                    last_error: s.last_error.clone(),
                    public_ipv6: public.and_then(|p| p.address).map(|a| a.to_string()),
                    public_url: endpoint.as_ref().map(PublicEndpoint::url),
                    public_endpoint: endpoint,
                    public_ipv6_status: public.and_then(|p| p.status.clone()),
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
            let (outcome, error, public) = perform(&shared.client, &action, &reg, shared.timeout);
            let mut slots = shared.slots.lock().unwrap_or_else(|p| p.into_inner());
            let s = &mut slots[i];
            s.machine.on_outcome(Millis::now(), outcome, rng.next());
            if error.is_some() {
                s.last_error = error;
            }
            if let Some(public) = public {
                s.public = public;
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

    const SERVED: &str = r#"{"route_id":"r1","generation":1,"lease_seconds":30,
        "public_ipv6":"2001:db8:66::7",
        "public_endpoint":{"address":"2001:db8:66::7","port":7443,"scheme":"https",
            "tls_server_name":"router-a","ca_bundle_id":"agentd-ca-0011223344556677"},
        "public_port":7443,"tls_server_name":"router-a","ca_bundle_id":"agentd-ca-0011223344556677",
        "public_ipv6_status":{"address":"2001:db8:66::7","served":true}}"#;
    const UNREGISTERED: &str = r#"{"route_id":"r1","generation":1,"removed":true}"#;

    fn public_reg(lease_seconds: u64) -> Registration {
        Registration {
            body: br#"{"intent":"demo.echo","public_ipv6":true}"#.to_vec(),
            lease_seconds,
        }
    }

    #[test]
    fn a_served_public_address_is_kept_with_its_endpoint_and_url() {
        let (port, _rx, h) = peer(vec![(200, SERVED), (200, UNREGISTERED)]);
        let mut k =
            Keeper::start(client(port), vec![public_reg(30)], Duration::from_secs(5)).unwrap();
        let st = k.status().remove(0);
        assert_eq!(st.public_ipv6.as_deref(), Some("2001:db8:66::7"));
        assert_eq!(
            st.public_url.as_deref(),
            Some("https://[2001:db8:66::7]:7443")
        );
        let e = st.public_endpoint.unwrap();
        assert_eq!(
            e.address,
            "2001:db8:66::7".parse::<std::net::Ipv6Addr>().unwrap()
        );
        assert_eq!((e.port, e.scheme.as_str()), (7443, "https"));
        assert_eq!(e.tls_server_name.as_deref(), Some("router-a"));
        assert_eq!(
            e.ca_bundle_id.as_deref(),
            Some("agentd-ca-0011223344556677")
        );
        let status = st.public_ipv6_status.unwrap();
        assert!(status.served && status.reason.is_none());
        assert_eq!(st.last_error, None);
        assert!(k.close().is_empty());
        h.join().unwrap();
        // Withdrawn: the address went with the route.
        let st = k.status().remove(0);
        assert_eq!(
            (st.public_ipv6, st.public_url, st.public_endpoint),
            (None, None, None)
        );
    }

    #[test]
    fn a_reply_without_a_public_address_leaves_the_fields_empty() {
        let (port, _rx, h) = peer(vec![
            (
                200,
                r#"{"route_id":"r1","generation":1,"lease_seconds":30,
                    "public_ipv6_status":{"address":null,"served":false,"reason":"ipv6.mode 'off'"}}"#,
            ),
            (200, UNREGISTERED),
            (
                200,
                r#"{"route_id":"r2","generation":1,"lease_seconds":30}"#,
            ),
            (200, UNREGISTERED),
        ]);
        let mut k =
            Keeper::start(client(port), vec![public_reg(30)], Duration::from_secs(5)).unwrap();
        let st = k.status().remove(0);
        assert_eq!(
            (st.public_ipv6, st.public_url, st.public_endpoint),
            (None, None, None)
        );
        assert_eq!(
            st.public_ipv6_status,
            Some(PublicIpv6Status {
                address: None,
                served: false,
                reason: Some("ipv6.mode 'off'".into()),
            })
        );
        assert_eq!(st.last_error, None);
        assert!(k.close().is_empty());
        // A router that knows nothing of public_ipv6 says nothing about it.
        let reg = Registration {
            body: b"{}".to_vec(),
            lease_seconds: 30,
        };
        let mut k = Keeper::start(client(port), vec![reg], Duration::from_secs(5)).unwrap();
        let st = k.status().remove(0);
        assert_eq!(st.route_id.as_deref(), Some("r2"));
        assert_eq!((st.public_ipv6, st.public_url), (None, None));
        assert_eq!((st.public_endpoint, st.public_ipv6_status), (None, None));
        assert!(k.close().is_empty());
        h.join().unwrap();
    }

    #[test]
    fn a_mismatched_endpoint_is_ignored_with_an_error_and_the_route_kept() {
        let (port, _rx, h) = peer(vec![
            (
                200,
                r#"{"route_id":"r1","generation":1,"lease_seconds":30,
                    "public_ipv6":"2001:db8:66::7",
                    "public_endpoint":{"address":"2001:db8:66::8","port":7443,"scheme":"https",
                        "tls_server_name":"router-a","ca_bundle_id":"agentd-ca-1"},
                    "public_ipv6_status":{"address":"2001:db8:66::7","served":true}}"#,
            ),
            (200, UNREGISTERED),
        ]);
        let mut k =
            Keeper::start(client(port), vec![public_reg(30)], Duration::from_secs(5)).unwrap();
        let st = k.status().remove(0);
        assert_eq!(st.route_id.as_deref(), Some("r1"));
        assert_eq!(
            (st.public_ipv6, st.public_url, st.public_endpoint),
            (None, None, None)
        );
        assert!(st.public_ipv6_status.unwrap().served, "the report is kept");
        let err = st.last_error.unwrap();
        assert!(
            err.contains("public_endpoint.address") && err.contains("differs from public_ipv6"),
            "{err}"
        );
        assert!(k.close().is_empty());
        h.join().unwrap();
    }

    #[test]
    fn a_reregistration_replaces_the_public_answer() {
        // A 1 s lease renews after ~0.6 s; the renewal meets a 404 (the
        // router forgot the route) and the re-register reply has no address.
        let short: &'static str = Box::leak(
            SERVED
                .replace(r#""lease_seconds":30"#, r#""lease_seconds":1"#)
                .into(),
        );
        let (port, rx, h) = peer(vec![
            (200, short),
            (
                404,
                r#"{"error":{"code":"not_found","message":"no route r1"}}"#,
            ),
            (
                200,
                r#"{"route_id":"r2","generation":2,"lease_seconds":30,
                    "public_ipv6_status":{"address":null,"served":false,"reason":"all 256 bound"}}"#,
            ),
            (200, UNREGISTERED),
        ]);
        let mut k =
            Keeper::start(client(port), vec![public_reg(1)], Duration::from_secs(5)).unwrap();
        assert!(k.status()[0].public_url.is_some());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while k.status()[0].reregistrations < 1 {
            assert!(std::time::Instant::now() < deadline, "no re-registration");
            thread::sleep(Duration::from_millis(20));
        }
        let st = k.status().remove(0);
        assert_eq!(st.route_id.as_deref(), Some("r2"));
        assert_eq!(
            (st.public_ipv6, st.public_url, st.public_endpoint),
            (None, None, None)
        );
        assert_eq!(
            st.public_ipv6_status.unwrap().reason.as_deref(),
            Some("all 256 bound")
        );
        assert!(k.close().is_empty());
        h.join().unwrap();
        let paths: Vec<_> = rx.try_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "/agent/v1/register",
                "/agent/v1/renew",
                "/agent/v1/register",
                "/agent/v1/unregister"
            ]
        );
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

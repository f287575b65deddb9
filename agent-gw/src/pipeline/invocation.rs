//! What every front end hands the pipeline: one typed invocation.
//!
//! The SDK API, MCP, A2A and the peer listener each turn their own wire
//! format into an [`Invocation`]; from there on nothing knows which one
//! it came from except through the [`Principal`] (whose rules apply) and
//! the [`Hints`] (what the caller asked of the call's handling).

use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;

use agentd::fib::AgentAddr;

use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;

use agentd::route::RouteId;

use crate::api::envelope::{Envelope, MAX_CURSOR};
use crate::api::error::{ApiError, ErrorCode};
use crate::forward::deadline::{header_budget_ms, ms_value, DEADLINE_HEADER, TIMEOUT_HEADER};
use crate::forward::hop::CallIdentity;
use crate::forward::relayed;
use crate::limits::InflightGuard;

/// One call, decoded and admitted up to its tenant's rate.
///
/// It travels the pipeline boxed (`Box<Invocation>`): it is ~460 bytes,
/// and an `async fn` keeps room for a by-value argument twice (the
/// argument and its local), at every stage it passes, all in the future
/// each connection holds for as long as it is open.
#[derive(Debug)]
pub struct Invocation {
    pub principal: Principal,
    /// The envelope, with the principal's identity applied.
    pub envelope: Envelope,
    pub mode: Mode,
    pub hints: Hints,
    /// When the call arrived: its deadline counts from here.
    pub started: Instant,
    /// The in-flight slot admission gave it before its body was read;
    /// held until the answer is finished. `None` when the front end
    /// holds the slot itself (A2A: one slot for a whole JSON-RPC
    /// request, which may wait for the task it starts).
    pub slot: Option<InflightGuard>,
    /// Closes the client connection the call came on (a stream follower
    /// that stopped reading).
    pub conn: Rc<ConnAbort>,
}

/// Whose rules a call is admitted and decided under.
#[derive(Clone, Debug)]
pub enum Principal {
    /// A caller of this router: an agent or protocol client on one of
    /// its listeners. Its tenant and subject are in the envelope (what
    /// authentication proved, or the body's own in auth `none`). `pin`:
    /// it called an agent's own address, and reaches that agent only.
    Caller {
        source: IpAddr,
        pin: Option<Arc<AgentAddr>>,
    },
    /// A neighbour router that sent the call over its link.
    Neighbour(Rc<Neighbour>),
}

impl Principal {
    /// The address shares and budgets are counted by.
    pub fn source(&self) -> IpAddr {
        match self {
            Principal::Caller { source, .. } => *source,
            Principal::Neighbour(n) => n.addr.ip(),
        }
    }

    pub fn neighbour(&self) -> Option<&Rc<Neighbour>> {
        match self {
            Principal::Neighbour(n) => Some(n),
            Principal::Caller { .. } => None,
        }
    }
}

/// A call a neighbour router forwarded: from which router, pinned to
/// which route, and whom it acts for (what the link proved).
#[derive(Debug)]
pub struct Neighbour {
    /// The linked router; shared with the in-flight slots its calls hold.
    pub router_id: Rc<str>,
    pub addr: SocketAddr,
    /// The base route id the sender chose.
    pub route: RouteId,
    pub who: Rc<CallIdentity>,
}

/// How the answer is wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The handler's answer, within the deadline.
    Sync,
    /// A task handle at once; the result later (`Prefer: respond-async`,
    /// A2A `SendMessage`).
    Async,
    /// An event stream held as a task, resumable from `cursor` (the
    /// caller's `Last-Event-ID`; the envelope's `resume_from_event_id`
    /// is folded in by the pipeline).
    Stream { cursor: Option<u64> },
}

/// What the caller asked of the call's handling, beyond the envelope.
#[derive(Clone, Debug, Default)]
pub struct Hints {
    /// The caller's headers relayed to the handler (trace context,
    /// `Accept`, `Idempotency-Key`, the loop mark, ...).
    pub relay: HeaderMap,
    /// The caller's timeout from its headers, if any; the smaller of it
    /// and the envelope's is the call's budget.
    pub timeout_ms: Option<u64>,
    /// The caller says the call may be repeated (`X-Agentd-Idempotent`).
    pub caller_idempotent: bool,
    /// The call carries an `Idempotency-Key`.
    pub has_key: bool,
}

// Pre-parsed names: a `&str` lookup parses the name on every request.
const PREFER: HeaderName = HeaderName::from_static("prefer");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// Longest accepted `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY: usize = 128;

/// Request headers a protocol call (MCP, A2A) relays: the trace context
/// only; its other headers are the protocol's own.
const PROTOCOL_RELAYED: [HeaderName; 2] = [
    HeaderName::from_static("traceparent"),
    HeaderName::from_static("tracestate"),
];

impl Hints {
    /// The hints of an SDK or neighbour request's headers.
    pub fn of_headers(h: &HeaderMap) -> Result<Hints, ApiError> {
        // One pass over the caller's few headers, not a hashed lookup per
        // name; the first value of a name counts, as `get` would have it.
        let mut relay = HeaderMap::new();
        let (mut timeout, mut deadline, mut key, mut idempotent) = (None, None, None, None);
        for (name, v) in h {
            let first = match name.as_str() {
                TIMEOUT_HEADER => Some(&mut timeout),
                DEADLINE_HEADER => Some(&mut deadline),
                "idempotency-key" => Some(&mut key),
                "x-agentd-idempotent" => Some(&mut idempotent),
                _ => None,
            };
            if let Some(first) = first {
                first.get_or_insert(v);
            }
            if relayed(name) {
                relay.append(name.clone(), v.clone());
            }
        }
        let has_key = match key {
            None => false,
            Some(v) if v.is_empty() || v.len() > MAX_IDEMPOTENCY_KEY => {
                return Err(ApiError::new(
                    ErrorCode::InvalidField,
                    format!("Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} bytes"),
                ))
            }
            Some(_) => true,
        };
        let asked = [
            ms_value(TIMEOUT_HEADER, timeout)?,
            ms_value(DEADLINE_HEADER, deadline)?,
        ];
        Ok(Hints {
            relay,
            timeout_ms: asked.into_iter().flatten().min(),
            caller_idempotent: idempotent.is_some_and(flag_value),
            has_key,
        })
    }

    /// The hints of a protocol request (MCP, A2A): its trace context and
    /// its deadline headers; nothing else of its HTTP request applies to
    /// the invocation.
    pub fn of_protocol(h: &HeaderMap) -> Result<Hints, ApiError> {
        let mut relay = HeaderMap::new();
        for name in &PROTOCOL_RELAYED {
            if let Some(v) = h.get(name) {
                relay.insert(name.clone(), v.clone());
            }
        }
        Ok(Hints {
            relay,
            timeout_ms: header_budget_ms(h)?,
            ..Hints::default()
        })
    }
}

impl Mode {
    /// The mode of an SDK or neighbour request: `stream` for the
    /// `invoke-stream` endpoint (its cursor from `Last-Event-ID`), else
    /// async when `Prefer: respond-async` asks for it.
    pub fn of_headers(h: &HeaderMap, stream: bool) -> Result<Mode, ApiError> {
        if stream {
            return Ok(Mode::Stream {
                cursor: last_event_id(h)?,
            });
        }
        let wants_async = h
            .get_all(&PREFER)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|p| p.trim().eq_ignore_ascii_case("respond-async"))
            });
        Ok(if wants_async { Mode::Async } else { Mode::Sync })
    }
}

fn flag_value(v: &HeaderValue) -> bool {
    v.to_str()
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// `Last-Event-ID` as a cursor; anything but a non-negative integer is a
/// typed error.
pub fn last_event_id(h: &HeaderMap) -> Result<Option<u64>, ApiError> {
    match h.get(&LAST_EVENT_ID) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|n| *n <= MAX_CURSOR)
            .map(Some)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidCursor,
                    "Last-Event-ID must be a non-negative integer",
                )
            }),
    }
}

/// A one-shot "close this connection now" for the server's connection
/// task, which races the hyper connection against it; and whether the
/// request being served has had its body read to the end (an HTTP/1
/// connection serves one request at a time), so that an answer that left
/// it unread can say it closes (`serve::http::dispatch`).
#[derive(Debug, Default)]
pub struct ConnAbort {
    abort: tokio::sync::Notify,
    body_read: std::cell::Cell<bool>,
}

impl ConnAbort {
    /// Asks the server to drop the connection (its socket closes, its
    /// response body is dropped).
    pub fn abort(&self) {
        // A stored permit: an abort before the server waits still counts.
        self.abort.notify_one();
    }

    /// Resolves once [`abort`](ConnAbort::abort) was called.
    pub async fn aborted(&self) {
        self.abort.notified().await;
    }

    /// A request begins: its body is not read yet.
    pub fn request_begins(&self) {
        self.body_read.set(false);
    }

    /// The current request's body was read to its end.
    pub fn body_read(&self) {
        self.body_read.set(true);
    }

    /// Whether [`body_read`](ConnAbort::body_read) was called since the
    /// request began.
    pub fn was_body_read(&self) -> bool {
        self.body_read.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn h(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(*k, HeaderValue::from_str(v).unwrap());
        }
        m
    }

    #[test]
    fn the_mode_comes_from_the_endpoint_and_prefer() {
        assert_eq!(Mode::of_headers(&h(&[]), false).unwrap(), Mode::Sync);
        let prefer = h(&[("prefer", "wait=5, respond-async")]);
        assert_eq!(Mode::of_headers(&prefer, false).unwrap(), Mode::Async);
        assert_eq!(
            Mode::of_headers(&h(&[("last-event-id", "7")]), true).unwrap(),
            Mode::Stream { cursor: Some(7) }
        );
        let bad = Mode::of_headers(&h(&[("last-event-id", "-1")]), true).unwrap_err();
        assert_eq!(bad.code, ErrorCode::InvalidCursor);
    }

    #[test]
    fn protocol_hints_relay_the_trace_context_only() {
        let headers = h(&[
            ("traceparent", "00-a-b-01"),
            ("authorization", "Bearer x"),
            ("idempotency-key", "k"),
            ("x-agentd-timeout-ms", "900"),
        ]);
        let p = Hints::of_protocol(&headers).unwrap();
        assert_eq!(p.relay.len(), 1);
        assert_eq!(p.timeout_ms, Some(900));
        assert!(!p.has_key);
        let s = Hints::of_headers(&headers).unwrap();
        assert!(s.has_key);
        assert!(s.relay.get("authorization").is_none());
        let long = "k".repeat(MAX_IDEMPOTENCY_KEY + 1);
        let e = Hints::of_headers(&h(&[("idempotency-key", &long)])).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidField);
    }

    /// The one pass reads what a lookup per name would: the first value
    /// of each name, every value of a relayed one.
    #[test]
    fn sdk_hints_read_in_one_pass_what_lookups_would() {
        let cases: [&[(&str, &str)]; 6] = [
            &[],
            &[
                ("x-agentd-timeout-ms", " 900 "),
                ("x-agentd-deadline-ms", "400"),
            ],
            &[
                ("x-agentd-deadline-ms", "700"),
                ("x-agentd-timeout-ms", "800"),
            ],
            &[("x-agentd-timeout-ms", "50"), ("x-agentd-timeout-ms", "x")],
            &[
                ("accept", "text/event-stream"),
                ("accept", "application/json"),
                ("x-agentd-idempotent", "Yes"),
                ("x-agentd-idempotent", "0"),
                ("traceparent", "00-a-b-01"),
                ("authorization", "Bearer x"),
                ("idempotency-key", "k"),
            ],
            &[("x-agentd-idempotent", "no"), ("prefer", "respond-async")],
        ];
        for pairs in cases {
            let headers = h(pairs);
            let got = Hints::of_headers(&headers).unwrap();
            assert_eq!(
                got.timeout_ms,
                header_budget_ms(&headers).unwrap(),
                "{pairs:?}"
            );
            assert_eq!(
                got.relay,
                crate::forward::relayed_headers(&headers),
                "{pairs:?}"
            );
            let flag = headers.get("x-agentd-idempotent").is_some_and(flag_value);
            assert_eq!(got.caller_idempotent, flag, "{pairs:?}");
            assert_eq!(got.has_key, headers.contains_key("idempotency-key"));
        }
        let got = Hints::of_headers(&h(cases[4])).unwrap();
        assert_eq!(got.relay.get_all("accept").iter().count(), 2);
        assert!(got.caller_idempotent);
        for name in ["x-agentd-timeout-ms", "x-agentd-deadline-ms"] {
            let e = Hints::of_headers(&h(&[(name, "soon")])).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidField);
            assert!(e.message.contains(name), "{}", e.message);
        }
    }
}

//! Routing of the served handler endpoint: which request goes to which
//! handler, in which mode, and how stream items become SSE.
//!
//! * `POST <path>` with an envelope → the capability handler, in one of
//!   three modes: `Prefer: respond-async` → async task (202 + task
//!   headers), `Accept: text/event-stream` → stream, otherwise sync.
//! * `/agent/v1/tasks/{id}[/events]` → the task table (status, events,
//!   cancel), authorised by `X-Nexus-Task-Token`.
//! * `GET /healthz` → 200, answered here without touching Python, so a
//!   handler hogging the GIL does not fail the router's health check.
//!
//! Stream events get ids 1, 2, 3… and the stream ends with the
//! `: nexus-stream-complete` comment. This agent keeps no replay history —
//! the producer-side router does (DESIGN §8) — so a resume request that
//! reaches it is refused explicitly rather than restarting the handler.

use crate::envelope::Envelope;
use crate::server::{ChunkSource, Dispatch, Reply, Request};
use crate::sse::{encode_complete, encode_event};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Sync,
    Async,
    Stream,
}

/// One item a streaming handler produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamItem {
    Event {
        event: Option<String>,
        data: String,
    },
    /// The handler failed: sent as an `error` event, then the stream ends.
    Failed {
        code: String,
        message: String,
    },
}

pub trait ItemSource: Send {
    fn next_item(&mut self) -> Option<StreamItem>;
    fn cancel(&mut self);
}

/// What a handler call produced.
pub enum Invocation {
    Reply(Reply),
    Stream(Box<dyn ItemSource>),
}

impl std::fmt::Debug for Invocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invocation::Reply(r) => write!(f, "Invocation::Reply({r:?})"),
            Invocation::Stream(_) => write!(f, "Invocation::Stream"),
        }
    }
}

/// The handler side (Python in the extension; plain Rust in tests).
pub trait Handlers: Send + Sync + 'static {
    fn invoke(&self, mode: Mode, envelope: &Envelope, req: &Request) -> Invocation;
    fn task(&self, req: &Request) -> Reply;
}

#[derive(Debug)]
pub struct Endpoint<H> {
    path: String,
    handlers: H,
}

impl<H: Handlers> Endpoint<H> {
    pub fn new(path: &str, handlers: H) -> Self {
        Endpoint {
            path: path.to_string(),
            handlers,
        }
    }
}

fn mode_of(req: &Request) -> Mode {
    if req.headers.has_token("prefer", "respond-async") {
        Mode::Async
    } else if req.headers.has_token("accept", "text/event-stream") {
        Mode::Stream
    } else {
        Mode::Sync
    }
}

impl<H: Handlers> Dispatch for Endpoint<H> {
    fn dispatch(&self, req: Request) -> Reply {
        let path = req.path().to_string();
        if path == "/healthz" {
            return match req.method.as_str() {
                "GET" | "HEAD" => Reply::json(200, br#"{"status":"ok"}"#.to_vec()),
                _ => Reply::error(405, "method_not_allowed", "use GET /healthz"),
            };
        }
        if path.starts_with("/agent/v1/tasks/") {
            return self.handlers.task(&req);
        }
        if path != self.path {
            return Reply::error(404, "not_found", &format!("no endpoint at {path}"));
        }
        if req.method != "POST" {
            return Reply::error(405, "method_not_allowed", &format!("use POST {path}"));
        }
        if let Some(ct) = req.headers.get("content-type") {
            let base = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if base != "application/json" && !base.ends_with("+json") {
                return Reply::error(
                    415,
                    "unsupported_media_type",
                    &format!("expected a JSON envelope, got {base:?}"),
                );
            }
        }
        let envelope = match Envelope::decode(&req.body) {
            Ok(e) => e,
            Err(e) => return Reply::error(400, e.code(), &e.to_string()),
        };
        let mode = mode_of(&req);
        if mode == Mode::Stream
            && (envelope.resume_from_event_id > 0 || req.headers.get("last-event-id").is_some())
        {
            return Reply::error(
                409,
                "history_lost",
                "this agent keeps no stream history; resumes are served from the router's history",
            );
        }
        match self.handlers.invoke(mode, &envelope, &req) {
            Invocation::Reply(r) => r,
            Invocation::Stream(source) => Reply::Stream {
                headers: vec![
                    ("Content-Type".into(), "text/event-stream".into()),
                    ("Cache-Control".into(), "no-store".into()),
                ],
                source: Box::new(SseFramer {
                    source,
                    next_id: 1,
                    done: false,
                }),
            },
        }
    }
}

/// Frames handler items as SSE with increasing ids.
struct SseFramer {
    source: Box<dyn ItemSource>,
    next_id: u64,
    done: bool,
}

impl SseFramer {
    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

impl ChunkSource for SseFramer {
    fn next_chunk(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        match self.source.next_item() {
            Some(StreamItem::Event { event, data }) => {
                let id = self.take_id();
                match encode_event(Some(id), event.as_deref(), &data) {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        // A bad event name is a handler bug: report it in-band.
                        self.source.cancel();
                        self.fail("invalid_event", &e.to_string())
                    }
                }
            }
            Some(StreamItem::Failed { code, message }) => self.fail(&code, &message),
            None => {
                self.done = true;
                Some(encode_complete())
            }
        }
    }

    fn cancel(&mut self) {
        self.source.cancel();
    }
}

impl SseFramer {
    fn fail(&mut self, code: &str, message: &str) -> Option<Vec<u8>> {
        self.done = true;
        let id = self.take_id();
        let data = serde_json::json!({"code": code, "message": message}).to_string();
        let mut out = encode_event(Some(id), Some("error"), &data).unwrap_or_default();
        out.extend(encode_complete());
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::Headers;
    use crate::resume::ResumeState;
    use crate::sse::SseDecoder;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    struct Items(Vec<StreamItem>, Arc<AtomicBool>);
    impl ItemSource for Items {
        fn next_item(&mut self) -> Option<StreamItem> {
            (!self.0.is_empty()).then(|| self.0.remove(0))
        }
        fn cancel(&mut self) {
            self.1.store(true, Ordering::SeqCst);
        }
    }

    struct H(Arc<AtomicBool>);
    impl Handlers for H {
        fn invoke(&self, mode: Mode, env: &Envelope, _req: &Request) -> Invocation {
            match mode {
                Mode::Stream => Invocation::Stream(Box::new(Items(
                    vec![
                        StreamItem::Event {
                            event: Some("token".into()),
                            data: "a".into(),
                        },
                        StreamItem::Event {
                            event: None,
                            data: "b".into(),
                        },
                        StreamItem::Failed {
                            code: "handler_failed".into(),
                            message: "boom".into(),
                        },
                        StreamItem::Event {
                            event: None,
                            data: "never".into(),
                        },
                    ],
                    self.0.clone(),
                ))),
                m => Invocation::Reply(Reply::json(
                    200,
                    format!("{:?}:{}", m, env.intent).into_bytes(),
                )),
            }
        }
        fn task(&self, req: &Request) -> Reply {
            Reply::json(200, req.path().as_bytes().to_vec())
        }
    }

    const ENV: &str = r#"{"version":"1.0","intent":"demo.echo","intent_version":1,"task_id":"t","source_agent":"s","tenant":"lab","hop_limit":8,"constraints":{},"payload":{}}"#;

    fn req(method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> Request {
        Request {
            method: method.into(),
            target: target.into(),
            headers: Headers(
                headers
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect(),
            ),
            body: body.as_bytes().to_vec(),
            peer: "192.0.2.1:1".parse().unwrap(),
            cancel: Arc::new(crate::server::Cancel::default()),
        }
    }

    fn full(r: Reply) -> (u16, String) {
        match r {
            Reply::Full { status, body, .. } => (status, String::from_utf8(body).unwrap()),
            Reply::Stream { .. } => panic!("expected a full reply"),
        }
    }

    fn endpoint() -> Endpoint<H> {
        Endpoint::new("/invoke", H(Arc::new(AtomicBool::new(false))))
    }

    #[test]
    fn modes_follow_prefer_and_accept() {
        let e = endpoint();
        assert_eq!(
            full(e.dispatch(req("POST", "/invoke", &[], ENV))),
            (200, "Sync:demo.echo".into())
        );
        let r = e.dispatch(req("POST", "/invoke", &[("Prefer", "respond-async")], ENV));
        assert_eq!(full(r), (200, "Async:demo.echo".into()));
        let r = e.dispatch(req(
            "POST",
            "/invoke",
            &[("Content-Type", "application/json; charset=utf-8")],
            ENV,
        ));
        assert_eq!(full(r).0, 200);
    }

    #[test]
    fn routing_errors_are_typed() {
        let e = endpoint();
        let (s, b) = full(e.dispatch(req("POST", "/other", &[], ENV)));
        assert!(s == 404 && b.contains("not_found"));
        assert_eq!(full(e.dispatch(req("GET", "/invoke", &[], ""))).0, 405);
        let (s, b) = full(e.dispatch(req("POST", "/invoke", &[], "{")));
        assert!(s == 400 && b.contains("invalid_json"), "{b}");
        let (s, b) = full(e.dispatch(req(
            "POST",
            "/invoke",
            &[("Content-Type", "text/plain")],
            ENV,
        )));
        assert!(s == 415 && b.contains("unsupported_media_type"), "{b}");
        assert_eq!(
            full(e.dispatch(req("GET", "/healthz", &[], ""))),
            (200, r#"{"status":"ok"}"#.into())
        );
        assert_eq!(
            full(e.dispatch(req("GET", "/agent/v1/tasks/x?y", &[], ""))).1,
            "/agent/v1/tasks/x"
        );
        let resume = req(
            "POST",
            "/invoke",
            &[("Accept", "text/event-stream"), ("Last-Event-ID", "3")],
            ENV,
        );
        assert_eq!(full(e.dispatch(resume)).0, 409);
    }

    #[test]
    fn stream_items_become_numbered_events_and_a_failure_ends_the_stream() {
        let cancelled = Arc::new(AtomicBool::new(false));
        let e = Endpoint::new("/invoke", H(cancelled.clone()));
        let Reply::Stream {
            mut source,
            headers,
        } = e.dispatch(req(
            "POST",
            "/invoke",
            &[("Accept", "text/event-stream")],
            ENV,
        ))
        else {
            panic!("expected a stream")
        };
        assert!(headers
            .iter()
            .any(|(n, v)| n == "Content-Type" && v == "text/event-stream"));
        let mut wire = Vec::new();
        while let Some(c) = source.next_chunk() {
            wire.extend(c);
        }
        let mut items = Vec::new();
        SseDecoder::new(1024, 4096).feed(&wire, &mut items).unwrap();
        let mut state = ResumeState::new(0, 0);
        let events: Vec<_> = items
            .into_iter()
            .filter_map(|i| state.on_item(i).unwrap())
            .collect();
        let ids: Vec<_> = events.iter().map(|e| e.id.clone().unwrap()).collect();
        assert_eq!(ids, ["1", "2", "3"]);
        assert_eq!(events[2].event.as_deref(), Some("error"));
        assert!(events[2].data.contains("handler_failed"));
        assert!(state.completed());
        assert!(!wire.windows(5).any(|w| w == b"never"));
        source.cancel();
        assert!(cancelled.load(Ordering::SeqCst));
    }
}

//! Reading a resumable SSE invocation (`POST /agent/v1/invoke-stream`).
//!
//! On a broken or prematurely closed connection the stream re-sends the
//! same envelope (same `task_id`) with `Last-Event-ID` and
//! `resume_from_event_id` set to its cursor; `resume::ResumeState` drops
//! anything at or below the cursor, so callers never see a duplicate.
//! An explicit refusal of the resume (lost history, changed request,
//! expired task) is surfaced as the router's error, never papered over.

use std::collections::VecDeque;
use std::fmt;
use std::io::Read;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::call::{CallError, Client};
use crate::http::client::OpenBody;
use crate::resume::{ResumeError, ResumeState};
use crate::sse::{SseDecoder, SseError, SseEvent};

const MAX_LINE: usize = 256 * 1024;
const MAX_EVENT: usize = 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    Call(CallError),
    Resume(ResumeError),
    Sse(SseError),
    /// The envelope handed in is not a JSON object.
    Envelope(String),
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Call(e) => e.fmt(f),
            StreamError::Resume(e) => e.fmt(f),
            StreamError::Sse(e) => write!(f, "malformed event stream: {e}"),
            StreamError::Envelope(e) => write!(f, "stream envelope: {e}"),
        }
    }
}

impl std::error::Error for StreamError {}

/// Reconnect delay before attempt `n` (1-based): 100 ms doubling, ≤ 2 s.
pub fn reconnect_delay(n: u32) -> Duration {
    Duration::from_millis((100u64 << n.saturating_sub(1).min(5)).min(2_000))
}

#[derive(Debug)]
pub struct EventStream {
    client: Arc<Client>,
    envelope: serde_json::Map<String, Value>,
    timeout: Duration,
    read_timeout: Option<Duration>,
    state: ResumeState,
    decoder: SseDecoder,
    body: Option<OpenBody>,
    pending: VecDeque<SseEvent>,
    finished: bool,
    /// `X-Nexus-Task-Id` of the first response, if the router sent one.
    pub task_id: Option<String>,
}

impl EventStream {
    pub fn new(
        client: Arc<Client>,
        envelope: &[u8],
        start_after: u64,
        max_reconnects: u32,
        timeout: Duration,
        read_timeout: Option<Duration>,
    ) -> Result<EventStream, StreamError> {
        let envelope = match serde_json::from_slice::<Value>(envelope) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(StreamError::Envelope("must be a JSON object".into())),
            Err(e) => return Err(StreamError::Envelope(e.to_string())),
        };
        Ok(EventStream {
            client,
            envelope,
            timeout,
            read_timeout,
            state: ResumeState::new(start_after, max_reconnects),
            decoder: SseDecoder::new(MAX_LINE, MAX_EVENT),
            body: None,
            pending: VecDeque::new(),
            finished: false,
            task_id: None,
        })
    }

    /// Last delivered event id.
    pub fn cursor(&self) -> u64 {
        self.state.cursor()
    }

    pub fn reconnects(&self) -> u32 {
        self.state.reconnects()
    }

    fn connect(&mut self) -> Result<(), CallError> {
        let cursor = self.state.cursor();
        let mut env = self.envelope.clone();
        let mut headers = Vec::new();
        if cursor > 0 {
            env.insert("resume_from_event_id".into(), Value::from(cursor));
            headers.push(("Last-Event-ID".to_string(), cursor.to_string()));
        }
        let body = Value::Object(env).to_string();
        let (head, reader) = self.client.open(
            "/agent/v1/invoke-stream",
            &headers,
            body.as_bytes(),
            self.timeout,
            self.read_timeout,
        )?;
        if self.task_id.is_none() {
            self.task_id = head.headers.get("x-nexus-task-id").map(str::to_string);
        }
        self.body = Some(reader);
        // A fresh connection starts a fresh event stream.
        self.decoder = SseDecoder::new(MAX_LINE, MAX_EVENT);
        Ok(())
    }

    /// The connection is gone: resume if allowed, else report why not.
    fn lost(&mut self) -> Result<(), StreamError> {
        self.body = None;
        self.state.on_disconnect().map_err(StreamError::Resume)?;
        thread::sleep(reconnect_delay(self.state.reconnects()));
        Ok(())
    }

    /// The next event, `Ok(None)` once the stream completed.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, StreamError> {
        let mut buf = [0u8; 8192];
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            if self.finished {
                return Ok(None);
            }
            if self.body.is_none() {
                match self.connect() {
                    Ok(()) => {}
                    // Only a resume may retry a connect that never got through.
                    Err(CallError::Transport { .. }) if self.state.reconnects() > 0 => {
                        self.lost()?;
                        continue;
                    }
                    Err(e) => return Err(StreamError::Call(e)),
                }
            }
            let Some(body) = self.body.as_mut() else {
                continue;
            };
            let n = match body.read(&mut buf) {
                Ok(0) | Err(_) => {
                    if self.state.completed() {
                        self.finished = true;
                        continue;
                    }
                    self.lost()?;
                    continue;
                }
                Ok(n) => n,
            };
            let mut items = Vec::new();
            let fed = self.decoder.feed(&buf[..n], &mut items);
            for item in items {
                if let Some(e) = self.state.on_item(item).map_err(StreamError::Resume)? {
                    self.pending.push_back(e);
                }
            }
            fed.map_err(StreamError::Sse)?;
            if self.state.completed() {
                self.finished = true;
                self.body = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_delays_double_up_to_two_seconds() {
        let ms: Vec<u64> = (1..=8)
            .map(|n| reconnect_delay(n).as_millis() as u64)
            .collect();
        assert_eq!(ms, [100, 200, 400, 800, 1_600, 2_000, 2_000, 2_000]);
    }
}

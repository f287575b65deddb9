//! A task operation of the SDK API (`/agent/v1/tasks/{id}[/events|
//! /result]`), decoded from its request: the same for a caller and for a
//! neighbour router sending a caller's operation on, and built directly
//! by the protocol front ends that hold calls as tasks (A2A, MCP).

use http::{HeaderMap, HeaderName, HeaderValue, Method};

use crate::api::error::{ApiError, ErrorCode};
use crate::router::TaskOp;

/// The request header that carries a task's token.
const TOKEN: HeaderName = HeaderName::from_static("x-nexus-task-token");

/// Request headers a task operation relays when it is sent on to the
/// router holding the task.
const RELAYED: [HeaderName; 3] = [
    http::header::ACCEPT,
    HeaderName::from_static("traceparent"),
    HeaderName::from_static("tracestate"),
];

#[derive(Clone, Debug)]
pub struct TaskRequest {
    /// The id as the path named it (checked by the task table).
    pub id: Box<str>,
    pub op: TaskOp,
    /// The caller's token (empty: none sent).
    pub token: HeaderValue,
    /// `/events?after=N`: the last event the caller has.
    pub after: u64,
    /// `/events?wait_ms=M`: how long to wait for the next event.
    pub wait_ms: u64,
    /// Headers relayed when the operation is sent on.
    pub relay: HeaderMap,
}

impl TaskRequest {
    /// A task operation with no cursor, wait or relayed headers.
    pub fn new(id: &str, op: TaskOp, token: HeaderValue) -> TaskRequest {
        TaskRequest {
            id: id.into(),
            op,
            token,
            after: 0,
            wait_ms: 0,
            relay: HeaderMap::new(),
        }
    }

    /// The operation `op` on `id` of a request with this query and
    /// these headers.
    pub fn of_request(
        id: &str,
        op: TaskOp,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<TaskRequest, ApiError> {
        let mut relay = HeaderMap::new();
        for name in &RELAYED {
            for v in headers.get_all(name) {
                relay.append(name.clone(), v.clone());
            }
        }
        let (after, wait_ms) = match op {
            TaskOp::Events => (
                query_u64(query, "after")?.unwrap_or(0),
                query_u64(query, "wait_ms")?.unwrap_or(0),
            ),
            _ => (0, 0),
        };
        Ok(TaskRequest {
            id: id.into(),
            op,
            token: headers
                .get(&TOKEN)
                .cloned()
                .unwrap_or_else(|| HeaderValue::from_static("")),
            after,
            wait_ms,
            relay,
        })
    }

    /// The method and path (with query) of this operation on the SDK API.
    pub fn method_and_path(&self) -> (Method, String) {
        let id = &self.id;
        match self.op {
            TaskOp::Status => (Method::GET, format!("/agent/v1/tasks/{id}")),
            TaskOp::Cancel => (Method::DELETE, format!("/agent/v1/tasks/{id}")),
            TaskOp::Result => (Method::GET, format!("/agent/v1/tasks/{id}/result")),
            TaskOp::Events => (
                Method::GET,
                format!(
                    "/agent/v1/tasks/{id}/events?after={}&wait_ms={}",
                    self.after, self.wait_ms
                ),
            ),
        }
    }

    /// The headers the operation is sent on with: the relayed ones and
    /// the token.
    pub fn headers(&self) -> HeaderMap {
        let mut h = self.relay.clone();
        if !self.token.is_empty() {
            h.insert(TOKEN, self.token.clone());
        }
        h
    }
}

/// The non-negative integer `name` of a query; `None` when absent.
fn query_u64(query: Option<&str>, name: &str) -> Result<Option<u64>, ApiError> {
    let Some(v) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    else {
        return Ok(None);
    };
    let v = v.trim();
    let ok = !v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| v.parse::<u64>().ok())
        .flatten()
        .map(Some)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidCursor,
                format!("{name} must be a non-negative integer"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_events_query_and_token_are_read_and_written_back() {
        let mut h = HeaderMap::new();
        h.insert("x-nexus-task-token", HeaderValue::from_static("ab"));
        h.insert("authorization", HeaderValue::from_static("Bearer x"));
        let r =
            TaskRequest::of_request("t1", TaskOp::Events, Some("after=3&wait_ms=500"), &h).unwrap();
        assert_eq!((r.after, r.wait_ms), (3, 500));
        assert_eq!(r.token, "ab");
        let (m, path) = r.method_and_path();
        assert_eq!(m, Method::GET);
        assert_eq!(path, "/agent/v1/tasks/t1/events?after=3&wait_ms=500");
        let sent = r.headers();
        assert_eq!(sent["x-nexus-task-token"], "ab");
        assert!(sent.get("authorization").is_none());
    }

    #[test]
    fn a_bad_cursor_is_typed_and_other_ops_ignore_the_query() {
        let h = HeaderMap::new();
        for q in [
            "after=-1",
            "after=",
            "wait_ms=x",
            "after=123456789012345678901",
        ] {
            let e = TaskRequest::of_request("t1", TaskOp::Events, Some(q), &h).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidCursor, "{q}");
        }
        let r = TaskRequest::of_request("t1", TaskOp::Status, Some("after=x"), &h).unwrap();
        assert_eq!(r.after, 0);
        // `afterwards=` is not `after=`.
        let r = TaskRequest::of_request("t1", TaskOp::Events, Some("afterwards=9"), &h).unwrap();
        assert_eq!(r.after, 0);
    }
}

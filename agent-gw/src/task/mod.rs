//! Tasks and streams (DESIGN §8): the bounded task table, per-task event
//! history with numeric ids, `Last-Event-ID` resume, cancellation, and the
//! SSE codec.
//!
//! ```text
//!  invoke (Prefer: respond-async)      invoke-stream
//!        |                                  |
//!   try_insert ── Full → 503 task_table_full (nothing dispatched)
//!        |                                  |
//!   producer task: upstream request ── SseParser ── push_event ──┐
//!        |   (dropped on CancelSignal → connection to handler closes)
//!   complete / fail / cancel ──────────────────────────────────── watch
//!                                                                 |
//!   GET /tasks/{id}, /events?after=N, Follower (SSE to caller) <──┘
//! ```
//!
//! [`TaskTable`] is sans-IO (time is an argument); [`live`] holds the
//! small async pieces that connect it to producers and followers.

pub mod digest;
pub mod history;
pub mod id;
pub mod live;
pub mod sse;
pub mod table;

use std::fmt;

pub use digest::{object_digest, request_digest, StreamKey, RESUME_FIELD};
pub use history::{CursorError, Event, History};
pub use id::{TaskId, TaskToken};
pub use live::{Follower, SharedTasks};
pub use table::{
    Admitted, Batch, CancelSignal, NewTask, TableStats, Task, TaskConfig, TaskFailure, TaskKind,
    TaskResult, TaskState, TaskTable, TASK_OVERHEAD,
};

use agentd::time::Millis;

use crate::budget::{Refusal, Scope};

/// Request header carrying a task id (Nexus SDK compatible).
pub const TASK_ID_HEADER: &str = "x-nexus-task-id";
/// Request/response header carrying the task access token.
pub const TASK_TOKEN_HEADER: &str = "x-nexus-task-token";

/// Why a task operation was refused. Every variant maps to a stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskError {
    /// The table holds `capacity` tasks; new async work is refused before
    /// dispatch. `retry_at`: when the first slot frees by itself.
    Full {
        capacity: usize,
        retry_at: Option<Millis>,
    },
    /// The caller's tenant or address holds its whole share of the table.
    Share {
        scope: Scope,
        held: usize,
        limit: usize,
        retry_at: Option<Millis>,
    },
    /// The gateway buffer budget (or the caller's share of it) has no room
    /// for what the new task must reserve.
    Budget(Refusal),
    /// A finished task whose outcome was already fetched and released.
    Released,
    /// Unknown id, wrong token or another tenant's task.
    NotFound,
    /// The task existed and has expired.
    Expired,
    /// A resume cursor older than the oldest retained event.
    HistoryLost { cursor: u64, oldest: u64 },
    /// A resume cursor beyond the last event, or not a number.
    BadCursor { cursor: u64, last: u64 },
    /// A resume whose request differs from the original.
    RequestMismatch,
    /// A new stream with the `task_id` of a running one and a different request.
    Duplicate,
    /// A result asked for before the task finished.
    NotFinished,
    /// The kernel random source failed.
    Random,
}

impl TaskError {
    /// When the refused work may be retried with a chance of success,
    /// for refusals that depend on held state.
    pub fn retry_at(&self) -> Option<Option<Millis>> {
        match self {
            TaskError::Full { retry_at, .. } | TaskError::Share { retry_at, .. } => Some(*retry_at),
            TaskError::Budget(r) => Some(r.retry_at),
            _ => None,
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            TaskError::Full { .. } => 503,
            TaskError::Share { .. } => 429,
            TaskError::Budget(r) if r.scope == Scope::Total => 503,
            TaskError::Budget(_) => 429,
            TaskError::Released => 410,
            TaskError::NotFound => 404,
            TaskError::Expired => 410,
            TaskError::HistoryLost { .. } => 409,
            TaskError::BadCursor { .. } => 400,
            TaskError::RequestMismatch => 409,
            TaskError::Duplicate => 409,
            TaskError::NotFinished => 409,
            TaskError::Random => 500,
        }
    }

    /// Stable code (docs/sdk-api.md).
    pub fn code(&self) -> &'static str {
        match self {
            TaskError::Full { .. } => "task_table_full",
            TaskError::Share { .. } => "share_exceeded",
            TaskError::Budget(r) if r.scope == Scope::Total => "overloaded",
            TaskError::Budget(_) => "share_exceeded",
            TaskError::Released => "result_released",
            TaskError::NotFound => "not_found",
            TaskError::Expired => "task_expired",
            TaskError::HistoryLost { .. } => "history_lost",
            TaskError::BadCursor { .. } => "invalid_cursor",
            TaskError::RequestMismatch | TaskError::Duplicate => "stream_changed",
            TaskError::NotFinished => "task_not_finished",
            TaskError::Random => "internal",
        }
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Full { capacity, .. } => {
                write!(f, "task table is full ({capacity} tasks)")
            }
            TaskError::Share {
                scope, held, limit, ..
            } => {
                let whose = match scope {
                    Scope::Tenant => "the tenant",
                    _ => "this client address",
                };
                write!(
                    f,
                    "{whose} holds {held} of its {limit} task slots (its share of the task table)"
                )
            }
            TaskError::Budget(r) => write!(f, "{r}"),
            TaskError::Released => {
                f.write_str("the outcome of this task was already fetched and released")
            }
            TaskError::NotFound => f.write_str("no such task"),
            TaskError::Expired => f.write_str("task has expired"),
            TaskError::HistoryLost { cursor, oldest } => {
                write!(
                    f,
                    "events after {cursor} are no longer retained (oldest is {oldest})"
                )
            }
            TaskError::BadCursor { cursor, last } => {
                write!(f, "cursor {cursor} is beyond the last event {last}")
            }
            TaskError::RequestMismatch => {
                f.write_str("resume request differs from the original request")
            }
            TaskError::Duplicate => f.write_str("a stream with this task_id is already running"),
            TaskError::NotFinished => f.write_str("task has not finished yet"),
            TaskError::Random => f.write_str("random source unavailable"),
        }
    }
}

impl std::error::Error for TaskError {}

/// Parses a `Last-Event-ID` / `after` cursor: a decimal u64, nothing else.
pub fn parse_cursor(s: &[u8]) -> Result<u64, TaskError> {
    let bad = TaskError::BadCursor {
        cursor: u64::MAX,
        last: 0,
    };
    let s = s.trim_ascii();
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return Err(bad);
    }
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(bad)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod share_tests;

//! A2A tasks as views of the gateway's async tasks (DESIGN §8): the
//! state mapping, the `Task` object of `GetTask`/`SendMessage`, and the
//! `StreamResponse` events of `SendStreamingMessage`/`SubscribeToTask`,
//! made from the task's own event history (`task_started`, then one of
//! `result`, `error`, `cancelled`), so a subscriber that joins late
//! replays exactly what happened, in order.
//!
//! Sans-IO: a [`TaskView`] is a snapshot taken from the task table.

use serde_json::{json, Value};

use super::part::result_parts;
use crate::task::{TaskFailure, TaskResult, TaskState};

/// The `TASK_STATE_*` name of one of our task states. Our tasks never
/// ask for input or authentication; a refusal before dispatch is an
/// error answer, not a task, so `REJECTED` is not used either.
pub fn state_name(s: TaskState) -> &'static str {
    match s {
        TaskState::Pending => "TASK_STATE_SUBMITTED",
        TaskState::Running => "TASK_STATE_WORKING",
        TaskState::Completed => "TASK_STATE_COMPLETED",
        TaskState::Failed => "TASK_STATE_FAILED",
        TaskState::Cancelled => "TASK_STATE_CANCELED",
    }
}

/// What an A2A answer shows of one task.
#[derive(Clone, Debug)]
pub struct TaskView {
    /// The A2A task id (the handle, see `handle`).
    pub id: String,
    pub context_id: String,
    pub state: TaskState,
    pub skill: String,
    pub capability: String,
    pub result: Option<TaskResult>,
    pub failure: Option<TaskFailure>,
}

/// The id of the one artifact a task produces (the handler's answer).
pub const ARTIFACT_ID: &str = "result";

impl TaskView {
    fn status(&self, state: TaskState) -> Value {
        let mut s = json!({"state": state_name(state)});
        if state == TaskState::Failed {
            if let Some(f) = &self.failure {
                s["message"] = json!({
                    "messageId": format!("{}-error", self.id),
                    "role": "ROLE_AGENT",
                    "taskId": self.id,
                    "contextId": self.context_id,
                    "parts": [{"text": format!("{}: {}", f.code.as_str(), f.message)}],
                    "metadata": {"code": f.code.as_str()},
                });
            }
        }
        s
    }

    fn artifact(&self) -> Option<Value> {
        let r = self.result.as_ref()?;
        Some(json!({
            "artifactId": ARTIFACT_ID,
            "name": format!("{} result", self.capability),
            "parts": result_parts(r),
        }))
    }

    /// The A2A `Task` object.
    pub fn task(&self) -> Value {
        let mut t = json!({
            "id": self.id,
            "contextId": self.context_id,
            "status": self.status(self.state),
            "metadata": {"skill": self.skill, "capability": self.capability},
        });
        if self.state == TaskState::Completed {
            if let Some(a) = self.artifact() {
                t["artifacts"] = json!([a]);
            }
        }
        if let Some(f) = &self.failure {
            t["metadata"]["error"] = json!({"code": f.code.as_str(), "message": &*f.message});
        }
        t
    }

    fn status_update(&self, state: TaskState) -> Value {
        json!({"statusUpdate": {
            "taskId": self.id,
            "contextId": self.context_id,
            "status": self.status(state),
        }})
    }

    /// The stream events for one history event of the task (by its
    /// event name); unknown names give none.
    pub fn events_for(&self, event: Option<&str>) -> Vec<Value> {
        match event {
            Some("task_started") => vec![self.status_update(TaskState::Running)],
            Some("result") => {
                let mut out = Vec::new();
                if let Some(a) = self.artifact() {
                    out.push(json!({"artifactUpdate": {
                        "taskId": self.id,
                        "contextId": self.context_id,
                        "artifact": a,
                        "lastChunk": true,
                    }}));
                }
                out.push(self.status_update(TaskState::Completed));
                out
            }
            Some("error") => vec![self.status_update(TaskState::Failed)],
            Some("cancelled") => vec![self.status_update(TaskState::Cancelled)],
            _ => Vec::new(),
        }
    }

    /// The first event of a stream: the task as it is now.
    pub fn first_event(&self) -> Value {
        json!({"task": self.task()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::error::ErrorCode;

    fn view(state: TaskState) -> TaskView {
        TaskView {
            id: "h1".into(),
            context_id: "c1".into(),
            state,
            skill: "echo".into(),
            capability: "echo.cap".into(),
            result: (state == TaskState::Completed).then(|| TaskResult {
                status: 200,
                content_type: Some("application/json".into()),
                body: br#"{"ok":true}"#.to_vec(),
            }),
            failure: (state == TaskState::Failed)
                .then(|| TaskFailure::new(ErrorCode::UpstreamUnknown, "handler went away")),
        }
    }

    #[test]
    fn every_state_has_its_spec_name() {
        assert_eq!(state_name(TaskState::Pending), "TASK_STATE_SUBMITTED");
        assert_eq!(state_name(TaskState::Running), "TASK_STATE_WORKING");
        assert_eq!(state_name(TaskState::Completed), "TASK_STATE_COMPLETED");
        assert_eq!(state_name(TaskState::Failed), "TASK_STATE_FAILED");
        assert_eq!(state_name(TaskState::Cancelled), "TASK_STATE_CANCELED");
    }

    #[test]
    fn a_completed_task_carries_its_artifact() {
        let t = view(TaskState::Completed).task();
        assert_eq!(t["id"], "h1");
        assert_eq!(t["contextId"], "c1");
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(t["artifacts"][0]["parts"][0]["data"]["ok"], true);
        assert!(view(TaskState::Running).task().get("artifacts").is_none());
    }

    #[test]
    fn a_failed_task_says_why_in_its_status_message() {
        let t = view(TaskState::Failed).task();
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        let text = t["status"]["message"]["parts"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("upstream_unknown: handler went away"),
            "{text}"
        );
        assert_eq!(t["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(t["metadata"]["error"]["code"], "upstream_unknown");
    }

    #[test]
    fn history_events_map_to_stream_responses() {
        let v = view(TaskState::Completed);
        assert_eq!(
            v.events_for(Some("task_started"))[0]["statusUpdate"]["status"]["state"],
            "TASK_STATE_WORKING"
        );
        let done = v.events_for(Some("result"));
        assert_eq!(done.len(), 2);
        assert_eq!(
            done[0]["artifactUpdate"]["artifact"]["artifactId"],
            ARTIFACT_ID
        );
        assert_eq!(
            done[1]["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        assert_eq!(
            view(TaskState::Cancelled).events_for(Some("cancelled"))[0]["statusUpdate"]["status"]
                ["state"],
            "TASK_STATE_CANCELED"
        );
        assert!(v.events_for(Some("other")).is_empty());
        assert_eq!(v.first_event()["task"]["id"], "h1");
    }
}

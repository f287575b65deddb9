//! `/agent/v1/tasks/{id}[/events|/result]`: status, events, result and
//! cancel of a caller's task, wherever it lives (`pipeline::remote`).

use http::request::Parts;
use http::Response;

use crate::api::error::ApiError;
use crate::api::task_request::TaskRequest;
use crate::body::Body;
use crate::front::{authenticate, Ctx, Need};
use crate::router::TaskOp;

/// Needs `agent.invoke` and the task token; a wrong token, an unknown id
/// or another tenant's task read as 404.
pub async fn task(
    cx: &Ctx,
    parts: &Parts,
    id: &str,
    op: TaskOp,
) -> Result<Response<Body>, ApiError> {
    let who = authenticate(cx, parts, Need::Invoke)?;
    let req = TaskRequest::of_request(id, op, parts.uri.query(), &parts.headers)?;
    if let Some(a) = cx.ingress.pin() {
        // At an agent's address: that agent's tasks on this router only.
        let route = crate::task::TaskId::parse(id)
            .and_then(|t| cx.state.tasks.borrow_mut().task(&t)?.route_id.clone());
        if !route.is_some_and(|r| crate::pipeline::decision::is_agents_route(&cx.state, a, &r)) {
            return Err(crate::pipeline::stream::not_this_agents(a));
        }
    }
    crate::pipeline::remote::task_op(&cx.state, &req, who.as_ref().map(|v| &*v.tenant)).await
}

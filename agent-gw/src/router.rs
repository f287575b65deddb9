//! The route table of the SDK API: (method, path) → endpoint.
//!
//! Pure, so the whole table is a unit test. Paths are matched exactly (no
//! trailing-slash or case games); query strings are the endpoint's
//! business.

use http::Method;

/// Task sub-resources (`/agent/v1/tasks/{id}[/...]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskOp {
    Status,
    Events,
    Result,
    Cancel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint<'p> {
    Healthz,
    Authentication,
    Bootstrap,
    Register,
    Renew,
    Unregister,
    Route,
    Invoke,
    InvokeStream,
    Task {
        id: &'p str,
        op: TaskOp,
    },
    /// An A2A agent card: the router's (`None`) or one mapping's.
    A2aCard {
        agent: Option<&'p str>,
    },
    /// An A2A JSON-RPC endpoint: the router's (`None`) or one mapping's.
    A2aRpc {
        agent: Option<&'p str>,
    },
    /// MCP Streamable HTTP; every method is the endpoint's to judge
    /// (the revision decides which are allowed).
    Mcp,
}

impl Endpoint<'_> {
    /// Served on the public listener too: invocation and tasks, not the
    /// LAN's registration and bootstrap.
    pub fn public(&self) -> bool {
        !matches!(
            self,
            Endpoint::Bootstrap | Endpoint::Register | Endpoint::Renew | Endpoint::Unregister
        )
    }

    /// Served at an agent's own address: calls to that agent and their
    /// tasks, the health check and the authentication document — never
    /// what would list or reach other agents (`route`, MCP, A2A).
    pub fn agent(&self) -> bool {
        matches!(
            self,
            Endpoint::Invoke
                | Endpoint::InvokeStream
                | Endpoint::Task { .. }
                | Endpoint::Healthz
                | Endpoint::Authentication
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoEndpoint {
    NotFound,
    /// Known path, wrong method; the value is the `Allow` header.
    MethodNotAllowed(&'static str),
}

/// Longest task id accepted in a path.
pub const MAX_TASK_ID: usize = 128;

pub fn resolve<'p>(method: &Method, path: &'p str) -> Result<Endpoint<'p>, NoEndpoint> {
    use Endpoint::*;
    let (ep, allow) = match path {
        "/mcp" => return Ok(Mcp),
        "/healthz" => (Healthz, "GET"),
        "/agent/v1/authentication" => (Authentication, "GET"),
        "/agent/v1/bootstrap" => (Bootstrap, "POST"),
        "/agent/v1/register" => (Register, "POST"),
        "/agent/v1/renew" => (Renew, "POST"),
        "/agent/v1/unregister" => (Unregister, "POST"),
        "/agent/v1/route" => (Route, "POST"),
        "/agent/v1/invoke" => (Invoke, "POST"),
        "/agent/v1/invoke-stream" => (InvokeStream, "POST"),
        "/.well-known/agent-card.json" => (A2aCard { agent: None }, "GET"),
        "/a2a" => (A2aRpc { agent: None }, "POST"),
        _ if path.starts_with("/a2a/") => return a2a_agent(method, path),
        _ => return task(method, path),
    };
    let ok = match allow {
        "GET" => method == Method::GET || method == Method::HEAD,
        _ => method == Method::POST,
    };
    if ok {
        Ok(ep)
    } else {
        Err(NoEndpoint::MethodNotAllowed(allow))
    }
}

/// Longest mapping name in an `/a2a/<name>` path.
pub const MAX_AGENT_NAME: usize = 128;

/// `/a2a/<name>` (JSON-RPC) and `/a2a/<name>/.well-known/agent-card.json`.
fn a2a_agent<'p>(method: &Method, path: &'p str) -> Result<Endpoint<'p>, NoEndpoint> {
    let rest = path.strip_prefix("/a2a/").ok_or(NoEndpoint::NotFound)?;
    let (name, card) = match rest.split_once('/') {
        None => (rest, false),
        Some((name, ".well-known/agent-card.json")) => (name, true),
        Some(_) => return Err(NoEndpoint::NotFound),
    };
    if name.is_empty() || name.len() > MAX_AGENT_NAME {
        return Err(NoEndpoint::NotFound);
    }
    let agent = Some(name);
    match (card, method) {
        (true, m) if m == Method::GET || m == Method::HEAD => Ok(Endpoint::A2aCard { agent }),
        (true, _) => Err(NoEndpoint::MethodNotAllowed("GET")),
        (false, m) if m == Method::POST => Ok(Endpoint::A2aRpc { agent }),
        (false, _) => Err(NoEndpoint::MethodNotAllowed("POST")),
    }
}

fn task<'p>(method: &Method, path: &'p str) -> Result<Endpoint<'p>, NoEndpoint> {
    let rest = path
        .strip_prefix("/agent/v1/tasks/")
        .ok_or(NoEndpoint::NotFound)?;
    let (id, sub) = match rest.split_once('/') {
        Some((id, sub)) => (id, Some(sub)),
        None => (rest, None),
    };
    if id.is_empty() || id.len() > MAX_TASK_ID {
        return Err(NoEndpoint::NotFound);
    }
    let (op, allow) = match sub {
        None if method == Method::GET => (TaskOp::Status, ""),
        None if method == Method::DELETE => (TaskOp::Cancel, ""),
        None => return Err(NoEndpoint::MethodNotAllowed("GET, DELETE")),
        Some("events") => (TaskOp::Events, "GET"),
        Some("result") => (TaskOp::Result, "GET"),
        Some(_) => return Err(NoEndpoint::NotFound),
    };
    if !allow.is_empty() && method != Method::GET {
        return Err(NoEndpoint::MethodNotAllowed(allow));
    }
    Ok(Endpoint::Task { id, op })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sdk_endpoint_resolves() {
        let post = Method::POST;
        assert_eq!(resolve(&Method::GET, "/healthz"), Ok(Endpoint::Healthz));
        assert_eq!(
            resolve(&Method::GET, "/agent/v1/authentication"),
            Ok(Endpoint::Authentication)
        );
        assert_eq!(
            resolve(&post, "/agent/v1/bootstrap"),
            Ok(Endpoint::Bootstrap)
        );
        assert_eq!(resolve(&post, "/agent/v1/register"), Ok(Endpoint::Register));
        assert_eq!(resolve(&post, "/agent/v1/renew"), Ok(Endpoint::Renew));
        assert_eq!(
            resolve(&post, "/agent/v1/unregister"),
            Ok(Endpoint::Unregister)
        );
        assert_eq!(resolve(&post, "/agent/v1/route"), Ok(Endpoint::Route));
        assert_eq!(resolve(&post, "/agent/v1/invoke"), Ok(Endpoint::Invoke));
        assert_eq!(
            resolve(&post, "/agent/v1/invoke-stream"),
            Ok(Endpoint::InvokeStream)
        );
    }

    #[test]
    fn task_paths_resolve_with_their_id() {
        let t = |m: &Method, p| resolve(m, p);
        assert_eq!(
            t(&Method::GET, "/agent/v1/tasks/t1"),
            Ok(Endpoint::Task {
                id: "t1",
                op: TaskOp::Status
            })
        );
        assert_eq!(
            t(&Method::DELETE, "/agent/v1/tasks/t1"),
            Ok(Endpoint::Task {
                id: "t1",
                op: TaskOp::Cancel
            })
        );
        assert_eq!(
            t(&Method::GET, "/agent/v1/tasks/t1/events"),
            Ok(Endpoint::Task {
                id: "t1",
                op: TaskOp::Events
            })
        );
        assert_eq!(
            t(&Method::GET, "/agent/v1/tasks/t1/result"),
            Ok(Endpoint::Task {
                id: "t1",
                op: TaskOp::Result
            })
        );
        assert_eq!(
            t(&Method::POST, "/agent/v1/tasks/t1"),
            Err(NoEndpoint::MethodNotAllowed("GET, DELETE"))
        );
        assert_eq!(
            t(&Method::GET, "/agent/v1/tasks/"),
            Err(NoEndpoint::NotFound)
        );
        assert_eq!(
            t(&Method::GET, "/agent/v1/tasks/t1/other"),
            Err(NoEndpoint::NotFound)
        );
    }

    #[test]
    fn registration_and_bootstrap_stay_off_the_public_listener() {
        let post = Method::POST;
        for p in [
            "/agent/v1/register",
            "/agent/v1/renew",
            "/agent/v1/unregister",
            "/agent/v1/bootstrap",
        ] {
            assert!(!resolve(&post, p).unwrap().public(), "{p}");
        }
        for p in [
            "/agent/v1/invoke",
            "/agent/v1/invoke-stream",
            "/agent/v1/route",
        ] {
            assert!(resolve(&post, p).unwrap().public(), "{p}");
        }
        assert!(resolve(&Method::GET, "/agent/v1/tasks/t1")
            .unwrap()
            .public());
        assert!(resolve(&Method::GET, "/healthz").unwrap().public());
    }

    #[test]
    fn a2a_paths_resolve_with_their_agent() {
        let get = Method::GET;
        let post = Method::POST;
        assert_eq!(
            resolve(&get, "/.well-known/agent-card.json"),
            Ok(Endpoint::A2aCard { agent: None })
        );
        assert_eq!(resolve(&post, "/a2a"), Ok(Endpoint::A2aRpc { agent: None }));
        assert_eq!(
            resolve(&post, "/a2a/echo"),
            Ok(Endpoint::A2aRpc {
                agent: Some("echo")
            })
        );
        assert_eq!(
            resolve(&get, "/a2a/echo/.well-known/agent-card.json"),
            Ok(Endpoint::A2aCard {
                agent: Some("echo")
            })
        );
        assert_eq!(
            resolve(&get, "/a2a"),
            Err(NoEndpoint::MethodNotAllowed("POST"))
        );
        assert_eq!(
            resolve(&get, "/a2a/echo"),
            Err(NoEndpoint::MethodNotAllowed("POST"))
        );
        assert_eq!(
            resolve(&post, "/a2a/echo/.well-known/agent-card.json"),
            Err(NoEndpoint::MethodNotAllowed("GET"))
        );
        assert_eq!(resolve(&post, "/a2a/"), Err(NoEndpoint::NotFound));
        assert_eq!(resolve(&post, "/a2a/echo/x"), Err(NoEndpoint::NotFound));
        let long = format!("/a2a/{}", "n".repeat(MAX_AGENT_NAME + 1));
        assert_eq!(resolve(&post, &long), Err(NoEndpoint::NotFound));
    }

    #[test]
    fn mcp_takes_every_method() {
        for m in [Method::POST, Method::GET, Method::DELETE, Method::PUT] {
            assert_eq!(resolve(&m, "/mcp"), Ok(Endpoint::Mcp));
        }
        assert_eq!(resolve(&Method::POST, "/mcp/"), Err(NoEndpoint::NotFound));
    }

    #[test]
    fn wrong_method_and_unknown_paths_are_told_apart() {
        assert_eq!(
            resolve(&Method::GET, "/agent/v1/invoke"),
            Err(NoEndpoint::MethodNotAllowed("POST"))
        );
        assert_eq!(
            resolve(&Method::POST, "/healthz"),
            Err(NoEndpoint::MethodNotAllowed("GET"))
        );
        assert_eq!(
            resolve(&Method::POST, "/agent/v1/invoke/"),
            Err(NoEndpoint::NotFound)
        );
        assert_eq!(
            resolve(&Method::POST, "/agent/v2/invoke"),
            Err(NoEndpoint::NotFound)
        );
    }
}

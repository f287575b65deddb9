//! `_native.Server`: the served handler endpoint, calling Python handlers.
//!
//! Callback contract (the Python package implements it):
//! * `on_invoke(mode, body, headers)` — `mode` is `"sync"`, `"async"` or
//!   `"stream"`, `body` the validated envelope bytes, `headers` a dict with
//!   lower-case names. Returns `(status, [(name, value)], body_bytes)` or,
//!   for a stream, an iterator of `("event", name_or_None, data)` /
//!   `("error", code, message)` tuples.
//! * `on_task(method, path, query, headers, body)` — the same reply tuple.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::endpoint::{Endpoint, Handlers, Invocation, ItemSource, Mode, StreamItem};
use crate::envelope::Envelope;
use crate::server::{self, Cancel, Reply, Request, ServerConfig};

struct PyHandlers {
    on_invoke: Py<PyAny>,
    on_task: Py<PyAny>,
}

fn headers_dict<'py>(py: Python<'py>, req: &Request) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (n, v) in &req.headers.0 {
        d.set_item(n.to_ascii_lowercase(), v)?;
    }
    Ok(d)
}

fn reply_from(obj: &Bound<'_, PyAny>) -> PyResult<Reply> {
    let (status, headers, body): (u16, Vec<(String, String)>, Vec<u8>) = obj.extract()?;
    Ok(Reply::Full {
        status,
        headers,
        body,
    })
}

fn internal(e: PyErr) -> Reply {
    Python::attach(|py| e.print(py));
    Reply::error(500, "handler_failed", "agent handler dispatch failed")
}

impl Handlers for PyHandlers {
    fn invoke(&self, mode: Mode, _envelope: &Envelope, req: &Request) -> Invocation {
        let mode_name = match mode {
            Mode::Sync => "sync",
            Mode::Async => "async",
            Mode::Stream => "stream",
        };
        Python::attach(|py| {
            let result = (|| -> PyResult<Invocation> {
                let body = PyBytes::new(py, &req.body);
                let cancel = Py::new(
                    py,
                    CancelHandle {
                        inner: req.cancel.clone(),
                    },
                )?;
                let args = (mode_name, body, headers_dict(py, req)?, cancel);
                let out = self.on_invoke.bind(py).call1(args)?;
                if mode == Mode::Stream && !out.is_instance_of::<pyo3::types::PyTuple>() {
                    let iter = out.try_iter()?.into_any().unbind();
                    return Ok(Invocation::Stream(Box::new(PyItems { iter: Some(iter) })));
                }
                Ok(Invocation::Reply(reply_from(&out)?))
            })();
            result.unwrap_or_else(|e| Invocation::Reply(internal(e)))
        })
    }

    fn task(&self, req: &Request) -> Reply {
        Python::attach(|py| {
            let result = (|| -> PyResult<Reply> {
                let body = PyBytes::new(py, &req.body);
                let args = (
                    req.method.as_str(),
                    req.path(),
                    req.query(),
                    headers_dict(py, req)?,
                    body,
                );
                reply_from(&self.on_task.bind(py).call1(args)?)
            })();
            result.unwrap_or_else(internal)
        })
    }
}

/// Fires when the caller of a synchronous invocation hangs up (the
/// router's way to cancel). `on_cancel(fn)` runs `fn()` then (or at once).
#[pyclass(module = "agentd_sdk._native")]
#[derive(Debug)]
pub struct CancelHandle {
    inner: Arc<Cancel>,
}

#[pymethods]
impl CancelHandle {
    #[getter]
    fn cancelled(&self) -> bool {
        self.inner.is_fired()
    }

    fn on_cancel(&self, py: Python<'_>, callback: Py<PyAny>) {
        let hook = Box::new(move || {
            Python::attach(|py| {
                if let Err(e) = callback.call0(py) {
                    e.print(py);
                }
            })
        });
        // The hook may run at once (already cancelled): do not hold the GIL
        // across the registry lock.
        py.detach(|| self.inner.on_cancel(hook));
    }
}

/// A Python iterator of stream items; `cancel` closes the generator so the
/// handler sees `GeneratorExit` (cancellation reaches the handler).
struct PyItems {
    iter: Option<Py<PyAny>>,
}

impl ItemSource for PyItems {
    fn next_item(&mut self) -> Option<StreamItem> {
        let iter = self.iter.as_ref()?;
        Python::attach(|py| {
            let it = iter.bind(py);
            let next = match it.call_method0("__next__") {
                Ok(v) => v,
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => return None,
                Err(e) => {
                    e.print(py);
                    return Some(StreamItem::Failed {
                        code: "handler_failed".into(),
                        message: "stream handler raised an exception".into(),
                    });
                }
            };
            let item = (|| -> PyResult<StreamItem> {
                let (kind, a, b): (String, Option<String>, String) = next.extract()?;
                Ok(match kind.as_str() {
                    "error" => StreamItem::Failed {
                        code: a.unwrap_or_else(|| "handler_failed".into()),
                        message: b,
                    },
                    _ => StreamItem::Event { event: a, data: b },
                })
            })();
            Some(item.unwrap_or_else(|e| StreamItem::Failed {
                code: "invalid_event".into(),
                message: e.to_string(),
            }))
        })
    }

    fn cancel(&mut self) {
        if let Some(iter) = self.iter.take() {
            Python::attach(|py| {
                let it = iter.bind(py);
                if it.hasattr("close").unwrap_or(false) {
                    if let Err(e) = it.call_method0("close") {
                        e.print(py);
                    }
                }
            });
        }
    }
}

impl Drop for PyItems {
    fn drop(&mut self) {
        // A stream that ended normally needs no close; one dropped early
        // (connection error before the end) must still release the handler.
        self.cancel();
    }
}

/// The HTTP server the router forwards envelopes to.
#[pyclass(module = "agentd_sdk._native")]
#[derive(Debug)]
pub struct Server {
    inner: Mutex<Option<server::Server>>,
    addr: SocketAddr,
}

#[pymethods]
impl Server {
    // The arguments mirror the Python keyword signature.
    #[allow(clippy::too_many_arguments)]
    #[new]
    #[pyo3(signature = (host, port, path, on_invoke, on_task, max_body=1048576, max_connections=64))]
    fn new(
        py: Python<'_>,
        host: &str,
        port: u16,
        path: &str,
        on_invoke: Py<PyAny>,
        on_task: Py<PyAny>,
        max_body: usize,
        max_connections: usize,
    ) -> PyResult<Self> {
        if !path.starts_with('/')
            || path.contains(['?', '#'])
            || path.starts_with("/agent/v1/tasks")
        {
            return Err(PyValueError::new_err(format!(
                "endpoint path {path:?} must be an absolute path"
            )));
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| PyOSError::new_err(format!("cannot resolve listen host {host:?}: {e}")))?
            .next()
            .ok_or_else(|| PyOSError::new_err(format!("listen host {host:?} has no address")))?;
        let cfg = ServerConfig {
            max_body,
            max_connections,
            idle_timeout: Duration::from_secs(30),
        };
        let endpoint = Endpoint::new(path, PyHandlers { on_invoke, on_task });
        let srv = py
            .detach(|| server::Server::start(addr, cfg, Arc::new(endpoint)))
            .map_err(|e| PyOSError::new_err(format!("cannot listen on {addr}: {e}")))?;
        let addr = srv.local_addr();
        Ok(Server {
            inner: Mutex::new(Some(srv)),
            addr,
        })
    }

    /// The bound port (useful with port 0).
    #[getter]
    fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The bound host address.
    #[getter]
    fn host(&self) -> String {
        self.addr.ip().to_string()
    }

    /// Connections being served right now.
    fn active(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |s| s.active())
    }

    /// Stops serving; waits up to `grace` seconds for running handlers.
    #[pyo3(signature = (grace=2.0))]
    fn close(&self, py: Python<'_>, grace: f64) {
        let srv = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut s) = srv {
            let grace = Duration::from_secs_f64(grace.clamp(0.0, 60.0));
            py.detach(move || s.shutdown(grace));
        }
    }
}

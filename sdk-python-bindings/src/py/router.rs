//! `_native.RouterClient`, `_native.LeaseKeeper`, `_native.EventStream`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::{call_err, StreamError as PyStreamError};
use crate::auth::{Mode, TokenSource};
use crate::call::{Client, Router};
use crate::keeper::{Keeper, Registration};
use crate::router_url::HttpUrl;
use crate::stream::{self, StreamError};

/// `(status, headers, body)` of a 2xx reply.
type RawReply<'py> = (u16, Vec<(String, String)>, Bound<'py, PyBytes>);
/// `(id, event, data)` of one stream event.
type RawEvent = (Option<u64>, Option<String>, String);

fn secs(t: f64) -> PyResult<Duration> {
    if !(t.is_finite() && t > 0.0 && t <= 86_400.0) {
        return Err(PyValueError::new_err(format!(
            "timeout {t} must be in (0, 86400] seconds"
        )));
    }
    Ok(Duration::from_secs_f64(t))
}

/// An HTTP client for one router, with its bearer-token source.
#[pyclass(module = "agentd_sdk._native")]
#[derive(Debug)]
pub struct RouterClient {
    client: Arc<Client>,
}

#[pymethods]
impl RouterClient {
    /// `token`: a static bearer token. Without one and with
    /// `discover_auth`, asks `GET /agent/v1/authentication` whether the
    /// router offers trusted-LAN bootstrap for (`tenant`, `origin`).
    #[new]
    #[pyo3(signature = (url, token=None, tenant="default", origin="", discover_auth=true, timeout=10.0))]
    fn new(
        py: Python<'_>,
        url: &str,
        token: Option<String>,
        tenant: &str,
        origin: &str,
        discover_auth: bool,
        timeout: f64,
    ) -> PyResult<Self> {
        let url = HttpUrl::parse(url).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let router = Router { url };
        let mode = match token {
            Some(t) if !t.is_empty() => {
                if t.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
                    return Err(PyValueError::new_err(
                        "token contains characters not allowed in a header",
                    ));
                }
                Mode::Static(t)
            }
            _ if discover_auth => {
                let timeout = secs(timeout)?;
                py.detach(|| TokenSource::discover(&router, tenant, origin, timeout))
                    .map_err(call_err)?
            }
            _ => Mode::None,
        };
        Ok(RouterClient {
            client: Arc::new(Client {
                router,
                tokens: TokenSource::new(mode),
            }),
        })
    }

    #[getter]
    fn url(&self) -> String {
        self.client.router.url.to_string()
    }

    /// `"none"`, `"static"` or `"bootstrap"`.
    #[getter]
    fn auth_mode(&self) -> &'static str {
        match self.client.tokens.mode() {
            Mode::None => "none",
            Mode::Static(_) => "static",
            Mode::Bootstrap { .. } => "bootstrap",
        }
    }

    /// Sends one authenticated request; returns `(status, headers, body)`
    /// for a 2xx answer and raises `CallError` otherwise.
    #[pyo3(signature = (method, target, body=None, headers=Vec::new(), timeout=10.0))]
    fn request<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        target: &str,
        body: Option<Vec<u8>>,
        headers: Vec<(String, String)>,
        timeout: f64,
    ) -> PyResult<RawReply<'py>> {
        if !target.starts_with('/') {
            return Err(PyValueError::new_err(format!(
                "target {target:?} must start with '/'"
            )));
        }
        let timeout = secs(timeout)?;
        let body = body.unwrap_or_default();
        let client = self.client.clone();
        let resp = py
            .detach(|| client.call(method, target, &headers, &body, timeout))
            .map_err(call_err)?;
        Ok((resp.status, resp.headers.0, PyBytes::new(py, &resp.body)))
    }
}

/// Registers routes and keeps their leases alive on a Rust thread.
#[pyclass(module = "agentd_sdk._native")]
#[derive(Debug)]
pub struct LeaseKeeper {
    inner: Mutex<Keeper>,
}

#[pymethods]
impl LeaseKeeper {
    /// `registrations`: `(json_body, lease_seconds)` pairs. Registers all
    /// of them before returning; raises `CallError` (and withdraws what it
    /// registered) when the router refuses one.
    #[new]
    #[pyo3(signature = (client, registrations, timeout=10.0))]
    fn new(
        py: Python<'_>,
        client: &RouterClient,
        registrations: Vec<(Vec<u8>, u64)>,
        timeout: f64,
    ) -> PyResult<Self> {
        let timeout = secs(timeout)?;
        let regs: Vec<Registration> = registrations
            .into_iter()
            .map(|(body, lease_seconds)| Registration {
                body,
                lease_seconds,
            })
            .collect();
        let c = client.client.clone();
        let keeper = py
            .detach(|| Keeper::start(c, regs, timeout))
            .map_err(call_err)?;
        Ok(LeaseKeeper {
            inner: Mutex::new(keeper),
        })
    }

    /// One dict per registration: route_id, generation, lease_seconds,
    /// renewals, reregistrations, failures, last_error, and the public-IPv6
    /// answer of the last register reply: public_ipv6 (str or None),
    /// public_url (`https://[addr]:port` or None), public_endpoint (dict of
    /// address, port, scheme, tls_server_name, ca_bundle_id, or None) and
    /// public_ipv6_status (dict of address, served and, when not served,
    /// reason; or None).
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let status = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .status();
        status
            .into_iter()
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("route_id", s.route_id)?;
                d.set_item("generation", s.generation)?;
                d.set_item("lease_seconds", s.lease_seconds)?;
                d.set_item("renewals", s.renewals)?;
                d.set_item("reregistrations", s.reregistrations)?;
                d.set_item("failures", s.failures)?;
                d.set_item("last_error", s.last_error)?;
                d.set_item("public_ipv6", s.public_ipv6)?;
                d.set_item("public_url", s.public_url)?;
                let endpoint = match s.public_endpoint {
                    Some(e) => {
                        let ed = PyDict::new(py);
                        ed.set_item("address", e.address.to_string())?;
                        ed.set_item("port", e.port)?;
                        ed.set_item("scheme", e.scheme.as_str())?;
                        ed.set_item("tls_server_name", e.tls_server_name)?;
                        ed.set_item("ca_bundle_id", e.ca_bundle_id)?;
                        Some(ed)
                    }
                    None => None,
                };
                d.set_item("public_endpoint", endpoint)?;
                let status = match s.public_ipv6_status {
                    Some(st) => {
                        let sd = PyDict::new(py);
                        sd.set_item("address", st.address.map(|a| a.to_string()))?;
                        sd.set_item("served", st.served)?;
                        if let Some(reason) = st.reason {
                            sd.set_item("reason", reason)?;
                        }
                        Some(sd)
                    }
                    None => None,
                };
                d.set_item("public_ipv6_status", status)?;
                Ok(d)
            })
            .collect()
    }

    /// Stops renewing and withdraws the routes; returns withdrawal errors.
    fn close(&self, py: Python<'_>) -> Vec<String> {
        py.detach(|| {
            let mut k = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            k.close().into_iter().map(|e| e.to_string()).collect()
        })
    }
}

/// Iterator over `(id, event, data)` of a resumable stream.
#[pyclass(module = "agentd_sdk._native")]
#[derive(Debug)]
pub struct EventStream {
    inner: Mutex<stream::EventStream>,
}

#[pymethods]
impl EventStream {
    #[new]
    #[pyo3(signature = (client, envelope, start_after=0, max_reconnects=5, timeout=10.0, read_timeout=None))]
    fn new(
        client: &RouterClient,
        envelope: Vec<u8>,
        start_after: u64,
        max_reconnects: u32,
        timeout: f64,
        read_timeout: Option<f64>,
    ) -> PyResult<Self> {
        let read_timeout = read_timeout.map(secs).transpose()?;
        let s = stream::EventStream::new(
            client.client.clone(),
            &envelope,
            start_after,
            max_reconnects,
            secs(timeout)?,
            read_timeout,
        )
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(EventStream {
            inner: Mutex::new(s),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<RawEvent>> {
        let next = py.detach(|| {
            self.inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .next_event()
        });
        match next {
            Ok(Some(e)) => Ok(Some((
                e.id.and_then(|i| i.trim().parse().ok()),
                e.event,
                e.data,
            ))),
            Ok(None) => Ok(None),
            Err(StreamError::Call(c)) => Err(call_err(c)),
            Err(e) => Err(PyStreamError::new_err(e.to_string())),
        }
    }

    /// Last delivered event id (0: none yet).
    #[getter]
    fn cursor(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cursor()
    }

    #[getter]
    fn reconnects(&self) -> u32 {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .reconnects()
    }

    /// The router's `X-Nexus-Task-Id` for this stream, once connected.
    #[getter]
    fn task_id(&self) -> Option<String> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .task_id
            .clone()
    }
}

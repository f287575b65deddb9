//! PyO3 glue: the `agentd_sdk._native` module.
//!
//! Thin by intent. Every blocking call releases the GIL (`py.detach`);
//! the served endpoint's threads take the GIL only for the handler call
//! itself; the lease keeper never takes it. Errors cross as
//! `_native.CallError(kind, status, code, message, not_delivered)` and
//! `_native.StreamError(message)`; the Python package maps them onto its
//! exception hierarchy.

mod router;
mod serve;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use crate::call::CallError as RustCallError;
use crate::router_url;

create_exception!(
    _native,
    CallError,
    PyException,
    "A router call failed (args: kind, status, code, message, not_delivered, outcome, reason)."
);
create_exception!(
    _native,
    StreamError,
    PyException,
    "A stream broke and could not be resumed."
);

/// Converts a router call failure into `_native.CallError`.
pub(crate) fn call_err(e: RustCallError) -> PyErr {
    match e {
        RustCallError::Transport {
            not_delivered,
            timeout,
            message,
        } => {
            let kind = if timeout { "timeout" } else { "transport" };
            CallError::new_err((
                kind,
                0u16,
                String::new(),
                message,
                not_delivered,
                None::<String>,
                None::<String>,
            ))
        }
        RustCallError::Status {
            status,
            code,
            message,
            detail,
        } => CallError::new_err((
            "status",
            status,
            code,
            message,
            false,
            detail.outcome,
            detail.reason,
        )),
        RustCallError::Decode(message) => CallError::new_err((
            "decode",
            0u16,
            String::new(),
            message,
            false,
            None::<String>,
            None::<String>,
        )),
    }
}

/// Resolves `"auto"` or a URL to the router's base URL: an explicit URL,
/// then `AGENTD_ROUTER_URL`, then a bounded `_agentd._tcp` browse, then
/// the IPv4 default gateway on :7446. Returns the URL and where it came
/// from (`explicit`, `environment`, `dns-sd`, `default-gateway`). The
/// browse runs without the GIL.
#[pyfunction]
fn resolve_router(py: Python<'_>, router: &str) -> PyResult<(String, &'static str)> {
    let env = std::env::var("AGENTD_ROUTER_URL").ok();
    let text = std::fs::read_to_string("/proc/net/route").ok();
    py.detach(|| {
        let routes = crate::browse::Routes::parse(text.as_deref().unwrap_or(""));
        let browse = || {
            // An mDNS socket that cannot be opened is a skipped step.
            let found = crate::browse::browse(crate::browse::WINDOW, &routes).ok()?;
            crate::browse::choose(&found, &routes)
        };
        router_url::resolve_router(router, env.as_deref(), text.as_deref(), browse)
    })
    .map(|(url, source)| {
        let source = match source {
            router_url::Source::Explicit => "explicit",
            router_url::Source::Environment => "environment",
            router_url::Source::DnsSd => "dns-sd",
            router_url::Source::DefaultGateway => "default-gateway",
        };
        (url.to_string(), source)
    })
    .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Returns the canonical advertise host or raises ValueError (loopback is
/// refused unless `allow_loopback`).
#[pyfunction]
fn check_advertise(host: &str, allow_loopback: bool) -> PyResult<String> {
    router_url::check_advertise(host, allow_loopback)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// `http://host:port/path`, bracketing IPv6 literals.
#[pyfunction]
fn endpoint_url(host: &str, port: u16, path: &str) -> String {
    router_url::endpoint_url(host, port, path)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CallError", m.py().get_type::<CallError>())?;
    m.add("StreamError", m.py().get_type::<StreamError>())?;
    m.add_function(wrap_pyfunction!(resolve_router, m)?)?;
    m.add_function(wrap_pyfunction!(check_advertise, m)?)?;
    m.add_function(wrap_pyfunction!(endpoint_url, m)?)?;
    m.add_class::<serve::Server>()?;
    m.add_class::<serve::CancelHandle>()?;
    m.add_class::<router::RouterClient>()?;
    m.add_class::<router::LeaseKeeper>()?;
    m.add_class::<router::EventStream>()?;
    Ok(())
}

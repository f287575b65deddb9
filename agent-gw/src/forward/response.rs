//! What of a handler's answer reaches the caller.
//!
//! The gateway answers on the router's own origin (`http://<router>:7446`),
//! and cookies, authentication prompts, `Alt-Svc` or `Clear-Site-Data` on
//! that origin would act on every other service of the router too (LuCI's
//! session cookie is host-scoped, not port-scoped). So a handler's headers
//! pass through an allow list: representation and caching metadata, trace
//! context and the handler's own `X-*` headers (nexilume's `X-Nexus-*` task
//! headers among them). Everything else is dropped, in particular every
//! hop-by-hop header and every header the handler's `Connection` header
//! names, and `X-Agentd-*`, which only the gateway sets.
//!
//! A redirect (3xx) is never followed and never relayed: the handler's
//! `Location` is in its own URL space, meaningless to the caller, so it
//! becomes a typed error that names it.
//!
//! Sans-IO: plain functions over heads, unit-tested here.

use http::{header, HeaderMap, HeaderName, StatusCode};

use agentd::route::RouteId;

use crate::api::error::{ApiError, ErrorCode, Outcome};

/// Largest handler response head (status line and headers) the gateway
/// reads; the same bound as request heads. A larger head fails the call
/// with `upstream_error` (outcome `error`).
pub const MAX_RESPONSE_HEAD_BYTES: usize = 16 * 1024;

/// The size of `resp`'s head as it came on the wire, give or take the
/// reason phrase: status line and `name: value` lines with their CRLFs.
pub fn head_len<B>(resp: &http::Response<B>) -> usize {
    let reason = resp.status().canonical_reason().map_or(0, str::len);
    let status_line = "HTTP/1.1 200 ".len() + reason + 2;
    let fields: usize = resp
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + 2 + v.len() + 2)
        .sum();
    status_line + fields + 2
}

/// Longest `Location` quoted in a redirect error.
const MAX_QUOTED_LOCATION: usize = 256;

/// Is `name` one of the headers a handler may pass to the caller (before
/// the `Connection` rule)? Representation and caching metadata, trace
/// context, and `X-*` but `X-Agentd-*`. A match on the name's text (lower
/// case in `HeaderName`): each of a handler's headers is looked at on
/// every call.
fn relayable(name: &HeaderName) -> bool {
    match name.as_str() {
        "content-type"
        | "content-encoding"
        | "content-language"
        | "content-disposition"
        | "cache-control"
        | "expires"
        | "etag"
        | "last-modified"
        | "vary"
        | "retry-after"
        | "traceparent"
        | "tracestate" => true,
        s => s.starts_with("x-") && !s.starts_with("x-agentd-"),
    }
}

/// Removes from a handler's response headers everything the caller must
/// not see (see the module doc). Allocates only when something is dropped.
pub fn filter_headers(headers: &mut HeaderMap) {
    // Headers named by `Connection` are hop-by-hop whatever their name.
    let mut named: Vec<HeaderName> = Vec::new();
    for v in headers.get_all(header::CONNECTION) {
        let Ok(s) = v.to_str() else { continue };
        for token in s.split(',') {
            if let Ok(name) = HeaderName::from_bytes(token.trim().as_bytes()) {
                named.push(name);
            }
        }
    }
    let mut drop: Vec<HeaderName> = Vec::new();
    for name in headers.keys() {
        if !relayable(name) || named.contains(name) {
            drop.push(name.clone());
        }
    }
    for name in &drop {
        headers.remove(name);
    }
}

/// [`filter_headers`] for an answer relayed from a peer router's gateway:
/// that gateway already filtered its handler's headers, and what it adds
/// itself is ours to relay — the outcome of a refusal and a task's
/// `Location` (the same URL space on every gateway).
pub fn filter_peer_headers(headers: &mut HeaderMap) {
    let outcome = headers.remove(OUTCOME_NAME);
    let location = headers.remove(header::LOCATION);
    filter_headers(headers);
    if let Some(v) = outcome {
        headers.insert(OUTCOME_NAME, v);
    }
    if let Some(v) = location {
        headers.insert(header::LOCATION, v);
    }
}

const OUTCOME_NAME: HeaderName = HeaderName::from_static(crate::forward::hop::OUTCOME_HEADER);

/// The typed error for a handler that answered a redirect.
pub fn redirect_error(
    capability: &str,
    route_id: &RouteId,
    status: StatusCode,
    headers: &HeaderMap,
) -> ApiError {
    let location = match headers.get(header::LOCATION) {
        None => "without a Location".to_string(),
        Some(v) => {
            let text = String::from_utf8_lossy(v.as_bytes());
            let mut quoted: String = text.chars().take(MAX_QUOTED_LOCATION).collect();
            if quoted.len() < text.len() {
                quoted.push('…');
            }
            format!("to {quoted:?}")
        }
    };
    ApiError::new(
        ErrorCode::HandlerRedirect,
        format!(
            "handler of {capability} on route {route_id} answered {status} {location}; \
             the gateway neither follows nor relays redirects"
        ),
    )
    .outcome(Outcome::Error)
    .capability(capability)
    .route_id(route_id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn names(h: &HeaderMap) -> Vec<&str> {
        let mut v: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn hop_by_hop_and_origin_acting_headers_are_dropped() {
        let mut h = map(&[
            ("connection", "keep-alive"),
            ("keep-alive", "timeout=5"),
            ("proxy-authenticate", "Basic"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("trailer", "x-sum"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("content-length", "12"),
            ("set-cookie", "sysauth=attacker; Path=/"),
            ("www-authenticate", "Basic realm=router"),
            ("alt-svc", "h2=\"evil:443\""),
            ("clear-site-data", "\"cookies\""),
            ("strict-transport-security", "max-age=1"),
            ("access-control-allow-origin", "*"),
            ("location", "/elsewhere"),
            ("server", "handler/1.0"),
            ("content-type", "application/json"),
        ]);
        filter_headers(&mut h);
        assert_eq!(names(&h), ["content-type"]);
    }

    #[test]
    fn handler_may_not_set_gateway_headers() {
        let mut h = map(&[
            ("x-agentd-route-id", "r-forged"),
            ("x-agentd-outcome", "rejected"),
            ("x-nexus-task-id", "t-1"),
            ("x-request-id", "abc"),
        ]);
        filter_headers(&mut h);
        assert_eq!(names(&h), ["x-nexus-task-id", "x-request-id"]);
    }

    #[test]
    fn headers_named_by_connection_are_dropped_with_every_value() {
        let mut h = map(&[
            ("connection", "X-Secret, close"),
            ("connection", " x-other "),
            ("x-secret", "1"),
            ("x-other", "2"),
            ("x-kept", "3"),
            ("cache-control", "no-store"),
            ("cache-control", "private"),
        ]);
        filter_headers(&mut h);
        assert_eq!(names(&h), ["cache-control", "x-kept"]);
        assert_eq!(h.get_all("cache-control").iter().count(), 2);
    }

    #[test]
    fn representation_caching_and_trace_headers_are_kept() {
        let mut h = map(&[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
            ("content-language", "en"),
            ("content-disposition", "inline"),
            ("cache-control", "no-store"),
            ("expires", "0"),
            ("etag", "\"1\""),
            ("last-modified", "Tue, 01 Dec 2026 08:00:00 GMT"),
            ("vary", "accept"),
            ("retry-after", "3"),
            ("traceparent", "00-a-b-01"),
            ("tracestate", "k=v"),
        ]);
        let before = h.len();
        filter_headers(&mut h);
        assert_eq!(h.len(), before);
    }

    #[test]
    fn redirect_error_names_status_and_a_bounded_location() {
        let route = RouteId::new("r-1").unwrap();
        let long = format!("http://evil/{}", "a".repeat(1000));
        let mut h = HeaderMap::new();
        h.insert(header::LOCATION, HeaderValue::from_str(&long).unwrap());
        let e = redirect_error("demo.echo", &route, StatusCode::FOUND, &h);
        assert_eq!(e.code, ErrorCode::HandlerRedirect);
        assert_eq!(e.code.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(e.outcome, Some(Outcome::Error));
        assert!(e.message.contains("302 Found"), "{}", e.message);
        assert!(e.message.contains("http://evil/aaa"), "{}", e.message);
        assert!(e.message.len() < 600, "location quoted unbounded");
        let none = redirect_error(
            "demo.echo",
            &route,
            StatusCode::NOT_MODIFIED,
            &HeaderMap::new(),
        );
        assert!(
            none.message.contains("without a Location"),
            "{}",
            none.message
        );
    }
}

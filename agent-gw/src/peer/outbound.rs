//! The sending end of one hop: the request to the next hop's gateway,
//! signed with a fresh forwarding assertion, on the warm connection.
//!
//! What the next hop needs to know travels explicitly: the assertion
//! (who calls, for which tenant and capability, over which body), the
//! base route id the call is pinned to, the deadline, and the caller's
//! relayed headers. A refusal the next hop made before dispatch comes
//! back marked `x-agentd-outcome: rejected | not_delivered`, which makes
//! it a "never delivered" failure here.

use std::error::Error as _;
use std::time::{SystemTime, UNIX_EPOCH};

use std::rc::Rc;

use edkey::Sha256;
use http::{header, HeaderMap, HeaderName, HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use tokio::time::Instant;

use crate::forward::deadline::DEADLINE_NAME;
use crate::forward::hop::{EndSign, HopBody, HopFuture, OutBody, PeerHop, OUTCOME_HEADER};
use crate::forward::ROUTE_ID_HEADER;
use crate::peer::assertion::Claims;
use crate::peer::{identity, PeerPlane, ASSERTION_HEADER};

const ASSERTION_NAME: HeaderName = HeaderName::from_static(ASSERTION_HEADER);
const ROUTE_ID_NAME: HeaderName = HeaderName::from_static(ROUTE_ID_HEADER);
const OUTCOME_NAME: HeaderName = HeaderName::from_static(OUTCOME_HEADER);

pub use crate::forward::hop::{CallIdentity, HopError, HopRequest};

/// The peer hop of a forwarder: requests sent over `plane`, signed with
/// assertions that live `ttl_ms`.
#[derive(Debug)]
pub struct Hop {
    pub plane: std::rc::Rc<PeerPlane>,
    pub ttl_ms: u64,
}

impl PeerHop for Hop {
    fn send<'a>(&'a self, req: HopRequest<'a>) -> HopFuture<'a> {
        Box::pin(send(&self.plane, self.ttl_ms, req))
    }
}

/// Sends `req` to its next hop and returns the next hop's answer.
pub async fn send(
    plane: &Rc<PeerPlane>,
    ttl_ms: u64,
    req: HopRequest<'_>,
) -> Result<Response<Incoming>, HopError> {
    let (mut sender, held) = plane
        .conns
        .sender(req.next_hop, req.deadline.instant())
        .await
        .map_err(|u| HopError::NotDelivered(u.0, None))?;
    let body = req.body.attempt().ok_or_else(|| {
        HopError::NotDelivered(
            "the request body in transit already left toward another path".into(),
            None,
        )
    })?;
    // Across a boundary the call carries a signed assertion; inside our
    // domain the link authenticates it and its identity rides in headers.
    // A body passed through from a link of our domain is signed once it
    // has passed: its assertion follows it in the trailers.
    let signed = plane.signed(req.next_hop);
    // Digested only to be signed: it is a pass over the whole body.
    let body_sha256 = if signed { digest(&req.body) } else { None };
    let (body, assertion) = match (body, body_sha256) {
        (b, _) if !signed => (b, None),
        (b, Some(d)) => {
            let c = claims(&req, d, plane.next_nonce(req.next_hop));
            (b, Some(sign(plane, ttl_ms, c).await?))
        }
        (HopBody::Transit(t), None) => {
            let template = claims(&req, [0; 32], [0; 16]);
            let sign = end_sign(plane.clone(), ttl_ms, template);
            (HopBody::signed_at_end(t, sign), None)
        }
        (b, None) => (b, None),
    };
    let uri: Uri = format!("https://{}{}", req.next_hop, req.path)
        .parse()
        .map_err(|e| HopError::NotDelivered(format!("request target: {e}"), None))?;
    let mut r = Request::new(body);
    *r.method_mut() = req.method.clone();
    *r.uri_mut() = uri;
    *r.version_mut() = http::Version::HTTP_2;
    let h = r.headers_mut();
    h.reserve(8 + req.relay.len());
    for (k, v) in req.relay {
        h.append(k, v.clone());
    }
    let invalid =
        |what: &str| HopError::NotDelivered(format!("{what} is not a valid header value"), None);
    match assertion {
        Some(a) => {
            h.insert(
                ASSERTION_NAME,
                assertion_value(&a).map_err(|_| invalid("the assertion"))?,
            );
        }
        None if signed => {
            h.insert(header::TRAILER, HeaderValue::from_static(ASSERTION_HEADER));
        }
        None => identity::encode(req.who, h),
    }
    h.insert(
        ROUTE_ID_NAME,
        HeaderValue::from_str(req.route).map_err(|_| invalid("the route id"))?,
    );
    if let Some(n) = req.hop_limit {
        h.insert(identity::HOP_LIMIT, HeaderValue::from(u16::from(n)));
    }
    if !req.body.is_empty() {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    h.insert(
        DEADLINE_NAME,
        HeaderValue::from(req.deadline.remaining_ms(Instant::now())),
    );
    req.sent.set(true);
    match sender.try_send_request(r).await {
        Ok(mut resp) => {
            if let Some(h) = held {
                resp.extensions_mut().insert(h);
            }
            match resp.headers().get(&OUTCOME_NAME).map(HeaderValue::as_bytes) {
                Some(b"rejected" | b"not_delivered") => Err(HopError::NotDelivered(
                    format!(
                        "router {} refused the call before dispatch ({})",
                        req.next_hop,
                        resp.status()
                    ),
                    Some(resp),
                )),
                _ => Ok(resp),
            }
        }
        Err(mut e) => {
            let unsent = e.take_message().is_some();
            if unsent {
                req.sent.set(false);
            }
            let e = e.into_error();
            if unsent || refused_stream(&e) {
                Err(HopError::NotDelivered(
                    format!("router {}: {e}", req.next_hop),
                    None,
                ))
            } else {
                Err(HopError::MaybeDelivered(format!(
                    "router {}: {e}",
                    req.next_hop
                )))
            }
        }
    }
}

/// The claims of `req`'s assertion over a body with `digest`. Source
/// and expiry are the signer's (one per batch).
fn claims(req: &HopRequest<'_>, digest: [u8; 32], nonce: [u8; 16]) -> Claims {
    Claims {
        source: String::new(),
        target: req.next_hop.to_string(),
        origin: req.who.origin.to_string(),
        caller: req.who.caller.to_string(),
        tenant: req.who.tenant.to_string(),
        capability: req.who.capability.to_string(),
        body_sha256: digest,
        nonce,
        expires_ms: 0,
    }
}

/// `claims` signed in this turn's batch, encoded.
async fn sign(plane: &PeerPlane, ttl_ms: u64, claims: Claims) -> Result<String, HopError> {
    let tls = plane.tls().ok_or_else(|| {
        HopError::NotDelivered("the peer data plane has no identity loaded".into(), None)
    })?;
    let (key, id) = tls.borrow().signer();
    Ok(plane
        .signer
        .sign(claims, ttl_ms, key, id)
        .await
        .ok_or_else(|| HopError::NotDelivered("the assertion signer went away".into(), None))?
        .encode())
}

/// The trailers of a body signed once it has passed: `template`'s
/// claims over its digest, with a nonce taken then (a long body must not
/// arrive behind the receiver's replay window).
fn end_sign(plane: Rc<PeerPlane>, ttl_ms: u64, template: Claims) -> EndSign {
    Box::new(move |digest| {
        Box::pin(async move {
            let claims = Claims {
                body_sha256: digest,
                nonce: plane.next_nonce(&template.target),
                ..template
            };
            let a = sign(&plane, ttl_ms, claims).await.map_err(|e| match e {
                HopError::NotDelivered(why, _) | HopError::MaybeDelivered(why) => why,
            })?;
            let mut t = HeaderMap::new();
            t.insert(
                ASSERTION_NAME,
                assertion_value(&a)
                    .map_err(|_| "the assertion is not a header value".to_string())?,
            );
            Ok(t)
        })
    })
}

/// The SHA-256 an assertion in the headers signs for `body`: a body in
/// transit as its sender signed it (checked as it passes); `None` for
/// one that nothing signed to us, which is signed at its end instead
/// (`end_sign`).
fn digest(body: &OutBody) -> Option<[u8; 32]> {
    match body {
        OutBody::Whole(b) => Some(Sha256::digest(b)),
        OutBody::Transit(t) => t.digest(),
    }
}

/// The next hop reset the stream with REFUSED_STREAM (or went away
/// before processing it): h2 guarantees nothing of it was processed.
fn refused_stream(e: &hyper::Error) -> bool {
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(h2e) = s.downcast_ref::<h2::Error>() {
            return h2e.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        source = s.source();
    }
    false
}

/// Wall-clock milliseconds (assertions cross machines).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The assertion as a header value HPACK never indexes (RFC 7541 §7.1.3):
/// it is a credential, and unique per call, so an entry for it in the
/// connection's dynamic table would only push out the headers that do
/// repeat (content type, route id) and hand a compression oracle the
/// bytes of a signature.
fn assertion_value(encoded: &str) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let mut v = HeaderValue::from_str(encoded)?;
    v.set_sensitive(true);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assertion_header_is_never_indexed_and_refuses_what_no_header_can_carry() {
        let v = assertion_value("AAEC-_").unwrap();
        assert!(v.is_sensitive());
        assert_eq!(v.as_bytes(), b"AAEC-_");
        assert!(assertion_value("a\nb").is_err());
    }
}

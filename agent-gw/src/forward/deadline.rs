//! The caller's deadline, fixed once at ingress.
//!
//! The budget comes from the caller (`X-Agentd-Timeout-Ms`,
//! `constraints.timeout_ms`) or an upstream hop (`X-Agentd-Deadline-Ms`,
//! already reduced by it), else the default. Every forwarding attempt —
//! retries included — uses what is left of that one deadline, and tells
//! the next hop the remainder; nothing on the path starts a fresh timeout.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;

use crate::api::envelope::MAX_TIMEOUT_MS;
use crate::api::error::{ApiError, ErrorCode};

pub const TIMEOUT_HEADER: &str = "x-agentd-timeout-ms";
pub const DEADLINE_HEADER: &str = "x-agentd-deadline-ms";
/// The same names pre-parsed: a lookup by `&str` re-parses the name on
/// every request.
pub const TIMEOUT_NAME: HeaderName = HeaderName::from_static(TIMEOUT_HEADER);
pub const DEADLINE_NAME: HeaderName = HeaderName::from_static(DEADLINE_HEADER);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    pub fn after_ms(now: Instant, ms: u64) -> Deadline {
        Deadline {
            at: now + Duration::from_millis(ms),
        }
    }

    pub fn instant(self) -> Instant {
        self.at
    }

    /// Whole ms left at `now` (0 once passed).
    pub fn remaining_ms(self, now: Instant) -> u64 {
        self.at
            .saturating_duration_since(now)
            .as_millis()
            .min(u64::MAX as u128) as u64
    }

    pub fn passed(self, now: Instant) -> bool {
        now >= self.at
    }
}

fn header_ms(headers: &HeaderMap, name: &HeaderName) -> Result<Option<u64>, ApiError> {
    ms_value(name.as_str(), headers.get(name))
}

/// The milliseconds header `name` holds, if it is there.
pub fn ms_value(name: &str, value: Option<&HeaderValue>) -> Result<Option<u64>, ApiError> {
    crate::api::request_body::decimal(value).map_err(|_| {
        ApiError::new(
            ErrorCode::InvalidField,
            format!("header {name} must be milliseconds"),
        )
    })
}

/// The budget in ms for one request: the smallest of what the caller and
/// upstream asked for, else `default_ms`; capped at 5 minutes.
pub fn budget_ms(
    headers: &HeaderMap,
    envelope_timeout: Option<u64>,
    default_ms: u64,
) -> Result<u64, ApiError> {
    Ok(fold_budget(
        header_budget_ms(headers)?,
        envelope_timeout,
        default_ms,
    ))
}

/// What the request's headers ask for: the smaller of the caller's
/// timeout and an upstream hop's remaining deadline, if either is there.
pub fn header_budget_ms(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let asked = [
        header_ms(headers, &TIMEOUT_NAME)?,
        header_ms(headers, &DEADLINE_NAME)?,
    ];
    Ok(asked.into_iter().flatten().min())
}

/// The budget of a call whose headers asked for `headers_ms` and whose
/// envelope for `envelope_timeout`: the smallest, else `default_ms`;
/// capped at 5 minutes.
pub fn fold_budget(headers_ms: Option<u64>, envelope_timeout: Option<u64>, default_ms: u64) -> u64 {
    let budget = [headers_ms, envelope_timeout]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(default_ms);
    budget.min(MAX_TIMEOUT_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, v.parse().unwrap());
        }
        m
    }

    #[test]
    fn smallest_budget_wins_and_default_applies_otherwise() {
        assert_eq!(budget_ms(&h(&[]), None, 30_000).unwrap(), 30_000);
        assert_eq!(
            budget_ms(&h(&[(TIMEOUT_HEADER, "900")]), Some(500), 30_000).unwrap(),
            500
        );
        assert_eq!(
            budget_ms(
                &h(&[(DEADLINE_HEADER, "20"), (TIMEOUT_HEADER, "900")]),
                None,
                30_000
            )
            .unwrap(),
            20
        );
        assert_eq!(
            budget_ms(&h(&[(TIMEOUT_HEADER, "99999999")]), None, 30_000).unwrap(),
            MAX_TIMEOUT_MS
        );
        assert_eq!(
            budget_ms(&h(&[(TIMEOUT_HEADER, "soon")]), None, 1)
                .unwrap_err()
                .code,
            ErrorCode::InvalidField
        );
    }

    #[test]
    fn remaining_time_counts_down_from_one_deadline() {
        let t0 = Instant::now();
        let d = Deadline::after_ms(t0, 100);
        assert_eq!(d.remaining_ms(t0), 100);
        assert_eq!(d.remaining_ms(t0 + Duration::from_millis(30)), 70);
        assert_eq!(d.remaining_ms(t0 + Duration::from_millis(300)), 0);
        assert!(d.passed(t0 + Duration::from_millis(100)));
    }
}

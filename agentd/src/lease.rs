//! Lease policy: turns a requested lease length into a deadline on the
//! monotonic clock, within the configured bounds (DESIGN §4: default 30 s,
//! bounds 5–3600 s, configurable in `config agentd 'main'`).
//!
//! A request outside the bounds is **rejected**, not clamped: an agent that
//! asks for 2 s and silently gets 5 s would renew on the wrong schedule
//! without knowing it, and one that asks for a day would believe it may
//! stay silent for a day. The error names the bounds so the SDK can fix its
//! request. An absent request gets the default; zero is a value (and is out
//! of range), not "unset".

use std::fmt;

use crate::route::Lease;
use crate::time::Millis;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeasePolicy {
    min_s: u64,
    default_s: u64,
    max_s: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseError {
    /// The configured bounds are inconsistent (need 1 ≤ min ≤ default ≤ max).
    BadBounds {
        min_s: u64,
        default_s: u64,
        max_s: u64,
    },
    /// The requested lease is outside `[min_s, max_s]`.
    OutOfRange {
        requested_s: u64,
        min_s: u64,
        max_s: u64,
    },
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::BadBounds { min_s, default_s, max_s } => write!(
                f,
                "lease bounds must satisfy 1 <= min_lease ({min_s}) <= default_lease ({default_s}) <= max_lease ({max_s})"
            ),
            LeaseError::OutOfRange { requested_s, min_s, max_s } => {
                write!(f, "lease_seconds {requested_s} is outside the allowed range {min_s}..={max_s}")
            }
        }
    }
}

impl std::error::Error for LeaseError {}

impl Default for LeasePolicy {
    /// The schema defaults of `agentd.min_lease`, `default_lease` and
    /// `max_lease`.
    fn default() -> Self {
        let a = &uci_schema::Config::defaults().agentd;
        LeasePolicy {
            min_s: a.min_lease,
            default_s: a.default_lease,
            max_s: a.max_lease,
        }
    }
}

impl LeasePolicy {
    pub fn new(min_s: u64, default_s: u64, max_s: u64) -> Result<LeasePolicy, LeaseError> {
        if min_s == 0 || min_s > default_s || default_s > max_s {
            return Err(LeaseError::BadBounds {
                min_s,
                default_s,
                max_s,
            });
        }
        Ok(LeasePolicy {
            min_s,
            default_s,
            max_s,
        })
    }

    pub fn min_s(&self) -> u64 {
        self.min_s
    }

    pub fn default_s(&self) -> u64 {
        self.default_s
    }

    pub fn max_s(&self) -> u64 {
        self.max_s
    }

    /// The granted lease length in seconds for a request.
    pub fn grant_s(&self, requested_s: Option<u64>) -> Result<u64, LeaseError> {
        let s = requested_s.unwrap_or(self.default_s);
        if s < self.min_s || s > self.max_s {
            return Err(LeaseError::OutOfRange {
                requested_s: s,
                min_s: self.min_s,
                max_s: self.max_s,
            });
        }
        Ok(s)
    }

    /// The lease for a (re)registration at `now`: live strictly before
    /// `now + seconds`.
    pub fn lease(&self, requested_s: Option<u64>, now: Millis) -> Result<Lease, LeaseError> {
        let s = self.grant_s(requested_s)?;
        Ok(Lease::Until(now.saturating_add_ms(s.saturating_mul(1000))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_request_gets_the_default() {
        let p = LeasePolicy::default();
        assert_eq!(
            p.lease(None, Millis(1_000)),
            Ok(Lease::Until(Millis(31_000)))
        );
    }

    #[test]
    fn bounds_are_inclusive() {
        let p = LeasePolicy::new(5, 30, 3600).unwrap();
        assert_eq!(p.lease(Some(5), Millis(0)), Ok(Lease::Until(Millis(5_000))));
        assert_eq!(
            p.lease(Some(3600), Millis(0)),
            Ok(Lease::Until(Millis(3_600_000)))
        );
    }

    #[test]
    fn out_of_range_is_rejected_naming_the_bounds() {
        let p = LeasePolicy::new(5, 30, 3600).unwrap();
        let err = p.lease(Some(4), Millis(0)).unwrap_err();
        assert_eq!(
            err,
            LeaseError::OutOfRange {
                requested_s: 4,
                min_s: 5,
                max_s: 3600
            }
        );
        assert_eq!(
            err.to_string(),
            "lease_seconds 4 is outside the allowed range 5..=3600"
        );
        assert!(p.lease(Some(0), Millis(0)).is_err());
        assert!(p.lease(Some(3601), Millis(0)).is_err());
    }

    #[test]
    fn inconsistent_bounds_are_refused() {
        assert!(LeasePolicy::new(0, 30, 3600).is_err());
        assert!(LeasePolicy::new(40, 30, 3600).is_err());
        assert!(LeasePolicy::new(5, 30, 20).is_err());
        assert!(LeasePolicy::new(7, 7, 7).is_ok());
    }

    #[test]
    fn huge_now_saturates_instead_of_wrapping() {
        let p = LeasePolicy::default();
        assert_eq!(
            p.lease(None, Millis(u64::MAX - 1)),
            Ok(Lease::Until(Millis(u64::MAX)))
        );
    }
}

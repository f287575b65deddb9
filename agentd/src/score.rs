//! The route score (DESIGN §4): lower wins.
//!
//! `S = sat64(wL*L + floor(C/dC) + wU*U + wT*(100-T) + wH*H + P)`
//!
//! Every quantity arrives from a registration or a peer advertisement, so
//! nothing here trusts them to be small: each multiply and add saturates at
//! `u64::MAX`, and a saturated score still ranks (it just ranks last, with
//! ties broken by route id like any other tie).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::route::Attributes;

/// Score weights of a policy rule (or the policy default).
///
/// Fields are public because they travel in IPC frames and come from UCI;
/// [`Weights::new`] / [`Weights::validate`] refuse a zero cost divisor, and
/// [`score`] still treats a zero divisor as 1 so that a value that slipped
/// past validation can never divide by zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weights {
    /// wL: per millisecond of latency.
    pub w_latency: u64,
    /// dC: cost (millionths) is divided by this, rounding down; ≥ 1.
    pub d_cost: u64,
    /// wU: per ‰ of load.
    pub w_load: u64,
    /// wT: per point of missing trust (100 − T).
    pub w_trust: u64,
    /// wH: per router hop.
    pub w_hops: u64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            w_latency: 1000,
            d_cost: 100,
            w_load: 100,
            w_trust: 5000,
            w_hops: 10000,
        }
    }
}

/// Why a set of weights was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightsError {
    /// `d_cost` must be at least 1.
    ZeroCostDivisor,
}

impl fmt::Display for WeightsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightsError::ZeroCostDivisor => f.write_str("d_cost must be at least 1"),
        }
    }
}

impl std::error::Error for WeightsError {}

impl Weights {
    pub fn new(
        w_latency: u64,
        d_cost: u64,
        w_load: u64,
        w_trust: u64,
        w_hops: u64,
    ) -> Result<Weights, WeightsError> {
        let w = Weights {
            w_latency,
            d_cost,
            w_load,
            w_trust,
            w_hops,
        };
        w.validate()?;
        Ok(w)
    }

    pub fn validate(&self) -> Result<(), WeightsError> {
        if self.d_cost == 0 {
            return Err(WeightsError::ZeroCostDivisor);
        }
        Ok(())
    }
}

/// Scores one eligible route. `hops` is the path length, `penalty` the
/// non-preferred-peer penalty P (0 when the rule names no preferred peer).
#[inline]
pub fn score(attrs: &Attributes, hops: u64, penalty: u64, w: &Weights) -> u64 {
    let missing_trust = 100u64.saturating_sub(attrs.trust);
    w.w_latency
        .saturating_mul(attrs.latency_ms)
        .saturating_add(attrs.cost_micros / w.d_cost.max(1))
        .saturating_add(w.w_load.saturating_mul(attrs.load_permille))
        .saturating_add(w.w_trust.saturating_mul(missing_trust))
        .saturating_add(w.w_hops.saturating_mul(hops))
        .saturating_add(penalty)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(latency_ms: u64, cost_micros: u64, load_permille: u64, trust: u64) -> Attributes {
        Attributes {
            latency_ms,
            cost_micros,
            load_permille,
            trust,
        }
    }

    #[test]
    fn defaults_match_the_design() {
        assert_eq!(
            Weights::default(),
            Weights::new(1000, 100, 100, 5000, 10000).unwrap()
        );
    }

    #[test]
    fn zero_cost_divisor_is_refused_but_scored_as_one() {
        assert_eq!(
            Weights::new(1, 0, 1, 1, 1),
            Err(WeightsError::ZeroCostDivisor)
        );
        let w = Weights {
            d_cost: 0,
            ..Weights::default()
        };
        assert_eq!(score(&attrs(0, 777, 0, 100), 0, 0, &w), 777);
    }

    #[test]
    fn trust_above_one_hundred_counts_as_full_trust() {
        let w = Weights::default();
        assert_eq!(score(&attrs(0, 0, 0, 250), 0, 0, &w), 0);
        assert_eq!(score(&attrs(0, 0, 0, u64::MAX), 0, 0, &w), 0);
    }

    #[test]
    fn latency_near_u64_max_saturates_instead_of_wrapping() {
        let w = Weights::default();
        // One below the largest latency whose product still fits.
        let fits = u64::MAX / 1000;
        assert_eq!(score(&attrs(fits, 0, 0, 100), 0, 0, &w), fits * 1000);
        assert_eq!(score(&attrs(fits + 1, 0, 0, 100), 0, 0, &w), u64::MAX);
        assert_eq!(score(&attrs(u64::MAX - 1, 0, 0, 100), 0, 0, &w), u64::MAX);
        // A fitting product plus a small addend that crosses the boundary.
        assert_eq!(score(&attrs(fits, 0, 0, 100), 0, 1000, &w), u64::MAX);
    }
}

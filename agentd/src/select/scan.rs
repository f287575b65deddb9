//! Full-scan reference selection: the same policy, filters and ranking as
//! [`super::select`], but finding candidates by walking the whole table
//! instead of the capability index. The benchmark and the property tests
//! compare the two on every query; it is not meant for production use.

use super::{decide, evaluate, Query, Refusal, Reject, Selected};
use crate::policy::Policy;
use crate::table::RouteTable;
use crate::time::Millis;

pub fn select<'a>(
    table: &'a RouteTable,
    policy: &'a Policy,
    q: &Query<'_>,
    now: Millis,
) -> Result<Selected<'a>, Refusal<'a>> {
    let ctx = decide(policy, q).map_err(Refusal::Denied)?;
    let mut best: Option<Selected<'a>> = None;
    let mut furthest = Reject::CapabilityVersion;
    for (slot, route, peer_up) in table.cells() {
        if *route.capability != *q.capability || route.version != q.version {
            continue;
        }
        match evaluate(route, peer_up, q, &ctx, now) {
            Ok(score) => {
                let cand = Selected { slot, route, score };
                if best.as_ref().is_none_or(|b| cand.ranks_before(b)) {
                    best = Some(cand);
                }
            }
            Err(r) => furthest = furthest.max(r),
        }
    }
    best.ok_or(Refusal::NoRoute(furthest))
}

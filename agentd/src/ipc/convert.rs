//! Mapping between the IPC vocabulary and the RIB's own types, so the
//! daemon (answering) and the gateway (asking its replica) describe the
//! same outcome with the same words.

use crate::ipc::message::{CandidateView, ConflictReason, IpcError, LookupQuery, LookupView};
use crate::lease::LeaseError;
use crate::select::{Denial, Explanation, Query, Refusal, Selected};
use crate::table::TableError;

impl LookupQuery {
    /// The selection query this request asks for.
    pub fn as_query(&self) -> Query<'_> {
        Query {
            capability: &self.capability,
            version: self.version,
            tenant: &self.tenant,
            source: self.source_agent.as_deref(),
            target_agent: self.target_agent.as_deref(),
        }
    }
}

impl CandidateView {
    pub fn of(s: &Selected<'_>) -> CandidateView {
        CandidateView {
            route_id: s.route.id.clone(),
            origin: s.route.origin.as_str().into(),
            endpoint: s.route.endpoint.as_str().into(),
            path: s.route.path.to_vec(),
            next_hop: s.route.next_hop.as_deref().map(Into::into),
            source: s.route.source,
            proof: s.route.proof,
            score: s.score,
        }
    }
}

impl LookupView {
    /// The answer to `Lookup { explain }` from a selection explanation.
    pub fn of(e: &Explanation<'_>, explain: bool) -> LookupView {
        let (denied, refusal) = match &e.outcome {
            Ok(_) => (false, None),
            Err(Refusal::Denied(Denial::Rule(_))) => (true, Some("policy_denied")),
            Err(Refusal::Denied(Denial::DefaultAction)) => (true, Some("default_deny")),
            Err(Refusal::Denied(Denial::PolicyInvalid(_))) => (true, Some("policy_invalid")),
            Err(Refusal::NoRoute(r)) => (false, Some(r.as_str())),
        };
        let shown = if explain {
            e.ranked.len()
        } else {
            e.ranked.len().min(1)
        };
        LookupView {
            rule: e.matched_rule.map(|r| r.id.clone()),
            denied,
            refusal: refusal.map(Box::from),
            candidates: e.ranked[..shown].iter().map(CandidateView::of).collect(),
            rejections: if explain {
                e.rejections
                    .iter()
                    .filter(|&(_, n)| n > 0)
                    .map(|(r, n)| (Box::from(r.as_str()), u64::from(n)))
                    .collect()
            } else {
                Default::default()
            },
        }
    }
}

impl IpcError {
    /// A table refusal as seen by a requester of `tenant`.
    pub fn from_table(err: TableError, tenant: &str) -> IpcError {
        match err {
            TableError::Conflict {
                route_id,
                existing_tenant,
                ..
            } => {
                let reason = if &*existing_tenant == tenant {
                    ConflictReason::OtherOrigin
                } else {
                    ConflictReason::OtherTenant
                };
                IpcError::Conflict { route_id, reason }
            }
            TableError::Full { max_routes } => IpcError::Full {
                max_routes: max_routes as u64,
            },
            TableError::NotFound(route_id) => IpcError::NotFound { route_id },
            TableError::VersionZero(_) => IpcError::invalid("version", "must be at least 1"),
            TableError::LeasedStatic(id) => IpcError::Conflict {
                route_id: id,
                reason: ConflictReason::NotLocal,
            },
        }
    }
}

impl From<LeaseError> for IpcError {
    fn from(e: LeaseError) -> IpcError {
        match e {
            LeaseError::OutOfRange {
                requested_s,
                min_s,
                max_s,
            } => IpcError::LeaseOutOfRange {
                requested: requested_s,
                min: min_s,
                max: max_s,
            },
            e @ LeaseError::BadBounds { .. } => IpcError::internal(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Action, Policy, Rule};
    use crate::route::{Access, Attributes, Lease, Route, RouteId, RouteSource};
    use crate::select::explain;
    use crate::table::RouteTable;
    use crate::time::Millis;

    fn route(id: &str, latency_ms: u64, deadline: u64) -> Route {
        Route {
            id: RouteId::new(id).unwrap(),
            capability: "demo.echo".into(),
            version: 1,
            origin: format!("agent://lab/{id}").into(),
            endpoint: "http://192.0.2.10:8080/".into(),
            tenant: "lab".into(),
            region: "local".into(),
            attrs: Attributes {
                latency_ms,
                cost_micros: 0,
                load_permille: 0,
                trust: 100,
            },
            access: Access::default().into(),
            contract: None,
            source: RouteSource::Local,
            path: Box::default(),
            next_hop: None,
            lease: Lease::Until(Millis(deadline)),
            healthy: true,
            allow_loopback: false,
            owner: None,
            proof: Default::default(),
            disputed: false,
        }
    }

    fn query() -> LookupQuery {
        LookupQuery {
            capability: "demo.echo".into(),
            version: 1,
            tenant: "lab".into(),
            source_agent: None,
            target_agent: None,
        }
    }

    #[test]
    fn explanation_lists_ranked_candidates_and_nonzero_rejections() {
        let mut t = RouteTable::new(10);
        t.upsert(route("slow", 50, 10_000)).unwrap();
        t.upsert(route("fast", 5, 10_000)).unwrap();
        t.upsert(route("gone", 1, 1_000)).unwrap();
        let p = Policy::default();
        let q = query();
        let e = explain(&t, &p, &q.as_query(), Millis(2_000));
        let v = LookupView::of(&e, true);
        let ids: Vec<_> = v.candidates.iter().map(|c| c.route_id.as_str()).collect();
        assert_eq!(ids, ["fast", "slow"]);
        assert!(v.candidates[0].score < v.candidates[1].score);
        assert_eq!(v.rejections.get("lease_expired"), Some(&1));
        assert_eq!(v.rejections.len(), 1);
        assert_eq!((v.denied, v.refusal), (false, None));
        let short = LookupView::of(&e, false);
        assert_eq!(short.candidates.len(), 1);
        assert!(short.rejections.is_empty());
    }

    #[test]
    fn deny_rule_and_no_route_are_named() {
        let mut t = RouteTable::new(10);
        t.upsert(route("gone", 1, 1_000)).unwrap();
        let q = query();
        let allow = Policy::default();
        let e = explain(&t, &allow, &q.as_query(), Millis(2_000));
        assert_eq!(
            LookupView::of(&e, true).refusal.as_deref(),
            Some("lease_expired")
        );
        let deny = Policy::new(
            vec![Rule::new("10-deny", 100, Action::Deny)],
            Action::Allow,
            Default::default(),
        )
        .unwrap();
        let e = explain(&t, &deny, &q.as_query(), Millis(0));
        let v = LookupView::of(&e, true);
        assert_eq!(
            (v.denied, v.refusal.as_deref(), v.rule.as_deref()),
            (true, Some("policy_denied"), Some("10-deny"))
        );
    }

    #[test]
    fn table_errors_map_to_codes() {
        let id = RouteId::new("r").unwrap();
        let conflict = || TableError::Conflict {
            route_id: id.clone(),
            existing_tenant: "lab".into(),
            existing_origin: "agent://lab/a".into(),
        };
        assert_eq!(
            IpcError::from_table(conflict(), "lab"),
            IpcError::Conflict {
                route_id: id.clone(),
                reason: ConflictReason::OtherOrigin
            }
        );
        let e = IpcError::from_table(conflict(), "other");
        assert_eq!(
            e,
            IpcError::Conflict {
                route_id: id.clone(),
                reason: ConflictReason::OtherTenant
            }
        );
        assert_eq!(
            IpcError::from_table(TableError::NotFound(id.clone()), "lab").http_status(),
            404
        );
        assert_eq!(
            IpcError::from_table(TableError::Full { max_routes: 3 }, "lab").code(),
            "full"
        );
        let lease: IpcError = LeaseError::OutOfRange {
            requested_s: 1,
            min_s: 5,
            max_s: 3600,
        }
        .into();
        assert_eq!(
            lease,
            IpcError::LeaseOutOfRange {
                requested: 1,
                min: 5,
                max: 3600
            }
        );
    }
}

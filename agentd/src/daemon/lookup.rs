//! `lookup` requests: run the same selection the gateway runs and turn it
//! into a view, with the ranking and rejection counts on `--explain`.

use std::collections::BTreeMap;

use super::state::State;
use crate::ipc::message::{CandidateView, LookupQuery, LookupView};
use crate::select::{self, Denial, Query, Refusal, Selected};
use crate::time::Millis;

fn candidate(s: &Selected<'_>) -> CandidateView {
    CandidateView {
        route_id: s.route.id.clone(),
        origin: s.route.origin.clone(),
        endpoint: s.route.endpoint.clone(),
        source: s.route.source,
        score: s.score,
    }
}

/// Why nothing was selected, for people.
pub fn refusal_text(r: &Refusal<'_>) -> String {
    match r {
        Refusal::Denied(Denial::Rule(rule)) => format!("denied by policy rule {}", rule.id),
        Refusal::Denied(Denial::DefaultAction) => "denied by the default action".to_string(),
        Refusal::Denied(Denial::PolicyInvalid(reason)) => {
            format!("denied: policy invalid: {reason}")
        }
        Refusal::NoRoute(reject) => format!("no eligible route ({reject})"),
    }
}

pub fn lookup(state: &State, q: &LookupQuery, explain: bool, now: Millis) -> LookupView {
    let query = Query {
        capability: &q.capability,
        version: q.version,
        tenant: &q.tenant,
        source: q.source_agent.as_deref(),
        target_agent: q.target_agent.as_deref(),
    };
    let (table, policy) = (state.table(), state.policy());
    if !explain {
        let rule = policy
            .match_rule(&q.tenant, q.source_agent.as_deref(), &q.capability)
            .map(|r| r.id.clone());
        return match select::select(table, policy, &query, now) {
            Ok(s) => LookupView {
                rule,
                denied: false,
                candidates: vec![candidate(&s)],
                ..LookupView::default()
            },
            Err(r) => LookupView {
                rule,
                denied: matches!(r, Refusal::Denied(_)),
                reason: Some(refusal_text(&r).into()),
                ..LookupView::default()
            },
        };
    }
    let e = select::explain(table, policy, &query, now);
    let rejections: BTreeMap<Box<str>, u64> = e
        .rejections
        .iter()
        .map(|(reason, n)| (reason.as_str().into(), u64::from(n)))
        .collect();
    LookupView {
        rule: e.matched_rule.map(|r| r.id.clone()),
        denied: matches!(e.outcome, Err(Refusal::Denied(_))),
        reason: e.outcome.as_ref().err().map(|r| refusal_text(r).into()),
        candidates: e.ranked.iter().map(candidate).collect(),
        rejections,
    }
}

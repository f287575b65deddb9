//! Input: `tests/vectors/score.json`, score cases computed independently
//! with exact integers (a copy of the suite's shared vectors).
//! Output: `agentd::score::score` reproduces every case, including the
//! saturating ones.

use agentd::route::Attributes;
use agentd::score::{score, Weights};
use serde_json::Value;

fn field(case: &Value, key: &str) -> u64 {
    case[key]
        .as_u64()
        .unwrap_or_else(|| panic!("case {} lacks u64 field {key}", case["name"]))
}

#[test]
fn every_shared_score_vector_matches() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/score.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(
        cases.len() >= 40,
        "expected the full vector set, got {}",
        cases.len()
    );
    let mut saturated = 0;
    for case in cases {
        let attrs = Attributes {
            latency_ms: field(case, "latency_ms"),
            cost_micros: field(case, "cost_micros"),
            load_permille: field(case, "load_permille"),
            trust: field(case, "trust"),
        };
        let w = Weights::new(
            field(case, "wL"),
            field(case, "dC"),
            field(case, "wU"),
            field(case, "wT"),
            field(case, "wH"),
        )
        .unwrap();
        let want = field(case, "score");
        let got = score(&attrs, field(case, "hops"), field(case, "penalty"), &w);
        assert_eq!(got, want, "case {}", case["name"]);
        saturated += usize::from(want == u64::MAX);
    }
    assert!(saturated > 0, "vectors must include saturating cases");
}

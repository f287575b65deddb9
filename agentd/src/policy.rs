//! Policy rules (DESIGN §4): which requests are allowed, under which
//! constraints, and with which score weights.
//!
//! A policy is built by agentd from UCI `rule` sections and shipped to
//! agent-gw inside IPC frames (postcard), hence the serde derives. Matching
//! never relies on the rule order that arrived over the wire: the winner is
//! computed by comparison (highest priority, then the lexicographically
//! smaller id), so a peer that sends rules unsorted cannot change a decision.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::route::RouteSource;
use crate::score::{Weights, WeightsError};

/// A name pattern of a rule: `*`, an exact name, or `prefix.*`.
///
/// `admin.*` matches every name that starts with `admin.` — not `admin`
/// itself and not `administrator`: the dot is part of the prefix so that a
/// rule for a capability family cannot leak onto a look-alike name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pattern {
    Any,
    Exact(Box<str>),
    /// Stored with its trailing dot (`admin.`).
    Prefix(Box<str>),
}

/// Why a pattern string was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternError {
    Empty,
    /// A `*` anywhere but as the whole pattern or after a final `.`.
    MisplacedStar(Box<str>),
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::Empty => f.write_str("pattern is empty"),
            PatternError::MisplacedStar(p) => {
                write!(
                    f,
                    "pattern {p:?}: '*' is only allowed alone or as a final '.*'"
                )
            }
        }
    }
}

impl std::error::Error for PatternError {}

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, PatternError> {
        if s.is_empty() {
            return Err(PatternError::Empty);
        }
        if s == "*" {
            return Ok(Pattern::Any);
        }
        if let Some(prefix) = s.strip_suffix('*') {
            if prefix.ends_with('.') && prefix.len() > 1 && !prefix.contains('*') {
                return Ok(Pattern::Prefix(prefix.into()));
            }
            return Err(PatternError::MisplacedStar(s.into()));
        }
        if s.contains('*') {
            return Err(PatternError::MisplacedStar(s.into()));
        }
        Ok(Pattern::Exact(s.into()))
    }

    pub fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exact(e) => **e == *name,
            Pattern::Prefix(p) => name.starts_with(&**p),
        }
    }

    /// Matching an absent value (a request without a source agent): only
    /// `*` matches nothing.
    pub fn matches_opt(&self, name: Option<&str>) -> bool {
        match name {
            Some(n) => self.matches(n),
            None => matches!(self, Pattern::Any),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Any => f.write_str("*"),
            Pattern::Exact(e) => f.write_str(e),
            Pattern::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    Allow,
    Deny,
}

/// A set of [`RouteSource`]s as a bit set (one bit per source).
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSet(u8);

impl SourceSet {
    pub const ALL: SourceSet = SourceSet(0b1111);
    pub const NONE: SourceSet = SourceSet(0);

    fn bit(s: RouteSource) -> u8 {
        match s {
            RouteSource::Local => 1,
            RouteSource::Static => 2,
            RouteSource::Peer => 4,
            RouteSource::Relay => 8,
        }
    }

    pub fn with(self, s: RouteSource) -> SourceSet {
        SourceSet(self.0 | Self::bit(s))
    }

    pub fn contains(self, s: RouteSource) -> bool {
        self.0 & Self::bit(s) != 0
    }

    pub fn intersects(self, other: SourceSet) -> bool {
        self.0 & other.0 != 0
    }
}

impl Default for SourceSet {
    fn default() -> Self {
        SourceSet::ALL
    }
}

impl FromIterator<RouteSource> for SourceSet {
    fn from_iter<I: IntoIterator<Item = RouteSource>>(iter: I) -> Self {
        iter.into_iter().fold(SourceSet::NONE, SourceSet::with)
    }
}

impl fmt::Debug for SourceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all = [
            RouteSource::Local,
            RouteSource::Static,
            RouteSource::Peer,
            RouteSource::Relay,
        ];
        f.debug_set()
            .entries(
                all.iter()
                    .filter(|s| self.contains(**s))
                    .map(|s| s.as_str()),
            )
            .finish()
    }
}

/// Eligibility constraints an allow rule adds, checked in this order after
/// the route's own filters (DESIGN §4). `None` means "no constraint".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Constraints {
    pub region: Option<Box<str>>,
    pub max_latency_ms: Option<u64>,
    pub max_cost: Option<u64>,
    pub max_load: Option<u64>,
    pub min_trust: Option<u64>,
    /// The route's origin must have been proven at least this way.
    pub min_proof: Option<crate::route::OriginProof>,
    pub max_hops: Option<u64>,
    /// Permitted route sources (default: all).
    pub sources: SourceSet,
    /// The route's next hop must be this router (local routes fail it).
    pub required_peer: Option<Box<str>>,
    /// The route's next hop must not be this router.
    pub denied_peer: Option<Box<str>>,
    /// The route's endpoint must start with this string.
    pub endpoint_prefix: Option<Box<str>>,
}

/// One `rule` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub id: Box<str>,
    pub priority: i64,
    pub action: Action,
    pub tenant: Pattern,
    /// Source agent (caller) pattern.
    pub source: Pattern,
    pub capability: Pattern,
    pub constraints: Constraints,
    pub weights: Weights,
    /// When set, every route whose next hop is not this router — including
    /// local and static routes, which have no next hop — scores
    /// `nonpreferred_penalty` more. That keeps the rule's meaning literal
    /// ("prefer what comes through router X") instead of silently
    /// favouring local endpoints.
    pub preferred_peer: Option<Box<str>>,
    pub nonpreferred_penalty: u64,
}

impl Rule {
    /// A rule that matches everything with default weights and no
    /// constraints; adjust fields from there.
    pub fn new(id: &str, priority: i64, action: Action) -> Rule {
        Rule {
            id: id.into(),
            priority,
            action,
            tenant: Pattern::Any,
            source: Pattern::Any,
            capability: Pattern::Any,
            constraints: Constraints::default(),
            weights: Weights::default(),
            preferred_peer: None,
            nonpreferred_penalty: 0,
        }
    }

    pub fn matches(&self, tenant: &str, source: Option<&str>, capability: &str) -> bool {
        self.tenant.matches(tenant)
            && self.source.matches_opt(source)
            && self.capability.matches(capability)
    }

    /// Penalty P for a route with this next hop.
    #[inline]
    pub fn penalty_for(&self, next_hop: Option<&str>) -> u64 {
        match &self.preferred_peer {
            Some(p) if next_hop != Some(&**p) => self.nonpreferred_penalty,
            _ => 0,
        }
    }

    /// True when `self` wins over `other`: higher priority, then smaller id.
    fn beats(&self, other: &Rule) -> bool {
        (std::cmp::Reverse(self.priority), &self.id)
            < (std::cmp::Reverse(other.priority), &other.id)
    }
}

/// Why a policy was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyError {
    DuplicateRuleId(Box<str>),
    Weights {
        rule: Box<str>,
        error: WeightsError,
    },
    DefaultWeights(WeightsError),
    /// The rules encode to more than [`MAX_POLICY_BYTES`].
    TooLarge {
        rules: usize,
        bytes: usize,
    },
}

/// Most bytes the encoded policy may take. agent-gw gets the policy whole,
/// inside the `SnapshotEnd` frame of its FIB snapshot (and a reload's
/// `PolicyReplaced`), whose bound is the IPC frame's 256 KiB; half of it
/// leaves room for the frame's links chunk and peer list. A policy past it
/// could never reach the gateway, which would then be left without a FIB,
/// so the configuration is refused instead (past about 900 rules with
/// 100-byte capability names).
pub const MAX_POLICY_BYTES: usize = 128 * 1024;

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::DuplicateRuleId(id) => write!(f, "rule id {id:?} is used twice"),
            PolicyError::Weights { rule, error } => write!(f, "rule {rule:?}: {error}"),
            PolicyError::DefaultWeights(e) => write!(f, "default weights: {e}"),
            PolicyError::TooLarge { rules, bytes } => write!(
                f,
                "{rules} rules encode to {bytes} bytes, more than the {MAX_POLICY_BYTES} agentd can send agent-gw in one frame; merge rules with patterns (`prefix.*`)"
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

/// The whole policy. `invalid` set means the configured policy failed to
/// load: every request is denied with that reason until it is repaired
/// (DESIGN §4: "an invalid policy denies requests").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    rules: Vec<Rule>,
    pub default_action: Action,
    pub default_weights: Weights,
    pub invalid: Option<Box<str>>,
}

impl Default for Policy {
    /// No rules, allow with default weights.
    fn default() -> Self {
        Policy {
            rules: Vec::new(),
            default_action: Action::Allow,
            default_weights: Weights::default(),
            invalid: None,
        }
    }
}

impl Policy {
    /// Validates and sorts the rules by (priority desc, id asc).
    pub fn new(
        mut rules: Vec<Rule>,
        default_action: Action,
        default_weights: Weights,
    ) -> Result<Policy, PolicyError> {
        default_weights
            .validate()
            .map_err(PolicyError::DefaultWeights)?;
        for r in &rules {
            r.weights.validate().map_err(|error| PolicyError::Weights {
                rule: r.id.clone(),
                error,
            })?;
        }
        // Ids are unique whatever the priorities: sorted by (priority,
        // id), two rules with one id and different priorities would not be
        // neighbours, so check by id.
        let mut ids = std::collections::HashSet::with_capacity(rules.len());
        if let Some(r) = rules.iter().find(|r| !ids.insert(&r.id)) {
            return Err(PolicyError::DuplicateRuleId(r.id.clone()));
        }
        rules.sort_by(|a, b| {
            (std::cmp::Reverse(a.priority), &a.id).cmp(&(std::cmp::Reverse(b.priority), &b.id))
        });
        let policy = Policy {
            rules,
            default_action,
            default_weights,
            invalid: None,
        };
        let bytes = postcard::experimental::serialized_size(&policy).unwrap_or(usize::MAX);
        if bytes > MAX_POLICY_BYTES {
            return Err(PolicyError::TooLarge {
                rules: policy.rules.len(),
                bytes,
            });
        }
        Ok(policy)
    }

    /// A policy that denies everything, saying why.
    pub fn invalid(reason: &str) -> Policy {
        Policy {
            invalid: Some(reason.into()),
            default_action: Action::Deny,
            ..Policy::default()
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule that decides a request, if any matches.
    pub fn match_rule(
        &self,
        tenant: &str,
        source: Option<&str>,
        capability: &str,
    ) -> Option<&Rule> {
        let mut best: Option<&Rule> = None;
        for r in &self.rules {
            if r.matches(tenant, source, capability) && best.is_none_or(|b| r.beats(b)) {
                best = Some(r);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, priority: i64, action: Action, cap: &str) -> Rule {
        Rule {
            capability: Pattern::parse(cap).unwrap(),
            ..Rule::new(id, priority, action)
        }
    }

    #[test]
    fn patterns_parse_star_exact_and_dotted_prefix() {
        assert_eq!(Pattern::parse("*"), Ok(Pattern::Any));
        assert_eq!(
            Pattern::parse("demo.echo"),
            Ok(Pattern::Exact("demo.echo".into()))
        );
        assert_eq!(
            Pattern::parse("admin.*"),
            Ok(Pattern::Prefix("admin.".into()))
        );
        assert_eq!(Pattern::parse(""), Err(PatternError::Empty));
        assert!(Pattern::parse("admin*").is_err());
        assert!(Pattern::parse("a*.b").is_err());
        assert!(Pattern::parse(".*").is_err());
    }

    #[test]
    fn prefix_pattern_needs_the_dot() {
        let p = Pattern::parse("admin.*").unwrap();
        assert!(p.matches("admin.reboot"));
        assert!(!p.matches("admin"));
        assert!(!p.matches("administrator"));
    }

    #[test]
    fn absent_source_matches_only_star() {
        assert!(Pattern::Any.matches_opt(None));
        assert!(!Pattern::parse("agent://lab/x").unwrap().matches_opt(None));
    }

    #[test]
    fn highest_priority_wins_then_smaller_id() {
        let p = Policy::new(
            vec![
                rule("b", 10, Action::Allow, "*"),
                rule("a", 10, Action::Deny, "*"),
                rule("z", 5, Action::Allow, "*"),
                rule("c", 50, Action::Allow, "other.*"),
            ],
            Action::Allow,
            Weights::default(),
        )
        .unwrap();
        assert_eq!(&*p.match_rule("lab", None, "demo.echo").unwrap().id, "a");
        assert_eq!(&*p.match_rule("lab", None, "other.x").unwrap().id, "c");
        let ids: Vec<&str> = p.rules().iter().map(|r| &*r.id).collect();
        assert_eq!(ids, ["c", "a", "b", "z"]);
    }

    #[test]
    fn matching_does_not_trust_wire_order() {
        let mut p = Policy::new(
            vec![
                rule("low", 1, Action::Allow, "*"),
                rule("high", 9, Action::Deny, "*"),
            ],
            Action::Allow,
            Weights::default(),
        )
        .unwrap();
        p.rules.reverse();
        assert_eq!(&*p.match_rule("t", None, "c").unwrap().id, "high");
    }

    #[test]
    fn no_match_returns_none() {
        let p = Policy::new(
            vec![rule("x", 1, Action::Deny, "admin.*")],
            Action::Allow,
            Weights::default(),
        )
        .unwrap();
        assert!(p.match_rule("lab", None, "demo.echo").is_none());
    }

    /// Rules with 100-byte capability names, `n` of them.
    pub(crate) fn many_rules(n: usize) -> Vec<Rule> {
        (0..n)
            .map(|i| rule(&format!("r{i:05}"), 1, Action::Allow, &format!("{i:0>100}")))
            .collect()
    }

    #[test]
    fn a_policy_too_large_for_one_ipc_frame_is_refused_with_its_size() {
        let fits = (1..).take_while(|&n| {
            Policy::new(many_rules(n * 100), Action::Allow, Weights::default()).is_ok()
        });
        let n = fits.last().unwrap() * 100;
        assert!(n >= 800, "{n} rules of 100-byte names should fit");
        let err = Policy::new(many_rules(n + 100), Action::Allow, Weights::default()).unwrap_err();
        let PolicyError::TooLarge { rules, bytes } = err else {
            panic!("{err:?}")
        };
        assert_eq!(rules, n + 100);
        assert!(bytes > MAX_POLICY_BYTES);
        assert!(err.to_string().contains("merge rules"), "{err}");
    }

    #[test]
    fn duplicate_ids_and_zero_divisor_are_refused() {
        let r = rule("same", 1, Action::Allow, "*");
        assert_eq!(
            Policy::new(
                vec![r.clone(), r.clone()],
                Action::Allow,
                Weights::default()
            ),
            Err(PolicyError::DuplicateRuleId("same".into()))
        );
        // Also when the priorities differ (they sort apart).
        let other = rule("same", 9, Action::Deny, "*");
        let between = rule("mid", 5, Action::Allow, "*");
        assert_eq!(
            Policy::new(
                vec![r.clone(), between, other],
                Action::Allow,
                Weights::default()
            ),
            Err(PolicyError::DuplicateRuleId("same".into()))
        );
        let mut bad = r;
        bad.weights.d_cost = 0;
        assert!(matches!(
            Policy::new(vec![bad], Action::Allow, Weights::default()),
            Err(PolicyError::Weights { .. })
        ));
    }

    #[test]
    fn penalty_applies_to_every_route_not_via_the_preferred_peer() {
        let mut r = Rule::new("p", 1, Action::Allow);
        assert_eq!(r.penalty_for(None), 0);
        r.preferred_peer = Some("router-b".into());
        r.nonpreferred_penalty = 50_000;
        assert_eq!(r.penalty_for(Some("router-b")), 0);
        assert_eq!(r.penalty_for(Some("router-c")), 50_000);
        assert_eq!(r.penalty_for(None), 50_000);
    }

    #[test]
    fn policy_round_trips_through_postcard() {
        let mut r = rule("20-cheap", 50, Action::Allow, "demo.*");
        r.constraints.max_latency_ms = Some(500);
        r.constraints.sources = [RouteSource::Local, RouteSource::Peer]
            .into_iter()
            .collect();
        let p = Policy::new(vec![r], Action::Deny, Weights::default()).unwrap();
        let bytes = postcard::to_allocvec(&p).unwrap();
        let back: Policy = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, p);
        assert!(back.rules()[0]
            .constraints
            .sources
            .contains(RouteSource::Peer));
        assert!(!back.rules()[0]
            .constraints
            .sources
            .contains(RouteSource::Static));
    }
}

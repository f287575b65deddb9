//! Partial loads: a partly invalid file yields everything valid in it plus
//! each problem with what was done about it (the rules are on
//! `uci_schema::Partial`). The result is always itself a valid config.

use uci_schema::{Config, ConfigErrorKind, Partial, Problem, Recovery};

const FILE: &str = "/etc/config/agentd";

fn partial(text: &str) -> Partial {
    let p = Config::from_str_partial(text, FILE);
    // Whatever was kept is a valid configuration on its own.
    let back = Config::from_package(&p.config.to_package(), "<kept>");
    assert!(back.is_ok(), "kept part is invalid: {back:?}\n{text}");
    p
}

/// (section type, section name, option, recovery) of every problem.
fn summary(p: &Partial) -> Vec<(String, Option<String>, Option<String>, Recovery)> {
    p.problems
        .iter()
        .map(|Problem { error, recovery }| {
            (
                error.section.as_ref().map_or("-".into(), |s| s.ty.clone()),
                error.section.as_ref().and_then(|s| s.name.clone()),
                error.option.clone(),
                *recovery,
            )
        })
        .collect()
}

fn s(v: &str) -> String {
    v.to_string()
}

#[test]
fn a_valid_file_has_no_problems_and_matches_the_strict_load() {
    let p = partial(uci_schema::demo::DEMO_CONFIG);
    assert!(p.is_valid());
    assert_eq!(p.policy_problems().count(), 0);
    assert_eq!(
        p.into_result().unwrap(),
        Config::from_str(uci_schema::demo::DEMO_CONFIG, FILE).unwrap()
    );
}

#[test]
fn a_typo_in_a_singleton_resets_that_option_only() {
    let p = partial(concat!(
        "config agentd 'main'\n\toption ipc_socket '/tmp/a.sock'\n\toption max_routes 'lots'\n",
        "config discovery 'discovery'\n\toption enabeld '0'\n\toption candidate_lifetime_s '7'\n",
        "\toption admission 'sometimes'\n",
    ));
    assert_eq!(p.config.agentd.ipc_socket, "/tmp/a.sock");
    assert_eq!(
        p.config.agentd.max_routes,
        Config::default().agentd.max_routes
    );
    assert_eq!(p.config.discovery.candidate_lifetime_s, 7);
    assert_eq!(
        p.config.discovery.admission,
        Config::default().discovery.admission
    );
    assert_eq!(
        summary(&p),
        [
            (
                s("agentd"),
                Some(s("main")),
                Some(s("max_routes")),
                Recovery::OptionDefault
            ),
            (
                s("discovery"),
                Some(s("discovery")),
                Some(s("enabeld")),
                Recovery::OptionIgnored
            ),
            (
                s("discovery"),
                Some(s("discovery")),
                Some(s("admission")),
                Recovery::OptionDefault
            ),
        ]
    );
    assert_eq!(p.policy_problems().count(), 0, "no rule was touched");
    assert_eq!(p.errors().0.len(), 3);
}

#[test]
fn a_bad_rule_is_skipped_and_leaves_the_policy_unknown() {
    let p = partial(concat!(
        "config rule 'good'\n\toption action 'deny'\n\toption capability 'admin.*'\n",
        "config rule 'bad'\n\toption priorty '100'\n",
        "config route 'r'\n\toption capability 'x'\n\toption version '1'\n",
        "\toption origin 'agent://lab/x'\n\toption endpoint 'http://192.0.2.10:8080/'\n",
    ));
    assert_eq!(p.config.rules.len(), 1);
    assert_eq!(p.config.rules[0].id, "good");
    assert_eq!(p.config.routes.len(), 1, "routes are not affected");
    assert_eq!(
        summary(&p),
        [(
            s("rule"),
            Some(s("bad")),
            Some(s("priorty")),
            Recovery::SectionSkipped
        )]
    );
    let policy: Vec<_> = p.policy_problems().collect();
    assert_eq!(policy.len(), 1);
    assert_eq!(
        policy[0].to_string(),
        "/etc/config/agentd: rule 'bad': option 'priorty': unknown option (did you mean 'priority'?) (section skipped)"
    );
}

#[test]
fn a_bad_route_or_tenant_is_skipped_without_touching_the_policy() {
    let p = partial(concat!(
        "config route 'ok'\n\toption capability 'x'\n\toption version '1'\n",
        "\toption origin 'agent://lab/x'\n\toption endpoint 'http://192.0.2.10:8080/'\n",
        "config route\n\toption capability 'y'\n\toption version '0'\n",
        "\toption origin 'agent://lab/y'\n\toption endpoint 'http://192.0.2.10:8080/'\n",
        "config tenant 'lab'\n\tlist jwt_key 'ed25519:AAAA'\n",
    ));
    assert_eq!(p.config.routes.len(), 1);
    assert_eq!(p.config.routes[0].id, "ok");
    assert!(p.config.tenants.is_empty());
    assert_eq!(
        summary(&p),
        [
            (
                s("tenant"),
                Some(s("lab")),
                Some(s("jwt_key")),
                Recovery::SectionSkipped
            ),
            (
                s("route"),
                None,
                Some(s("version")),
                Recovery::SectionSkipped
            ),
            (s("route"), None, Some(s("id")), Recovery::SectionSkipped),
        ]
    );
    assert_eq!(p.policy_problems().count(), 0);
}

#[test]
fn kept_sections_remember_where_they_are_in_the_file() {
    let p = partial(concat!(
        "config route\n\toption capability 'y'\n\toption version '0'\n",
        "config route\n\toption id 'b'\n\toption capability 'x'\n\toption version '1'\n",
        "\toption origin 'agent://lab/x'\n\toption endpoint 'http://192.0.2.10:8080/'\n",
    ));
    assert_eq!(p.config.routes.len(), 1);
    assert_eq!(p.config.routes[0].at.index, 1, "@route[1], not [0]");
    assert_eq!(
        p.config.routes[0].at.to_string(),
        "route 'b' (section @route[1])"
    );
}

#[test]
fn the_first_of_two_rules_with_one_id_is_kept() {
    let p = partial(concat!(
        "config rule 'a'\n\toption id 'x'\n\toption action 'deny'\n",
        "config rule 'b'\n\toption id 'x'\n",
    ));
    assert_eq!(p.config.rules.len(), 1);
    assert_eq!(p.config.rules[0].section.as_deref(), Some("a"));
    assert!(matches!(
        p.problems[0].error.kind,
        ConfigErrorKind::Duplicate { .. }
    ));
    assert_eq!(p.policy_problems().count(), 1);
}

#[test]
fn cross_option_checks_run_again_on_the_defaults() {
    // default_lease is the culprit first; with its default (30) min_lease
    // (100) is still too big, so it falls back too: the result is ordered.
    let p =
        partial("config agentd 'main'\n\toption min_lease '100'\n\toption default_lease '50'\n");
    let a = &p.config.agentd;
    let d = Config::default().agentd;
    assert_eq!(
        (a.min_lease, a.default_lease),
        (d.min_lease, d.default_lease)
    );
    assert_eq!(
        summary(&p),
        [
            (
                s("agentd"),
                Some(s("main")),
                Some(s("default_lease")),
                Recovery::OptionDefault
            ),
            (
                s("agentd"),
                Some(s("main")),
                Some(s("min_lease")),
                Recovery::OptionDefault
            ),
        ]
    );
    // The strict load reports what the file says, not the follow-on error.
    assert_eq!(p.errors().0.len(), 1);
    assert_eq!(
        Config::from_str(
            "config agentd 'main'\n\toption min_lease '100'\n\toption default_lease '50'\n",
            FILE
        )
        .unwrap_err()
        .0
        .len(),
        1
    );
}

#[test]
fn a_condition_no_value_can_satisfy_turns_the_feature_off() {
    let p = partial(concat!(
        "config ipv6 'ipv6'\n\toption mode 'ndp-proxy'\n\toption max_addresses '9'\n",
        "config cloud 'cloud'\n\toption enabled '1'\n\toption url 'ftp://x'\n",
    ));
    assert_eq!(p.config.ipv6.mode, Config::default().ipv6.mode);
    assert_eq!(
        p.config.ipv6.max_addresses, 9,
        "the rest of the section stays"
    );
    assert!(!p.config.cloud.enabled);
    let options: Vec<_> = summary(&p).into_iter().map(|x| x.2.unwrap()).collect();
    assert_eq!(options, ["prefix", "url", "url"]);
    assert!(p
        .problems
        .iter()
        .all(|p| p.recovery == Recovery::OptionDefault));
}

#[test]
fn a_syntax_error_keeps_what_parsed_before_it() {
    let p = partial(concat!(
        "config agentd 'main'\n\toption ipc_socket '/tmp/a.sock'\n",
        "config gateway 'gateway'\n\toption sdk_listen '127.0.0.1:7999'\n",
        "\toption auth 'none' 'extra'\n",
        "config rule 'r'\n\toption action 'deny'\n",
    ));
    assert_eq!(p.config.agentd.ipc_socket, "/tmp/a.sock");
    assert_eq!(p.config.gateway.sdk_listen, "127.0.0.1:7999");
    assert_eq!(p.config.gateway.auth, Config::default().gateway.auth);
    assert!(p.config.rules.is_empty(), "nothing after the error is read");
    assert_eq!(
        summary(&p),
        [
            (s("-"), None, None, Recovery::RestIgnored),
            (
                s("gateway"),
                Some(s("gateway")),
                None,
                Recovery::SectionPartial
            ),
        ]
    );
    assert!(matches!(
        &p.problems[0].error.kind,
        ConfigErrorKind::Syntax(e) if e.line == 5
    ));
    assert_eq!(
        p.problems[1].error.to_string(),
        "/etc/config/agentd: gateway 'gateway': cut short by the syntax error at line 5: its later options were not read"
    );
    // Rules may follow the error: the policy is unknown.
    assert_eq!(p.policy_problems().count(), 1);
}

#[test]
fn a_repeatable_section_cut_short_is_skipped() {
    let p = partial(concat!(
        "config route 'a'\n\toption capability 'x'\n\toption version '1'\n",
        "\toption origin 'agent://lab/x'\n\toption endpoint 'http://192.0.2.10:8080/'\n",
        "\tbogus line\n",
    ));
    assert!(p.config.routes.is_empty());
    assert_eq!(
        summary(&p),
        [
            (s("-"), None, None, Recovery::RestIgnored),
            (s("route"), Some(s("a")), None, Recovery::SectionSkipped),
        ]
    );
}

#[test]
fn an_error_in_a_config_line_does_not_cut_the_section_before_it() {
    let p = partial(concat!(
        "config agentd 'main'\n\toption ipc_socket '/tmp/a.sock'\n",
        "config gateway 'bad name'\n",
    ));
    assert_eq!(p.config.agentd.ipc_socket, "/tmp/a.sock");
    assert_eq!(summary(&p), [(s("-"), None, None, Recovery::RestIgnored)]);
}

#[test]
fn line_limits_and_bad_utf8_cut_at_the_start_of_their_line() {
    let long = "#".repeat(uci_schema::uci::MAX_LINE_BYTES + 1);
    let text = format!("config agentd 'main'\n\toption ipc_socket '/tmp/a.sock'\n{long}\n");
    let p = partial(&text);
    assert_eq!(p.config.agentd.ipc_socket, "/tmp/a.sock");
    assert!(matches!(
        &p.problems[0].error.kind,
        ConfigErrorKind::Syntax(e) if e.line == 3
    ));
    let bytes = b"config agentd 'main'\n\toption ipc_socket '/tmp/a.sock'\n\toption x '\xff'\n";
    let prefix = uci_schema::uci::Package::parse_bytes_prefix(bytes);
    let cut = prefix.cut.expect("cut");
    assert_eq!(cut.error.line, 3);
    assert!(cut.last_section_open);
    assert_eq!(prefix.pkg.sections[0].options.len(), 1);
}

#[test]
fn an_unknown_section_is_skipped_and_a_misspelt_rule_counts_for_the_policy() {
    let p = partial("config rul 'r'\n\toption action 'deny'\nconfig gatway 'g'\n");
    assert_eq!(
        summary(&p),
        [
            (s("rul"), Some(s("r")), None, Recovery::SectionSkipped),
            (s("gatway"), Some(s("g")), None, Recovery::SectionSkipped),
        ]
    );
    assert_eq!(p.policy_problems().count(), 1);
}

#[test]
fn default_action_is_part_of_the_policy() {
    let p = partial("config agentd 'main'\n\toption default_action 'dney'\n");
    assert_eq!(p.policy_problems().count(), 1);
}

#[test]
fn an_unreadable_file_yields_the_defaults_and_says_why() {
    let path = std::env::temp_dir().join(format!("uci-partial-absent-{}", std::process::id()));
    let p = Config::load_partial(&path);
    assert_eq!(p.config, Config::default());
    assert_eq!(p.problems.len(), 1);
    assert_eq!(p.problems[0].recovery, Recovery::FileIgnored);
    assert!(matches!(
        p.problems[0].error.kind,
        ConfigErrorKind::Io { .. }
    ));
    assert_eq!(p.policy_problems().count(), 1);
}

/// Deterministic xorshift, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn mangled_demo_configs_keep_only_valid_parts_and_the_prefix_agrees_with_the_strict_parser() {
    use uci_schema::uci::Package;
    let demo = uci_schema::demo::DEMO_CONFIG.as_bytes();
    let junk: &[u8] = b"'\"\\#;\n x0-_:/.*'\xff";
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..400 {
        let mut bytes = demo.to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len());
            match rng.below(3) {
                0 => bytes[at] = junk[rng.below(junk.len())],
                1 => bytes.insert(at, junk[rng.below(junk.len())]),
                _ => {
                    bytes.remove(at);
                }
            }
        }
        let prefix = Package::parse_bytes_prefix(&bytes);
        match (&prefix.cut, Package::parse_bytes(&bytes)) {
            (None, Ok(pkg)) => assert_eq!(pkg, prefix.pkg),
            (Some(cut), Err(e)) => assert_eq!(cut.error, e),
            (cut, strict) => panic!("prefix {cut:?} disagrees with strict {strict:?}"),
        }
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let p = partial(text);
            assert_eq!(p.is_valid(), Config::from_str(text, FILE).is_ok());
        }
    }
}

//! Typed config: defaults, zero values, and every error kind naming file,
//! section and option.

use uci_schema::schema::Kind;
use uci_schema::{
    Action, Admission, Auth, Config, ConfigError, ConfigErrorKind, ConfigErrors, Effect, Ipv6Mode,
    Protocol, RelayMode, RouteSource, Weights,
};

const FILE: &str = "/etc/config/agentd";

fn ok(text: &str) -> Config {
    Config::from_str(text, FILE).unwrap_or_else(|e| panic!("{e}\n--- input ---\n{text}"))
}

fn errors(text: &str) -> Vec<ConfigError> {
    match Config::from_str(text, FILE) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(ConfigErrors(v)) => v,
    }
}

/// The single error of `text`.
fn one_error(text: &str) -> ConfigError {
    let v = errors(text);
    assert_eq!(v.len(), 1, "expected one error, got {v:#?}");
    v.into_iter().next().unwrap()
}

#[test]
fn the_message_names_file_rule_id_section_option_and_problem() {
    let e =
        one_error("config rule 'prefer_cheap'\n\toption id '20-cheap'\n\toption priority 'high'\n");
    assert_eq!(
        e.to_string(),
        "/etc/config/agentd: rule '20-cheap' (section 'prefer_cheap'): option 'priority': expected an integer 0..=65535, got 'high'"
    );
    assert_eq!(e.file, FILE);
    let s = e.section.as_ref().unwrap();
    assert_eq!(
        (s.ty.as_str(), s.name.as_deref(), s.index),
        ("rule", Some("prefer_cheap"), 0)
    );
    assert_eq!(e.option.as_deref(), Some("priority"));
    assert_eq!(
        e.kind,
        ConfigErrorKind::InvalidValue {
            expected: Kind::UInt { min: 0, max: 65535 },
            got: "high".into()
        }
    );
}

#[test]
fn all_errors_are_collected_not_just_the_first() {
    let v = errors(concat!(
        "config agentd 'main'\n\toption max_routes 'lots'\n\toption log_lvl 'debug'\n",
        "config gateway 'gateway'\n\toption auth 'basic'\n",
        "config route 'r'\n\toption version '0'\n",
    ));
    let found: Vec<_> = v
        .iter()
        .map(|e| {
            (
                e.section.as_ref().unwrap().ty.as_str(),
                e.option.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("agentd", "max_routes"),
            ("agentd", "log_lvl"),
            ("gateway", "auth"),
            ("route", "version"),
            ("route", "capability"),
            ("route", "origin"),
            ("route", "endpoint"),
        ]
    );
    let text = ConfigErrors(v).to_string();
    assert_eq!(text.lines().count(), 7, "{text}");
    assert!(
        text.contains(
            "gateway 'gateway': option 'auth': expected one of 'jwt', 'none', got 'basic'"
        ),
        "{text}"
    );
}

#[test]
fn empty_file_is_the_default_config_with_design_defaults() {
    let c = ok("");
    assert_eq!(c, Config::default());
    assert_eq!(
        (
            c.agentd.min_lease,
            c.agentd.default_lease,
            c.agentd.max_lease
        ),
        (5, 30, 3600)
    );
    assert_eq!(
        (
            c.agentd.health_fail_threshold,
            c.agentd.health_recover_threshold
        ),
        (3, 2)
    );
    assert_eq!(c.agentd.default_action, Action::Allow);
    assert_eq!(
        c.gateway.auth,
        Auth::Jwt,
        "auth 'none' is never the default"
    );
    assert_eq!(c.gateway.sdk_listen, "[::]:7446", "dual-stack");
    assert_eq!(c.gateway.public_listen, "[::]:7443");
    assert_eq!(c.gateway.peer_listen, "[::]:7447");
    assert_eq!(c.arpx.listen, "[::]:7444");
    assert_eq!(
        (c.arpx.heartbeat_ms, c.arpx.miss_limit, c.arpx.graceful_s),
        (1000, 3, 10)
    );
    assert_eq!(
        (
            c.gateway.task_capacity,
            c.gateway.task_ttl,
            c.gateway.hop_limit
        ),
        (512, 300, 8)
    );
    assert_eq!(
        (
            c.gateway.stream_history_events,
            c.gateway.stream_history_bytes
        ),
        (64, 1_048_576)
    );
    assert_eq!(c.discovery.admission, Admission::Manual);
    assert_eq!(c.discovery.candidate_lifetime_s, 5);
    assert_eq!(c.ipv6.mode, Ipv6Mode::Off);
    assert_eq!(c.relay.mode, RelayMode::Off);
    assert!(!c.cloud.enabled);
    assert!(c.peers.is_empty() && c.rules.is_empty() && c.routes.is_empty());
}

#[test]
fn rule_defaults_are_the_design_weights_and_no_constraints() {
    let w = Weights::default();
    assert_eq!(
        (w.w_latency, w.d_cost, w.w_load, w.w_trust, w.w_hops),
        (1000, 100, 100, 5000, 10000)
    );
    let c = ok("config rule 'r'\n");
    let r = &c.rules[0];
    assert_eq!(r.id, "r", "id defaults to the section name");
    assert_eq!((r.priority, r.action), (0, Action::Allow));
    assert_eq!(
        (r.tenant.as_str(), r.source.as_str(), r.capability.as_str()),
        ("*", "*", "*")
    );
    assert_eq!(r.weights, w);
    let k = &r.constraints;
    assert_eq!(
        (k.max_latency_ms, k.max_cost, k.max_load, k.max_hops),
        (u64::MAX, u64::MAX, u64::MAX, u64::MAX)
    );
    assert_eq!(k.min_trust, 0);
    assert_eq!(
        k.sources,
        [
            RouteSource::Local,
            RouteSource::Static,
            RouteSource::Peer,
            RouteSource::Relay
        ]
    );
    assert_eq!(*k, uci_schema::Constraints::default());
}

#[test]
fn zero_is_a_value_never_unset() {
    let c = ok(concat!(
        "config gateway 'gateway'\n\toption clock_skew '0'\n\toption stream_history_events '0'\n\toption stream_history_bytes '0'\n",
        "config arpx 'arpx'\n\toption graceful_s '0'\n",
        "config tenant 'lab'\n\toption rate_per_second '0'\n",
        "config rule 'r'\n\toption w_latency '0'\n\toption w_trust '0'\n\toption max_latency_ms '0'\n\toption max_cost '0'\n\toption max_hops '0'\n\toption max_load '0'\n\toption nonpreferred_penalty '0'\n",
        "config route 'p'\n\toption capability 'office.print'\n\toption version '1'\n\toption origin 'agent://lab/printer'\n\toption endpoint 'http://192.0.2.10:8080/invoke'\n\toption cost '0'\n\toption trust '0'\n\toption latency_ms '0'\n",
    ));
    assert_eq!(c.gateway.clock_skew, 0);
    assert_eq!(
        (
            c.gateway.stream_history_events,
            c.gateway.stream_history_bytes
        ),
        (0, 0)
    );
    assert_eq!(c.arpx.graceful_s, 0);
    assert_eq!(c.tenants[0].rate_per_second, 0);
    let r = &c.rules[0];
    assert_eq!(
        (
            r.weights.w_latency,
            r.weights.w_trust,
            r.nonpreferred_penalty
        ),
        (0, 0, 0)
    );
    assert_eq!(
        r.weights.d_cost, 100,
        "untouched weights keep their default"
    );
    let k = &r.constraints;
    assert_eq!(
        (k.max_latency_ms, k.max_cost, k.max_hops, k.max_load),
        (0, 0, 0, 0)
    );
    let p = &c.routes[0];
    assert_eq!((p.cost, p.trust, p.latency_ms), (0, 0, 0));
    assert_eq!(Config::default().routes.len(), 0);
    assert_eq!(ok("config route 'q'\n\toption capability 'x'\n\toption version '1'\n\toption origin 'agent://lab/q'\n\toption endpoint 'http://192.0.2.1/'\n").routes[0].trust, 50, "absent trust takes the default");
}

#[test]
fn unknown_sections_and_options_are_errors_with_suggestions() {
    let e = one_error("config gatway 'gw'\n\toption auth 'none'\n");
    assert_eq!(
        e.kind,
        ConfigErrorKind::UnknownSection {
            suggestion: Some("gateway")
        }
    );
    assert_eq!(
        e.to_string(),
        "/etc/config/agentd: gatway 'gw': unknown section type (did you mean 'gateway'?)"
    );

    let e = one_error("config rule 'r'\n\toption priorty '5'\n");
    assert_eq!(e.option.as_deref(), Some("priorty"));
    assert_eq!(
        e.kind,
        ConfigErrorKind::UnknownOption {
            suggestion: Some("priority")
        }
    );
    assert_eq!(
        e.to_string(),
        "/etc/config/agentd: rule 'r': option 'priorty': unknown option (did you mean 'priority'?)"
    );

    let e = one_error("config bogus\n");
    assert_eq!(e.kind, ConfigErrorKind::UnknownSection { suggestion: None });
    assert_eq!(
        e.to_string(),
        "/etc/config/agentd: bogus @bogus[0]: unknown section type"
    );
}

#[test]
fn singletons_may_appear_once_under_any_name() {
    let c = ok("config gateway 'gw'\n\toption auth 'none'\n");
    assert_eq!(c.gateway.auth, Auth::None);
    let c = ok("config arpx\n\toption reflector '1'\n");
    assert!(c.arpx.reflector);
    let e = one_error("config gateway 'a'\nconfig gateway 'b'\n");
    assert_eq!(
        e.kind,
        ConfigErrorKind::DuplicateSection {
            first: "gateway 'a'".into()
        }
    );
    assert_eq!(e.section.unwrap().name.as_deref(), Some("b"));
}

#[test]
fn list_for_a_single_option_is_an_error_and_option_for_a_list_is_one_item() {
    let e = one_error("config gateway 'g'\n\tlist auth 'jwt'\n");
    assert_eq!(
        (e.option.as_deref(), &e.kind),
        (Some("auth"), &ConfigErrorKind::NotAList)
    );
    let c = ok("config discovery 'd'\n\toption interface 'br-guest'\n");
    assert_eq!(c.discovery.interface, ["br-guest"]);
    let c = ok("config discovery 'd'\n\tlist interface 'br-lan'\n\tlist interface 'br-iot'\n");
    assert_eq!(c.discovery.interface, ["br-lan", "br-iot"]);
}

#[test]
fn each_bad_list_item_is_reported() {
    let v = errors(
        "config rule 'r'\n\tlist sources 'local'\n\tlist sources 'cloud'\n\tlist sources 'lan'\n",
    );
    let got: Vec<_> = v
        .iter()
        .map(|e| match &e.kind {
            ConfigErrorKind::InvalidValue { got, .. } => got.as_str(),
            k => panic!("{k:?}"),
        })
        .collect();
    assert_eq!(got, ["cloud", "lan"]);
}

#[test]
fn required_options_and_ids_of_anonymous_sections() {
    let v = errors("config route\n\toption capability 'x'\n\toption version '1'\n\toption origin 'agent://lab/x'\n\toption endpoint 'http://192.0.2.1/'\n");
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].kind, ConfigErrorKind::Missing);
    assert_eq!(
        v[0].to_string(),
        "/etc/config/agentd: route @route[0]: option 'id': required but missing"
    );
    let c = ok("config rule\n\toption id '10-x'\n");
    assert_eq!(
        (c.rules[0].id.as_str(), c.rules[0].section.as_deref()),
        ("10-x", None)
    );
    let e = one_error("config peer 'b'\n\toption router_id 'router-b'\n");
    assert_eq!(
        (e.option.as_deref(), e.kind),
        (Some("address"), ConfigErrorKind::Missing)
    );
}

#[test]
fn route_validation() {
    let base = "config route 'r'\n\toption capability 'office.print'\n\toption origin 'agent://lab/printer'\n\toption endpoint 'http://192.0.2.10:8080/invoke'\n";
    let e = one_error(&format!("{base}\toption version '0'\n"));
    assert_eq!(e.to_string(), "/etc/config/agentd: route 'r': option 'version': expected an integer 1..=4294967295, got '0'");
    let e = one_error(base);
    assert_eq!(
        (e.option.as_deref(), e.kind),
        (Some("version"), ConfigErrorKind::Missing)
    );
    let c = ok(&format!("{base}\toption version '2'\n"));
    assert_eq!(
        c.routes[0].tenant, "lab",
        "tenant comes from origin when absent"
    );
    assert_eq!(c.routes[0].effect, None);
    let e = one_error(&format!(
        "{base}\toption version '1'\n\toption tenant 'other'\n"
    ));
    assert_eq!(
        e.kind,
        ConfigErrorKind::TenantMismatch {
            tenant: "other".into(),
            origin_tenant: "lab".into()
        }
    );
    let e = one_error(&format!(
        "{base}\toption version '1'\n\toption load '1001'\n"
    ));
    assert_eq!(e.option.as_deref(), Some("load"));
    let v = errors("config route 'r'\n\toption capability 'x'\n\toption version '1'\n\toption origin 'lab/printer'\n\toption endpoint 'ftp://192.0.2.1/'\n\toption effect 'maybe'\n");
    let opts: Vec<_> = v.iter().map(|e| e.option.clone().unwrap()).collect();
    assert_eq!(opts, ["origin", "endpoint", "effect"]);
    let c = ok(&format!("{base}\toption version '1'\n\toption effect 'write'\n\toption idempotent 'yes'\n\toption input_schema '{{\"type\":\"object\"}}'\n\tlist allowed_tenants 'ops'\n"));
    let r = &c.routes[0];
    assert_eq!((r.effect, r.idempotent), (Some(Effect::Write), true));
    assert_eq!(r.allowed_tenants, ["ops"]);
    let e = one_error(&format!(
        "{base}\toption version '1'\n\toption input_schema 'not json'\n"
    ));
    assert_eq!(
        e.kind,
        ConfigErrorKind::InvalidValue {
            expected: Kind::JsonObject,
            got: "not json".into()
        }
    );
}

#[test]
fn identifiers_must_be_unique() {
    let e = one_error("config rule 'a'\n\toption id '10'\nconfig rule 'b'\n\toption id '10'\n");
    assert_eq!(
        e.to_string(),
        "/etc/config/agentd: rule '10' (section 'b'): option 'id': rule id '10' is already used by rule '10' (section 'a')"
    );
    // Whatever the priorities (a disabled rule's id is taken too).
    let e = one_error("config rule 'a'\n\toption id '10'\n\toption priority '1'\n\toption enabled '0'\nconfig rule 'b'\n\toption id '10'\n\toption priority '900'\n");
    assert!(
        matches!(
            e.kind,
            ConfigErrorKind::Duplicate {
                what: "rule id",
                ..
            }
        ),
        "{e}"
    );
    // A section name reused as another rule's explicit id collides too.
    let e = one_error("config rule 'x'\nconfig rule 'y'\n\toption id 'x'\n");
    assert!(
        matches!(
            e.kind,
            ConfigErrorKind::Duplicate {
                what: "rule id",
                ..
            }
        ),
        "{e}"
    );
    let route = |name: &str, id: &str| {
        format!("config route '{name}'\n\toption id '{id}'\n\toption capability 'c'\n\toption version '1'\n\toption origin 'agent://t/a'\n\toption endpoint 'http://192.0.2.1/'\n")
    };
    let e = one_error(&(route("a", "static:1") + &route("b", "static:1")));
    assert!(
        matches!(
            e.kind,
            ConfigErrorKind::Duplicate {
                what: "route id",
                ..
            }
        ),
        "{e}"
    );
    let e = one_error("config tenant 'a'\n\toption name 'lab'\nconfig tenant 'lab'\n");
    assert!(
        matches!(
            e.kind,
            ConfigErrorKind::Duplicate {
                what: "tenant name",
                ..
            }
        ),
        "{e}"
    );
    let e = one_error("config peer 'a'\n\toption router_id 'r'\n\toption address '192.0.2.2'\nconfig peer 'b'\n\toption router_id 'r'\n\toption address '192.0.2.3'\n");
    assert!(
        matches!(
            e.kind,
            ConfigErrorKind::Duplicate {
                what: "peer router_id",
                ..
            }
        ),
        "{e}"
    );
    // Same mapping name under different protocols is fine.
    let c = ok("config mapping 'a'\n\toption name 'echo'\n\toption capability 'demo.echo'\nconfig mapping 'b'\n\toption name 'echo'\n\toption protocol 'a2a'\n\toption capability 'demo.echo'\n");
    assert_eq!(c.mappings[1].protocol, Protocol::A2a);
    let e = one_error("config mapping 'a'\n\toption name 'echo'\n\toption capability 'x'\nconfig mapping 'b'\n\toption name 'echo'\n\toption capability 'y'\n");
    assert!(
        matches!(
            e.kind,
            ConfigErrorKind::Duplicate {
                what: "mapping name",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn lease_bounds_must_be_ordered() {
    let e = one_error("config agentd 'main'\n\toption min_lease '60'\n");
    assert_eq!(e.option.as_deref(), Some("min_lease"));
    assert_eq!(
        e.kind,
        ConfigErrorKind::Order {
            lower: "min_lease",
            lower_value: 60,
            upper: "default_lease",
            upper_value: 30
        }
    );
    assert_eq!(e.to_string(), "/etc/config/agentd: agentd 'main': option 'min_lease': min_lease (60) must not be greater than default_lease (30)");
    let e = one_error("config agentd 'main'\n\toption max_lease '10'\n");
    assert_eq!(e.option.as_deref(), Some("max_lease"));
    let c = ok("config agentd 'main'\n\toption min_lease '30'\n\toption default_lease '30'\n\toption max_lease '30'\n");
    assert_eq!(c.agentd.max_lease, 30);
    // An invalid bound is reported once, not again as an ordering error.
    let v = errors("config agentd 'main'\n\toption min_lease 'x'\n\toption max_lease '1'\n");
    assert_eq!(v.len(), 2, "{v:#?}");
}

#[test]
fn conditional_requirements() {
    let e = one_error("config relay 'relay'\n\toption mode 'client'\n");
    assert_eq!(
        e.to_string(),
        "/etc/config/agentd: relay 'relay': option 'server': required when mode is 'client'"
    );
    assert_eq!(ok("config relay 'relay'\n\toption mode 'client'\n\toption server 'relay.lab.example:7447'\n").relay.mode, RelayMode::Client);
    let e = one_error("config ipv6 'ipv6'\n\toption mode 'ndp-proxy'\n");
    assert_eq!(
        (e.option.as_deref(), e.kind),
        (
            Some("prefix"),
            ConfigErrorKind::RequiredWhen {
                condition: "mode is 'ndp-proxy'".into(),
                trigger: "mode",
            }
        )
    );
    // Proxy NDP answers on the upstream's on-link /64 only.
    let e = one_error(
        "config ipv6 'ipv6'\n\toption mode 'ndp-proxy'\n\toption prefix '2001:db8:1::/56'\n",
    );
    assert_eq!(e.option.as_deref(), Some("prefix"));
    assert!(e.to_string().contains("must be that /64"), "{e}");
    for prefix in ["2001:db8:1::/64", "auto"] {
        let text =
            format!("config ipv6 'ipv6'\n\toption mode 'ndp-proxy'\n\toption prefix '{prefix}'\n");
        assert_eq!(ok(&text).ipv6.prefix, prefix);
    }
    assert_eq!(
        ok("config ipv6 'ipv6'\n\toption mode 'routed-prefix'\n\toption prefix '2001:db8::/48'\n")
            .ipv6
            .prefix,
        "2001:db8::/48"
    );
    let e = one_error(
        "config ipv6 'ipv6'\n\toption mode 'routed-prefix'\n\toption prefix '2001:db8::/72'\n",
    );
    assert!(e.to_string().contains("/48 to /64"), "{e}");
    let e = one_error("config cloud 'cloud'\n\toption enabled '1'\n");
    assert_eq!(e.option.as_deref(), Some("url"));
    let e = one_error("config relay 'relay'\n\toption reconnect_min_ms '5000'\n\toption reconnect_max_ms '1000'\n");
    assert!(matches!(e.kind, ConfigErrorKind::Order { .. }));
}

#[test]
fn value_kinds_in_context() {
    let cases: &[(&str, &str)] = &[
        ("config rule 'r'\n\toption d_cost '0'\n", "d_cost"),
        ("config gateway 'g'\n\toption bootstrap_ttl '301'\n", "bootstrap_ttl"),
        ("config gateway 'g'\n\tlist bootstrap_networks '10.0.0.0/33'\n", "bootstrap_networks"),
        ("config gateway 'g'\n\tlist bootstrap_networks 'lan'\n", "bootstrap_networks"),
        ("config gateway 'g'\n\toption sdk_listen 'localhost:7446'\n", "sdk_listen"),
        ("config agentd 'main'\n\toption router_id 'router_a'\n", "router_id"),
        ("config agentd 'main'\n\toption identity 'relative/key'\n", "identity"),
        ("config agentd 'main'\n\toption enabled 'maybe'\n", "enabled"),
        ("config rule 'r'\n\toption capability 'admin*'\n", "capability"),
        ("config rule 'r'\n\toption min_trust '101'\n", "min_trust"),
        ("config tenant 't'\n\tlist jwt_key 'ed25519:BASE64...'\n", "jwt_key"),
        ("config peer 'p'\n\toption router_id 'b'\n\toption address 'a b'\n", "address"),
        ("config peer 'p'\n\toption router_id 'b'\n\toption address '192.0.2.2'\n\toption port '70000'\n", "port"),
        ("config ipv6 'v'\n\toption prefix '192.0.2.0/24'\n", "prefix"),
        ("config discovery 'd'\n\tlist interface 'much-too-long-name'\n", "interface"),
        ("config arpx 'a'\n\toption heartbeat_ms '-1'\n", "heartbeat_ms"),
        ("config relay 'r'\n\toption server 'relay.example:99999'\n", "server"),
        ("config relay 'r'\n\toption server '192.0.2.300:7447'\n", "server"),
        ("config agent 'a'\n\toption origin 'agent://lab/x'\n\tlist source '192.0.2.0/33'\n", "source"),
        ("config ipv6 'v'\n\toption prefix '2001:db8::/129'\n", "prefix"),
    ];
    for (text, option) in cases {
        let e = one_error(text);
        assert_eq!(e.option.as_deref(), Some(*option), "{text}");
        assert!(
            matches!(e.kind, ConfigErrorKind::InvalidValue { .. }),
            "{text}: {e}"
        );
    }
}

/// libuci does not store `option x ''` (it drops it when it reads the
/// file, so rpcd and LuCI never see it and their next commit writes the
/// file without it): the daemons read it as absent too, i.e. as the
/// default — a listener stays on, a required option is missing — and
/// only `off` turns a listener off.
#[test]
fn an_empty_value_reads_as_absent_as_libuci_reads_it() {
    let c = ok(concat!(
        "config gateway 'g'\n\toption public_listen ''\n\toption peer_listen ''\n",
        "\toption admin_listen ''\n\toption sdk_listen ''\n",
        "config arpx 'a'\n\toption listen ''\n",
        "config agentd 'main'\n\toption domain_ca ''\n\toption max_routes ''\n",
    ));
    let d = ok("");
    assert_eq!(c.gateway.public_listen, "[::]:7443");
    assert_eq!(c.gateway.peer_listen, "[::]:7447");
    assert_eq!(c.gateway.admin_listen, "127.0.0.1:9101");
    assert_eq!(c.gateway.sdk_listen, d.gateway.sdk_listen);
    assert_eq!(c.arpx.listen, "[::]:7444");
    assert_eq!(c.agentd.domain_ca, "");
    assert_eq!(c.agentd.max_routes, d.agentd.max_routes);
    // A required option set to '' is missing, as for libuci.
    let e = one_error("config agent 'a'\n\toption origin ''\n");
    assert_eq!(e.option.as_deref(), Some("origin"));
    assert!(matches!(e.kind, ConfigErrorKind::Missing), "{e}");
}

#[test]
fn boolean_spellings() {
    for (v, want) in [
        ("1", true),
        ("yes", true),
        ("on", true),
        ("true", true),
        ("enabled", true),
        ("0", false),
        ("no", false),
        ("off", false),
        ("false", false),
        ("disabled", false),
    ] {
        assert_eq!(
            ok(&format!("config arpx 'a'\n\toption reflector '{v}'\n"))
                .arpx
                .reflector,
            want,
            "{v}"
        );
    }
}

#[test]
fn syntax_errors_name_the_file_and_position() {
    let e = one_error("config rule 'r'\n\toption id 'x\n");
    assert!(matches!(e.kind, ConfigErrorKind::Syntax(_)));
    assert_eq!(
        e.to_string(),
        "/etc/config/agentd: line 2, column 12: unterminated ' quote (opened here)"
    );
}

/// DESIGN §13 with section names made unique (see the syntax tests for
/// why the verbatim example cannot load) and a real JWT key.
const DESIGN_EXAMPLE: &str = include_str!("design-example.conf");

#[test]
fn design_example_validates_with_its_values() {
    let c = ok(DESIGN_EXAMPLE);
    assert_eq!(c.agentd.router_id, "router-a");
    assert_eq!(c.agentd.max_routes, 10000);
    assert_eq!(c.discovery.interface, ["br-lan"]);
    assert_eq!(c.peers[0].router_id, "router-b");
    assert_eq!(c.peers[0].port, 7444);
    assert_eq!(c.tenants[0].name, "lab");
    assert_eq!(c.rules.len(), 2);
    let deny = &c.rules[0];
    assert_eq!(
        (deny.id.as_str(), deny.priority, deny.action),
        ("10-deny", 100, Action::Deny)
    );
    let cheap = &c.rules[1];
    assert_eq!(cheap.id, "20-cheap");
    assert_eq!(
        (
            cheap.constraints.max_latency_ms,
            cheap.constraints.min_trust
        ),
        (500, 20)
    );
    assert_eq!(
        (cheap.preferred_peer.as_str(), cheap.nonpreferred_penalty),
        ("router-b", 50000)
    );
    assert_eq!(c.routes[0].cost, 0);
    assert_eq!(c.routes[0].region, "local");
    assert_eq!(c.mappings[0].protocol, Protocol::Mcp);
}

#[test]
fn typed_config_round_trips_through_uci_text() {
    for text in [DESIGN_EXAMPLE, uci_schema::demo::DEMO_CONFIG, ""] {
        let c = ok(text);
        let written = c.to_uci().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok(&written), c, "{written}");
    }
    let c = Config {
        rules: ok("config rule\n\toption id 'anon'\n\toption priority '7'\n").rules,
        routes: ok(concat!(
            "config route\n\toption id 'static:1'\n\toption capability 'c'\n\toption version '3'\n",
            "\toption origin 'agent://t/a'\n\toption endpoint 'http://192.0.2.1/'\n\toption tenant 't'\n"
        ))
        .routes,
        ..Config::default()
    };
    let written = c.to_uci().unwrap();
    assert!(
        written.contains("config rule\n\toption id 'anon'\n"),
        "{written}"
    );
    assert_eq!(ok(&written), c);
}

#[test]
fn to_uci_refuses_what_uci_cannot_express() {
    let mut c = Config::default();
    c.discovery.interface.clear();
    let e = c.to_uci().unwrap_err();
    assert_eq!(e.0[0].kind, ConfigErrorKind::Unrepresentable);
    let mut c = Config::default();
    c.gateway.bootstrap_ttl = 301;
    let e = c.to_uci().unwrap_err();
    assert_eq!(e.0[0].option.as_deref(), Some("bootstrap_ttl"));
}

#[test]
fn arpx_frame_and_path_bounds_have_defaults_and_ranges() {
    let c = ok("");
    assert_eq!((c.arpx.max_frame, c.arpx.max_path), (65536, 8));
    let c = ok("config arpx 'arpx'\n\toption max_frame '1024'\n\toption max_path '64'\n");
    assert_eq!((c.arpx.max_frame, c.arpx.max_path), (1024, 64));
    for (opt, bad) in [
        ("max_frame", "1023"),
        ("max_frame", "16777217"),
        ("max_path", "0"),
        ("max_path", "65"),
    ] {
        let e = one_error(&format!("config arpx 'arpx'\n\toption {opt} '{bad}'\n"));
        assert_eq!(e.option.as_deref(), Some(opt), "{e}");
        assert!(
            matches!(e.kind, ConfigErrorKind::InvalidValue { .. }),
            "{e}"
        );
    }
    // The old name is gone, with a hint to the new one.
    let e = one_error("config arpx 'arpx'\n\toption max_frame_bytes '4096'\n");
    assert!(
        matches!(e.kind, ConfigErrorKind::UnknownOption { .. }),
        "{e}"
    );
}

const PEER_B: &str =
    "config peer 'b'\n\toption router_id 'router-b'\n\toption address '192.0.2.2'\n";

#[test]
fn peer_route_limit_and_exported_tenants() {
    let c = ok(PEER_B);
    assert_eq!(c.peers[0].max_routes, 10000);
    assert!(c.peers[0].export_tenant.is_empty(), "default: every tenant");
    let c = ok(&format!(
        "{PEER_B}\toption max_routes '1'\n\tlist export_tenant 'lab'\n\tlist export_tenant 'home'\n"
    ));
    assert_eq!(c.peers[0].max_routes, 1);
    assert_eq!(c.peers[0].export_tenant, ["lab", "home"]);
    for (line, opt) in [
        ("\toption max_routes '0'\n", "max_routes"),
        ("\toption max_routes '1000001'\n", "max_routes"),
        ("\tlist export_tenant 'not a name'\n", "export_tenant"),
        (
            "\toption export_tenant 'lab'\n\toption export_tenant 'x y'\n",
            "export_tenant",
        ),
    ] {
        let e = one_error(&format!("{PEER_B}{line}"));
        assert_eq!(e.option.as_deref(), Some(opt), "{e}");
        assert_eq!(e.section.as_ref().unwrap().name.as_deref(), Some("b"));
    }
    let written = c.to_uci().unwrap();
    assert_eq!(ok(&written), c, "{written}");
}

#[test]
fn a_peer_naming_this_router_is_refused_with_its_section() {
    let text = format!("config agentd 'main'\n\toption router_id 'router-b'\n{PEER_B}");
    let e = one_error(&text);
    assert_eq!(
        e.kind,
        ConfigErrorKind::OwnRouterId {
            router_id: "router-b".into()
        }
    );
    assert_eq!(e.option.as_deref(), Some("router_id"));
    assert_eq!(
        e.to_string(),
        "/etc/config/agentd: peer 'b': option 'router_id': router_id 'router-b' is this router's own agentd.router_id (a router does not peer with itself)"
    );
    // Another router_id is fine; so is any when ours is the host name.
    let c = ok(&format!(
        "config agentd 'main'\n\toption router_id 'router-a'\n{PEER_B}"
    ));
    assert_eq!(c.peers.len(), 1);
    assert_eq!(ok(PEER_B).peers.len(), 1);
    // A partial load skips only that peer.
    let p = Config::from_str_partial(
        &format!(
            "{text}config peer 'c'\n\toption router_id 'router-c'\n\toption address '192.0.2.3'\n"
        ),
        FILE,
    );
    let ids: Vec<&str> = p
        .config
        .peers
        .iter()
        .map(|p| p.router_id.as_str())
        .collect();
    assert_eq!(ids, ["router-c"]);
    assert_eq!(p.problems.len(), 1);
}

#[test]
fn mapping_schema_is_inline_or_a_file_never_both() {
    let c = ok(
        "config mapping 'echo'\n\toption capability 'demo.echo'\n\toption title 'Echo'\n\
        \toption input_schema_file '/etc/agentd/echo.json'\n",
    );
    let m = &c.mappings[0];
    assert_eq!((m.title.as_str(), m.input_schema.as_str()), ("Echo", ""));
    assert_eq!(m.input_schema_file, "/etc/agentd/echo.json");
    let e = one_error("config mapping 'echo'\n\toption capability 'demo.echo'\n\
        \toption input_schema '{\"type\":\"object\"}'\n\toption input_schema_file '/etc/agentd/echo.json'\n");
    assert_eq!(e.option.as_deref(), Some("input_schema_file"));
    assert!(
        matches!(
            e.kind,
            ConfigErrorKind::Exclusive {
                other: "input_schema"
            }
        ),
        "{e}"
    );
    let e = one_error("config mapping 'echo'\n\toption capability 'demo.echo'\n\toption input_schema_file 'rel.json'\n");
    assert_eq!(e.option.as_deref(), Some("input_schema_file"));
}

#[test]
fn protocol_ingress_options_have_their_defaults_and_are_read() {
    let c = ok("");
    assert!(!c.gateway.expose_schemas);
    assert_eq!(c.gateway.protocol_tenant, "default");
    assert!(c.gateway.allowed_hosts.is_empty());
    let c = ok(
        "config gateway 'gateway'\n\toption expose_schemas '1'\n\toption protocol_tenant 'lab'\n\
        \tlist allowed_hosts 'router.lan'\n\tlist allowed_hosts '192.0.2.1'\n",
    );
    assert!(c.gateway.expose_schemas);
    assert_eq!(c.gateway.protocol_tenant, "lab");
    assert_eq!(c.gateway.allowed_hosts, ["router.lan", "192.0.2.1"]);
    let e = one_error("config gateway 'gateway'\n\tlist allowed_hosts 'bad host'\n");
    assert_eq!(e.option.as_deref(), Some("allowed_hosts"));
}

/// `off` is the one spelling of an empty meaning that survives libuci
/// (`''` is dropped, see above): it turns a listener off.
#[test]
fn off_turns_off_what_the_empty_value_turns_off() {
    let c = ok(concat!(
        "config gateway 'gateway'\n\toption public_listen 'off'\n\toption peer_listen 'off'\n",
        "config arpx 'arpx'\n\toption listen 'off'\n",
        "config agentd 'main'\n\toption domain_ca 'off'\n",
        "config mapping 'm'\n\toption capability 'demo.echo'\n\toption description 'off'\n",
    ));
    assert_eq!(c.gateway.public_listen, "");
    assert_eq!(c.gateway.peer_listen, "");
    assert_eq!(c.arpx.listen, "");
    assert_eq!(c.agentd.domain_ca, "");
    // Where `off` is itself a value (free text), it stays that value.
    assert_eq!(c.mappings[0].description, "off");
    // Where no empty value is accepted, `off` is an error like any other.
    let e = Config::from_str(
        "config gateway 'gateway'\n\toption sdk_listen 'off'\n",
        FILE,
    )
    .unwrap_err();
    assert!(e.to_string().contains("sdk_listen"), "{e}");
}

/// Pins are typed values: a malformed one is refused with its section
/// and option, like a bad port, not left for the TLS handshake to fail.
#[test]
fn malformed_pins_name_their_section_and_option() {
    let hex = "0123456789abcdef".repeat(4);
    let peer = |fp: &str| {
        format!("config peer 'b'\n\toption router_id 'router-b'\n\toption address '192.0.2.2'\n\toption key_fingerprint '{fp}'\n")
    };
    let allow =
        |fp: &str| format!("config discovery 'discovery'\n\tlist allow_fingerprint '{fp}'\n");
    let good = format!("sha256:{hex}");
    assert_eq!(ok(&peer(&good)).peers[0].key_fingerprint, good);
    assert_eq!(
        ok(&allow(&good)).discovery.allow_fingerprint,
        std::slice::from_ref(&good)
    );
    for bad in [
        format!("sha257:{hex}"),
        format!("sha256:{hex}a"),
        format!("sha256:{}", &hex[2..]),
        "sha256:00".to_string(),
    ] {
        let e = one_error(&peer(&bad));
        assert_eq!(
            e.to_string(),
            format!("/etc/config/agentd: peer 'b': option 'key_fingerprint': expected a key fingerprint 'sha256:' and 64 hex digits, got '{}'", bad.chars().take(64).collect::<String>() + if bad.chars().count() > 64 { "..." } else { "" })
        );
        let e = one_error(&allow(&bad));
        assert_eq!(e.option.as_deref(), Some("allow_fingerprint"));
        assert_eq!(e.section.as_ref().map(|s| s.ty.as_str()), Some("discovery"));
        assert!(matches!(
            e.kind,
            ConfigErrorKind::InvalidValue {
                expected: Kind::Fingerprint,
                ..
            }
        ));
    }
}

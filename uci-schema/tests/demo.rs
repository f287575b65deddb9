//! The embedded demo config is valid and says what its docs promise.

use uci_schema::demo::DEMO_CONFIG;
use uci_schema::{Action, Auth, Config};

#[test]
fn demo_config_validates_with_two_echo_routes_and_an_admin_deny() {
    let c = Config::from_str(DEMO_CONFIG, "demo").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.agentd.router_id, "demo-router");
    assert_eq!(c.agentd.domain, "lab.example");
    assert_eq!(c.gateway.auth, Auth::None);
    let echo: Vec<_> = c
        .routes
        .iter()
        .filter(|r| r.capability == "demo.echo" && r.version == 1)
        .collect();
    assert_eq!(echo.len(), 2);
    assert_ne!(echo[0].endpoint, echo[1].endpoint);
    assert_ne!(echo[0].latency_ms, echo[1].latency_ms);
    assert_ne!(echo[0].trust, echo[1].trust);
    assert!(c
        .routes
        .iter()
        .all(|r| r.endpoint.starts_with("http://127.0.0.1:")));
    let deny = c
        .rules
        .iter()
        .find(|r| r.action == Action::Deny)
        .expect("a deny rule");
    assert_eq!(deny.capability, "admin.*");
    assert!(c.rules.iter().any(|r| r.action == Action::Allow));
}

//! A complete, valid configuration for demos, examples and tests.
//!
//! Daemons started from it in tests override `ipc_socket`, `state_dir` and
//! the listeners (they point under `/tmp/agentd-demo` and at loopback).

/// `router_id 'demo-router'` in domain `lab.example` with lab-mode auth,
/// two static `demo.echo` v1 routes on loopback (different latency and
/// trust), an allow rule and a final deny for `admin.*`.
pub const DEMO_CONFIG: &str = r#"# agentd demo configuration (see docs/config.md for every option)
package agentd

config agentd 'main'
	option router_id 'demo-router'
	option domain 'lab.example'
	option identity '/tmp/agentd-demo/identity.key'
	option ipc_socket '/tmp/agentd-demo/agentd.sock'
	option state_dir '/tmp/agentd-demo'
	option default_lease '30'
	option min_lease '5'
	option max_lease '3600'
	option default_action 'allow'
	option log_level 'info'
	# Lab mode: demo agents run on this machine (loopback endpoints).
	option allow_loopback_endpoints '1'

config gateway 'gateway'
	option sdk_listen '127.0.0.1:7446'
	option public_listen 'off'        # no public ingress in the demo
	option peer_listen '127.0.0.1:7447'
	# Lab mode: callers are not authenticated. Never use this on a real LAN.
	option auth 'none'
	option task_capacity '512'

config arpx 'arpx'
	option listen '127.0.0.1:7444'
	option reflector '0'

config discovery 'discovery'
	option enabled '0'
	option admission 'manual'

config tenant 'lab'
	option rate_per_second '100'

config rule 'deny_admin'
	option id '10-deny-admin'
	option priority '100'
	option action 'deny'
	option capability 'admin.*'

config rule 'allow_lab'
	option id '20-allow-lab'
	option priority '50'
	option action 'allow'
	option tenant 'lab'
	option capability '*'
	option max_latency_ms '500'
	option min_trust '20'

config route 'echo_fast'
	option capability 'demo.echo'
	option version '1'
	option origin 'agent://lab/echo-fast'
	option endpoint 'http://127.0.0.1:18081/invoke'
	option allow_loopback '1'
	option latency_ms '2'
	option cost '0'
	option load '0'
	option trust '90'
	option effect 'read'
	option idempotent '1'
	option description 'Echo back the input (fast replica)'

config route 'echo_slow'
	option capability 'demo.echo'
	option version '1'
	option origin 'agent://lab/echo-slow'
	option endpoint 'http://127.0.0.1:18082/invoke'
	option allow_loopback '1'
	option latency_ms '40'
	option cost '0'
	option load '0'
	option trust '60'
	option effect 'read'
	option idempotent '1'
	option description 'Echo back the input (slow replica)'

config mapping 'mcp_echo'
	option protocol 'mcp'
	option name 'echo'
	option capability 'demo.echo'
	option version '1'
	option description 'Echo back the input'
	option input_schema '{"type":"object","properties":{"text":{"type":"string"}}}'

config ipv6 'ipv6'
	option mode 'off'

config relay 'relay'
	option mode 'off'

config cloud 'cloud'
	option enabled '0'
"#;

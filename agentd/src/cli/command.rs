//! agentctl's command line: global options and the subcommand.
//!
//! `agentctl [--socket PATH] [--config FILE] [--json] COMMAND [ARGS]`

use std::path::PathBuf;

use super::args::{Arg, Parser, UsageError};
use super::pki::{PkiCommand, PkiOptions};

pub const USAGE: &str = "\
usage: agentctl [--socket PATH] [--config FILE] [--json] COMMAND

commands:
  status                         daemon state, config generation, errors
  routes                         every route in the RIB
  agents                         origins (agents) and their routes
  lookup CAPABILITY [--version N] [--tenant T] [--source S] [--explain]
                                 the route a call would take (and why)
  peers                          ARPX sessions: state, uptime, routes, errors
  candidates                     routers discovered by mDNS and unicast DNS-SD, their record
                                 version and state; each search domain's last success and error
  discovery records [ZONE] [--address IP]...
                                 the zone lines (PTR, SRV, TXT, AAAA/A) that publish this
                                 router for unicast DNS-SD (ZONE: default agentd.domain)
  approve ROUTER_ID VERSION      admit a candidate at that record version (writes a
                                 discovered peer section into the config file, reloads)
  revoke ROUTER_ID VERSION       remove that approval (the session ends)
  reload                         re-read the config (same as SIGHUP)
  unregister ROUTE_ID            withdraw one locally registered route now
  flush --origin AGENT_URI       withdraw every local route of one agent now
  stats                          the daemon's counters
  tasks                          agent-gw's task tables: its own and the handles of tasks on other routers
  rpcd list | rpcd call METHOD   rpcd exec-plugin protocol (ubus object agentd)

pki (local files, no daemon; docs/pki.md):
  pki init-domain --domain D [--out DIR] [--days N]
                                 new domain CA: DIR/domain-ca.key (0600) + domain-ca.pem
  pki issue-router --ca-key F --ca-cert F --router-id R [--domain D]
                   (--key IDENTITY_KEY | --pubkey ed25519:B64) [--out FILE] [--days N]
                                 router certificate for that router's identity key
  pki init-identity [--key FILE] [--group NAME|GID]
                                 create the identity key (--key, else the config's
                                 agentd.identity) if missing, never rewriting one;
                                 --group: readable by that group (0640), e.g. agent-gw
  pki show                       router_id, identity key fingerprint, domain CA,
                                 router certificate and peer trust of --config

options:
  --socket PATH   agentd's IPC socket (default: ipc_socket from the config)
  --config FILE   UCI file to read the socket path (and what pki show reports) from
                  (default /etc/config/agentd)
  --json          machine-readable output
  --version       (alone) print agentctl's version and exit

exit status: 0 ok, 1 refused (by the daemon; a pki command: file exists,
             bad key or certificate; pki show: a problem found), 2 usage,
             3 cannot reach the daemon
";

/// Exit statuses, stable for scripts.
pub mod exit {
    pub const OK: u8 = 0;
    pub const DAEMON_ERROR: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const CONNECT: u8 = 3;
}

/// A route lookup as the CLI and ubus express it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LookupQuery {
    pub capability: String,
    /// Interface version; `None` means 1.
    pub version: Option<u32>,
    pub tenant: Option<String>,
    pub source: Option<String>,
    pub explain: bool,
}

/// What agentctl does, independent of how it was asked (CLI or rpcd).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Status,
    Routes,
    Agents,
    Lookup(LookupQuery),
    Reload,
    Stats,
    Peers,
    /// Discovered routers.
    Candidates,
    /// `approve ROUTER_ID VERSION` (`true`) or `revoke ROUTER_ID VERSION`.
    Admission {
        approve: bool,
        router_id: String,
        version: u32,
    },
    /// The gateway's task table, from its latest report to agentd.
    Tasks,
    /// Withdraw one local route (operator).
    Unregister(String),
    /// Withdraw every local route of an origin (operator).
    Flush(String),
    RpcdList,
    RpcdCall(String),
    /// Local certificate and key files (no daemon).
    Pki(PkiCommand),
    /// The zone lines that publish this router (no daemon).
    DiscoveryRecords {
        zone: Option<String>,
        addresses: Vec<std::net::IpAddr>,
    },
    Help,
    /// `agentctl --version` on its own.
    Version,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlOptions {
    pub socket: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub json: bool,
    pub command: Command,
}

/// Parses agentctl's arguments; options may come before or after the
/// command word.
pub fn parse(mut p: Parser) -> Result<CtlOptions, UsageError> {
    let mut socket = None;
    let mut config = None;
    let mut json = false;
    let mut words: Vec<String> = Vec::new();
    let mut lookup = LookupQuery::default();
    let mut lookup_opts = false;
    let mut origin: Option<String> = None;
    let mut pki = PkiOptions::default();
    let mut addresses = Vec::new();
    while let Some(arg) = p.next_arg()? {
        match arg {
            Arg::Long(l) if pki.take(&l, &mut p)? => {}
            Arg::Long(l) if l == "socket" => socket = Some(PathBuf::from(p.value()?)),
            Arg::Long(l) if l == "config" => config = Some(PathBuf::from(p.value()?)),
            Arg::Long(l) if l == "json" => json = true,
            Arg::Long(l) if l == "help" => {
                return Ok(CtlOptions {
                    socket,
                    config,
                    json,
                    command: Command::Help,
                })
            }
            Arg::Short('h') => {
                return Ok(CtlOptions {
                    socket,
                    config,
                    json,
                    command: Command::Help,
                })
            }
            // Alone, it asks for agentctl's version; anywhere else it is
            // lookup's interface version, which takes a value.
            Arg::Long(l) if l == "version" && words.is_empty() && p.at_end() => {
                return Ok(CtlOptions {
                    socket,
                    config,
                    json,
                    command: Command::Version,
                })
            }
            Arg::Long(l) if l == "version" => {
                lookup.version = Some(p.number()?);
                lookup_opts = true;
            }
            Arg::Long(l) if l == "tenant" => {
                lookup.tenant = Some(p.value()?);
                lookup_opts = true;
            }
            Arg::Long(l) if l == "source" => {
                lookup.source = Some(p.value()?);
                lookup_opts = true;
            }
            Arg::Long(l) if l == "origin" => origin = Some(p.value()?),
            Arg::Long(l) if l == "address" => {
                let v = p.value()?;
                let ip = v.parse().map_err(|_| UsageError::BadValue {
                    option: "--address".into(),
                    value: v.clone(),
                    reason: "not an IP address",
                })?;
                addresses.push(ip);
            }
            Arg::Long(l) if l == "explain" => {
                lookup.explain = true;
                lookup_opts = true;
            }
            Arg::Positional(w) => words.push(w),
            other => return Err(other.unexpected()),
        }
    }
    let mut words = words.into_iter();
    let command = match words.next().as_deref() {
        None => return Err(UsageError::Missing("command (try agentctl --help)")),
        Some("status") => Command::Status,
        Some("routes") => Command::Routes,
        Some("agents") => Command::Agents,
        Some("reload") => Command::Reload,
        Some("stats") => Command::Stats,
        Some("peers") => Command::Peers,
        Some("candidates") => Command::Candidates,
        Some("discovery") => match words.next().as_deref() {
            Some("records") => Command::DiscoveryRecords {
                zone: words.next(),
                addresses: std::mem::take(&mut addresses),
            },
            Some(other) => return Err(UsageError::UnexpectedArgument(other.to_string())),
            None => return Err(UsageError::Missing("discovery verb (records)")),
        },
        Some(verb @ ("approve" | "revoke")) => {
            let approve = verb == "approve";
            let router_id = words.next().ok_or(UsageError::Missing(if approve {
                "ROUTER_ID VERSION for approve"
            } else {
                "ROUTER_ID VERSION for revoke"
            }))?;
            let v = words.next().ok_or(UsageError::Missing(
                "VERSION (the record version agentctl candidates shows)",
            ))?;
            let version =
                v.parse::<u32>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or(UsageError::BadValue {
                        option: "VERSION".into(),
                        value: v,
                        reason: "not a record version (an integer ≥ 1)",
                    })?;
            Command::Admission {
                approve,
                router_id,
                version,
            }
        }
        Some("tasks") => Command::Tasks,
        Some("help") => Command::Help,
        Some("unregister") => Command::Unregister(
            words
                .next()
                .ok_or(UsageError::Missing("route_id for unregister"))?,
        ),
        Some("flush") => Command::Flush(
            origin
                .take()
                .ok_or(UsageError::Missing("--origin AGENT_URI for flush"))?,
        ),
        Some("lookup") => {
            lookup.capability = words
                .next()
                .ok_or(UsageError::Missing("capability for lookup"))?;
            Command::Lookup(lookup.clone())
        }
        Some("rpcd") => match words.next().as_deref() {
            Some("list") => Command::RpcdList,
            Some("call") => Command::RpcdCall(
                words
                    .next()
                    .ok_or(UsageError::Missing("method for rpcd call"))?,
            ),
            Some(other) => return Err(UsageError::UnexpectedArgument(other.to_string())),
            None => return Err(UsageError::Missing("rpcd verb (list or call)")),
        },
        Some("pki") => Command::Pki(std::mem::take(&mut pki).command(words.next().as_deref())?),
        Some(other) => return Err(UsageError::UnexpectedArgument(other.to_string())),
    };
    if let Some(extra) = words.next() {
        return Err(UsageError::UnexpectedArgument(extra));
    }
    if let Some(flag) = pki.first_given() {
        return Err(UsageError::Conflict(flag, "a command other than pki"));
    }
    if !addresses.is_empty() {
        return Err(UsageError::Conflict(
            "--address",
            "a command other than discovery records",
        ));
    }
    if origin.is_some() {
        return Err(UsageError::Conflict(
            "--origin",
            "a command other than flush",
        ));
    }
    if lookup_opts && !matches!(command, Command::Lookup(_)) {
        return Err(UsageError::Conflict(
            "--version/--tenant/--source/--explain",
            "a command other than lookup",
        ));
    }
    Ok(CtlOptions {
        socket,
        config,
        json,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<CtlOptions, UsageError> {
        parse(Parser::new(args.iter().map(|s| s.to_string())))
    }

    #[test]
    fn lookup_takes_capability_and_filters_in_any_order() {
        let o = parse_args(&[
            "--json",
            "lookup",
            "--explain",
            "demo.echo",
            "--version",
            "2",
            "--tenant=lab",
        ])
        .unwrap();
        assert!(o.json);
        assert_eq!(
            o.command,
            Command::Lookup(LookupQuery {
                capability: "demo.echo".into(),
                version: Some(2),
                tenant: Some("lab".into()),
                source: None,
                explain: true,
            })
        );
    }

    #[test]
    fn version_alone_is_agentctl_s_and_elsewhere_lookup_s() {
        let version = |args: &[&str]| parse_args(args).map(|o| o.command);
        assert_eq!(version(&["--version"]), Ok(Command::Version));
        assert_eq!(version(&["--json", "--version"]), Ok(Command::Version));
        // With a command, or a value, it is the lookup filter.
        assert_eq!(
            version(&["lookup", "demo.echo", "--version"]),
            Err(UsageError::MissingValue("--version".into()))
        );
        assert!(matches!(
            version(&["--version=2", "lookup", "demo.echo"]),
            Ok(Command::Lookup(LookupQuery {
                version: Some(2),
                ..
            }))
        ));
        assert!(matches!(
            version(&["--version", "2"]),
            Err(UsageError::Missing(_))
        ));
    }

    #[test]
    fn lookup_without_capability_is_a_usage_error() {
        assert_eq!(
            parse_args(&["lookup"]),
            Err(UsageError::Missing("capability for lookup"))
        );
    }

    #[test]
    fn lookup_filters_on_other_commands_are_refused() {
        assert!(matches!(
            parse_args(&["status", "--explain"]),
            Err(UsageError::Conflict(..))
        ));
    }

    #[test]
    fn discovery_records_takes_a_zone_and_addresses() {
        assert_eq!(
            parse_args(&["discovery", "records"]).unwrap().command,
            Command::DiscoveryRecords {
                zone: None,
                addresses: vec![]
            }
        );
        assert_eq!(
            parse_args(&[
                "discovery",
                "records",
                "lab.example",
                "--address",
                "192.0.2.1",
                "--address",
                "2001:db8::1"
            ])
            .unwrap()
            .command,
            Command::DiscoveryRecords {
                zone: Some("lab.example".into()),
                addresses: vec!["192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()]
            }
        );
        assert!(matches!(
            parse_args(&["discovery", "records", "--address", "x"]),
            Err(UsageError::BadValue { .. })
        ));
        assert!(matches!(
            parse_args(&["status", "--address", "192.0.2.1"]),
            Err(UsageError::Conflict(..))
        ));
        assert!(matches!(
            parse_args(&["discovery"]),
            Err(UsageError::Missing(_))
        ));
    }

    #[test]
    fn approve_and_revoke_take_a_router_and_a_version() {
        assert_eq!(
            parse_args(&["approve", "router-b", "77"]).unwrap().command,
            Command::Admission {
                approve: true,
                router_id: "router-b".into(),
                version: 77
            }
        );
        assert_eq!(
            parse_args(&["--json", "revoke", "router-b", "3"])
                .unwrap()
                .command,
            Command::Admission {
                approve: false,
                router_id: "router-b".into(),
                version: 3
            }
        );
        assert!(matches!(
            parse_args(&["approve", "router-b"]),
            Err(UsageError::Missing(_))
        ));
        for bad in ["0", "x", "4294967296"] {
            assert!(
                matches!(
                    parse_args(&["approve", "router-b", bad]),
                    Err(UsageError::BadValue { .. })
                ),
                "{bad}"
            );
        }
        assert_eq!(
            parse_args(&["candidates"]).unwrap().command,
            Command::Candidates
        );
    }

    #[test]
    fn rpcd_verbs_parse() {
        assert_eq!(
            parse_args(&["rpcd", "list"]).unwrap().command,
            Command::RpcdList
        );
        assert_eq!(
            parse_args(&["rpcd", "call", "status"]).unwrap().command,
            Command::RpcdCall("status".into())
        );
        assert!(parse_args(&["rpcd", "call"]).is_err());
    }

    #[test]
    fn unregister_and_flush_name_what_they_remove() {
        assert_eq!(
            parse_args(&["unregister", "r-1"]).unwrap().command,
            Command::Unregister("r-1".into())
        );
        assert!(parse_args(&["unregister"]).is_err());
        assert_eq!(
            parse_args(&["flush", "--origin", "agent://lab/x"])
                .unwrap()
                .command,
            Command::Flush("agent://lab/x".into())
        );
        assert!(parse_args(&["flush"]).is_err());
        assert!(matches!(
            parse_args(&["status", "--origin", "agent://lab/x"]),
            Err(UsageError::Conflict(..))
        ));
    }

    #[test]
    fn pki_verbs_take_their_options_in_any_order() {
        use super::super::pki::Subject;
        let o = parse_args(&[
            "--pubkey",
            "ed25519:AAAA",
            "pki",
            "issue-router",
            "--router-id=router-b",
            "--ca-key",
            "k",
            "--ca-cert",
            "c",
        ])
        .unwrap();
        assert_eq!(
            o.command,
            Command::Pki(PkiCommand::IssueRouter {
                ca_key: "k".into(),
                ca_cert: "c".into(),
                router_id: "router-b".into(),
                domain: None,
                subject: Subject::PublicKey("ed25519:AAAA".into()),
                out: None,
                days: router_pki::cert::ROUTER_DAYS,
            })
        );
        assert_eq!(
            parse_args(&["pki", "init-domain", "--domain", "d"])
                .unwrap()
                .command,
            Command::Pki(PkiCommand::InitDomain {
                domain: "d".into(),
                out: ".".into(),
                days: router_pki::cert::CA_DAYS,
            })
        );
        assert_eq!(
            parse_args(&["routes", "--out", "x"]),
            Err(UsageError::Conflict("--out", "a command other than pki"))
        );
    }

    #[test]
    fn socket_option_is_kept() {
        let o = parse_args(&["--socket", "/tmp/s", "status"]).unwrap();
        assert_eq!(o.socket, Some(PathBuf::from("/tmp/s")));
        assert_eq!(o.command, Command::Status);
    }

    #[test]
    fn unknown_command_and_extra_words_are_refused() {
        assert!(parse_args(&["frobnicate"]).is_err());
        assert!(parse_args(&["status", "now"]).is_err());
        assert!(parse_args(&[]).is_err());
    }
}

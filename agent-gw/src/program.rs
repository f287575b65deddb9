//! The `agent-gw` program (`agent-gw --config FILE [-f] [--socket PATH]
//! [--listen ADDR]`), for its own binary and the suite's multi-call one.
//!
//! The invocation gateway daemon: serves the LAN SDK API and forwards
//! invocations decided on its FIB replica of agentd.
//!
//! Logs like agentd: to syslog (OpenWrt `logd`) unless `-f` keeps it in
//! the foreground on stderr; the level is `agentd.log_level`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::{AuthMode, GatewayConfig};
use crate::serve::Gateway;
use agentd::log::{self, Level, Sink};
use agentd::{log_error, log_info, log_notice, log_warn};

const USAGE: &str = "\
usage: agent-gw [--config FILE] [-f] [--socket PATH] [--listen ADDR]

  --config FILE, -c FILE  UCI file to run on (default /etc/config/agentd)
  -f, --foreground        stay in the foreground and log to stderr
  --socket PATH           agentd's IPC socket, overriding agentd.ipc_socket
  --listen ADDR           SDK listener, overriding gateway.sdk_listen
  -h, --help              print this help and exit
  --version               print the version and exit
";

/// Configuration problems logged one per line at startup.
const MAX_LOGGED_PROBLEMS: usize = 32;

#[derive(Debug, Default)]
struct Args {
    config: Option<PathBuf>,
    foreground: bool,
    socket: Option<PathBuf>,
    listen: Option<SocketAddr>,
    help: bool,
    version: bool,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--config" | "-c" => a.config = Some(PathBuf::from(value("--config")?)),
            "-f" | "--foreground" => a.foreground = true,
            "--socket" => a.socket = Some(PathBuf::from(value("--socket")?)),
            "--listen" => {
                let v = value("--listen")?;
                a.listen = Some(
                    v.parse()
                        .map_err(|_| format!("--listen {v}: not a socket address"))?,
                );
            }
            "-h" | "--help" => a.help = true,
            "--version" => a.version = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

/// Entry point of the `agent-gw` binary.
pub fn main() -> ExitCode {
    main_with(std::env::args().skip(1))
}

/// [`main`] on `args` (without the program name).
pub fn main_with(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args = match parse_args(args) {
        Ok(a) if a.help => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(a) if a.version => {
            println!("agent-gw {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Ok(a) => a,
        Err(e) => {
            eprintln!("agent-gw: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let sink = if args.foreground {
        Sink::Stderr
    } else {
        Sink::Syslog
    };
    log::init(sink, c"agent-gw");
    // A startup failure must reach whoever started us even when logging
    // goes to syslog.
    let fatal = |msg: String| {
        log_error!("{msg}");
        if sink == Sink::Syslog {
            eprintln!("agent-gw: {msg}");
        }
    };
    // Like agentd: a file named on the command line must exist; the
    // default path may be absent (fresh install) and then defaults apply.
    // Otherwise start on whatever is valid in the file (a typo in a
    // section must not take the data plane down) and log what is not.
    let named = args.config.is_some();
    let path = args
        .config
        .unwrap_or_else(|| PathBuf::from(uci_schema::config::DEFAULT_PATH));
    let partial = if !path.exists() {
        if named {
            fatal(format!(
                "configuration file {} does not exist",
                path.display()
            ));
            return ExitCode::from(2);
        }
        log_notice!("{} does not exist; using built-in defaults", path.display());
        uci_schema::Config::from_str_partial("", "<built-in defaults>")
    } else {
        uci_schema::Config::load_partial(&path)
    };
    let uci = &partial.config;
    if let Some(level) = Level::parse(uci.agentd.log_level.as_str()) {
        log::set_level(level);
    }
    let (mut cfg, gw_problems) = GatewayConfig::from_partial(uci);
    let problems: Vec<String> = partial
        .problems
        .iter()
        .map(|p| p.to_string())
        .chain(
            gw_problems
                .into_iter()
                .map(|p| format!("{}: {p}", path.display())),
        )
        .collect();
    for p in problems.iter().take(MAX_LOGGED_PROBLEMS) {
        log_error!("{p}");
    }
    if problems.len() > MAX_LOGGED_PROBLEMS {
        log_error!(
            "... and {} more configuration problem(s) (agentctl status)",
            problems.len() - MAX_LOGGED_PROBLEMS
        );
    }
    if !problems.is_empty() {
        log_warn!(
            "starting on the valid part of {}: {} problem(s) left out",
            path.display(),
            problems.len()
        );
    }
    if cfg.auth == AuthMode::Jwt {
        let key_path = GatewayConfig::issuer_key_path(uci);
        match crate::auth::load_or_create_key(&key_path) {
            Ok(k) => cfg.issuer_key = Some(k),
            Err(e) => {
                fatal(e.to_string());
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(s) = args.socket {
        cfg.ipc_socket = s;
    }
    if let Some(l) = args.listen {
        cfg.sdk_listen = l;
    }
    if cfg.auth == AuthMode::None {
        log_warn!(
            "WARNING: auth 'none' (lab mode): callers are NOT authenticated; tenant and source \
             are taken from request bodies"
        );
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // Host-name lookups are the blocking pool's only regular work and
        // hold at most MAX_LOOKUPS threads; a few more for peer dials by
        // name. tokio's default (512) would let a silent resolver cost a
        // thread per new connection.
        .max_blocking_threads(crate::forward::lookup::MAX_LOOKUPS + 4)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            fatal(format!("cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let local = tokio::task::LocalSet::new();
    let gw = Gateway::of(cfg);
    local.spawn_local(on_hangup());
    match local.block_on(&rt, crate::serve::run(gw)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fatal(e.to_string());
            ExitCode::FAILURE
        }
    }
}

/// procd's reload trigger sends SIGHUP when /etc/config/agentd changes.
/// Its default action would kill the gateway mid-call; instead say that
/// the gateway's own options apply on restart (routes and policy already
/// follow agentd's reload through the FIB).
async fn on_hangup() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        log_warn!("cannot watch SIGHUP");
        return;
    };
    while hup.recv().await.is_some() {
        log_info!(
            "SIGHUP: routes and policy follow agentd's reload; gateway options (listeners, auth, limits) \
             apply when agent-gw restarts"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn version_and_help_are_options_and_anything_unknown_is_refused() {
        assert!(parse(&["--version"]).unwrap().version);
        assert!(parse(&["-h"]).unwrap().help);
        assert!(!parse(&["-f"]).unwrap().version);
        assert_eq!(
            parse(&["--versions"]).unwrap_err(),
            "unknown argument --versions"
        );
    }
}

//! The agentd daemon.
//!
//! * [`options`] — command line.
//! * [`state`] — all routing decisions, sans-IO (time is an argument).
//! * [`lookup`] — selection answers for `lookup` requests.
//! * [`instance`] — the single event loop around `state` and its inputs.
//! * [`probe`] — health probes of local/static endpoints.
//! * [`peers`] — the ARPX driver (sessions with other routers).
//! * [`discovery`] — mDNS announce/browse and the candidate table.
//! * [`peer_addrs`] — peer router addresses the state cannot see itself.
//! * [`memory`] — giving memory back after the route table shrank.
//! * [`log`] — syslog / stderr.

pub mod discovery;
pub mod effect;
#[cfg(test)]
mod endpoint_tests;
pub mod input;
pub mod instance;
#[cfg(test)]
mod instance_tests;
pub mod ipv6;
pub mod lookup;
pub mod memory;
pub mod options;
#[cfg(test)]
mod origin_claims_tests;
pub mod origins;
#[cfg(test)]
mod ownership_tests;
pub mod peer_addrs;
pub mod peers;
pub mod persist;
pub mod privilege;
pub mod probe;
pub mod relay;
pub mod state;
#[cfg(test)]
mod state_tests;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cli::args::Parser;
use crate::config;
use crate::ipc::server::{IpcServer, ServerConfig};
use crate::log;
use crate::time::Millis;
use crate::{log_error, log_info, log_notice, log_warn};
use effect::Driver;
use input::{Control, Input, Signal};
use instance::Instance;
use options::{ConfigSource, Mode, RunOptions};
use peers::tls::Identity;
use state::State;

/// Longest the exit waits for mDNS's goodbyes (the task sends them as
/// soon as it reads the stop; this bounds a runtime that is slow to run it).
const MDNS_GOODBYE_WAIT: Duration = Duration::from_millis(1500);

/// Lease-file writes are coalesced over this long: a crash loses at most
/// this much of renewal history, far less than the shortest lease margin.
const PERSIST_DELAY: Duration = Duration::from_secs(1);

/// How long a stopping daemon waits for its ARPX Close frames to go out.
const PEER_CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Configuration problems logged one per line at startup; the rest are
/// counted (all of them are in `agentctl status`, up to its limit).
const MAX_LOGGED_PROBLEMS: usize = 32;

/// Program name and version, as sent in the IPC `Hello` and `status`.
pub const SOFTWARE: &str = concat!("agentd ", env!("CARGO_PKG_VERSION"));

/// Entry point of the `agentd` binary.
pub fn main() -> ExitCode {
    main_with(std::env::args().skip(1))
}

/// [`main`] on `args` (without the program name): the suite's multi-call
/// binary hands over what follows the applet's name.
pub fn main_with(args: impl IntoIterator<Item = String>) -> ExitCode {
    let demo_env = std::env::var("AGENTD_DEMO").ok();
    match options::parse(Parser::new(args), demo_env.as_deref()) {
        Ok(Mode::Help) => {
            print!("{}", options::USAGE);
            ExitCode::SUCCESS
        }
        Ok(Mode::Version) => {
            println!("{SOFTWARE}");
            ExitCode::SUCCESS
        }
        Ok(Mode::CheckConfig(path)) => check_config(&path),
        Ok(Mode::Run(opts)) => run(opts),
        Err(e) => {
            eprintln!("agentd: {e}\n{}", options::USAGE);
            ExitCode::from(2)
        }
    }
}

/// `--check-config FILE`: `OK` on stdout and status 0, or every error (one
/// per line, naming file, section and option) on stderr and status 1.
pub fn check_config(path: &Path) -> ExitCode {
    match config::load_file(path) {
        Ok(rt) => {
            if let Some(reason) = &rt.policy.invalid {
                eprintln!("{}: policy invalid: {reason}", path.display());
                return ExitCode::from(1);
            }
            for advice in rt.advice() {
                eprintln!("{}: warning: {advice}", path.display());
            }
            println!("OK");
            ExitCode::SUCCESS
        }
        Err(e) => {
            for line in e.lines() {
                eprintln!("{line}");
            }
            ExitCode::from(1)
        }
    }
}

fn run(opts: RunOptions) -> ExitCode {
    log::init(
        if opts.foreground {
            log::Sink::Stderr
        } else {
            log::Sink::Syslog
        },
        c"agentd",
    );
    if let ConfigSource::Explicit(path) = &opts.config {
        if !path.exists() {
            log_error!("configuration file {} does not exist", path.display());
            eprintln!(
                "agentd: configuration file {} does not exist",
                path.display()
            );
            return ExitCode::from(1);
        }
    }
    // Before any thread exists (see `privilege`).
    match privilege::keep_only(&[privilege::CAP_NET_ADMIN]) {
        Ok(privilege::Dropped::Kept(_)) => {
            log_info!("capabilities: all but CAP_NET_ADMIN dropped (bounding set too)")
        }
        Ok(privilege::Dropped::NoneHeld) => {}
        // A container without CAP_SETPCAP: run with what we were given.
        Err(e) => {
            log_warn!("cannot drop capabilities: {e}; running with those it was started with")
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log_error!("cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(serve(opts))
}

/// Creates the socket's directory (0755) if needed.
fn prepare_socket_dir(socket: &Path) -> std::io::Result<()> {
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}

/// System users whose processes may use the socket besides root: our own
/// user (agentctl run by whoever runs agentd, e.g. a developer) and the
/// gateway's service user if the system has one.
const GATEWAY_USERS: [&std::ffi::CStr; 2] = [c"agent-gw", c"agentgw"];

fn allowed_uids() -> Vec<u32> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let mut uids = vec![unsafe { libc::geteuid() }];
    uids.extend(GATEWAY_USERS.iter().filter_map(|name| uid_of(name)));
    uids.retain(|uid| *uid != 0);
    uids.dedup();
    uids
}

/// The uid of a system user, via the reentrant `getpwnam_r`.
fn uid_of(name: &std::ffi::CStr) -> Option<u32> {
    // SAFETY: `passwd` is plain old data; all-zero is a valid value that
    // getpwnam_r overwrites.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and `buf` outlives it;
    // `result` is either null or points at `pwd`.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then_some(pwd.pw_uid)
}

/// A tokio instant for a monotonic-clock deadline.
fn instant_at(deadline: Millis) -> Instant {
    let now = Millis::now();
    Instant::now() + Duration::from_millis(deadline.saturating_sub(now))
}

async fn serve(opts: RunOptions) -> ExitCode {
    let loaded = effect::start_config(&opts.config);
    let state = State::start(loaded, &opts.config.describe(), SOFTWARE, Millis::now());
    log::set_level(state.runtime().log_level);
    let problems = &state.runtime().problems;
    for p in problems.iter().take(MAX_LOGGED_PROBLEMS) {
        log_error!("{p}");
    }
    if problems.len() > MAX_LOGGED_PROBLEMS {
        log_error!(
            "... and {} more configuration problem(s) (agentctl status)",
            problems.len() - MAX_LOGGED_PROBLEMS
        );
    }
    match state.config_error() {
        None if problems.is_empty() => log_notice!(
            "started on {}: {} static route(s)",
            opts.config.describe(),
            state.runtime().static_routes.len()
        ),
        None => log_warn!(
            "started on the valid part of {}: {} static route(s), {} problem(s) left out (agentctl status)",
            opts.config.describe(),
            state.runtime().static_routes.len(),
            problems.len()
        ),
        Some(e) => log_error!(
            "configuration {} unusable, starting with empty tables: {e}",
            opts.config.describe()
        ),
    }
    if let Some(reason) = &state.runtime().policy.invalid {
        log_warn!("policy invalid, denying every request: {reason}");
    }
    for advice in state.runtime().advice() {
        log_warn!("{advice}");
    }

    let socket = opts
        .socket
        .clone()
        .unwrap_or_else(|| state.runtime().socket.clone());
    if let Err(e) = prepare_socket_dir(&socket) {
        log_error!("cannot create the directory of {}: {e}", socket.display());
        return ExitCode::from(1);
    }
    let server_config = ServerConfig {
        software: SOFTWARE.into(),
        allowed_uids: allowed_uids(),
        // A reload may raise max_routes; the bound follows the start value.
        outbound_bytes: ServerConfig::outbound_bytes_for(state.runtime().max_routes),
        ..ServerConfig::default()
    };
    let server = match IpcServer::bind(&socket, server_config) {
        Ok(s) => s,
        Err(e) => {
            log_error!("cannot listen on {}: {e}", socket.display());
            return ExitCode::from(1);
        }
    };
    log_info!("listening on {}", socket.display());

    let (server_tx, mut server_rx) = mpsc::channel(256);
    tokio::spawn(server.run(server_tx));
    let (input_tx, mut input_rx) = mpsc::channel(256);
    for (kind, sig) in [
        (SignalKind::hangup(), Signal::Reload),
        (SignalKind::terminate(), Signal::Terminate),
        (SignalKind::interrupt(), Signal::Terminate),
    ] {
        match signal(kind) {
            Ok(mut stream) => {
                let tx = input_tx.clone();
                tokio::spawn(async move {
                    while stream.recv().await.is_some() {
                        if tx.send(Input::Signal(sig)).await.is_err() {
                            return;
                        }
                    }
                });
            }
            Err(e) => log_warn!("cannot watch signal {sig:?}: {e}"),
        }
    }

    let mut driver = Driver::new(input_tx);
    let mut effects = Vec::new();
    // The identity files, as a reload reads them with the configuration
    // (off the loop: the loop has not started yet).
    let identity = Identity::read(&state.runtime().mesh);
    let mut instance = Instance::new(state, opts.config.clone(), identity);
    instance.restore(Millis::now());
    instance.sync_health(Millis::now());
    instance.start_peers(Millis::now());
    instance.start_discovery(Millis::now());
    instance.take_effects(&mut effects);
    driver.perform(&mut effects);
    let mut persist_at: Option<Instant> = None;
    let peer_bell = instance.peer_bell();
    loop {
        let deadline = instance.state().next_deadline();
        let next_probe = instance.next_probe();
        let next_peer_timer = instance.next_peer_timer();
        let next_discovery = instance.next_discovery_timer();
        let peer_turn = instance.peer_turn_ready();
        // While connections have frames waiting, turns are always ready;
        // an ARPX timer that is due (a heartbeat to send, a hold time to
        // check) goes first, without depending on how often the runtime
        // gets round to firing its sleep: under a flood and a loaded CPU
        // that was seen to hold an honest peer's heartbeats back for
        // longer than its hold time.
        let peer_timer_due = peer_turn && next_peer_timer.is_some_and(|t| t <= Millis::now());
        let input = if peer_timer_due {
            Input::PeerTimer
        } else {
            tokio::select! {
            ev = server_rx.recv() => match ev {
                Some(ev) => Input::Ipc(ev),
                None => {
                    log_error!("IPC server stopped");
                    break;
                }
            },
            Some(input) = input_rx.recv() => input,
            () = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(instant_at(d)).await,
                    None => std::future::pending().await,
                }
            } => Input::Timer,
            () = async {
                match next_probe {
                    Some(at) => tokio::time::sleep_until(instant_at(at)).await,
                    None => std::future::pending().await,
                }
            } => Input::ProbeDue,
            () = async {
                match next_peer_timer {
                    Some(at) => tokio::time::sleep_until(instant_at(at)).await,
                    None => std::future::pending().await,
                }
            } => Input::PeerTimer,
            // One ARPX connection's frames per turn; with more waiting
            // this branch stays ready, and select! picks among the ready
            // branches at random, so timers and IPC are served between
            // turns.
            () = async {
                if !peer_turn {
                    peer_bell.notified().await;
                }
            } => Input::PeerTurn,
            () = async {
                match next_discovery {
                    Some(at) => tokio::time::sleep_until(instant_at(at)).await,
                    None => std::future::pending().await,
                }
            } => Input::DiscoveryTimer,
            () = async {
                match persist_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                persist_at = None;
                Input::Persist
            }
            }
        };
        let control = instance.process(input, Millis::now(), &mut effects);
        driver.perform(&mut effects);
        if control == Control::Stop {
            break;
        }
        if instance.wants_persist() && persist_at.is_none() {
            persist_at = Some(Instant::now() + PERSIST_DELAY);
        }
    }
    // Goodbyes first: other routers' candidate lifetimes start now. They
    // go out from mDNS's own threads, which the exit would take with it:
    // wait (bounded) until they are handed over. A router that vanished
    // without them stays a candidate elsewhere for its records' TTL.
    if let Some(stopped) = instance.stop_discovery() {
        stopped.wait(MDNS_GOODBYE_WAIT).await;
    }
    // Peers hear admin_shutdown (bounded: a peer that does not read does
    // not hold the exit up).
    instance.stop_peers(Millis::now());
    instance.take_effects(&mut effects);
    driver.perform(&mut effects);
    let closing = driver.finish_peers();
    let _ = tokio::time::timeout(PEER_CLOSE_WAIT, async {
        for writer in closing {
            let _ = writer.await;
        }
    })
    .await;
    if let Some(leases) = instance.save_leases() {
        if let Err(e) = leases.save() {
            log_warn!("{e}");
        }
    }
    instance.close_subscribers();
    if let Err(e) = std::fs::remove_file(&socket) {
        log_warn!("cannot remove {}: {e}", socket.display());
    }
    log_notice!("stopped");
    ExitCode::SUCCESS
}

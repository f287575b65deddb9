//! agentctl's driver: resolve the socket, connect, run one command,
//! render the answer, pick the exit status.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use super::command::{exit, Command, CtlOptions, LookupQuery};
use super::{render, rpcd};
use crate::config;
use crate::ipc::client::{Client, ClientError};
use crate::ipc::message::{self, AgentsQuery, RoutesQuery};

/// Sent in our IPC `Hello`.
const SOFTWARE: &str = concat!("agentctl ", env!("CARGO_PKG_VERSION"));

/// Tenant a lookup runs as when `--tenant` is not given.
pub const DEFAULT_TENANT: &str = "default";

/// Pages fetched at most for `routes`/`agents` (256 rows each), so a
/// misbehaving daemon cannot keep agentctl looping.
const MAX_PAGES: usize = 1024;

/// A failed command: what to print and which exit status to use.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    /// `error` field of the JSON form.
    pub kind: &'static str,
    pub message: String,
}

impl Failure {
    fn json(&self) -> Value {
        rpcd::error_json(self.kind, &self.message)
    }
}

/// The socket to use: `--socket`, else `ipc_socket` of the config file
/// (read like agentd reads it at startup: from a partly invalid file too),
/// else the default path.
pub fn resolve_socket(opts: &CtlOptions) -> PathBuf {
    if let Some(s) = &opts.socket {
        return s.clone();
    }
    let file = opts
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::daemon::options::DEFAULT_CONFIG));
    config::load_file_partial(&file)
        .map(|(rt, _)| rt.socket)
        .unwrap_or_else(|_| config::default_socket())
}

fn client_failure(socket: &Path, e: ClientError) -> Failure {
    match e {
        ClientError::Server(err) => Failure {
            code: exit::DAEMON_ERROR,
            kind: err.code(),
            message: err.to_string(),
        },
        ClientError::UnexpectedResponse { .. } => Failure {
            code: exit::DAEMON_ERROR,
            kind: "unexpected_response",
            message: e.to_string(),
        },
        ClientError::Connect(kind) => Failure {
            code: exit::CONNECT,
            kind: "unreachable",
            message: format!("cannot connect to agentd at {}: {kind}", socket.display()),
        },
        other => Failure {
            code: exit::CONNECT,
            kind: "unreachable",
            message: format!("agentd at {}: {other}", socket.display()),
        },
    }
}

/// Human and JSON forms of one answer.
#[derive(Debug)]
pub(super) struct Output {
    pub(super) text: String,
    pub(super) json: Value,
}

async fn execute(socket: &Path, command: &Command) -> Result<Output, Failure> {
    let client = Client::connect(socket, SOFTWARE)
        .await
        .map_err(|e| client_failure(socket, e))?;
    let fail = |e| client_failure(socket, e);
    match command {
        Command::Status => {
            let s = client.status().await.map_err(fail)?;
            Ok(Output {
                text: render::status_text(&s),
                json: render::status_json(&s),
            })
        }
        Command::Routes => {
            let mut routes = Vec::new();
            let mut after = None;
            for _ in 0..MAX_PAGES {
                let page = client
                    .routes(RoutesQuery {
                        capability: None,
                        after,
                        limit: 0,
                    })
                    .await
                    .map_err(fail)?;
                routes.extend(page.routes);
                after = page.next;
                if after.is_none() {
                    break;
                }
            }
            Ok(Output {
                text: render::routes_text(&routes),
                json: render::routes_json(&routes),
            })
        }
        Command::Agents => {
            let mut agents = Vec::new();
            let mut after = None;
            for _ in 0..MAX_PAGES {
                let page = client
                    .agents(AgentsQuery { after, limit: 0 })
                    .await
                    .map_err(fail)?;
                agents.extend(page.agents);
                after = page.next;
                if after.is_none() {
                    break;
                }
            }
            Ok(Output {
                text: render::agents_text(&agents),
                json: render::agents_json(&agents),
            })
        }
        Command::Lookup(q) => {
            let version = q.version.unwrap_or(1);
            let view = client.lookup(ipc_query(q), q.explain).await.map_err(fail)?;
            Ok(Output {
                text: render::lookup_text(&q.capability, version, &view, q.explain),
                json: render::lookup_json(&q.capability, version, &view),
            })
        }
        Command::Reload => {
            let generation = client.reload().await.map_err(fail)?;
            Ok(Output {
                text: render::reloaded_text(generation),
                json: render::reloaded_json(generation),
            })
        }
        Command::Stats => {
            let s = client.stats().await.map_err(fail)?;
            Ok(Output {
                text: render::stats_text(&s),
                json: render::stats_json(&s),
            })
        }
        Command::Tasks => {
            let s = client.stats().await.map_err(fail)?;
            Ok(Output {
                text: render::tasks_text(&s),
                json: render::tasks_json(&s),
            })
        }
        Command::Peers => {
            let p = client.peers().await.map_err(fail)?;
            Ok(Output {
                text: super::peers::peers_text(&p),
                json: super::peers::peers_json(&p),
            })
        }
        Command::Candidates => {
            let c = client.candidates().await.map_err(fail)?;
            Ok(Output {
                text: super::discovery::candidates_text(&c),
                json: super::discovery::candidates_json(&c),
            })
        }
        Command::Admission {
            approve,
            router_id,
            version,
        } => match client
            .admission(*approve, router_id, *version)
            .await
            .map_err(fail)?
        {
            Ok(done) => Ok(Output {
                text: super::discovery::admission_text(*approve, &done),
                json: super::discovery::admission_json(*approve, &done),
            }),
            Err(refusal) => Err(Failure {
                code: exit::DAEMON_ERROR,
                kind: refusal.code(),
                message: refusal.to_string(),
            }),
        },
        Command::Unregister(id) => {
            let route_id = crate::route::RouteId::new(id).map_err(|e| Failure {
                code: exit::USAGE,
                kind: "invalid_argument",
                message: e.to_string(),
            })?;
            let generation = client.unregister(route_id, None).await.map_err(fail)?;
            Ok(Output {
                text: render::unregistered_text(id, generation),
                json: render::unregistered_json(id, generation),
            })
        }
        Command::Flush(origin) => {
            let (removed, ids, generation) = client.flush(origin).await.map_err(fail)?;
            Ok(Output {
                text: render::flushed_text(origin, removed, &ids, generation),
                json: render::flushed_json(origin, removed, &ids, generation),
            })
        }
        Command::RpcdList
        | Command::RpcdCall(_)
        | Command::Pki(_)
        | Command::DiscoveryRecords { .. }
        | Command::Help
        | Command::Version => Err(Failure {
            code: exit::USAGE,
            kind: "invalid_argument",
            message: "not a daemon command".into(),
        }),
    }
}

fn ipc_query(q: &LookupQuery) -> message::LookupQuery {
    message::LookupQuery {
        capability: q.capability.as_str().into(),
        version: q.version.unwrap_or(1),
        tenant: q.tenant.as_deref().unwrap_or(DEFAULT_TENANT).into(),
        source_agent: q.source.as_deref().map(Into::into),
        target_agent: None,
    }
}

fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure {
            code: exit::CONNECT,
            kind: "internal",
            message: format!("cannot start the runtime: {e}"),
        })?;
    Ok(rt.block_on(f))
}

/// Writes `text` to stdout. A reader that went away (`agentctl … | head`
/// closes the pipe early; Rust ignores SIGPIPE, so the write fails with
/// `EPIPE`) is not an error of the command: the rest is dropped quietly
/// instead of panicking inside `print!`, and the exit status stays the
/// command's own. Any other write error is reported on stderr (best
/// effort: stderr may be gone too).
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            warn(&format!("cannot write the output: {e}"));
        }
    }
}

/// `eprintln!` without its panic when stderr is closed.
fn warn(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "agentctl: {text}");
}

fn print_json(v: &Value) {
    let mut text = serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    emit(&text);
}

/// Runs agentctl with parsed options; returns the exit status.
pub fn run(opts: CtlOptions) -> u8 {
    match &opts.command {
        Command::Help => {
            emit(super::command::USAGE);
            exit::OK
        }
        Command::Version if opts.json => {
            print_json(&serde_json::json!({ "software": SOFTWARE }));
            exit::OK
        }
        Command::Version => {
            emit(&format!("{SOFTWARE}\n"));
            exit::OK
        }
        Command::RpcdList => {
            print_json(&rpcd::signatures());
            exit::OK
        }
        Command::RpcdCall(method) => {
            // rpcd relays whatever object we print; errors are objects too.
            let socket = resolve_socket(&opts);
            let result = rpcd::read_args(std::io::stdin().lock())
                .and_then(|args| rpcd::command_for(method, &args))
                .map_err(|e| e.to_json())
                .and_then(|cmd| match block_on(execute(&socket, &cmd)) {
                    Ok(Ok(out)) => Ok(out.json),
                    Ok(Err(f)) | Err(f) => Err(f.json()),
                });
            match result {
                Ok(v) | Err(v) => print_json(&v),
            }
            exit::OK
        }
        Command::Pki(p) => {
            let result = super::pki::run(p, opts.config.as_deref(), std::time::SystemTime::now());
            report(opts.json, result)
        }
        Command::DiscoveryRecords { zone, addresses } => {
            let result = super::discovery_records::records(
                opts.config.as_deref(),
                zone.as_deref(),
                addresses,
            );
            report(opts.json, result)
        }
        command => {
            let socket = resolve_socket(&opts);
            let result = block_on(execute(&socket, command)).and_then(|r| r);
            report(opts.json, result.map(|out| (out, exit::OK)))
        }
    }
}

/// Prints an answer (or the failure) in the asked-for form; returns the
/// exit status.
fn report(json: bool, result: Result<(Output, u8), Failure>) -> u8 {
    match result {
        Ok((out, code)) => {
            if json {
                print_json(&out.json);
            } else {
                emit(&out.text);
            }
            code
        }
        Err(f) => {
            if json {
                print_json(&f.json());
            }
            warn(&f.message);
            f.code
        }
    }
}

/// Entry point of the `agentctl` binary.
pub fn main() -> ExitCode {
    main_with(std::env::args().skip(1))
}

/// [`main`] on `args` (without the program name), for the multi-call
/// binary.
pub fn main_with(args: impl IntoIterator<Item = String>) -> ExitCode {
    match super::command::parse(super::args::Parser::new(args)) {
        Ok(opts) => ExitCode::from(run(opts)),
        Err(e) => {
            warn(&format!("{e}\n{}", super::command::USAGE));
            ExitCode::from(exit::USAGE)
        }
    }
}

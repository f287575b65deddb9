//! I/O the loop asks for ([`Effect`]) and the [`Driver`] that carries it
//! out off the loop: configuration and lease files, probes, the ARPX
//! driver's sockets and tasks, mDNS. Results come back as inputs.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;

use super::discovery::dns::{self, DnsQuery};
use super::discovery::mdns::MdnsStart;
use super::input::{Admission, ConfigEdit, Input, ReloadCause};
use super::options::ConfigSource;
use super::peers::io::{PeerIo, PeerTasks};
use super::peers::tls::Identity;
use super::probe::{self, ProbeTarget};
use crate::config::{self, LoadError, Runtime};
use crate::discovery::approval::EditError;
use crate::{log_debug, log_warn};

/// I/O that `Instance::process` asks for; the driver performs it.
#[derive(Debug)]
pub enum Effect {
    /// Read the configuration; the result comes back as
    /// `Input::ConfigRead`.
    ReadConfig {
        source: ConfigSource,
        cause: ReloadCause,
    },
    /// Rewrite the config file; the result comes back as
    /// `Input::ConfigEdited`.
    EditConfig {
        edit: ConfigEdit,
        admission: Admission,
    },
    /// Write the lease file; a failure comes back as
    /// `Input::PersistFailed`.
    SaveLeases {
        dir: PathBuf,
        /// The encoded file (`persist::encode`).
        file: super::persist::Encoded,
    },
    /// The route table shrank to half its peak: return the heap's free
    /// pages to the system (see `daemon::memory`).
    TrimMemory,
    /// Probe one endpoint; the verdict comes back as `Input::Probed`.
    Probe {
        target: ProbeTarget,
        guard: crate::endpoint::Guard,
        timeout: Duration,
    },
    /// The ARPX driver's I/O (listen, dial, serve, cut; see
    /// `peers::io`).
    Peer(PeerIo),
    /// Start mDNS (its sockets and threads); a failure comes back as
    /// `Input::MdnsFailed`.
    StartMdns(MdnsStart),
    /// One unicast DNS-SD question; the answer comes back as
    /// `Input::DnsAnswered`.
    Dns(DnsQuery),
}

/// Carries out effects, next to the loop: owns what outlives one effect
/// (the ARPX driver's tasks) and the loop's input channel for results.
#[derive(Debug)]
pub struct Driver {
    inputs: mpsc::Sender<Input>,
    peers: PeerTasks,
}

impl Driver {
    pub fn new(inputs: mpsc::Sender<Input>) -> Driver {
        Driver {
            inputs,
            peers: PeerTasks::default(),
        }
    }

    /// Carries out every effect in order; returns at once.
    pub fn perform(&mut self, effects: &mut Vec<Effect>) {
        for effect in effects.drain(..) {
            effect.perform(self);
        }
    }

    /// At exit: the ARPX connection writers still flushing their Close,
    /// for a bounded wait; every other driver task is stopped.
    pub fn finish_peers(&mut self) -> Vec<tokio::task::JoinHandle<()>> {
        self.peers.finish()
    }
}

impl Effect {
    /// Carries the effect out in a task of its own (file work on the
    /// blocking pool), reporting into the driver's inputs. Returns at
    /// once.
    fn perform(self, driver: &mut Driver) {
        let inputs = driver.inputs.clone();
        match self {
            Effect::ReadConfig { source, cause } => {
                tokio::spawn(async move {
                    let read = blocking(move || {
                        let loaded = load_config(&source);
                        let identity = match &loaded {
                            Ok(rt) => Identity::read(&rt.mesh),
                            Err(_) => Err("the configuration was not loaded".into()),
                        };
                        (loaded, identity)
                    })
                    .await;
                    let (loaded, identity) =
                        read.unwrap_or_else(|e| (Err(LoadError::Invalid(vec![e.clone()])), Err(e)));
                    let input = Input::ConfigRead {
                        loaded: Box::new(loaded),
                        identity: Box::new(identity),
                        cause,
                    };
                    let _ = inputs.send(input).await;
                });
            }
            Effect::EditConfig { edit, admission } => {
                let path = admission.path.clone();
                tokio::spawn(async move {
                    let result = blocking(move || edit_config(&path, edit))
                        .await
                        .unwrap_or_else(|e| Err(EditError::Io(e)));
                    let _ = inputs.send(Input::ConfigEdited { result, admission }).await;
                });
            }
            Effect::SaveLeases { ref file, .. } => {
                let trim = file.len() >= super::memory::TRIM_AFTER_SAVE_BYTES;
                tokio::spawn(async move {
                    let saved = blocking(move || {
                        // `save` frees the file's pieces when it ends.
                        let saved = self.save();
                        if trim {
                            super::memory::trim();
                        }
                        saved
                    });
                    if let Err(error) = saved.await.and_then(|r| r) {
                        let _ = inputs.send(Input::PersistFailed { error }).await;
                    }
                });
            }
            Effect::TrimMemory => {
                tokio::spawn(async move {
                    let _ = blocking(super::memory::trim).await;
                });
            }
            Effect::Probe {
                target,
                guard,
                timeout,
            } => {
                tokio::spawn(async move {
                    let ok = probe::probe(&target, &guard, timeout).await;
                    if let Err(e) = &ok {
                        log_debug!("health probe of {target} failed: {e}");
                    }
                    let _ = inputs
                        .send(Input::Probed {
                            target,
                            ok: ok.is_ok(),
                        })
                        .await;
                });
            }
            Effect::Peer(io) => driver.peers.perform(io, &inputs),
            Effect::Dns(q) => {
                // Bounded in time by the exchange itself.
                tokio::spawn(async move {
                    let result = dns::exchange(&q).await;
                    let _ = inputs
                        .send(Input::DnsAnswered {
                            ask: q.ask,
                            result: Box::new(result),
                        })
                        .await;
                });
            }
            Effect::StartMdns(start) => {
                // mDNS opens its sockets (and starts its task): the blocking
                // pool's work, not the loop's.
                tokio::spawn(async move {
                    let serial = start.serial;
                    let inputs2 = inputs.clone();
                    let started = blocking(move || start.run(inputs2)).await;
                    if let Err(error) = started.and_then(|r| r) {
                        let _ = inputs.send(Input::MdnsFailed { serial, error }).await;
                    }
                });
            }
        }
    }

    /// Writes the lease file now, on this thread (the daemon's exit).
    /// Other effects are not for this.
    pub fn save(self) -> Result<(), String> {
        let Effect::SaveLeases { dir, file } = self else {
            return Ok(());
        };
        super::persist::write(&dir, &file).map_err(|e| {
            format!(
                "cannot write {}: {e}",
                super::persist::path_in(&dir).display()
            )
        })
    }
}

/// Runs file work on the blocking pool (the loop's thread stays free).
/// `Err`: the work panicked or the runtime is shutting down.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("file task failed: {e}"))
}

/// Carries out an approve or revoke on the config file.
fn edit_config(path: &std::path::Path, edit: ConfigEdit) -> Result<String, EditError> {
    use crate::discovery::approval;
    match edit {
        ConfigEdit::Approve(c) => approval::edit_file(path, |pkg| approval::approve(pkg, &c)),
        ConfigEdit::Revoke { router_id, version } => {
            approval::edit_file(path, |pkg| approval::revoke(pkg, &router_id, version))
        }
    }
}

/// Reads the configuration strictly (reload): a file with any problem is
/// refused and the running state stays. The default path may be absent
/// on a fresh install: built-in defaults then apply.
pub fn load_config(source: &ConfigSource) -> Result<Runtime, LoadError> {
    match source {
        ConfigSource::Demo => config::load_demo(),
        ConfigSource::Explicit(path) => config::load_file(path),
        ConfigSource::Default => {
            let path = std::path::Path::new(super::options::DEFAULT_CONFIG);
            match config::load_file(path) {
                Err(LoadError::Read {
                    kind: std::io::ErrorKind::NotFound,
                    ..
                }) => {
                    log_warn!("{} not found; running on built-in defaults", path.display());
                    Ok(Runtime::default())
                }
                other => other,
            }
        }
    }
}

/// Reads the configuration at startup: what is valid in the file (a typo
/// must not take the router down), its problems in `Runtime::problems`.
/// Fails only if the file cannot be opened; the default path may be
/// absent on a fresh install (built-in defaults then apply).
pub fn start_config(source: &ConfigSource) -> Result<Runtime, LoadError> {
    let path = match source {
        ConfigSource::Demo => return config::load_demo(),
        ConfigSource::Explicit(path) => path.clone(),
        ConfigSource::Default => std::path::PathBuf::from(super::options::DEFAULT_CONFIG),
    };
    match config::load_file_partial(&path) {
        Ok((rt, _)) => Ok(rt),
        Err(LoadError::Read {
            kind: std::io::ErrorKind::NotFound,
            ..
        }) if *source == ConfigSource::Default => {
            log_warn!("{} not found; running on built-in defaults", path.display());
            Ok(Runtime::default())
        }
        Err(e) => Err(e),
    }
}

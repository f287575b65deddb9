//! Starts the real `agentd` binary in a private directory and drives it
//! with the real `agentctl` binary. Readiness is polled for a bounded
//! time; nothing waits a fixed time and hopes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub const AGENTD: &str = env!("CARGO_BIN_EXE_agentd");
pub const AGENTCTL: &str = env!("CARGO_BIN_EXE_agentctl");

/// How long a test waits for a condition before it gives up. Measured as
/// wall time, not as a number of attempts: on a loaded CI machine every
/// attempt (an agentctl process) can take far longer than the step.
const POLL_LIMIT: Duration = Duration::from_secs(30);
const POLL_STEP: Duration = Duration::from_millis(20);

/// A directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agentd-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A valid configuration with one static route, for tenant `lab`.
pub const GOOD: &str = "
config agentd 'main'
\toption router_id 'test-router'
\toption health_check 'off'

config rule 'allow_lab'
\toption id '20-allow-lab'
\toption priority '50'
\toption tenant 'lab'
\toption capability '*'

config route 'printer'
\toption capability 'office.print'
\toption version '1'
\toption origin 'agent://lab/printer'
\toption endpoint 'http://192.0.2.10:8080/invoke'
\toption latency_ms '5'
\toption trust '90'
";

/// The same router with a second route and a deny rule.
pub const GOOD_V2: &str = "
config agentd 'main'
\toption router_id 'test-router'
\toption health_check 'off'

config rule 'deny_print'
\toption id '10-deny-print'
\toption priority '100'
\toption action 'deny'
\toption capability 'office.print'

config route 'printer'
\toption capability 'office.print'
\toption version '1'
\toption origin 'agent://lab/printer'
\toption endpoint 'http://192.0.2.10:8080/invoke'

config route 'scanner'
\toption capability 'office.scan'
\toption version '1'
\toption origin 'agent://lab/scanner'
\toption endpoint 'http://192.0.2.11:8080/invoke'
";

/// Not valid: a typo'd option in a route section.
pub const BAD: &str = "
config agentd 'main'
\toption health_check 'off'

config route 'printer'
\toption capability 'office.print'
\toption version '1'
\toption origin 'agent://lab/printer'
\toption endpoint 'http://192.0.2.10:8080/invoke'
\toption latency 'fast'
";

/// One running agentd; killed (by PID) and cleaned up on drop.
pub struct Daemon {
    child: Child,
    /// Holds the config, socket and log; removed on drop.
    _dir: TempDir,
    pub socket: PathBuf,
    pub config: PathBuf,
    log: PathBuf,
}

impl Daemon {
    /// `agentd -c DIR -f --socket DIR/agentd.sock` with `config` as
    /// `DIR/agentd`, waiting until agentctl gets an answer.
    pub fn start(tag: &str, config: &str) -> Daemon {
        Daemon::start_in(TempDir::new(tag), config)
    }

    /// Like [`Daemon::start`] in an existing directory (a restart), with
    /// `state_dir` inside it.
    pub fn start_in(dir: TempDir, config: &str) -> Daemon {
        Daemon::spawn(dir, config, true)
    }

    /// Like [`Daemon::start`] without `--socket`: the socket path is only
    /// in the file (`ipc_socket`), as on a router.
    pub fn start_on_file_socket(tag: &str, config: &str) -> Daemon {
        Daemon::spawn(TempDir::new(tag), config, false)
    }

    fn spawn(dir: TempDir, config: &str, socket_arg: bool) -> Daemon {
        let path = dir.path().join("agentd");
        let socket = dir.path().join("run").join("agentd.sock");
        let config = private_paths(config, dir.path());
        std::fs::write(&path, config).expect("write config");
        let log = dir.path().join("agentd.log");
        let mut cmd = Command::new(AGENTD);
        cmd.arg("-c").arg(dir.path()).arg("-f");
        if socket_arg {
            cmd.arg("--socket").arg(&socket);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn agentd");
        let mut d = Daemon {
            child,
            _dir: dir,
            socket,
            config: path,
            log,
        };
        d.wait_until("agentd answers status", |d| {
            d.ctl(&["status"]).status.success()
        });
        d
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `cond` until it holds; panics with the daemon log once
    /// `POLL_LIMIT` has passed.
    pub fn wait_until(&mut self, what: &str, mut cond: impl FnMut(&mut Daemon) -> bool) {
        let give_up = std::time::Instant::now() + POLL_LIMIT;
        while std::time::Instant::now() < give_up {
            if cond(self) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "agentd exited ({status}) while waiting for {what}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(POLL_STEP);
        }
        panic!("gave up waiting for {what}; log:\n{}", self.log());
    }

    pub fn ctl(&self, args: &[&str]) -> Output {
        ctl_at(&self.socket, args, None)
    }

    pub fn ctl_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.ctl(&all);
        assert!(
            out.status.success(),
            "agentctl {all:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("agentctl --json prints JSON")
    }

    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: plain kill(2) on the PID of the child we spawned.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// Replaces the file (for a reload), with the same private paths as
    /// at start.
    pub fn write_config(&self, text: &str) {
        std::fs::write(&self.config, private_paths(text, self._dir.path()))
            .expect("rewrite config");
    }

    pub fn state_dir(&self) -> PathBuf {
        self._dir.path().join("state")
    }

    /// `kill -9`, then hand back the directory for a restart.
    pub fn kill9(mut self) -> TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = std::mem::replace(&mut self._dir, TempDir::new("spent"));
        drop(self);
        dir
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        // Drop then sees the exit and does not signal again.
        self.child.wait().expect("wait agentd")
    }
}

/// `config` with `state_dir`, `ipc_socket` and (unless it names one) the
/// identity key inside `dir`: a test never touches the system paths.
fn private_paths(config: &str, dir: &Path) -> String {
    let identity = if config.contains("option identity ") {
        String::new()
    } else {
        format!(
            "\toption identity '{}'\n",
            dir.join("identity.key").display()
        )
    };
    config.replacen(
        "config agentd 'main'\n",
        &format!(
            "config agentd 'main'\n\toption state_dir '{}'\n\toption ipc_socket '{}'\n{identity}",
            dir.join("state").display(),
            dir.join("run").join("agentd.sock").display(),
        ),
        1,
    )
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs agentctl against `socket` with optional stdin.
pub fn ctl_at(socket: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(AGENTCTL);
    cmd.arg("--socket").arg(socket).args(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn agentctl");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        pipe.write_all(input).expect("write stdin");
    }
    child.wait_with_output().expect("agentctl output")
}

pub fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn err_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Registers `demo.echo` v1 of `origin` at `http://192.0.2.20:<port>` over
/// IPC (as agent-gw would), with `lease_seconds`, on behalf of `caller`
/// (`None`: an administrator). Returns the granted route id.
pub fn register_ipc(
    d: &Daemon,
    origin: &str,
    port: u16,
    lease_seconds: u32,
    caller: Option<agentd::owner::Caller>,
) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = agentd::ipc::client::Client::connect(&d.socket, "daemon-test")
            .await
            .unwrap();
        let reg = agentd::ipc::message::Registration {
            route_id: None,
            capability: "demo.echo".into(),
            version: 1,
            origin: origin.into(),
            endpoint: format!("http://192.0.2.20:{port}/invoke").into(),
            tenant: "lab".into(),
            region: "local".into(),
            attrs: Default::default(),
            access: Default::default(),
            contract: None,
            lease_seconds: Some(lease_seconds),
            caller,
            owner: None,
            public_ipv6: false,
        };
        client.register(reg).await.unwrap().route_id.to_string()
    })
}

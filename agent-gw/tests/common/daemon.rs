//! Real agentd processes for the gateway's integration tests: the binary
//! of this workspace, a child killed by PID when dropped, a temp dir and
//! a bounded poll.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The agentd binary of this workspace (`cargo build --workspace`).
pub fn agentd_bin() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), PathBuf::from);
    let bin = target.join("debug").join("agentd");
    assert!(
        bin.exists(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        bin.display()
    );
    bin
}

/// An agentd child process, killed (by PID) when the test ends, however
/// it ends.
pub struct Daemon(Child);

impl Daemon {
    pub fn start(config: &Path, socket: &Path) -> Daemon {
        let child = Command::new(agentd_bin())
            .arg("--config")
            .arg(config)
            .arg("--socket")
            .arg(socket)
            .arg("-f")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start agentd");
        Daemon(child)
    }

    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("agent-gw-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `cond` every 10 ms for at most `secs` seconds.
pub async fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    for _ in 0..secs * 100 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

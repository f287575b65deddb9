//! The agent-gw binary: its command line and startup on a partly invalid
//! configuration file (a typo must not take the data plane down).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const AGENT_GW: &str = env!("CARGO_BIN_EXE_agent-gw");

fn run(args: &[&str]) -> Output {
    Command::new(AGENT_GW)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run agent-gw")
}

#[test]
fn help_prints_usage_and_exits_0_bad_usage_exits_2() {
    for flag in ["--help", "-h"] {
        let out = run(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        let usage = String::from_utf8_lossy(&out.stdout);
        assert!(usage.starts_with("usage: agent-gw"), "{usage}");
        assert!(usage.contains("--listen ADDR"), "{usage}");
    }
    for args in [&["--bogus"][..], &["--listen", "nonsense"], &["--config"]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("agent-gw: ") && err.contains("usage:"),
            "{err}"
        );
    }
}

#[test]
fn a_named_config_file_must_exist() {
    let dir = TempDir::new("nofile");
    let out = run(&["--config", dir.0.join("absent").to_str().unwrap(), "-f"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("agent-gw-cli-{tag}-{}", std::process::id()));
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

/// The gateway process, killed by PID on drop.
struct Gw(Child);

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls the log until the gateway says where it listens (bounded).
fn listening_addr(gw: &mut Gw, log: &Path) -> SocketAddr {
    let give_up = Instant::now() + Duration::from_secs(20);
    while Instant::now() < give_up {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(rest) = text.split("listening sdk=").nth(1) {
            let addr = rest.split_whitespace().next().unwrap_or("");
            return addr
                .parse()
                .unwrap_or_else(|_| panic!("bad address in {text}"));
        }
        if let Ok(Some(status)) = gw.0.try_wait() {
            panic!("agent-gw exited ({status}):\n{text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "agent-gw did not listen:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn typos_in_sections_it_does_not_use_do_not_stop_the_gateway() {
    let dir = TempDir::new("typo");
    let config = dir.0.join("agentd");
    std::fs::write(
        &config,
        format!(
            "config agentd 'main'\n\toption router_id 'gw-typo'\n\toption ipc_socket '{}'\n\
             \toption identity '{}'\n\toption max_lease 'forever'\n\
             config gateway 'gateway'\n\toption sdk_listen '127.0.0.1:0'\n\toption auth 'none'\n\
             \toption rate_burts '9'\n\
             config discovery 'discovery'\n\toption enabeld '0'\n\
             config rule 'r'\n\toption priorty '1'\n\
             config route 'x'\n\toption capability 'c'\n",
            dir.0.join("none.sock").display(),
            dir.0.join("identity.key").display()
        ),
    )
    .unwrap();
    let log = dir.0.join("gw.log");
    let mut gw = Gw(Command::new(AGENT_GW)
        .arg("--config")
        .arg(&config)
        .arg("-f")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn agent-gw"));
    let addr = listening_addr(&mut gw, &log);
    assert!(addr.ip().is_loopback(), "the file's sdk_listen: {addr}");
    let reply = get(addr, "/healthz");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let text = std::fs::read_to_string(&log).unwrap();
    for named in [
        "agentd 'main': option 'max_lease'",
        "gateway 'gateway': option 'rate_burts'",
        "rule 'r'",
        "route 'x'",
        "starting on the valid part of",
    ] {
        assert!(text.contains(named), "log lacks {named:?}:\n{text}");
    }
}

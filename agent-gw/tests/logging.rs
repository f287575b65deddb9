//! Where the agent-gw binary logs: stderr with `-f` (lines prefixed with
//! an ISO 8601 UTC time and `agent-gw[level]:`), syslog otherwise — then nothing but a fatal
//! startup error reaches stderr. Real processes, loopback only.

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child killed (by PID) when the test ends, however it ends.
struct Gw(Child);

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn config(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("agent-gw-log-{tag}-{}.conf", std::process::id()));
    std::fs::write(
        &p,
        "config agentd 'main'\n\toption log_level 'info'\n\toption ipc_socket '/nonexistent/agentd.sock'\n\
         config gateway 'gateway'\n\toption auth 'none'\n",
    )
    .unwrap();
    p
}

fn start(conf: &PathBuf, listen: &str, foreground: bool) -> Gw {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-gw"));
    cmd.arg("--config").arg(conf).arg("--listen").arg(listen);
    if foreground {
        cmd.arg("-f");
    }
    Gw(cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agent-gw"))
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls (bounded, 10 s) until `addr` accepts a connection.
fn wait_listening(addr: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < until, "agent-gw never listened on {addr}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn foreground_logs_to_stderr_with_the_gateway_prefix() {
    let conf = config("fg");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut gw = start(&conf, &addr, true);
    // A reader thread, so waiting for the listening line is bounded in
    // time as well as in lines.
    let stderr = gw.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let until = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while seen.len() < 20 {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        let done = line.contains("listening sdk=");
        seen.push(line);
        if done {
            break;
        }
    }
    let _ = std::fs::remove_file(&conf);
    // `2026-12-01T09:30:12.345Z agent-gw[notice]: ...`
    let stamped: Vec<(&str, &str)> = seen.iter().filter_map(|l| l.split_once(' ')).collect();
    assert_eq!(stamped.len(), seen.len(), "{seen:?}");
    for (ts, _) in &stamped {
        let b = ts.as_bytes();
        assert!(
            b.len() == 24
                && b[4] == b'-'
                && b[10] == b'T'
                && b[19] == b'.'
                && b[23] == b'Z'
                && ts.starts_with("20"),
            "not an ISO 8601 UTC time: {ts:?}"
        );
    }
    assert!(
        stamped
            .iter()
            .any(|(_, l)| l.starts_with("agent-gw[warning]: WARNING: auth 'none' (lab mode)")),
        "{seen:?}"
    );
    assert!(
        stamped
            .iter()
            .any(|(_, l)| *l == format!("agent-gw[notice]: listening sdk={addr}")),
        "{seen:?}"
    );
}

#[test]
fn without_foreground_nothing_but_fatal_errors_reach_stderr() {
    let conf = config("bg");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut gw = start(&conf, &addr, false);
    wait_listening(&addr);
    let _ = gw.0.kill();
    let _ = gw.0.wait();
    let mut err = String::new();
    gw.0.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = std::fs::remove_file(&conf);
    assert_eq!(err, "", "log lines went to stderr instead of syslog");

    // A fatal startup error still reaches whoever started it.
    let out = Command::new(env!("CARGO_BIN_EXE_agent-gw"))
        .args(["--config", "/nonexistent/agentd.conf"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.starts_with("agent-gw: ") && err.contains("/nonexistent/agentd.conf"),
        "{err}"
    );
}

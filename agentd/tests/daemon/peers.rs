//! Local users on the IPC socket: credentials are checked at accept,
//! before a connection slot is taken, and each non-root uid has its own
//! share of slots. The other users are real: this test binary runs itself
//! as `nobody` (uid 65534) for the client side (tests run as root).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentd::ipc::frame::{self, FrameDecoder};
use agentd::ipc::message::{
    Hello, IpcError, Request, RequestBody, ResponseBody, ServerMsg, CONNECTION_ERROR_ID,
};
use agentd::ipc::server::{IpcServer, ServerConfig, ServerEvent};

use super::harness::{text, Daemon, TempDir};

const NOBODY: u32 = 65534;

/// Running a process as another uid needs root (CI and `make test` run as
/// root); elsewhere these tests say so and do nothing.
fn can_switch_uid() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("SKIPPED: needs root to run a client as uid {NOBODY}");
    }
    root
}

/// What the helper saw on its connections.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    denied: usize,
    unavailable: usize,
    served: usize,
    other: usize,
}

/// The helper, when this binary is run by [`Helper::start`]: opens `N`
/// connections to the socket (sending nothing, or a `Hello` and a status
/// request), says so, holds them until its stdin gets a line, then reads
/// what the server sent on each and prints the tally.
#[test]
#[ignore = "helper process of the peers tests, started by them as another uid"]
fn peer_helper() {
    let Ok(socket) = std::env::var("AGENTD_PEER_HELPER_SOCKET") else {
        return;
    };
    let n: usize = std::env::var("AGENTD_PEER_HELPER_N")
        .unwrap()
        .parse()
        .unwrap();
    let speak = std::env::var("AGENTD_PEER_HELPER_MODE").unwrap() == "hello";
    let mut conns = Vec::new();
    for _ in 0..n {
        let mut s = UnixStream::connect(&socket).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        if speak {
            let mut bytes = frame::encode(&Hello::ours("peer-helper")).unwrap();
            let req = Request {
                id: 1,
                body: RequestBody::Status,
            };
            bytes.extend(frame::encode(&req).unwrap());
            // A refused connection may be closed already; its answer is
            // still there to read.
            let _ = s.write_all(&bytes);
        }
        conns.push(s);
    }
    println!("connected {n}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let mut seen = Seen::default();
    for mut s in conns {
        match first_answer(&mut s) {
            Some(Err(IpcError::PermissionDenied { .. })) => seen.denied += 1,
            Some(Err(IpcError::Unavailable { .. })) => seen.unavailable += 1,
            Some(Ok(())) => seen.served += 1,
            _ => seen.other += 1,
        }
    }
    println!(
        "seen {} {} {} {}",
        seen.denied, seen.unavailable, seen.served, seen.other
    );
}

/// After the server's `Hello`: `Err` for an id-0 connection error, `Ok`
/// for the answer to request 1, `None` if the connection just closed.
fn first_answer(s: &mut UnixStream) -> Option<Result<(), IpcError>> {
    let mut d = FrameDecoder::new();
    let mut buf = [0u8; 4096];
    let mut hello = false;
    loop {
        if !hello {
            if d.next_message::<Hello>().ok()?.is_some() {
                hello = true;
                continue;
            }
        } else if let Some(msg) = d.next_message::<ServerMsg>().ok()? {
            return match msg {
                ServerMsg::Response(r) if r.id == CONNECTION_ERROR_ID => Some(r.body.map(|_| ())),
                ServerMsg::Response(r) if r.id == 1 => Some(r.body.map(|_| ())),
                _ => None,
            };
        }
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        d.push(&buf[..n]);
    }
}

/// This test binary, run as `uid` in helper mode; killed by PID on drop.
struct Helper {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
    /// The copy of this binary the other uid runs (deleted after it).
    _bin: TempDir,
}

impl Helper {
    fn start(uid: u32, socket: &Path, n: usize, mode: &str) -> Helper {
        // The checkout may sit in a directory only root can enter (a
        // `mktemp -d` clone is 0700), so the other uid runs a copy in a
        // directory of its own that it may enter.
        use std::os::unix::fs::PermissionsExt;
        let bin = TempDir::new("peerbin");
        let exe = bin.path().join("helper");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).expect("copy the test binary");
        for (path, mode) in [(bin.path(), 0o755), (exe.as_path(), 0o755)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .expect("make the helper runnable by another uid");
        }
        let mut child = Command::new(&exe)
            .args(["peers::peer_helper", "--exact", "--ignored", "--nocapture"])
            .args(["--test-threads", "1", "-q"])
            .env("AGENTD_PEER_HELPER_SOCKET", socket)
            .env("AGENTD_PEER_HELPER_N", n.to_string())
            .env("AGENTD_PEER_HELPER_MODE", mode)
            .uid(uid)
            .gid(uid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run the helper as another uid");
        let out = BufReader::new(child.stdout.take().unwrap());
        Helper {
            child,
            out,
            _bin: bin,
        }
    }

    /// The next line starting with `prefix` (libtest prints its own).
    fn line(&mut self, prefix: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "helper ended before printing {prefix:?}");
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.trim().to_string();
            }
        }
    }

    /// Lets the helper read its connections; returns what it saw.
    fn finish(mut self) -> Seen {
        let mut stdin = self.child.stdin.take().unwrap();
        writeln!(stdin).unwrap();
        let v: Vec<usize> = self
            .line("seen ")
            .split(' ')
            .map(|x| x.parse().unwrap())
            .collect();
        Seen {
            denied: v[0],
            unavailable: v[1],
            served: v[2],
            other: v[3],
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_unprivileged_uid_is_refused_at_accept_and_cannot_exhaust_slots() {
    if !can_switch_uid() {
        return;
    }
    let d = Daemon::start("peers", super::harness::GOOD);
    // More silent connections than the server has slots (64), held open.
    let mut flood = Helper::start(NOBODY, &d.socket, 80, "silent");
    assert_eq!(flood.line("connected "), "80");
    // Root (the operator, the gateway in these tests) still gets in.
    for _ in 0..3 {
        let out = d.ctl(&["status"]);
        assert!(out.status.success(), "{}", super::harness::err_text(&out));
        assert!(text(&out).contains("test-router"));
    }
    // Every one of them was answered "permission denied" without the
    // server waiting for a Hello that never came.
    assert_eq!(
        flood.finish(),
        Seen {
            denied: 80,
            ..Seen::default()
        }
    );
}

/// An IPC server on its own runtime thread that answers every request
/// with an empty status; `allowed_uids` as given.
fn server_thread(socket: &Path, config: ServerConfig) {
    let socket = socket.to_path_buf();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let server = IpcServer::bind(&socket, config).unwrap();
            let (tx, mut rx) = tokio::sync::mpsc::channel(64);
            tokio::spawn(server.run(tx));
            ready_tx.send(()).unwrap();
            while let Some(ev) = rx.recv().await {
                if let ServerEvent::Request(req) = ev {
                    req.reply.send(Ok(ResponseBody::Status(Box::default())));
                }
            }
        });
    });
    ready_rx.recv().unwrap();
}

#[test]
fn an_allowed_uid_holds_at_most_its_share_and_root_still_gets_in() {
    if !can_switch_uid() {
        return;
    }
    let dir = TempDir::new("peershare");
    let socket = dir.path().join("s.sock");
    server_thread(
        &socket,
        ServerConfig {
            allowed_uids: vec![NOBODY],
            ..ServerConfig::default()
        },
    );
    let per_uid = ServerConfig::default().max_per_uid;
    let mut user = Helper::start(NOBODY, &socket, per_uid + 4, "hello");
    assert_eq!(user.line("connected "), (per_uid + 4).to_string());
    // While nobody holds its share, root is served.
    let body =
        agentd::ipc::client::call_blocking(&socket, "root-client", RequestBody::Status).unwrap();
    assert!(matches!(body, ResponseBody::Status(_)), "{body:?}");
    assert_eq!(
        user.finish(),
        Seen {
            served: per_uid,
            unavailable: 4,
            ..Seen::default()
        }
    );
}

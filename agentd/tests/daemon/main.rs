//! End-to-end tests of the agentd binary, driven by agentctl and raw
//! IPC bytes over its real Unix socket.

mod harness;
mod links;
mod peers;
mod sessions;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use agentd::ipc::frame;
use agentd::ipc::message::{Hello, IpcError, Request, RequestBody, ServerMsg, CONNECTION_ERROR_ID};
use harness::{ctl_at, err_text, text, Daemon, TempDir, AGENTCTL, AGENTD, BAD, GOOD, GOOD_V2};

// ===== agentctl output =====

#[test]
fn status_routes_and_lookup_render_as_tables_and_json() {
    let d = Daemon::start("render", GOOD);

    let status = text(&d.ctl(&["status"]));
    assert!(
        status.contains("router_id          test-router"),
        "{status}"
    );
    assert!(status.contains("config_status      ok"), "{status}");

    let routes = text(&d.ctl(&["routes"]));
    let mut lines = routes.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("ROUTE           CAPABILITY"),
        "{routes}"
    );
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("static:printer  office.print"),
        "{routes}"
    );

    let explain = text(&d.ctl(&["lookup", "office.print", "--tenant", "lab", "--explain"]));
    assert!(
        explain.starts_with("office.print v1: winner static:printer"),
        "{explain}"
    );
    assert!(explain.contains("rule 20-allow-lab"), "{explain}");
    assert!(explain.contains("RANK  ROUTE"), "{explain}");

    let j = d.ctl_json(&["status"]);
    assert_eq!(j["router_id"], "test-router");
    assert_eq!(j["routes"]["static"], 1);
    assert_eq!(j["config"]["ok"], true);
    assert_eq!(j["config"]["generation"], 1);

    let j = d.ctl_json(&["routes"]);
    assert_eq!(j["routes"][0]["route_id"], "static:printer");
    assert_eq!(j["routes"][0]["expires_in_s"], "permanent");

    let j = d.ctl_json(&["lookup", "office.print", "--tenant", "lab", "--explain"]);
    assert_eq!(j["winner"], "static:printer");
    assert_eq!(j["candidates"][0]["score"], 5 * 1000 + 10 * 5000);

    // Another tenant: no route, and the reason is counted.
    let j = d.ctl_json(&["lookup", "office.print", "--tenant", "guest", "--explain"]);
    assert_eq!(j["winner"], serde_json::Value::Null);
    assert_eq!(j["refusal"], "tenant_access");
    assert_eq!(j["rejections"]["tenant_access"], 1);

    let j = d.ctl_json(&["stats"]);
    assert_eq!(j["counters"]["routes"], 1);
    assert!(
        j["counters"]["requests.lookup"].as_u64().unwrap() >= 3,
        "{j}"
    );

    let j = d.ctl_json(&["agents"]);
    assert_eq!(j["agents"][0]["origin"], "agent://lab/printer");

    use std::os::unix::fs::PermissionsExt;
    let dir_mode = std::fs::metadata(d.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o755, "socket directory created 0755");
    let socket = d.socket.clone();
    assert!(d.stop().success(), "SIGTERM is a clean exit");
    assert!(!socket.exists(), "the socket file is removed on exit");
}

// ===== reload =====

fn config_generation(d: &Daemon) -> u64 {
    d.ctl_json(&["status"])["config"]["generation"]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn sighup_with_an_invalid_file_keeps_state_and_a_fixed_file_replaces_it() {
    let mut d = Daemon::start("sighup", GOOD);
    d.write_config(BAD);
    d.signal(libc::SIGHUP);
    d.wait_until("status reports the refused reload", |d| {
        !d.ctl_json(&["status"])["config"]["error"].is_null()
    });
    let st = d.ctl_json(&["status"]);
    let error = st["config"]["error"].as_str().unwrap();
    assert!(
        error.contains("route 'printer'") && error.contains("latency"),
        "{error}"
    );
    assert_eq!(
        st["config"]["generation"], 1,
        "refused reload is not a generation"
    );
    // Old routes and old policy still serve.
    let j = d.ctl_json(&["lookup", "office.print", "--tenant", "lab"]);
    assert_eq!(j["winner"], "static:printer");
    assert!(text(&d.ctl(&["status"])).contains("ERROR (running on the last valid state)"));

    d.write_config(GOOD_V2);
    d.signal(libc::SIGHUP);
    d.wait_until("the fixed file is loaded", |d| config_generation(d) == 2);
    let st = d.ctl_json(&["status"]);
    assert_eq!(st["config"]["error"], serde_json::Value::Null);
    assert_eq!(st["routes"]["static"], 2);
    let j = d.ctl_json(&["lookup", "office.print", "--tenant", "lab"]);
    assert_eq!(j["denied"], true);
    assert_eq!(j["rule"], "10-deny-print");
    assert!(d.stop().success());
}

#[test]
fn agentctl_reload_reports_refusal_with_exit_status_1() {
    let d = Daemon::start("ctlreload", GOOD);
    d.write_config(BAD);
    let out = d.ctl(&["reload"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(err_text(&out).contains("latency"), "{}", err_text(&out));
    d.write_config(GOOD_V2);
    let out = d.ctl(&["reload"]);
    assert!(out.status.success(), "{}", err_text(&out));
    assert!(text(&out).starts_with("configuration reloaded"));
    assert_eq!(config_generation(&d), 2);
}

#[test]
fn a_bad_route_at_startup_is_skipped_and_the_rest_serves() {
    // BAD plus a valid route: only the bad one is left out.
    let config = format!(
        "{BAD}\nconfig route 'scanner'\n\toption capability 'office.scan'\n\toption version '1'\n\
         \toption origin 'agent://lab/scanner'\n\toption endpoint 'http://192.0.2.11:8080/invoke'\n"
    );
    let d = Daemon::start("badstart", &config);
    let st = d.ctl_json(&["status"]);
    assert_eq!(st["routes"]["static"], 1);
    assert_eq!(st["config"]["ok"], false);
    assert_eq!(
        st["config"]["error"],
        serde_json::Value::Null,
        "nothing refused"
    );
    assert_eq!(st["config"]["generation"], 1);
    assert_eq!(st["config"]["problems_total"], 1);
    let p = &st["config"]["problems"][0];
    assert_eq!(p["section_type"], "route");
    assert_eq!(p["section"], "route 'printer'");
    assert_eq!(p["option"], "latency");
    assert_eq!(p["action"], "section_skipped");
    assert!(
        p["reason"].as_str().unwrap().contains("unknown option"),
        "{p}"
    );
    assert_eq!(st["policy"]["ok"], true, "a route is not the policy");
    let j = d.ctl_json(&["lookup", "office.scan", "--tenant", "lab"]);
    assert_eq!(j["winner"], "static:scanner");
    let j = d.ctl_json(&["lookup", "office.print", "--tenant", "lab"]);
    assert_eq!(j["winner"], serde_json::Value::Null);
    let status = text(&d.ctl(&["status"]));
    assert!(
        status.contains("config_problems    1 (running on the valid part of the file)")
            && status.contains("route 'printer': option 'latency'")
            && status.contains("(section skipped)"),
        "{status}"
    );
    assert!(
        d.log().contains("started on the valid part of"),
        "{}",
        d.log()
    );
}

#[test]
fn a_typo_in_an_unused_section_keeps_the_files_socket_and_agentctl_finds_it() {
    let config = format!(
        "{GOOD}\nconfig discovery 'discovery'\n\toption enabeld '0'\n\toption admission 'sometimes'\n\
         config gatway 'gw'\n"
    );
    let d = Daemon::start_on_file_socket("typo", &config);
    assert!(d.socket.exists(), "listening on the file's ipc_socket");
    // agentctl reads the same partly invalid file to find the socket.
    let out = std::process::Command::new(AGENTCTL)
        .arg("--config")
        .arg(&d.config)
        .arg("--json")
        .arg("status")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", err_text(&out));
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found: Vec<(String, String)> = st["config"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["section"].as_str().unwrap_or("").to_string(),
                p["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        found,
        [
            s("gatway 'gw'", "section_skipped"),
            s("discovery 'discovery'", "option_ignored"),
            s("discovery 'discovery'", "option_default"),
        ]
    );
    assert_eq!(st["policy"]["ok"], true);
    let j = d.ctl_json(&["lookup", "office.print", "--tenant", "lab"]);
    assert_eq!(j["winner"], "static:printer");
}

#[test]
fn a_bad_rule_at_startup_denies_everything_and_says_which_rule() {
    let config =
        format!("{GOOD}\nconfig rule 'oops'\n\toption priorty '100'\n\toption action 'deny'\n");
    let d = Daemon::start("badrule", &config);
    let st = d.ctl_json(&["status"]);
    assert_eq!(st["routes"]["static"], 1, "routes are still installed");
    assert_eq!(st["policy"]["ok"], false);
    let why = st["policy"]["error"].as_str().unwrap();
    assert!(
        why.contains("rule 'oops'") && why.contains("priorty"),
        "{why}"
    );
    assert_eq!(st["config"]["problems"][0]["section"], "rule 'oops'");
    let j = d.ctl_json(&["lookup", "office.print", "--tenant", "lab"]);
    assert_eq!(j["denied"], true);
    assert_eq!(j["refusal"], "policy_invalid");
    assert!(text(&d.ctl(&["status"])).contains("INVALID, denying every request"));
}

#[test]
fn a_syntax_error_at_startup_keeps_what_parsed_before_it_and_denies() {
    let config = format!("{GOOD}\nconfig rule 'x'\n\toption 'unterminated\n");
    let d = Daemon::start_on_file_socket("syntax", &config);
    let st = d.ctl_json(&["status"]);
    assert_eq!(st["routes"]["static"], 1);
    assert_eq!(st["router_id"], "test-router");
    let actions: Vec<&str> = st["config"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["rest_ignored", "section_skipped"]);
    assert_eq!(st["policy"]["ok"], false, "rules may follow the error");
}

#[test]
fn missing_explicit_config_file_is_a_startup_error() {
    let dir = TempDir::new("missing");
    let out = std::process::Command::new(AGENTD)
        .arg("--config")
        .arg(dir.path().join("nope"))
        .arg("-f")
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err_text(&out).contains("does not exist"),
        "{}",
        err_text(&out)
    );
}

// ===== --check-config =====

#[test]
fn check_config_prints_ok_or_every_error_with_file_section_and_option() {
    let dir = TempDir::new("check");
    let good = dir.path().join("good");
    std::fs::write(&good, GOOD).unwrap();
    let out = std::process::Command::new(AGENTD)
        .arg("--check-config")
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(text(&out), "OK\n");

    let bad = dir.path().join("bad");
    std::fs::write(
        &bad,
        format!("{BAD}\nconfig rule 'r'\n\toption priority 'high'\n"),
    )
    .unwrap();
    let out = std::process::Command::new(AGENTD)
        .arg("--check-config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let errors = err_text(&out);
    let lines: Vec<&str> = errors.lines().collect();
    assert_eq!(lines.len(), 2, "{errors}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with(&bad.display().to_string())),
        "{errors}"
    );
    assert!(
        errors.contains("route 'printer'") && errors.contains("option 'latency'"),
        "{errors}"
    );
    assert!(errors.contains("option 'priority'"), "{errors}");

    let out = std::process::Command::new(AGENTD)
        .arg("--check-config")
        .arg(dir.path().join("absent"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

// ===== untrusted IPC bytes =====

/// Reads one length-prefixed frame.
fn read_frame(s: &mut UnixStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

fn connect(d: &Daemon) -> UnixStream {
    let s = UnixStream::connect(&d.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// The id-0 connection error the server sends before closing.
fn connection_error(s: &mut UnixStream) -> IpcError {
    let payload = read_frame(s).expect("an error frame before close");
    match frame::decode_payload::<ServerMsg>(&payload) {
        Ok(ServerMsg::Response(r)) if r.id == CONNECTION_ERROR_ID => r.body.expect_err("an error"),
        other => panic!("expected a connection error, got {other:?}"),
    }
}

fn hello_frame() -> Vec<u8> {
    frame::encode(&Hello::ours("daemon-test")).unwrap()
}

#[test]
fn garbage_frames_get_an_error_and_the_daemon_keeps_serving_others() {
    let d = Daemon::start("garbage", GOOD);

    // A frame that is no Hello at all.
    let mut s = connect(&d);
    let hello: Hello =
        frame::decode_payload(&read_frame(&mut s).expect("server hello first")).unwrap();
    assert!(hello.software.starts_with("agentd "));
    s.write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff]).unwrap();
    assert!(matches!(
        connection_error(&mut s),
        IpcError::Malformed { .. }
    ));
    assert!(
        read_frame(&mut s).is_none(),
        "connection closed after the error"
    );

    // A valid Hello, then a frame that is not a request.
    let mut s = connect(&d);
    read_frame(&mut s).unwrap();
    let mut bytes = hello_frame();
    bytes.extend_from_slice(&[0, 0, 0, 2, 0x07, 0xee]);
    s.write_all(&bytes).unwrap();
    assert!(matches!(
        connection_error(&mut s),
        IpcError::Malformed { .. }
    ));

    // A length prefix far beyond the limit: refused without buffering it.
    let mut s = connect(&d);
    read_frame(&mut s).unwrap();
    let mut bytes = hello_frame();
    bytes.extend_from_slice(&u32::MAX.to_be_bytes());
    s.write_all(&bytes).unwrap();
    let e = connection_error(&mut s);
    assert!(
        matches!(&e, IpcError::Malformed { reason } if reason.contains("exceeds")),
        "{e:?}"
    );

    // A well-formed request on a fresh connection still works, and the
    // state is intact.
    let mut s = connect(&d);
    read_frame(&mut s).unwrap();
    let mut bytes = hello_frame();
    bytes.extend(
        frame::encode(&Request {
            id: 7,
            body: RequestBody::Status,
        })
        .unwrap(),
    );
    s.write_all(&bytes).unwrap();
    match frame::decode_payload::<ServerMsg>(&read_frame(&mut s).unwrap()).unwrap() {
        ServerMsg::Response(r) => assert_eq!(r.id, 7),
        other => panic!("{other:?}"),
    }
    let j = d.ctl_json(&["status"]);
    assert_eq!(j["routes"]["total"], 1);
    assert_eq!(j["config"]["generation"], 1);
    assert!(d.stop().success());
}

#[test]
fn hello_and_request_in_one_write_are_both_served() {
    // agentctl writes its Hello and first request back to back; the
    // server must not wait for more bytes before serving the request.
    let d = Daemon::start("oneshot", GOOD);
    for _ in 0..5 {
        let out = d.ctl(&["status"]);
        assert!(out.status.success(), "{}", err_text(&out));
    }
}

// ===== agentctl without a daemon, rpcd protocol =====

#[test]
fn agentctl_exit_codes_distinguish_usage_and_unreachable_daemon() {
    let dir = TempDir::new("noctl");
    let sock = dir.path().join("none.sock");
    let out = ctl_at(&sock, &["status"], None);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        err_text(&out).contains(&sock.display().to_string()),
        "{}",
        err_text(&out)
    );
    let out = ctl_at(&sock, &["frobnicate"], None);
    assert_eq!(out.status.code(), Some(2));
    let out = ctl_at(&sock, &["lookup"], None);
    assert_eq!(out.status.code(), Some(2));
}

/// `agentctl … | head`: the reader closes its end before agentctl writes
/// (the read end is dropped before the process starts, so every write
/// gets EPIPE). agentctl must exit with the command's own status, not
/// panic (status 101) or die of SIGPIPE.
fn ctl_into_closed_pipe(socket: &std::path::Path, args: &[&str]) -> std::process::Output {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe(2) fills two fresh descriptors we then own: the read
    // end is closed at once, the write end is owned by the File.
    let writer = unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0, "pipe");
        libc::close(fds[0]);
        std::fs::File::from_raw_fd(fds[1])
    };
    std::process::Command::new(AGENTCTL)
        .arg("--socket")
        .arg(socket)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run agentctl")
}

#[test]
fn agentctl_into_a_closed_pipe_exits_quietly_with_its_own_status() {
    let d = Daemon::start("epipe", GOOD);
    for args in [
        &["--help"][..],
        &["rpcd", "list"],
        &["routes"],
        &["--json", "routes"],
        &["status"],
    ] {
        let out = ctl_into_closed_pipe(&d.socket, args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "agentctl {args:?}: {}",
            err_text(&out)
        );
        assert!(!err_text(&out).contains("panicked"), "{}", err_text(&out));
    }
    // A failing command keeps its failure status with stdout gone too.
    let dir = TempDir::new("epipe-none");
    let out = ctl_into_closed_pipe(&dir.path().join("none.sock"), &["--json", "status"]);
    assert_eq!(out.status.code(), Some(3), "{}", err_text(&out));
    assert!(!err_text(&out).contains("panicked"), "{}", err_text(&out));
}

#[test]
fn rpcd_list_answers_without_a_daemon() {
    let dir = TempDir::new("rpcdlist");
    let out = ctl_at(&dir.path().join("none.sock"), &["rpcd", "list"], None);
    assert!(out.status.success());
    let sigs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for m in [
        "status",
        "routes",
        "agents",
        "lookup",
        "peers",
        "candidates",
        "approve",
        "revoke",
        "reload",
        "tasks",
        "stats",
    ] {
        assert!(sigs.get(m).is_some(), "method {m} missing");
    }
    assert_eq!(sigs["lookup"]["capability"], "str");
}

#[test]
fn rpcd_call_reads_arguments_and_prints_one_object() {
    let d = Daemon::start("rpcdcall", GOOD);
    let call = |method: &str, input: &[u8]| -> serde_json::Value {
        let out = ctl_at(&d.socket, &["rpcd", "call", method], Some(input));
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).expect("one JSON object")
    };
    assert_eq!(call("status", b"")["router_id"], "test-router");
    let j = call(
        "lookup",
        br#"{"capability":"office.print","tenant":"lab","explain":true}"#,
    );
    assert_eq!(j["winner"], "static:printer");
    let code = |v: serde_json::Value| v["error"]["code"].clone();
    assert_eq!(code(call("lookup", b"{not json")), "invalid_argument");
    assert_eq!(
        code(call("lookup", br#"{"version":1}"#)),
        "invalid_argument"
    );
    let tasks = call("tasks", b"{}");
    assert_eq!(tasks["reported"], false, "no gateway runs here: {tasks}");
    // Discovery runs (on no interface here): nothing discovered, so an
    // approval is refused, typed.
    assert_eq!(
        call("candidates", b"{}")["candidates"],
        serde_json::json!([])
    );
    assert_eq!(
        code(call("approve", br#"{"id":"router-b","version":1}"#)),
        "candidate_not_found"
    );
    assert_eq!(
        code(call("revoke", br#"{"id":"router-b","version":1}"#)),
        "not_approved"
    );
    let peers = call("peers", b"{}");
    assert_eq!(peers["router_id"], "test-router");
    assert_eq!(peers["peers"], serde_json::json!([]), "{peers}");
    assert_eq!(call("stats", b"{}")["counters"]["routes"], 1);
    assert_eq!(code(call("nosuch", b"{}")), "unknown_method");
    let big = vec![b' '; 70 * 1024];
    assert_eq!(code(call("status", &big)), "invalid_argument");
}

// ===== health checks =====

fn healthy(d: &Daemon) -> bool {
    d.ctl_json(&["routes"])["routes"][0]["healthy"] == true
}

#[test]
fn health_checks_exclude_a_dead_endpoint_and_restore_it_when_it_answers() {
    // A loopback port that nobody listens on (bound, then released).
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = format!(
        "
config agentd 'main'
\toption health_check 'http'
\toption health_interval '1'
\toption health_timeout_ms '500'
\toption health_fail_threshold '1'
\toption health_recover_threshold '1'

config route 'echo'
\toption capability 'demo.echo'
\toption version '1'
\toption origin 'agent://lab/echo'
\toption endpoint 'http://{addr}/invoke'
\toption allow_loopback '1'
"
    );
    let mut d = Daemon::start("health", &config);
    d.wait_until("the dead endpoint is marked unhealthy", |d| !healthy(d));
    let j = d.ctl_json(&["lookup", "demo.echo", "--tenant", "lab", "--explain"]);
    assert_eq!(j["rejections"]["unhealthy"], 1);
    assert_eq!(
        d.ctl_json(&["routes"])["routes"].as_array().unwrap().len(),
        1,
        "excluded, not removed"
    );

    // Bring the endpoint up: a tiny /healthz server on that port, serving
    // a bounded number of probes.
    let listener = std::net::TcpListener::bind(addr).expect("rebind the port");
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        for stream in listener.incoming().take(3) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 512];
            let n = s.read(&mut buf).unwrap_or(0);
            let _ = seen_tx.send(buf[..n].to_vec());
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        }
    });
    d.wait_until("the endpoint is healthy again", |d| healthy(d));
    assert_eq!(
        d.ctl_json(&["lookup", "demo.echo", "--tenant", "lab"])["winner"],
        "static:echo"
    );
    let request = seen_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a probe reached the server");
    assert!(
        request.starts_with(b"GET /healthz HTTP/1.1\r\n"),
        "{:?}",
        String::from_utf8_lossy(&request)
    );
    assert!(d.stop().success());
    // The server thread ends after its bounded number of probes, or when
    // the process exits; do not wait on it.
    drop(server);
}

// ===== restart =====

#[test]
fn local_leases_survive_kill_9_of_agentd() {
    let mut d = Daemon::start("restart", GOOD);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let grant = rt.block_on(async {
        let client = agentd::ipc::client::Client::connect(&d.socket, "daemon-test")
            .await
            .unwrap();
        let reg = agentd::ipc::message::Registration {
            route_id: None,
            capability: "demo.echo".into(),
            version: 1,
            origin: "agent://lab/echo".into(),
            endpoint: "http://192.0.2.20:9000/invoke".into(),
            tenant: "lab".into(),
            region: "local".into(),
            attrs: Default::default(),
            access: Default::default(),
            contract: None,
            lease_seconds: Some(600),
            caller: None,
            owner: None,
            public_ipv6: false,
        };
        client.register(reg).await.unwrap()
    });
    let lease_file = d.state_dir().join("leases");
    d.wait_until("the lease file is written", |_| lease_file.exists());

    let dir = d.kill9();
    let d = Daemon::start_in(dir, GOOD);
    let routes = d.ctl_json(&["routes"]);
    let back = routes["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["route_id"] == grant.route_id.as_str());
    let back = back.unwrap_or_else(|| panic!("route not restored: {routes}\n{}", d.log()));
    assert_eq!(back["source"], "local");
    assert!(
        d.log().contains("restored 1 of 1 local lease(s)"),
        "{}",
        d.log()
    );
    let j = d.ctl_json(&["lookup", "demo.echo", "--tenant", "lab"]);
    assert_eq!(j["winner"], grant.route_id.as_str());
}

// ===== operator withdrawal =====

fn register_via_ipc(d: &Daemon, origin: &str, port: u16) -> String {
    let caller = agentd::owner::Caller::address("192.0.2.20".parse().unwrap());
    harness::register_ipc(d, origin, port, 600, Some(caller))
}

fn local_ids(d: &Daemon) -> Vec<String> {
    d.ctl_json(&["routes"])["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["source"] == "local")
        .map(|r| r["route_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn agentctl_unregister_and_flush_withdraw_local_routes() {
    let d = Daemon::start("flush", GOOD);
    let a1 = register_via_ipc(&d, "agent://lab/a", 9001);
    let a2 = register_via_ipc(&d, "agent://lab/a", 9002);
    let a3 = register_via_ipc(&d, "agent://lab/a", 9003);
    let b = register_via_ipc(&d, "agent://lab/b", 9004);
    assert_eq!(local_ids(&d).len(), 4);

    // One route by id.
    let out = d.ctl(&["unregister", &a1]);
    assert!(out.status.success(), "{}", err_text(&out));
    assert!(text(&out).contains(&a1), "{}", text(&out));
    assert!(!local_ids(&d).contains(&a1));
    // Unknown id: the daemon refuses (exit 1), naming it.
    let out = d.ctl(&["unregister", &a1]);
    assert_eq!(out.status.code(), Some(1));
    assert!(err_text(&out).contains(&a1), "{}", err_text(&out));
    // A static route is not the operator's to withdraw this way.
    let out = d.ctl(&["--json", "unregister", "static:printer"]);
    assert_eq!(out.status.code(), Some(1));

    // Every route of one origin, the other origin untouched.
    let j = d.ctl_json(&["flush", "--origin", "agent://lab/a"]);
    assert_eq!(j["removed"], 2, "{j}");
    let mut listed: Vec<String> = j["route_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    listed.sort();
    let mut want = vec![a2, a3];
    want.sort();
    assert_eq!(listed, want);
    assert_eq!(local_ids(&d), vec![b]);
    // The origin is free again: flushing it again removes nothing.
    assert_eq!(
        d.ctl_json(&["flush", "--origin", "agent://lab/a"])["removed"],
        0
    );
    let j = d.ctl_json(&["lookup", "demo.echo", "--tenant", "lab"]);
    assert_eq!(j["candidates"].as_array().map(Vec::len), Some(1), "{j}");
}

//! Sans-IO tests of the daemon's loop: [`Instance::process`] is fed
//! inputs with explicit instants and its effects are read back. No file
//! is read or written, no socket opened, no task or thread spawned: the
//! config read, the file edit, the lease file, the ARPX driver's
//! listener, dials and connections and the mDNS start are effects. These
//! tests run without a tokio runtime, so a spawn would panic.

use std::path::PathBuf;

use super::effect::Effect;
use super::input::{ConfigEdit, Input, ReloadCause, Signal};
use super::instance::Instance;
use super::options::ConfigSource;
use super::peers::io::PeerIo;
use super::peers::tasks::PeerEvent;
use super::peers::tls::Identity;
use super::state::State;
use crate::config::{load_str, Runtime};
use crate::discovery::approval::EditError;
use crate::ipc::message::RequestBody;
use crate::ipc::server::{ConnId, IncomingRequest, PeerCred, Replier, ServerEvent};
use crate::time::Millis;

/// No router_id (ARPX off), discovery off, health probes over TCP.
const BASE: &str = "
config agentd 'main'
\toption state_dir '/nonexistent/agentd-test-state'
\toption health_check 'tcp'
\toption health_interval '5'

config discovery 'discovery'
\toption enabled '0'

config rule 'allow_lab'
\toption id '20-allow-lab'
\toption priority '50'
\toption tenant 'lab'
\toption capability '*'
";

const PRINTER: &str = "
config route 'printer'
\toption capability 'office.print'
\toption version '1'
\toption origin 'agent://lab/printer'
\toption endpoint 'http://192.0.2.10:8080/invoke'
";

const CONFIG_PATH: &str = "/nonexistent/agentd-test.conf";

fn runtime(extra: &str) -> Runtime {
    load_str(&format!("{BASE}{extra}"), CONFIG_PATH).expect("test config is valid")
}

fn instance() -> Instance {
    let state = State::start(Ok(runtime("")), CONFIG_PATH, "agentd test", Millis(1_000));
    Instance::new(
        state,
        ConfigSource::Explicit(PathBuf::from(CONFIG_PATH)),
        Err("no router_id".into()),
    )
}

/// The configuration as the driver reads it (no identity: ARPX is off).
fn read(extra: &str) -> Input {
    read_file(
        &format!("{BASE}{extra}"),
        Err("agentd.router_id is not set".into()),
    )
}

/// A whole file and its identity files as the driver reads them on SIGHUP.
fn read_file(text: &str, identity: Result<Identity, String>) -> Input {
    Input::ConfigRead {
        loaded: Box::new(load_str(text, CONFIG_PATH)),
        identity: Box::new(identity),
        cause: ReloadCause::Signal,
    }
}

fn run(i: &mut Instance, input: Input, now: u64) -> Vec<Effect> {
    let mut effects = Vec::new();
    i.process(input, Millis(now), &mut effects);
    effects
}

fn request(body: RequestBody) -> Input {
    Input::Ipc(ServerEvent::Request(Box::new(IncomingRequest {
        conn: ConnId(1),
        peer: PeerCred {
            uid: 0,
            gid: 0,
            pid: None,
        },
        id: 1,
        body,
        reply: Replier::detached(1),
    })))
}

#[test]
fn a_reload_reads_the_file_through_the_driver_and_applies_what_comes_back() {
    let mut i = instance();
    let generation = i.state().generation();
    let effects = run(&mut i, Input::Signal(Signal::Reload), 2_000);
    let [Effect::ReadConfig {
        source: ConfigSource::Explicit(path),
        cause: ReloadCause::Signal,
    }] = &effects[..]
    else {
        panic!("one ReadConfig of the config file: {effects:?}")
    };
    assert_eq!(path, &PathBuf::from(CONFIG_PATH));
    // Nothing changed until the driver answers.
    assert_eq!(i.state().generation(), generation);
    assert_eq!(i.state().table().len(), 0);

    let effects = run(&mut i, read(PRINTER), 2_001);
    assert!(effects.is_empty(), "{effects:?}");
    assert!(i.state().generation() > generation);
    assert_eq!(i.state().table().len(), 1);
}

#[test]
fn agentctl_reload_is_answered_after_the_read_not_before() {
    let mut i = instance();
    let effects = run(&mut i, request(RequestBody::Reload), 2_000);
    assert!(
        matches!(
            &effects[..],
            [Effect::ReadConfig {
                cause: ReloadCause::Request(_),
                ..
            }]
        ),
        "{effects:?}"
    );
    // A file that does not load keeps the running state.
    let generation = i.state().generation();
    let Some(Effect::ReadConfig { cause, .. }) = effects.into_iter().next() else {
        unreachable!()
    };
    let bad = load_str("config bogus", CONFIG_PATH);
    assert!(bad.is_err());
    let effects = run(
        &mut i,
        Input::ConfigRead {
            loaded: Box::new(bad),
            identity: Box::new(Err("not read".into())),
            cause,
        },
        2_001,
    );
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(i.state().generation(), generation);
}

#[test]
fn the_lease_file_is_an_effect_written_once_per_change_and_again_after_a_failure() {
    let mut i = instance();
    assert!(
        run(&mut i, Input::Persist, 2_000).is_empty(),
        "nothing changed"
    );
    // A static route is a change the lease file follows.
    run(&mut i, read(PRINTER), 2_001);
    assert!(i.wants_persist());
    let effects = run(&mut i, Input::Persist, 3_000);
    let [Effect::SaveLeases { dir, file }] = &effects[..] else {
        panic!("one SaveLeases: {effects:?}")
    };
    assert_eq!(dir, &PathBuf::from("/nonexistent/agentd-test-state"));
    let leases =
        crate::daemon::persist::decode(&file.to_vec(), &crate::daemon::persist::boot_id()).unwrap();
    assert!(
        leases.is_empty(),
        "static routes are not leases: {leases:?}"
    );
    assert!(!i.wants_persist());
    assert!(run(&mut i, Input::Persist, 3_001).is_empty());
    // The driver could not write it: the next flush tries again.
    run(
        &mut i,
        Input::PersistFailed {
            error: "cannot write /nonexistent: ENOENT".into(),
        },
        3_002,
    );
    assert!(i.wants_persist());
    assert!(matches!(
        &run(&mut i, Input::Persist, 4_000)[..],
        [Effect::SaveLeases { .. }]
    ));
}

#[test]
fn health_probes_are_effects_for_the_driver_to_start() {
    let mut i = instance();
    run(&mut i, read(PRINTER), 2_000);
    let due = i.next_probe().expect("the printer's endpoint is probed");
    let effects = run(&mut i, Input::ProbeDue, due.0);
    let [Effect::Probe { target, .. }] = &effects[..] else {
        panic!("one probe of the one endpoint: {effects:?}")
    };
    assert!(target.to_string().contains("192.0.2.10:8080"), "{target}");
    // Its verdict comes back as an input; no second probe of the same
    // endpoint is due at once.
    let effects = run(
        &mut i,
        Input::Probed {
            target: target.clone(),
            ok: true,
        },
        due.0 + 1,
    );
    assert!(effects.is_empty(), "{effects:?}");
}

#[test]
fn revoke_edits_the_file_through_the_driver_then_reloads() {
    let mut i = instance();
    let effects = run(
        &mut i,
        request(RequestBody::Revoke {
            router_id: "router-b".into(),
            version: 3,
        }),
        2_000,
    );
    let Some(Effect::EditConfig { edit, admission }) = effects.into_iter().next() else {
        panic!("an EditConfig")
    };
    assert!(
        matches!(&edit, ConfigEdit::Revoke { router_id, version: 3 } if router_id == "router-b"),
        "{edit:?}"
    );
    assert_eq!(admission.path, PathBuf::from(CONFIG_PATH));
    assert!(!admission.approve);
    // The file was edited: the configuration is read again, and the
    // request is answered once that is applied.
    let effects = run(
        &mut i,
        Input::ConfigEdited {
            result: Ok("peer_router_b".into()),
            admission,
        },
        2_001,
    );
    assert!(
        matches!(
            &effects[..],
            [Effect::ReadConfig {
                cause: ReloadCause::Admission(_, section),
                ..
            }] if section == "peer_router_b"
        ),
        "{effects:?}"
    );
}

#[test]
fn a_refused_edit_is_answered_without_a_reload() {
    let mut i = instance();
    let effects = run(
        &mut i,
        request(RequestBody::Revoke {
            router_id: "router-b".into(),
            version: 3,
        }),
        2_000,
    );
    let Some(Effect::EditConfig { admission, .. }) = effects.into_iter().next() else {
        panic!("an EditConfig")
    };
    let effects = run(
        &mut i,
        Input::ConfigEdited {
            result: Err(EditError::NotApproved {
                router_id: "router-b".into(),
            }),
            admission,
        },
        2_001,
    );
    assert!(effects.is_empty(), "{effects:?}");
}

#[test]
fn approve_of_an_unknown_candidate_is_refused_without_touching_the_file() {
    let mut i = instance();
    let effects = run(
        &mut i,
        request(RequestBody::Approve {
            router_id: "router-x".into(),
            version: 1,
        }),
        2_000,
    );
    assert!(effects.is_empty(), "{effects:?}");
}

/// Router A with one configured peer, B, and inbound sessions on.
const MESH: &str = "
config agentd 'main'
\toption router_id 'router-a'
\toption state_dir '/nonexistent/agentd-test-state'

config arpx 'arpx'
\toption listen '127.0.0.1:17444'

config discovery 'discovery'
\toption enabled '0'

config peer 'b'
\toption router_id 'router-b'
\toption address '192.0.2.2'
";

/// Router A's identity, made in memory (what the driver would read).
fn identity_a() -> Identity {
    let key = router_pki::identity::generate_key().expect("random key");
    Identity {
        identity: router_pki::RouterIdentity::new(key, None, "router-a").expect("self-signed"),
        ca: None,
    }
}

fn mesh_instance(identity: Result<Identity, String>) -> Instance {
    let rt = load_str(MESH, CONFIG_PATH).expect("mesh config is valid");
    let state = State::start(Ok(rt), CONFIG_PATH, "agentd test", Millis(1_000));
    Instance::new(
        state,
        ConfigSource::Explicit(PathBuf::from(CONFIG_PATH)),
        identity,
    )
}

fn taken(i: &mut Instance) -> Vec<Effect> {
    let mut effects = Vec::new();
    i.take_effects(&mut effects);
    effects
}

#[test]
fn the_arpx_driver_listens_and_dials_through_effects_and_hears_back_through_inputs() {
    let identity = identity_a();
    let mut i = mesh_instance(Ok(identity.clone()));
    i.start_peers(Millis(1_000));
    let effects = taken(&mut i);
    let [Effect::Peer(PeerIo::Listen { serial, addr, .. })] = &effects[..] else {
        panic!("one Listen, no dial before its timer: {effects:?}")
    };
    assert_eq!(addr.to_string(), "127.0.0.1:17444");
    let serial = *serial;

    // A late report of an older listener changes nothing; this one's
    // failure is shown by `agentctl peers`... once it is this one's.
    run(
        &mut i,
        Input::Peer(PeerEvent::Listening {
            serial: serial + 7,
            bound: Err("Address in use (os error 98)".into()),
        }),
        1_001,
    );
    assert_eq!(i.peers().view(Millis(1_001)).listen_error, None);
    run(
        &mut i,
        Input::Peer(PeerEvent::Listening {
            serial,
            bound: Ok("127.0.0.1:17444".parse().unwrap()),
        }),
        1_002,
    );
    assert_eq!(i.peers().view(Millis(1_002)).listen_error, None);

    // The first dial is spread over the first backoff step: a timer.
    let due = i.next_peer_timer().expect("a dial timer");
    let effects = run(&mut i, Input::PeerTimer, due.0);
    let [Effect::Peer(PeerIo::Dial {
        peer,
        address,
        port,
        ..
    })] = &effects[..]
    else {
        panic!("one dial of router-b: {effects:?}")
    };
    assert_eq!((peer.as_str(), address.as_str()), ("router-b", "192.0.2.2"));
    assert_eq!(*port, 7444);
    // No second dial while one runs.
    assert!(run(&mut i, Input::PeerTimer, due.0 + 1).is_empty());

    // The dial failed: kept as the peer's last error, and dialled again
    // after a backoff.
    let effects = run(
        &mut i,
        Input::Peer(PeerEvent::DialFailed {
            peer: "router-b".into(),
            relay: None,
            error: "connect to 192.0.2.2 port 7444: timed out".into(),
        }),
        due.0 + 2,
    );
    assert!(effects.is_empty(), "{effects:?}");
    let view = i.peers().view(Millis(due.0 + 2));
    assert_eq!(
        view.peers[0].last_error.as_deref(),
        Some("connect to 192.0.2.2 port 7444: timed out")
    );
    let again = i.next_peer_timer().expect("a retry");
    assert!(again.0 > due.0 + 2);
    let effects = run(&mut i, Input::PeerTimer, again.0);
    assert!(
        matches!(&effects[..], [Effect::Peer(PeerIo::Dial { peer, .. })] if peer == "router-b"),
        "{effects:?}"
    );

    // A reload without the peer while its dial runs: the dial is
    // abandoned and, with no peer left, the listener closed.
    let without_b = MESH.split("config peer 'b'").next().unwrap();
    let effects = run(&mut i, read_file(without_b, Ok(identity)), again.0 + 1);
    let io: Vec<String> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Peer(io) => Some(format!("{io:?}")),
            _ => None,
        })
        .collect();
    // The same key: the mesh runs on, only the peer set changed.
    assert_eq!(io, ["StopDial(router-b)", "StopListening"]);
}

#[test]
fn a_listener_that_cannot_bind_is_shown_and_a_new_key_restarts_the_mesh() {
    let mut i = mesh_instance(Ok(identity_a()));
    i.start_peers(Millis(1_000));
    let effects = taken(&mut i);
    let [Effect::Peer(PeerIo::Listen { serial, .. })] = &effects[..] else {
        panic!("one Listen: {effects:?}")
    };
    run(
        &mut i,
        Input::Peer(PeerEvent::Listening {
            serial: *serial,
            bound: Err("Address in use (os error 98)".into()),
        }),
        1_001,
    );
    let view = i.peers().view(Millis(1_001));
    assert_eq!(
        view.listen_error.as_deref(),
        Some("Address in use (os error 98)")
    );
    let old = view.fingerprint;
    // A reload reads another key (the file was replaced): the mesh
    // restarts on it and listens again.
    let effects = run(&mut i, read_file(MESH, Ok(identity_a())), 2_000);
    assert!(
        matches!(&effects[..], [Effect::Peer(PeerIo::Listen { serial: s, .. })] if s > serial),
        "{effects:?}"
    );
    let view = i.peers().view(Millis(2_000));
    assert_ne!(view.fingerprint, old);
    assert_eq!(view.listen_error, None);
}

#[test]
fn the_identity_is_read_with_the_configuration_and_a_fixed_file_starts_the_mesh() {
    // The key file could not be read at start: sessions are off, and say why.
    let mut i = mesh_instance(Err(
        "identity key /etc/agentd/identity.key: permission denied".into(),
    ));
    i.start_peers(Millis(1_000));
    assert!(taken(&mut i).is_empty());
    let view = i.peers().view(Millis(1_000));
    assert_eq!(
        view.off_reason.as_deref(),
        Some("identity key /etc/agentd/identity.key: permission denied")
    );
    // The operator fixed it and reloads: the driver read it with the file.
    let effects = run(&mut i, read_file(MESH, Ok(identity_a())), 2_000);
    assert!(
        matches!(&effects[..], [Effect::Peer(PeerIo::Listen { .. })]),
        "{effects:?}"
    );
    let view = i.peers().view(Millis(2_000));
    assert_eq!(view.off_reason, None);
    assert!(view.fingerprint.is_some());
}

const MDNS: &str = "
config discovery 'discovery'
\toption enabled '1'
\tlist interface 'lan0'
";

#[test]
fn mdns_is_started_by_the_driver_and_a_failed_start_is_shown_and_retried_on_reload() {
    let mut i = instance();
    run(&mut i, read(""), 1_500);
    let rt = runtime("").discovery;
    assert!(!rt.enabled);
    // Discovery on: BASE turns it off, so the reload's file adds it.
    let with_mdns = BASE.replace("config discovery 'discovery'\n\toption enabled '0'\n", MDNS);
    let effects = run(
        &mut i,
        read_file(&with_mdns, Err("agentd.router_id is not set".into())),
        2_000,
    );
    let [Effect::StartMdns(start)] = &effects[..] else {
        panic!("one mDNS start: {effects:?}")
    };
    let serial = start.serial;
    // mDNS could not open its sockets.
    run(
        &mut i,
        Input::MdnsFailed {
            serial,
            error: "No such device (os error 19)".into(),
        },
        2_001,
    );
    let view = i.discovery().view(Millis(2_001));
    assert_eq!(
        view.off_reason.as_deref(),
        Some("mDNS: No such device (os error 19)")
    );
    // A reload tries again; the old start's late report is ignored.
    let effects = run(
        &mut i,
        read_file(&with_mdns, Err("agentd.router_id is not set".into())),
        3_000,
    );
    let [Effect::StartMdns(again)] = &effects[..] else {
        panic!("a new mDNS start: {effects:?}")
    };
    assert!(again.serial > serial);
    run(
        &mut i,
        Input::MdnsFailed {
            serial,
            error: "stale".into(),
        },
        3_001,
    );
    let view = i.discovery().view(Millis(3_001));
    assert_ne!(view.off_reason.as_deref(), Some("mDNS: stale"));
}

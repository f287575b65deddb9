//! Sans-IO tests of the daemon's loop: [`Instance::process`] is fed
//! inputs with explicit instants and its effects are read back. No file
//! is read or written, no socket opened, no task spawned (the config
//! read, the file edit and the lease file are effects; the config turns
//! discovery and ARPX sessions off, so neither starts its threads).

use std::path::PathBuf;

use tokio::sync::mpsc;

use super::instance::{ConfigEdit, Effect, Input, Instance, ReloadCause, Signal};
use super::options::ConfigSource;
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
    // Inputs from child tasks: none are started here.
    let (tx, _rx) = mpsc::channel(8);
    Instance::new(
        state,
        ConfigSource::Explicit(PathBuf::from(CONFIG_PATH)),
        tx,
    )
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

    let effects = run(
        &mut i,
        Input::ConfigRead {
            loaded: Box::new(Ok(runtime(PRINTER))),
            cause: ReloadCause::Signal,
        },
        2_001,
    );
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
    run(
        &mut i,
        Input::ConfigRead {
            loaded: Box::new(Ok(runtime(PRINTER))),
            cause: ReloadCause::Signal,
        },
        2_001,
    );
    assert!(i.wants_persist());
    let effects = run(&mut i, Input::Persist, 3_000);
    let [Effect::SaveLeases { dir, leases, .. }] = &effects[..] else {
        panic!("one SaveLeases: {effects:?}")
    };
    assert_eq!(dir, &PathBuf::from("/nonexistent/agentd-test-state"));
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
    run(
        &mut i,
        Input::ConfigRead {
            loaded: Box::new(Ok(runtime(PRINTER))),
            cause: ReloadCause::Signal,
        },
        2_000,
    );
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

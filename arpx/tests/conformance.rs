//! ARPX conformance: recorded inputs replayed into one instance, its
//! outputs diffed against recorded goldens.
//!
//! Each scenario is a directory under `tests/conformance/` holding
//! `config.json` (the router under test; its key is
//! `arpx::testing::key(router)`), `README.md` (what it proves), and per
//! step `NN-input-<step>.jsonl` / `NN-output-<step>.jsonl`: one JSON
//! object per line, `{"t": ms, "input": …}` / `{"t": ms, "output": …}`.
//! The vectors are produced by the builders in `conformance/scenarios.rs`
//! (scripted peers sign with `testing::key(n)`); a run checks that the
//! files still equal what the builders produce, replays the *files* and
//! compares every output line. `ARPX_REGEN=1` rewrites the files.

#[path = "conformance/scenarios.rs"]
mod scenarios;

use std::fs;
use std::path::{Path, PathBuf};

use arpx::instance::{Input, Instance, InstanceConfig, Output};
use serde::{Deserialize, Serialize};

/// The router under test, as recorded in `config.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestConfig {
    /// Test router number (`router-b` is 2); also its key.
    pub router: u8,
    pub boot_epoch: u64,
    pub heartbeat_ms: u32,
    pub miss_limit: u32,
    pub graceful_ms: u64,
    pub reflector: bool,
    pub max_path: usize,
    pub max_frame: usize,
}

impl TestConfig {
    pub fn router(n: u8) -> TestConfig {
        let d = arpx::testing::config(n);
        TestConfig {
            router: n,
            boot_epoch: d.boot_epoch,
            heartbeat_ms: d.heartbeat_ms,
            miss_limit: d.miss_limit,
            graceful_ms: d.graceful_ms,
            reflector: d.reflector,
            max_path: d.max_path,
            max_frame: d.max_frame,
        }
    }

    fn instance(&self) -> InstanceConfig {
        InstanceConfig {
            boot_epoch: self.boot_epoch,
            heartbeat_ms: self.heartbeat_ms,
            miss_limit: self.miss_limit,
            graceful_ms: self.graceful_ms,
            reflector: self.reflector,
            max_path: self.max_path,
            max_frame: self.max_frame,
            ..arpx::testing::config(self.router)
        }
    }
}

#[derive(Serialize, Deserialize)]
struct InputLine {
    t: u64,
    input: Input,
}

#[derive(Serialize, Deserialize)]
struct OutputLine {
    t: u64,
    output: Output,
}

#[derive(Debug)]
pub struct Step {
    pub name: &'static str,
    pub inputs: Vec<(u64, Input)>,
}

#[derive(Debug)]
pub struct Scenario {
    pub readme: &'static str,
    pub config: TestConfig,
    pub steps: Vec<Step>,
}

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(name)
}

fn input_text(inputs: &[(u64, Input)]) -> String {
    inputs
        .iter()
        .map(|(t, input)| {
            let line = InputLine {
                t: *t,
                input: input.clone(),
            };
            serde_json::to_string(&line).expect("inputs serialise") + "\n"
        })
        .collect()
}

fn output_text(outputs: &[(u64, Output)]) -> String {
    outputs
        .iter()
        .map(|(t, output)| {
            let line = OutputLine {
                t: *t,
                output: output.clone(),
            };
            serde_json::to_string(&line).expect("outputs serialise") + "\n"
        })
        .collect()
}

fn replay(inst: &mut Instance, inputs: Vec<(u64, Input)>) -> Vec<(u64, Output)> {
    let mut all = Vec::new();
    for (t, input) in inputs {
        let mut out = Vec::new();
        inst.handle(t, input, &mut out);
        for o in &out {
            // Whatever we send passes the wire rules and fits a frame.
            if let Output::Send { msg, .. } = o {
                assert_eq!(msg.validate(), Ok(()), "we sent an invalid {}", msg.kind());
                assert!(arpx::frame::encode(msg, arpx::frame::DEFAULT_MAX_FRAME).is_ok());
            }
        }
        all.extend(out.into_iter().map(|o| (t, o)));
    }
    all
}

fn file_name(i: usize, kind: &str, step: &str) -> String {
    format!("{:02}-{kind}-{step}.jsonl", i + 1)
}

/// After each step: the counters and every peer's status, so drops
/// ("dropped and counted") and the per-peer view are recorded too.
fn state_name(i: usize, step: &str) -> String {
    format!("{:02}-state-{step}.json", i + 1)
}

fn state_text(inst: &Instance, t: u64) -> String {
    let state = serde_json::json!({
        "counters": inst.counters(),
        "peers": inst.peers(t),
    });
    serde_json::to_string_pretty(&state).expect("state serialises") + "\n"
}

fn last_t(inputs: &[(u64, Input)]) -> u64 {
    inputs.last().map_or(0, |(t, _)| *t)
}

fn regenerate(name: &str, s: Scenario) {
    let d = dir(name);
    fs::create_dir_all(&d).unwrap();
    for entry in fs::read_dir(&d).unwrap() {
        let path = entry.unwrap().path();
        if path
            .extension()
            .is_some_and(|e| e == "jsonl" || e == "json")
            && path.file_name().is_some_and(|n| n != "config.json")
        {
            fs::remove_file(path).unwrap();
        }
    }
    assert!(
        !s.readme.is_empty(),
        "{name}: every scenario says what it proves"
    );
    fs::write(
        d.join("config.json"),
        serde_json::to_string_pretty(&s.config).unwrap() + "\n",
    )
    .unwrap();
    let mut inst = Instance::new(s.config.instance());
    for (i, step) in s.steps.into_iter().enumerate() {
        fs::write(
            d.join(file_name(i, "input", step.name)),
            input_text(&step.inputs),
        )
        .unwrap();
        let t = last_t(&step.inputs);
        let outputs = replay(&mut inst, step.inputs);
        fs::write(
            d.join(file_name(i, "output", step.name)),
            output_text(&outputs),
        )
        .unwrap();
        fs::write(d.join(state_name(i, step.name)), state_text(&inst, t)).unwrap();
    }
}

/// The first differing line of two texts, for a readable failure.
fn first_difference(want: &str, got: &str) -> String {
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        if w != g {
            return format!("line {}:\n  want {w}\n  got  {g}", i + 1);
        }
    }
    format!(
        "{} lines wanted, {} produced",
        want.lines().count(),
        got.lines().count()
    )
}

fn check(name: &str, s: Scenario) {
    if std::env::var_os("ARPX_REGEN").is_some_and(|v| v == "1") {
        return regenerate(name, s);
    }
    let d = dir(name);
    let recorded: TestConfig = serde_json::from_str(
        &fs::read_to_string(d.join("config.json"))
            .unwrap_or_else(|e| panic!("{name}: no config.json ({e}); run with ARPX_REGEN=1")),
    )
    .expect("config.json parses");
    assert_eq!(
        recorded, s.config,
        "{name}: config.json drifted from the builder; ARPX_REGEN=1"
    );
    let mut inst = Instance::new(recorded.instance());
    for (i, step) in s.steps.into_iter().enumerate() {
        let input_file = d.join(file_name(i, "input", step.name));
        let text = fs::read_to_string(&input_file)
            .unwrap_or_else(|e| panic!("{}: {e}; run with ARPX_REGEN=1", input_file.display()));
        assert!(
            text == input_text(&step.inputs),
            "{}: the recorded inputs differ from the builder's ({}); ARPX_REGEN=1",
            input_file.display(),
            first_difference(&text, &input_text(&step.inputs))
        );
        let inputs: Vec<(u64, Input)> = text
            .lines()
            .map(|l| {
                let line: InputLine = serde_json::from_str(l).expect("input line parses");
                (line.t, line.input)
            })
            .collect();
        let t = last_t(&inputs);
        let got = output_text(&replay(&mut inst, inputs));
        let output_file = d.join(file_name(i, "output", step.name));
        let want = fs::read_to_string(&output_file)
            .unwrap_or_else(|e| panic!("{}: {e}; run with ARPX_REGEN=1", output_file.display()));
        assert!(
            want == got,
            "{}: outputs differ, {}",
            output_file.display(),
            first_difference(&want, &got)
        );
        let state_file = d.join(state_name(i, step.name));
        let want = fs::read_to_string(&state_file)
            .unwrap_or_else(|e| panic!("{}: {e}; run with ARPX_REGEN=1", state_file.display()));
        let got_state = state_text(&inst, t);
        assert!(
            want == got_state,
            "{}: state differs, {}",
            state_file.display(),
            first_difference(&want, &got_state)
        );
        let want = fs::read_to_string(&output_file).unwrap();
        // Every recorded output line parses back (the goldens are typed).
        for l in want.lines() {
            serde_json::from_str::<OutputLine>(l).expect("output line parses");
        }
    }
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check(&stringify!($name).replace('_', "-"), scenarios::$name());
            }
        )*
    };
}

scenarios!(
    establish,
    heartbeat_loss,
    reconnect_within_grace,
    withdraw_ordering,
    sequence_gap,
    loop_drop,
    forged_signature,
    conflicting_owner,
    split_horizon,
    no_transit,
    snapshot_during_churn,
    per_peer_limit,
    collision,
);

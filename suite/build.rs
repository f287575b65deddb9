//! Drops the unwind tables from the multi-call binary in release builds
//! (the release and router profiles, and the OpenWrt feed's build), which
//! abort on panic.
//!
//! With `panic = "abort"` nothing unwinds: a panic prints its message and
//! ends the process, and procd respawns it. Yet every function keeps a
//! frame description, because std comes prebuilt for unwinding and LLVM
//! gives a function the unwind entry of any std code inlined into it;
//! `-C force-unwind-tables=no` cannot take them off. They were 0.7 MB of
//! the 5.4 MB router binary. What is lost is a backtrace of a panic with
//! `RUST_BACKTRACE` set (it comes out empty) — OpenWrt strips its
//! binaries, so those held no names anyway.
//!
//! Cargo tells a build script the target's default panic strategy, not
//! the profile's, so the test is the profile's kind: `PROFILE` is
//! `release` for every profile that inherits from release, and all of
//! ours that build this binary abort. Were one built with `panic =
//! "unwind"` all the same, a panic could not start unwinding and would
//! abort the process just as well; the daemons catch no panics.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=no-unwind-tables.ld");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if release && linux {
        let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        let script = Path::new(&dir).join("no-unwind-tables.ld");
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
}

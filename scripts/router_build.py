#!/usr/bin/env python3
"""Build the router binaries the way OpenWrt's packages feed does and
report their sizes.

OpenWrt's lang/rust/rust-package.mk builds with `cargo install --profile
release` and CARGO_PROFILE_RELEASE_* set to opt-level z, LTO, one codegen
unit, overflow checks on and panic=unwind, which our package Makefile
sets back to abort; the `router-openwrt` profile in Cargo.toml carries
exactly those settings (plus release's per-package overrides, which the
environment variables leave in place). Our package Makefile also links
with packed relative relocations (`-z pack-relative-relocs`, DT_RELR),
and so does this build when the host's linker and C library take them
(probed first: binutils >= 2.38 on x86, glibc >= 2.36). This builds
what the feed installs — the multi-call binary `agentd-suite` (agentd,
agent-gw and agentctl in one file, suite/) — with it (host target: the
sizes are the x86_64 ones; a MIPS or ARM build differs, its trend does
not), makes the links the packages install (target/router-openwrt/agentd,
agent-gw, agentctl → agentd-suite) and prints one JSON object — also
written to target/router-openwrt/sizes.json, with the change against the
previous run's file when there is one. Stripped sizes too: OpenWrt's
build strips what it packages.

The stripped binary has a budget, 4 MiB (issue 25; docs/footprint.md,
"The margin"): a build over it fails (exit 1) after writing the report,
so `make test` says which change crossed it. The budget holds for the
feed's link, with packed relocations; a host that cannot link them only
reports. `--no-budget` reports without failing (to measure a change that
is meant to be cut back).

    scripts/router_build.py [--no-build] [--no-budget]
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILE = "router-openwrt"
# Where cargo puts the build: CARGO_TARGET_DIR when set (relative to the
# repository, where the build runs), else the repository's target/.
OUT = REPO / os.environ.get("CARGO_TARGET_DIR", "target") / PROFILE
SUITE = "agentd-suite"
LINKS = ["agentd", "agentctl", "agent-gw"]
#: What the stripped multi-call binary may weigh.
BUDGET = 4 * 1024 * 1024
# What rust-package.mk sets (rust-values.mk, CARGO_PKG_CONFIG_VARS), with
# openwrt-feed/agentd/Makefile's panic=abort.
SETTINGS = {
    "opt-level": "z",
    "lto": True,
    "codegen-units": 1,
    "debug": False,
    "debug-assertions": False,
    "overflow-checks": True,
    "panic": "abort",
    "rpath": False,
}


# What openwrt-feed/agentd/Makefile appends to rust-values.mk's
# CARGO_RUSTFLAGS: a position-independent executable's relative
# relocations packed into a bitmap (DT_RELR) instead of 24 bytes each in
# .rela.dyn, which the loader also reads at every start.
RELR_FLAG = "-Clink-arg=-Wl,-z,pack-relative-relocs"

# And, also from that Makefile: the cargo registry's directory taken out
# of the source paths that panic locations carry, so that a router's
# flash holds `hashbrown-0.16.1/src/raw/mod.rs`, not the build host's
# cargo home before it (261 paths, ~16 KiB here; the same bytes from
# every build host, as reproducible builds want). The index directory's
# name is fixed by cargo (since 1.85) for crates.io; should it change,
# the first, general prefix still applies (rustc takes the last match).
REGISTRY_INDEX = "index.crates.io-1949cf8c6b5b557f"


def remap_flags() -> list:
    home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    src = home / "registry" / "src"
    return [f"--remap-path-prefix={src}=", f"--remap-path-prefix={src / REGISTRY_INDEX}="]


def relr_supported() -> bool:
    """Whether the host toolchain links DT_RELR and its loader runs it:
    an old ld only warns that it ignores the option, and an old glibc
    refuses the binary, so link a program and run it."""
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "p.c", Path(tmp) / "p"
        src.write_text("static int x; int *p = &x; int main(void) { return *p; }\n")
        try:
            link = subprocess.run(
                ["cc", "-pie", "-fPIE", "-Wl,-z,pack-relative-relocs", "-o", str(exe), str(src)],
                capture_output=True, text=True, stdin=subprocess.DEVNULL,
            )
            if link.returncode != 0 or "ignored" in link.stderr:
                return False
            dynamic = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True)
            if "(RELR)" not in dynamic.stdout:
                return False
            return subprocess.run([str(exe)], stdin=subprocess.DEVNULL).returncode == 0
        except OSError:
            return False


def main() -> int:
    if "--no-build" not in sys.argv[1:]:
        relr = relr_supported()
        cmd = ["cargo", "build", "--locked", "--profile", PROFILE, "-p", SUITE, "--bins"]
        env = dict(os.environ)
        flags = env.get("RUSTFLAGS", "").split() + remap_flags()
        if relr:
            flags.append(RELR_FLAG)
        else:
            print("router_build: the host toolchain cannot link DT_RELR; building without it", file=sys.stderr)
        env["RUSTFLAGS"] = " ".join(flags)
        print("RUSTFLAGS=" + repr(env["RUSTFLAGS"]) + " $ " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, cwd=REPO, check=True, stdin=subprocess.DEVNULL, env=env)
    path = OUT / SUITE
    if not path.is_file():
        print(f"router_build: {path} was not built", file=sys.stderr)
        return 1
    for name in LINKS:
        link = OUT / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(SUITE)
    stripped = OUT / f"{SUITE}.stripped"
    subprocess.run(["strip", "-o", str(stripped), str(path)], check=True, stdin=subprocess.DEVNULL)
    sizes = {SUITE: path.stat().st_size, f"{SUITE} (stripped)": stripped.stat().st_size}
    report = {
        "profile": PROFILE,
        "settings": SETTINGS,
        "relr": "(RELR)" in subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout,
        "host": f"{platform.machine()}-{platform.system().lower()}",
        "bytes": sizes,
        "links": LINKS,
        "total_bytes": sizes[SUITE],
        "budget_bytes": BUDGET,
        "under_budget_bytes": BUDGET - sizes[f"{SUITE} (stripped)"],
    }
    previous = OUT / "sizes.json"
    if previous.is_file():
        try:
            before = json.loads(previous.read_text())["bytes"]
            report["change_bytes"] = {n: sizes[n] - before[n] for n in sizes if n in before}
        except (ValueError, KeyError, TypeError):
            pass
    text = json.dumps(report, indent=2)
    previous.write_text(text + "\n")
    print(text)
    over = -report["under_budget_bytes"]
    if over > 0 and report["relr"] and "--no-budget" not in sys.argv[1:]:
        print(f"router_build: {SUITE} is {sizes[f'{SUITE} (stripped)']} bytes stripped, {over} over its "
              f"budget of {BUDGET} (4 MiB; docs/footprint.md, \"The margin\")", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Build the router binaries the way OpenWrt's packages feed does and
report their sizes.

OpenWrt's lang/rust/rust-package.mk builds with `cargo install --profile
release` and CARGO_PROFILE_RELEASE_* set to opt-level z, LTO, one codegen
unit, overflow checks on and panic=unwind, which our package Makefile
sets back to abort; the `router-openwrt` profile in Cargo.toml carries
exactly those settings (plus release's per-package overrides, which the
environment variables leave in place). This builds
what the feed installs — the multi-call binary `agentd-suite` (agentd,
agent-gw and agentctl in one file, suite/) — with it (host target: the
sizes are the x86_64 ones; a MIPS or ARM build differs, its trend does
not), makes the links the packages install (target/router-openwrt/agentd,
agent-gw, agentctl → agentd-suite) and prints one JSON object — also
written to target/router-openwrt/sizes.json, with the change against the
previous run's file when there is one. Stripped sizes too: OpenWrt's
build strips what it packages.

    scripts/router_build.py [--no-build]
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILE = "router-openwrt"
OUT = REPO / "target" / PROFILE
SUITE = "agentd-suite"
LINKS = ["agentd", "agentctl", "agent-gw"]
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


def main() -> int:
    if "--no-build" not in sys.argv[1:]:
        cmd = ["cargo", "build", "--locked", "--profile", PROFILE, "-p", SUITE, "--bins"]
        print("$ " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, cwd=REPO, check=True, stdin=subprocess.DEVNULL)
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
        "host": f"{platform.machine()}-{platform.system().lower()}",
        "bytes": sizes,
        "links": LINKS,
        "total_bytes": sizes[SUITE],
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
    return 0


if __name__ == "__main__":
    sys.exit(main())

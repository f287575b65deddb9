#!/usr/bin/env python3
"""Build the router binaries the way OpenWrt's packages feed does and
report their sizes.

OpenWrt's lang/rust/rust-package.mk builds with `cargo install --profile
release` and CARGO_PROFILE_RELEASE_* set to opt-level z, LTO, one codegen
unit, overflow checks on and panic=unwind; the `router-openwrt` profile in
Cargo.toml carries exactly those settings (plus release's per-package
overrides, which the environment variables leave in place). This builds
agentd, agentctl and agent-gw with it (host target: the sizes are the
x86_64 ones; a MIPS or ARM build differs, its trend does not) and prints
one JSON object — also written to target/router-openwrt/sizes.json, with
the change against the previous run's file when there is one.

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
BINS = ["agentd", "agentctl", "agent-gw"]
# What rust-package.mk sets (rust-values.mk, CARGO_PKG_CONFIG_VARS).
SETTINGS = {
    "opt-level": "z",
    "lto": True,
    "codegen-units": 1,
    "debug": False,
    "debug-assertions": False,
    "overflow-checks": True,
    "panic": "unwind",
    "rpath": False,
}


def main() -> int:
    if "--no-build" not in sys.argv[1:]:
        cmd = ["cargo", "build", "--locked", "--profile", PROFILE, "-p", "agentd", "-p", "agent-gw", "--bins"]
        print("$ " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, cwd=REPO, check=True, stdin=subprocess.DEVNULL)
    sizes = {}
    for name in BINS:
        path = OUT / name
        if not path.is_file():
            print(f"router_build: {path} was not built", file=sys.stderr)
            return 1
        sizes[name] = path.stat().st_size
    report = {
        "profile": PROFILE,
        "settings": SETTINGS,
        "host": f"{platform.machine()}-{platform.system().lower()}",
        "bytes": sizes,
        "total_bytes": sum(sizes.values()),
    }
    previous = OUT / "sizes.json"
    if previous.is_file():
        try:
            before = json.loads(previous.read_text())["bytes"]
            report["change_bytes"] = {n: sizes[n] - before[n] for n in BINS if n in before}
        except (ValueError, KeyError, TypeError):
            pass
    text = json.dumps(report, indent=2)
    previous.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

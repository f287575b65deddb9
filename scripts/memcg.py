"""The memory cgroup a benchmark runs daemons in (v1 or v2, whichever the
machine has): made, limited, read and removed, and a calibration of
whether kernel memory counts toward its limit. Used by
`bench_cgroup.py`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness.poll import wait_for  # noqa: E402

MIB = 1 << 20


def log(msg: str) -> None:
    print(f"[memcg] {msg}", file=sys.stderr, flush=True)


def detect_cgroup() -> Tuple[str, Path]:
    """v2 when /sys/fs/cgroup is a cgroup2 hierarchy whose root hands the
    memory controller to its children; else the v1 memory hierarchy."""
    root = Path("/sys/fs/cgroup")
    ctl = root / "cgroup.subtree_control"
    if (root / "cgroup.controllers").exists() and ctl.exists() and "memory" in ctl.read_text().split():
        return "v2", root
    v1 = root / "memory"
    if (v1 / "memory.limit_in_bytes").exists():
        return "v1", v1
    raise SystemExit("bench_cgroup: no memory cgroup controller (neither v1 at /sys/fs/cgroup/memory "
                     "nor v2 with +memory at /sys/fs/cgroup)")


def swap_present() -> bool:
    return read_kv_colon(Path("/proc/meminfo")).get("SwapTotal", 0) > 0


def read_kv_colon(path: Path) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        if value.split() and value.split()[0].isdigit():
            out[key] = int(value.split()[0])
    return out


def read_kv(path: Path) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


class MemCgroup:
    """One memory cgroup of ours, with `limit` bytes (None: unlimited)."""

    def __init__(self, kind: str, root: Path, name: str, limit: Optional[int]) -> None:
        self.kind = kind
        self.path = root / name
        self.path.mkdir()
        if kind == "v1":
            if limit is not None:
                (self.path / "memory.limit_in_bytes").write_text(str(limit))
                # With swap, memory+swap gets the same bound: nothing may
                # move to swap to fit. Without swap it is left alone (a
                # memsw limit equal to the memory limit is hit first and
                # takes the fail counts memory.failcnt should show).
                memsw = self.path / "memory.memsw.limit_in_bytes"
                if memsw.exists() and swap_present():
                    memsw.write_text(str(limit))
        else:
            (self.path / "memory.max").write_text(str(limit) if limit is not None else "max")
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def holds(self, pid: int) -> bool:
        try:
            text = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            return False
        return any(line.rsplit(":", 1)[-1] == "/" + self.path.name for line in text.splitlines())

    def oom_kills(self) -> int:
        f = "memory.oom_control" if self.kind == "v1" else "memory.events"
        return read_kv(self.path / f).get("oom_kill", 0)

    def _int(self, name: str) -> Optional[int]:
        p = self.path / name
        try:
            return int(p.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def snapshot(self) -> Dict[str, Any]:
        """The counters a trial records, in bytes."""
        stat = read_kv(self.path / "memory.stat")
        if self.kind == "v1":
            return {
                "usage": self._int("memory.usage_in_bytes"),
                "peak": self._int("memory.max_usage_in_bytes"),
                "failcnt": self._int("memory.failcnt"),
                "memsw_failcnt": self._int("memory.memsw.failcnt"),
                "oom_kill": self.oom_kills(),
                "rss": stat.get("rss"),
                "cache": stat.get("cache"),
                "mapped_file": stat.get("mapped_file"),
                "shmem": stat.get("shmem"),
                "dirty": stat.get("dirty"),
                "pgmajfault": stat.get("pgmajfault"),
                "kmem": self._int("memory.kmem.usage_in_bytes"),
                "kmem_peak": self._int("memory.kmem.max_usage_in_bytes"),
                "kmem_tcp": self._int("memory.kmem.tcp.usage_in_bytes"),
            }
        events = read_kv(self.path / "memory.events")
        return {
            "usage": self._int("memory.current"),
            "peak": self._int("memory.peak"),
            "failcnt": events.get("max"),  # times usage reached memory.max
            "memsw_failcnt": None,
            "oom_kill": events.get("oom_kill", 0),
            "rss": stat.get("anon"),
            "cache": stat.get("file"),
            "mapped_file": stat.get("file_mapped"),
            "shmem": stat.get("shmem"),
            "dirty": stat.get("file_dirty"),
            "pgmajfault": stat.get("pgmajfault"),
            "kmem": stat.get("kernel"),
            "kmem_peak": None,
            "kmem_tcp": stat.get("sock"),
        }

    def remove(self) -> None:
        """rmdir once no process is left (ours are stopped by then)."""
        def empty() -> bool:
            return not self.procs.read_text().strip()
        try:
            wait_for(f"cgroup {self.path.name} empty", empty, timeout=15, interval=0.05)
        except AssertionError as exc:
            log(f"cannot remove {self.path}: {exc}")
            return
        for _ in range(50):  # EBUSY while the last exit is being accounted
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        log(f"cannot remove {self.path}")


def in_cgroup(argv: List[str], procs: Path) -> List[str]:
    """`argv` started in the cgroup: the shell writes its own PID into
    cgroup.procs and execs `argv` (itself `ip netns exec`, which execs
    the daemon), so the daemon's PID is the one placed."""
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]


KMEM_FILES = 20000
KMEM_PROG = """import os, sys
for i in range(int(sys.argv[2])):
    os.close(os.open(os.path.join(sys.argv[1], str(i)), os.O_CREAT | os.O_WRONLY, 0o600))
"""


def kmem_calibration(kind: str, root: Path, work: Path) -> Dict[str, Any]:
    """Does kernel memory count toward the limit? A process in a cgroup
    of its own creates KMEM_FILES empty files (inodes and dentries: slab,
    i.e. kernel memory, and a little directory page cache) and exits;
    then usage - (rss + cache) is compared with the kmem counter. v1 only
    (in v2 memory.current includes `kernel` by definition)."""
    if kind != "v1":
        return {}
    cg = MemCgroup(kind, root, f"agentd-bench-{os.getpid()}-kmem", None)
    files = work / "kmem-files"
    files.mkdir()
    try:
        p = subprocess.run(in_cgroup([sys.executable, "-c", KMEM_PROG, str(files), str(KMEM_FILES)], cg.procs),
                           capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        if p.returncode != 0:
            return {"error": p.stderr.decode(errors="replace")[-300:]}
        c = cg.snapshot()
        other = c["usage"] - c["rss"] - c["cache"]
        return {"files": KMEM_FILES, "usage": c["usage"], "rss": c["rss"], "cache": c["cache"], "kmem": c["kmem"],
                "usage_minus_rss_cache": other,
                # Charges are batched per CPU (64 pages each): agreement
                # within that is agreement.
                "kmem_counts_toward_limit": abs(other - c["kmem"]) <= 64 * 4096 * (os.cpu_count() or 1)
                and c["kmem"] > 4 * MIB}
    finally:
        shutil.rmtree(files, ignore_errors=True)
        cg.remove()

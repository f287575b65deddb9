"""agentd's one event loop under load it did not ask for.

Out of descriptors: with its RLIMIT_NOFILE lowered (prlimit) to a few
above what it holds, a bounded number of connections to R's ARPX port
puts R's listener into EMFILE with connections left in the backlog. The
listener pauses instead of spinning: R's CPU time over the window stays
small (read from /proc/PID/stat), its session with S stays established
(sampled from S throughout), and once the connections go R accepts and
answers agentctl again."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import List

from harness.mesh import ARPX_PORT
from harness.poll import wait_for

# Connections held open against R's ARPX port (bounded; the kernel's
# backlog holds those R cannot accept).
FLOOD_CONNECTIONS = 40
# How long R's CPU time is watched while it is out of descriptors, and
# how S's session with R is sampled meanwhile. Shorter than R's TLS
# handshake timeout (10 s), so the accepted connections keep their
# descriptors for the whole window.
WINDOW_S = 4.0
# CPU seconds R may use in the window: a listener that retries at once
# spins a core for the whole window; paced, a few dozen accept calls.
MAX_CPU_S = 0.8


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        stat = f.read()
    # Fields after the parenthesised command name; utime and stime are
    # the 14th and 15th fields of the whole line.
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_arpx_listener_out_of_descriptors_pauses_and_recovers(mesh):
    r = mesh.router("router-r")
    s = mesh.router("router-s")
    mesh.link("router-r", "router-s")
    r.start()
    s.start()
    r.wait_established("router-s")
    s.wait_established("router-r")
    pid = r.stack.agentd.pid
    limit = open_fds(pid) + 3
    subprocess.run(["prlimit", "--pid", str(pid), f"--nofile={limit}:{limit}"], check=True, timeout=10)
    flood: List[socket.socket] = []
    try:
        for _ in range(FLOOD_CONNECTIONS):
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.bind((r.ns.mgmt_host_addr, 0))
            c.settimeout(5)
            c.connect((r.ns.mgmt_addr, ARPX_PORT))
            flood.append(c)
        wait_for("R's ARPX listener to run out of descriptors",
                 lambda: "ARPX listener: accept failed" in r.stack.agentd.log_text(), timeout=15)
        assert open_fds(pid) >= limit - 1, (open_fds(pid), limit)
        before = cpu_seconds(pid)
        states = []
        end = time.monotonic() + WINDOW_S
        while time.monotonic() < end:
            states.append((s.peer("router-r") or {}).get("state"))
            time.sleep(0.25)
        used = cpu_seconds(pid) - before
        print(f"agentd CPU out of descriptors: {used:.2f} s in {WINDOW_S} s")
        assert len(states) >= 4 and set(states) == {"established"}, states
        assert used < MAX_CPU_S, f"agentd used {used:.2f} CPU s in {WINDOW_S} s out of descriptors"
    finally:
        for c in flood:
            c.close()
    # Descriptors free up (the handshakes see EOF): R accepts and answers
    # agentctl again, its session with S never went down.
    wait_for("R's listener to accept again",
             lambda: "ARPX listener: accepting again after" in r.stack.agentd.log_text(), timeout=15)
    assert (r.peer("router-s") or {}).get("state") == "established"
    assert (s.peer("router-r") or {}).get("state") == "established"

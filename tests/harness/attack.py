"""What a test needs to attack a mesh and watch the honest part of it:
a misbehaving ARPX neighbour that keeps its session alive from a thread,
a sampler of session states while the attack runs, and a bounded loop of
honest calls whose success rate the test asserts."""

from __future__ import annotations

import os
import threading
import time
from typing import Dict, List, Tuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from . import arpx_wire as w
from .http import envelope
from .mesh import ARPX_PORT, MeshRouter, PeerSpec


class Rogue:
    """A pinned neighbour speaking raw ARPX: it answers nothing but keeps
    its session alive (heartbeats every 300 ms, everything it is sent read
    and dropped) from a thread, until closed."""

    def __init__(self, key: Ed25519PrivateKey, router_id: str, workdir, target: MeshRouter) -> None:
        self.peer = w.RoguePeer(key, router_id, workdir)
        self.peer.connect(target.ns.mgmt_addr, ARPX_PORT, source=target.ns.mgmt_host_addr)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.seq = 0
        self.closed_with = None
        self.send(w.open_msg(router_id, boot_epoch=int.from_bytes(os.urandom(4), "big")))
        first = self.peer.recv()
        assert first is not None and first["type"] == "open", first
        self.send(w.snapshot_begin(1))
        self.send(w.snapshot_end(1))
        self.peer.sock.settimeout(0.3)
        self.reader = threading.Thread(target=self._run, daemon=True)
        self.reader.start()

    def send(self, body: bytes) -> None:
        with self.lock:
            self.peer.send(body)

    def update(self, routes: List[w.RouteAd], chunk: int = 40) -> None:
        for i in range(0, len(routes), chunk):
            self.seq += 1
            self.send(w.update(self.seq, routes[i:i + chunk]))

    def _run(self) -> None:
        last = 0.0
        deadline = time.monotonic() + 120  # bounded whatever the test does
        while not self.stop.is_set() and time.monotonic() < deadline:
            if time.monotonic() - last > 0.3:
                try:
                    self.send(w.heartbeat())
                except OSError:
                    return
                last = time.monotonic()
            try:
                msg = self.peer.recv()
            except (TimeoutError, OSError):
                continue
            if msg is None:
                return
            if msg["type"] == "close":
                self.closed_with = msg
                return

    def close(self) -> None:
        self.stop.set()
        self.reader.join(5)
        self.peer.close()


class Sampler:
    """Samples the session states of (router, peer) pairs every 100 ms in
    a thread; `states()` lists every state seen per pair."""

    def __init__(self, pairs: List[Tuple[MeshRouter, str]]) -> None:
        self.pairs = pairs
        self.seen: Dict[str, List[str]] = {f"{r.name}->{p}": [] for r, p in pairs}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < deadline:
            for r, p in self.pairs:
                # A router that does not answer is a sample too: a thread
                # that died on it would leave the rest of the attack unseen.
                try:
                    st = (r.peer(p) or {}).get("state", "absent")
                except Exception as e:  # noqa: BLE001 - recorded, asserted by the test
                    st = f"unanswered ({type(e).__name__})"
                self.seen[f"{r.name}->{p}"].append(st)
            time.sleep(0.1)

    def finish(self) -> Dict[str, List[str]]:
        self.stop.set()
        self.t.join(10)
        return self.seen

    def assert_always_established(self) -> None:
        seen = self.finish()
        for pair, states in seen.items():
            assert states, f"{pair}: never sampled"
            bad = [s for s in states if s != "established"]
            assert not bad, f"{pair}: left established during the attack ({len(bad)}/{len(states)} samples: {set(bad)})"


def call_many(router: MeshRouter, capability: str, n: int, headers=None) -> Tuple[int, int]:
    """n sync calls of `capability` at `router`: (successes, attempts)."""
    ok = 0
    failures = []
    for i in range(n):
        r = router.stack.http.post("/agent/v1/invoke", envelope(capability, {"i": i}), headers=headers)
        ok += r.status == 200
        if r.status != 200 and len(failures) < 3:
            failures.append(r.describe())
    if failures:
        print(f"{router.name}: failed calls of {capability}: {failures}")
    return ok, n


def pin_rogue(router: MeshRouter, name: str, key: Ed25519PrivateKey, **options) -> None:
    """A peer section for the rogue at `router` (dialled in vain: nothing
    listens at its address; the rogue connects instead)."""
    opts = {"router_id": name, "address": "192.0.2.1", "port": ARPX_PORT,
            "key_fingerprint": w.fingerprint_of(key), **options}
    router.peers.append(PeerSpec(name, "192.0.2.1", opts))
    router._write_peers()


def counters(router: MeshRouter) -> Dict[str, int]:
    return router.stack.ctl_json("stats")["counters"]

"""Fixtures of the system tests: the real agentd, agentctl and agent-gw
binaries of this checkout on a generated UCI config in a private directory,
a plain-HTTP handler backend, network namespaces for agents that need a
non-loopback address, and Ed25519 keys for JWTs.

Run: `make test-python` (creates .venv), or `.venv/bin/pytest tests`.
Environment: AGENTD_BIN_DIR (default target/debug), AGENTD_TEST_NO_BUILD=1
to skip the `cargo build` of the binaries.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.backend import Backend  # noqa: E402
from harness.config import base_config  # noqa: E402
from harness.mesh import MeshNet, MeshRouter  # noqa: E402
from harness.netns import NetNs  # noqa: E402
from harness.procs import Binaries, Stack, locate_binaries  # noqa: E402


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


def _failed(request: pytest.FixtureRequest) -> bool:
    rep = getattr(request.node, "rep_call", None)
    return rep is None or rep.failed


@pytest.fixture(scope="session")
def bins() -> Binaries:
    return locate_binaries()


@pytest.fixture
def workdir(request: pytest.FixtureRequest) -> Iterator[Path]:
    # Short path: the IPC socket path must fit sun_path (108 bytes).
    path = Path(tempfile.mkdtemp(prefix="st-", dir="/tmp"))
    yield path
    if _failed(request):
        print(f"(test directory kept: {path})")
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_stack(bins: Binaries, workdir: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Stack]]:
    """`make_stack(auth="none", sdk_host="127.0.0.1", agentd={}, gateway={},
    tenants=[(name, opts)], rules=[...], routes=[...], start=True,
    cli_overrides=True, extra_sections=[Section...])`: a config written into
    the test's directory, agentd and agent-gw started and ready
    (`cli_overrides=False`: socket and listener only from the file). Everything is stopped by PID at teardown; on failure the
    daemons' logs are printed."""
    stacks: List[Stack] = []
    counter = [0]

    def factory(start: bool = True, cli_overrides: bool = True, extra_sections: Any = (), **kw: Any) -> Stack:
        counter[0] += 1
        cfg = base_config(workdir / f"r{counter[0]}", **kw)
        cfg.sections.extend(extra_sections)
        stack = Stack(bins, cfg, cli_overrides=cli_overrides)
        stacks.append(stack)
        if start:
            stack.start()
        return stack

    yield factory
    for stack in stacks:
        stack.stop()
    if _failed(request):
        for stack in stacks:
            print(stack.logs())


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    """agentd + agent-gw with `auth 'none'` on 127.0.0.1."""
    return make_stack()


@pytest.fixture
def backend() -> Iterator[Backend]:
    b = Backend()
    yield b
    b.close()


@pytest.fixture
def netns() -> Iterator[NetNs]:
    ns = NetNs()
    yield ns
    ns.close()


@pytest.fixture
def netns2() -> Iterator[NetNs]:
    """A second LAN host, for tests that need two (attacker and victim,
    flooder and well-behaved host)."""
    ns = NetNs()
    yield ns
    ns.close()


class Mesh:
    """Routers in namespaces joined by veth links (harness/mesh.py)."""

    def __init__(self, bins: Binaries, workdir: Path) -> None:
        self.bins = bins
        self.workdir = workdir
        self.net = MeshNet()
        self.routers: dict = {}

    def router(self, name: str, **kw: Any) -> MeshRouter:
        ns = self.net.add_router(name)
        r = MeshRouter(self.bins, self.net, ns, self.workdir / name, **kw)
        self.routers[name] = r
        return r

    def link(self, a: str, b: str, *, pin: bool = True, a_opts: Any = None, b_opts: Any = None) -> None:
        """A veth between a and b, and a peer section on each side."""
        self.net.link(a, b)
        ra, rb = self.routers[a], self.routers[b]
        ra.peer_with(rb, pin=pin, **(a_opts or {}))
        rb.peer_with(ra, pin=pin, **(b_opts or {}))

    def logs(self) -> str:
        return "\n".join(f"==== {n}\n{r.stack.logs()}" for n, r in self.routers.items())

    def close(self) -> None:
        for r in self.routers.values():
            r.stop()
        self.net.close()


@pytest.fixture
def mesh(bins: Binaries, workdir: Path, request: pytest.FixtureRequest) -> Iterator[Mesh]:
    """`mesh.router(name, reflector=False, arpx={}, agentd={})` then
    `mesh.link(a, b)`, then start the routers. All daemons stopped by PID
    and all namespaces deleted at teardown; logs printed on failure."""
    m = Mesh(bins, workdir)
    try:
        yield m
    finally:
        if _failed(request):
            print(m.logs())
        m.close()

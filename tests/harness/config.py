"""The UCI file (`/etc/config/agentd` format, DESIGN §9/§13) that both
daemons read in a test. Every path lives in the test's own directory and
every listener is either disabled or on a port picked free for the test."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

Value = Union[str, int, Sequence[str]]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _quote(value: str) -> str:
    if "'" in value:
        raise ValueError(f"UCI value with a quote is not supported here: {value!r}")
    return f"'{value}'"


@dataclass
class Section:
    type: str
    name: str
    options: Dict[str, Value] = field(default_factory=dict)

    def render(self) -> str:
        lines = [f"config {self.type} {_quote(self.name)}"]
        for key, value in self.options.items():
            if isinstance(value, (list, tuple)):
                for item in value:
                    lines.append(f"\tlist {key} {_quote(str(item))}")
            else:
                lines.append(f"\toption {key} {_quote(str(value))}")
        return "\n".join(lines) + "\n"


@dataclass
class Config:
    """A whole config file; tests adjust sections before writing."""

    dir: Path
    sdk_host: str = "127.0.0.1"
    sdk_port: int = 0
    router_id: str = "systest"
    sections: List[Section] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.dir / "agentd.conf"

    @property
    def socket(self) -> Path:
        return self.dir / "run" / "agentd.sock"

    def section(self, type_: str, name: Optional[str] = None) -> Section:
        for s in self.sections:
            if s.type == type_ and (name is None or s.name == name):
                return s
        raise KeyError(f"no config section {type_} {name or ''}")

    def write(self) -> Path:
        (self.dir / "run").mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join(s.render() for s in self.sections), encoding="utf-8")
        return self.path


def base_config(
    dir: Path,
    *,
    auth: str = "none",
    sdk_host: str = "127.0.0.1",
    agentd: Optional[Mapping[str, Value]] = None,
    gateway: Optional[Mapping[str, Value]] = None,
    tenants: Sequence[Tuple[str, Mapping[str, Value]]] = (),
    rules: Sequence[Tuple[str, Mapping[str, Value]]] = (),
    routes: Sequence[Tuple[str, Mapping[str, Value]]] = (),
    loopback_endpoints: bool = True,
    sdk_port: Optional[int] = None,
) -> Config:
    """A single-router config: ARPX, discovery, peer and public listeners
    off (so nothing but the SDK API opens a port), all state in `dir`.

    `loopback_endpoints` (default on, lab mode): most tests run handlers on
    127.0.0.1, which agentd refuses unless `agentd.allow_loopback_endpoints`
    is set; static routes get `allow_loopback 1` unless they say otherwise.
    SSRF tests pass `loopback_endpoints=False` to get the router's default.

    Tests register many routes from the test host itself as setup, so the
    per-source registration rate and route quota are lifted here (as the
    lab setting they are); the flood test sets the router's defaults back
    explicitly."""
    dir.mkdir(parents=True, exist_ok=True)
    # A host in its own namespace (mesh routers) may use a fixed port; the
    # test's own namespace picks a free one.
    port = sdk_port or free_port(sdk_host)
    cfg = Config(dir=dir, sdk_host=sdk_host, sdk_port=port)
    main: Dict[str, Value] = {
        "router_id": cfg.router_id,
        "domain": "lab.example",
        "identity": str(dir / "identity.key"),
        "ipc_socket": str(cfg.socket),
        "state_dir": str(dir / "run"),
        "default_lease": 30,
        "min_lease": 1,
        "max_lease": 3600,
        "default_action": "allow",
        "log_level": "debug",
        "health_check": "off",
        "allow_loopback_endpoints": 1 if loopback_endpoints else 0,
        "max_routes_per_source": 1_000_000,
    }
    main.update(agentd or {})
    gw: Dict[str, Value] = {
        "sdk_listen": f"{sdk_host}:{port}",
        "public_listen": "off",
        "peer_listen": "off",
        # Tests that scrape set their own port; the default would have
        # every stack on this host try 127.0.0.1:9101.
        "admin_listen": "off",
        "auth": auth,
        "control_rate_per_source": 1_000_000,
        "control_burst_per_source": 1_000_000,
    }
    gw.update(gateway or {})
    cfg.sections = [
        Section("agentd", "main", main),
        Section("gateway", "gateway", gw),
        Section("arpx", "arpx", {"listen": "off"}),
        Section("discovery", "discovery", {"enabled": 0}),
    ]
    for name, opts in tenants:
        cfg.sections.append(Section("tenant", name, dict(opts)))
    for name, opts in rules:
        cfg.sections.append(Section("rule", name, dict(opts)))
    for name, opts in routes:
        route = dict(opts)
        if loopback_endpoints:
            route.setdefault("allow_loopback", 1)
        cfg.sections.append(Section("route", name, route))
    return cfg

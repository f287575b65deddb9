"""Wiring of the LuCI harness for one test: the feed's real rpcd exec
plugin running this checkout's agentctl against the test's agentd, the
rpcd stand-in (ACL from the app's acl.d file, `uci` over the test's
config file, reload triggers as SIGHUP to the daemons) and the web
server the browser loads the views from."""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from luci_rpcd import Acl, ExecPlugin, Rpcd, UciStore
from luci_web import ACL, REPO, LuciServer

FEED = REPO / "openwrt-feed"


def plugin_source() -> Path:
    """The rpcd exec plugin the feed installs as /usr/libexec/rpcd/agentd."""
    for candidate in sorted(FEED.rglob("*")):
        rel = candidate.relative_to(FEED).as_posix()
        if candidate.is_file() and (rel.endswith("libexec/rpcd/agentd") or rel.endswith("agentd.rpcd")):
            return candidate
    raise FileNotFoundError("no rpcd plugin for ubus object agentd under openwrt-feed/")


def plugin_command(agentctl: Path, config: Path) -> Tuple[List[str], Dict[str, str]]:
    """The plugin file as rpcd runs it, with the environment the plugin
    reads for tests (AGENTCTL: this checkout's agentctl, AGENTD_CONFIG:
    the test's config; rpcd sets neither on a router)."""
    env = dict(os.environ, AGENTCTL=str(agentctl), AGENTD_CONFIG=str(config))
    return [str(plugin_source())], env


class Harness:
    def __init__(self, dir: Path, agentctl: Path, config: Path, reload_pids: Callable[[], Sequence[int]],
                 scopes: Sequence[str] = ("read", "write")) -> None:
        self.config = config
        self.reload_pids = reload_pids
        self.reloads = 0
        argv, env = plugin_command(agentctl, config)
        self.plugin = ExecPlugin("agentd", argv, env)
        self.uci = UciStore({"agentd": config}, self._reload)
        self.rpcd = Rpcd(Acl([ACL], ["luci-app-agentd"], scopes), {"agentd": self.plugin}, self.uci,
                         session=secrets.token_hex(16))
        self.server = LuciServer(self.rpcd)

    def _reload(self, configs: List[str]) -> None:
        """procd's reload trigger on package agentd: each init script's
        reload_service sends SIGHUP."""
        for pid in self.reload_pids():
            os.kill(pid, signal.SIGHUP)
        self.reloads += 1

    def url(self, page: str) -> str:
        return self.server.url(page)

    def close(self) -> None:
        self.server.close()


def maybe(pid_of: Callable[[], Optional[int]]) -> List[int]:
    pid = pid_of()
    return [pid] if pid else []

"""Wiring of the LuCI harness for one test: the feed's real rpcd exec
plugin running this checkout's agentctl against the test's agentd, the
rpcd stand-in (ACL from the app's acl.d file, `uci` over the test's
config file, reload triggers as SIGHUP to the daemons) and the web
server the browser loads the views from."""

from __future__ import annotations

import os
import secrets
import signal
import stat
from pathlib import Path
from typing import Callable, List, Optional, Sequence

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


def install_plugin(dir: Path, agentctl: Path, config: Path) -> Path:
    """The plugin as rpcd would run it on this host: a copy whose
    `/usr/bin/agentctl` is a wrapper running this checkout's agentctl on
    the test's config (on a router agentctl finds /etc/config/agentd by
    itself). Nothing else of the plugin changes."""
    dir.mkdir(parents=True, exist_ok=True)
    wrapper = dir / "agentctl"
    wrapper.write_text(f'#!/bin/sh\nexec "{agentctl}" --config "{config}" "$@"\n', encoding="utf-8")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    text = plugin_source().read_text(encoding="utf-8")
    if "/usr/bin/agentctl" not in text:
        raise AssertionError("the rpcd plugin does not run /usr/bin/agentctl; adapt luci_stack.install_plugin")
    plugin = dir / "agentd"
    plugin.write_text(text.replace("/usr/bin/agentctl", str(wrapper)), encoding="utf-8")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    return plugin


class Harness:
    def __init__(self, dir: Path, agentctl: Path, config: Path, reload_pids: Callable[[], Sequence[int]],
                 scopes: Sequence[str] = ("read", "write")) -> None:
        self.config = config
        self.reload_pids = reload_pids
        self.reloads = 0
        plugin = install_plugin(dir / "rpcd", agentctl, config)
        self.plugin = ExecPlugin("agentd", [str(plugin)])
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

"""The browser's own network namespace.

Chromium watches the host's links and addresses (netlink) and fails a
load in flight with `net::ERR_NETWORK_CHANGED` when they change. The
other tests, and whatever else shares this machine, add and remove veths
and addresses in the root namespace all the time, so a LuCI page could
fail to load one of its scripts for a reason that has nothing to do with
the app. The browser runs in a namespace of its own with nothing but
loopback, and the harness's web server listens there too: its listening
socket is made on a thread that has joined that namespace (a socket
belongs to the namespace it was made in, whichever thread accepts on it).

One namespace per test process, made on first use, deleted at exit."""

from __future__ import annotations

import atexit
import ctypes
import os
import subprocess
import threading
import uuid
from typing import Callable, List, Optional, TypeVar

CLONE_NEWNET = 0x40000000

T = TypeVar("T")

_lock = threading.Lock()
_name: Optional[str] = None


def _delete(name: str) -> None:
    subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)


def name() -> str:
    """The namespace, made (with loopback up) on the first call."""
    global _name
    with _lock:
        if _name is None:
            made = f"agentd-luci-{os.getpid()}-{uuid.uuid4().hex[:6]}"
            subprocess.run(["ip", "netns", "add", made], check=True, capture_output=True)
            atexit.register(_delete, made)
            subprocess.run(["ip", "-n", made, "link", "set", "lo", "up"], check=True, capture_output=True)
            _name = made
        return _name


def exec_prefix() -> List[str]:
    """What runs a command inside the namespace."""
    return ["ip", "netns", "exec", name()]


def inside(make: Callable[[], T]) -> T:
    """`make()` run on a thread inside the namespace (setns affects only
    the calling thread); sockets it creates stay there."""
    path = f"/run/netns/{name()}"
    result: dict = {}

    def run() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(path, "rb") as ns:
                if libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into {path}: {os.strerror(err)}")
            result["value"] = make()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            result["error"] = e

    t = threading.Thread(target=run, name="luci-netns")
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    return result["value"]

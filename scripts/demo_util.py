"""Helpers the `make demo` scripts share: output, a free loopback port,
bounded waiting."""

from __future__ import annotations

import socket
import time
from typing import Any, Callable


def say(msg: str = "") -> None:
    print(msg, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """`check()` until truthy (its value is returned), bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - still starting
            last = exc
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what} ({last!r})")

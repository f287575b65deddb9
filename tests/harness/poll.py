"""Bounded polling: every wait in the system tests is a condition checked
until a deadline, never a fixed sleep standing in for the condition."""

from __future__ import annotations

import time
from typing import Callable, Optional, TypeVar

T = TypeVar("T")


class PollTimeout(AssertionError):
    """The condition did not hold before the deadline."""


class Fatal(AssertionError):
    """Raised by a check when waiting longer cannot help (the process being
    waited for has exited); `wait_for` lets it through at once."""


def wait_for(
    what: str,
    check: Callable[[], Optional[T]],
    timeout: float = 10.0,
    interval: float = 0.02,
) -> T:
    """Call `check` until it returns a truthy value; return that value.

    Exceptions from `check` count as "not yet" (a daemon that is still
    starting refuses connections) and the last one is reported on timeout.
    """
    deadline = time.monotonic() + timeout
    last_error: Optional[BaseException] = None
    last_value: Optional[T] = None
    while True:
        try:
            last_value = check()
            if last_value:
                return last_value
        except Fatal:
            raise
        except Exception as exc:  # noqa: BLE001 - reported below
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f"; last error: {last_error!r}" if last_error else f"; last value: {last_value!r}"
            raise PollTimeout(f"timed out after {timeout:.1f}s waiting for {what}{detail}")
        time.sleep(interval)

"""An agent program (SDK-based) as a subprocess that reports progress as
JSON lines on stdout and stops when its stdin closes."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional


class AgentProcess:
    def __init__(self, argv: List[str], log: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.argv = argv
        self.log = log
        self._log_file = open(log, "ab")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=env,
        )
        self.lines: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self.lines.put(json.loads(raw))
            except ValueError:
                self._log_file.write(b"stdout: " + raw)

    def wait_message(self, key: str, timeout: float = 20.0) -> Dict[str, Any]:
        """The next stdout JSON object that has `key`, within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"agent {self.argv[-4:]} did not report {key!r} in {timeout}s:\n{self.log_text()}")
            try:
                msg = self.lines.get(timeout=min(remaining, 0.2))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(f"agent exited ({self.proc.returncode}) before {key!r}:\n{self.log_text()}")
                continue
            if key in msg:
                return msg

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """Close stdin (the agent's signal to stop), then wait; SIGKILL by
        PID if it does not exit in time."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log_file.close()
        return self.proc.returncode

    def log_text(self) -> str:
        try:
            return self.log.read_bytes()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

"""Calling capabilities through the router: ``invoke``, ``invoke_async``
(task handles) and ``stream`` (resumable SSE).

The HTTP work happens in the native module with the GIL released; this
module builds envelopes, decodes JSON and maps errors.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import quote

from . import _native
from .errors import (
    AgentdError,
    HandlerError,
    ProtocolError,
    StreamError,
    TaskCancelledError,
    TaskFailedError,
    TaskResultReleasedError,
    DeadlineExceededError,
    error_for,
    from_native,
)

_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-")


def _check_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 95 or not set(value) <= _ID_CHARS:
        raise ValueError(f"{what} {value!r} must be 1-95 characters of [A-Za-z0-9._~-]")
    return value


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"{what} is not JSON: {exc}") from None


def _envelope(
    capability: str,
    payload: Any,
    *,
    version: int,
    source_agent: str,
    tenant: str,
    target_agent: Optional[str] = None,
    constraints: Optional[Mapping[str, Any]] = None,
    task_id: Optional[str] = None,
    hop_limit: int = 8,
) -> Dict[str, Any]:
    """The invocation envelope (Nexus router protocol, DESIGN §9); shared
    by ``Client`` and ``DirectAgent`` so both send the same document."""

    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError("version must be an integer >= 1")
    if payload is None:
        raise ValueError("payload must not be None (use {} for an empty payload)")
    env: Dict[str, Any] = {
        "version": "1.0",
        "intent": capability,
        "intent_version": version,
        "task_id": task_id or str(uuid.uuid4()),
        "source_agent": source_agent,
        "tenant": tenant,
        "hop_limit": hop_limit,
        "constraints": dict(constraints or {}),
        "payload": payload,
    }
    if target_agent is not None:
        env["target_agent"] = target_agent
    return env


@dataclass(frozen=True)
class StreamEvent:
    """One event of a stream: ``id`` (int, increasing), ``event`` (name or
    None) and ``data`` (text)."""

    id: Optional[int]
    event: Optional[str]
    data: str

    def json(self) -> Any:
        """``data`` decoded as JSON."""
        return json.loads(self.data)


class Client:
    """A caller of capabilities through one router.

    ``router`` is ``"auto"`` (``AGENTD_ROUTER_URL``, then a router that
    announces ``_agentd._tcp`` over mDNS, then the IPv4 default gateway on
    :7446; see the README) or ``http://host:port``. ``token`` (or the
    ``AGENTD_TOKEN`` environment variable) is sent as a bearer token;
    without one the SDK uses the router's trusted-LAN bootstrap if offered.
    The connection is set up lazily on first use.
    """

    def __init__(
        self,
        router: str = "auto",
        tenant: str = "default",
        agent_id: Optional[str] = None,
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
    ) -> None:
        self.tenant = _check_id(tenant, "tenant")
        self.agent_id = _check_id(agent_id or "caller", "agent_id")
        self.origin = f"agent://{self.tenant}/{self.agent_id}"
        self.router = router
        self.token = token if token is not None else (os.environ.get("AGENTD_TOKEN") or None)
        self.timeout = float(timeout)
        self._native: Optional[_native.RouterClient] = None
        self._url: Optional[str] = None
        self._source: Optional[str] = None
        self._lock = threading.Lock()

    # ----- plumbing -----

    @property
    def router_url(self) -> str:
        """The resolved router URL (discovery only; no connection)."""
        if self._url is None:
            self._url, self._source = _native.resolve_router(self.router)
        return self._url

    @property
    def router_source(self) -> str:
        """How the router was found: ``explicit``, ``environment``,
        ``dns-sd`` or ``default-gateway``."""
        _ = self.router_url
        assert self._source is not None
        return self._source

    @property
    def native(self) -> "_native.RouterClient":
        with self._lock:
            if self._native is None:
                url = self.router_url
                try:
                    self._native = _native.RouterClient(
                        url, token=self.token, tenant=self.tenant, origin=self.origin, timeout=self.timeout
                    )
                except _native.CallError as exc:
                    raise from_native(exc) from None
            return self._native

    def request(
        self,
        method: str,
        target: str,
        payload: Any = None,
        *,
        headers: Optional[List[Tuple[str, str]]] = None,
        timeout: Optional[float] = None,
    ) -> Tuple[int, Dict[str, str], Any]:
        """One JSON request to the router: ``(status, headers, decoded body)``.
        Raises the matching ``AgentdError`` subclass on failure."""

        body = None if payload is None else _dumps(payload)
        try:
            status, raw_headers, raw = self.native.request(
                method, target, body, list(headers or []), timeout or self.timeout
            )
        except _native.CallError as exc:
            raise from_native(exc) from None
        return status, {k.lower(): v for k, v in raw_headers}, _loads(raw, f"reply to {method} {target}")

    def envelope(
        self,
        capability: str,
        payload: Any,
        *,
        version: int = 1,
        tenant: Optional[str] = None,
        target_agent: Optional[str] = None,
        constraints: Optional[Mapping[str, Any]] = None,
        task_id: Optional[str] = None,
        hop_limit: int = 8,
    ) -> Dict[str, Any]:
        """The invocation envelope (Nexus router protocol, DESIGN §9)."""

        return _envelope(
            capability,
            payload,
            version=version,
            source_agent=self.origin,
            tenant=tenant or self.tenant,
            target_agent=target_agent,
            constraints=constraints,
            task_id=task_id,
            hop_limit=hop_limit,
        )

    @staticmethod
    def _call_headers(timeout: float, idempotency_key: Optional[str]) -> List[Tuple[str, str]]:
        # The router caps a call's budget at 300 s (docs/sdk-api.md).
        headers = [("X-Agentd-Timeout-Ms", str(min(300_000, max(1, int(timeout * 1000)))))]
        if idempotency_key is not None:
            if (
                not idempotency_key
                or len(idempotency_key.encode()) > 128
                or any(not (0x20 < ord(c) < 0x7F) for c in idempotency_key)
            ):
                raise ValueError("idempotency_key must be 1-128 visible ASCII characters")
            headers.append(("Idempotency-Key", idempotency_key))
        return headers

    # ----- calls -----

    def invoke(
        self,
        capability: str,
        payload: Any,
        *,
        version: int = 1,
        tenant: Optional[str] = None,
        timeout: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        target_agent: Optional[str] = None,
        constraints: Optional[Mapping[str, Any]] = None,
    ) -> Any:
        """Invokes ``capability`` (interface ``version``) and returns the
        handler's JSON result. ``timeout`` is the whole call's deadline and
        travels with the request. With an ``idempotency_key`` the router
        may retry the call on another replica after an ambiguous failure."""

        timeout = float(timeout or self.timeout)
        env = self.envelope(
            capability, payload, version=version, tenant=tenant, target_agent=target_agent, constraints=constraints
        )
        _, _, body = self.request(
            "POST", "/agent/v1/invoke", env, headers=self._call_headers(timeout, idempotency_key), timeout=timeout
        )
        return body

    def invoke_async(
        self,
        capability: str,
        payload: Any,
        *,
        version: int = 1,
        tenant: Optional[str] = None,
        timeout: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        target_agent: Optional[str] = None,
        constraints: Optional[Mapping[str, Any]] = None,
    ) -> "Task":
        """Starts ``capability`` as an async task (``Prefer:
        respond-async``) and returns its handle at once."""

        timeout = float(timeout or self.timeout)
        env = self.envelope(
            capability, payload, version=version, tenant=tenant, target_agent=target_agent, constraints=constraints
        )
        headers = self._call_headers(timeout, idempotency_key) + [("Prefer", "respond-async")]
        _, reply_headers, body = self.request("POST", "/agent/v1/invoke", env, headers=headers, timeout=timeout)
        body = body if isinstance(body, dict) else {}
        task_id = reply_headers.get("x-nexus-task-id") or body.get("task_id")
        token = reply_headers.get("x-nexus-task-token") or body.get("task_token") or body.get("token")
        if not task_id or not token:
            raise ProtocolError("the router did not return a task id and task token for an async call")
        return Task(self, str(task_id), str(token))

    def stream(
        self,
        capability: str,
        payload: Any,
        *,
        version: int = 1,
        tenant: Optional[str] = None,
        timeout: Optional[float] = None,
        target_agent: Optional[str] = None,
        constraints: Optional[Mapping[str, Any]] = None,
        task_id: Optional[str] = None,
        last_event_id: int = 0,
        max_reconnects: int = 5,
        idle_timeout: Optional[float] = 300.0,
    ) -> "Stream":
        """Invokes a streaming capability; iterate the result for
        ``StreamEvent``s. A dropped connection is resumed with the same
        ``task_id`` and ``Last-Event-ID``; no event is yielded twice. Pass
        ``task_id`` and ``last_event_id`` to resume a stream started
        elsewhere. An ``error`` event raises ``HandlerError``."""

        if not isinstance(last_event_id, int) or last_event_id < 0:
            raise ValueError("last_event_id must be a non-negative integer")
        env = self.envelope(
            capability,
            payload,
            version=version,
            tenant=tenant,
            target_agent=target_agent,
            constraints=constraints,
            task_id=task_id,
        )
        native = _native.EventStream(
            self.native,
            _dumps(env),
            start_after=last_event_id,
            max_reconnects=max_reconnects,
            timeout=float(timeout or self.timeout),
            read_timeout=idle_timeout,
        )
        return Stream(native, env["task_id"])

    def route(self, capability: str, *, version: int = 1, tenant: Optional[str] = None) -> Any:
        """Asks the router which route it would pick (no invocation)."""

        env = self.envelope(capability, {}, version=version, tenant=tenant)
        return self.request("POST", "/agent/v1/route", env)[2]


class Stream:
    """Iterator of ``StreamEvent`` over a resumable stream."""

    def __init__(self, native: "_native.EventStream", task_id: str) -> None:
        self._native = native
        self.task_id = task_id

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        try:
            item = next(self._native)
        except _native.CallError as exc:
            raise from_native(exc) from None
        except _native.StreamError as exc:
            raise StreamError(str(exc)) from None
        ev = StreamEvent(*item)
        if ev.event == "error":
            try:
                err = json.loads(ev.data)
                code, message = str(err.get("code") or "handler_failed"), str(err.get("message") or "")
            except (ValueError, AttributeError):
                code, message = "handler_failed", ev.data
            raise HandlerError(message, code=code)
        return ev

    @property
    def cursor(self) -> int:
        """Id of the last event yielded (0 before the first)."""
        return self._native.cursor

    @property
    def reconnects(self) -> int:
        """How many times the stream was resumed."""
        return self._native.reconnects


_TERMINAL = {"completed", "failed", "cancelled", "canceled"}


class Task:
    """Handle of an async invocation: ``status()``, ``result(timeout)``,
    ``cancel()``. The task token authorises the handle and never appears
    in ``repr``.

    ``result()`` collects the outcome with ``GET …/result`` once the task
    has finished, which releases the task on the router at once (its table
    slot and its bytes in the router's memory budget), and keeps the
    outcome on this handle: later ``result()`` calls answer from it
    without asking the router again."""

    def __init__(self, client: Client, task_id: str, token: str) -> None:
        self.client = client
        self.task_id = task_id
        self._token = token
        # The finished task's status document as collected by `result()`.
        self._outcome: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        return f"Task({self.task_id!r})"

    def _target(self, suffix: str = "") -> str:
        return f"/agent/v1/tasks/{quote(self.task_id, safe='')}{suffix}"

    def _headers(self) -> List[Tuple[str, str]]:
        return [("X-Nexus-Task-Token", self._token)]

    def status(self) -> Dict[str, Any]:
        """The task's status object (``status`` is ``running``,
        ``completed``, ``failed`` or ``cancelled``; ``result`` or ``error``
        when finished). Once the result was collected (``result()``), the
        router answers it with ``result_released: true`` and without the
        result; this handle's ``result()`` still returns it."""
        _, _, body = self.client.request("GET", self._target(), headers=self._headers())
        if not isinstance(body, dict):
            raise ProtocolError("task status is not a JSON object")
        return body

    def events(self, after: int = 0) -> List[Dict[str, Any]]:
        """Events the task emitted after ``after`` (streaming capabilities)."""
        _, _, body = self.client.request("GET", self._target(f"/events?after={int(after)}"), headers=self._headers())
        return list((body or {}).get("events") or [])

    def cancel(self) -> Dict[str, Any]:
        """Asks the task to stop; returns its status after the request."""
        _, _, body = self.client.request("DELETE", self._target(), headers=self._headers())
        return body if isinstance(body, dict) else {}

    def result(self, timeout: float = 300.0) -> Any:
        """Waits until the task finishes and returns its result; raises
        ``TaskFailedError`` / ``TaskCancelledError`` or
        ``DeadlineExceededError`` after ``timeout`` seconds, and
        ``TaskResultReleasedError`` when the outcome was already collected
        by another handle (the router released it)."""
        if self._outcome is not None:
            return self._settled(self._outcome)
        deadline = time.monotonic() + max(0.0, float(timeout))
        delay = 0.02
        while True:
            st = self.status()
            if str(st.get("status") or "") in _TERMINAL:
                self._outcome = self._collect(st)
                return self._settled(self._outcome)
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlineExceededError(f"task {self.task_id} did not finish within {timeout} s")
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.5)

    def _released(self) -> TaskResultReleasedError:
        return TaskResultReleasedError(
            f"task {self.task_id}'s outcome was already collected through another handle; "
            "the router released it and no longer holds the result",
            status=410,
        )

    def _collect(self, st: Dict[str, Any]) -> Dict[str, Any]:
        """The finished task's outcome, fetched with ``GET …/result`` (which
        releases the task on the router). A router without that release
        (an unexpected answer) leaves the outcome in ``st``, the status
        that said the task finished."""
        if st.get("result_released") is True:
            raise self._released()
        try:
            _, _, body = self.client.request("GET", self._target("/result"), headers=self._headers())
        except TaskResultReleasedError:
            raise self._released() from None
        except AgentdError:
            return st
        if isinstance(body, dict) and str(body.get("status") or "") in _TERMINAL:
            return body
        return st

    def _settled(self, doc: Dict[str, Any]) -> Any:
        """The result of a finished task's document, or its failure raised."""
        state = str(doc.get("status") or "")
        if state == "completed":
            return doc.get("result")
        if state == "failed":
            err = doc.get("error") if isinstance(doc.get("error"), dict) else {}
            raise TaskFailedError(str(err.get("message") or "task failed"), code=str(err.get("code") or "task_failed"))
        raise TaskCancelledError(f"task {self.task_id} was cancelled")


__all__ = ["Client", "Stream", "StreamEvent", "Task", "AgentdError", "error_for"]

"""``Agent``: declare capabilities, serve them, keep their routes leased.

::

    agent = Agent(router="auto", tenant="lab", agent_id="echo")

    @agent.capability("demo.echo", version=1, idempotent=True)
    def echo(payload):
        return {"echo": payload}

    agent.run()   # serves, registers, renews; withdraws on SIGINT/SIGTERM

The handler endpoint is an HTTP server in the native module; the router
POSTs invocation envelopes to it. Lease renewal runs on a native thread
that never needs the GIL, so a busy handler cannot let a lease lapse.
"""

from __future__ import annotations

import asyncio
import atexit
import hmac
import inspect
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from . import _native
from .client import Client, Stream, Task, _check_id, _dumps
from .errors import AgentdError, HandlerError, from_native

Reply = Tuple[int, List[Tuple[str, str]], bytes]
_JSON = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _error(status: int, code: str, message: str) -> Reply:
    return status, list(_JSON), _dumps({"error": {"code": code, "message": message}})


@dataclass(frozen=True)
class Event:
    """A named stream event: ``yield Event({"delta": "x"}, event="token")``.
    ``data`` that is not a ``str`` is sent as JSON."""

    data: Any
    event: Optional[str] = None


class Context:
    """What a handler may want besides the payload: the envelope, the task
    id and a cancellation flag. Declare a second parameter to receive it::

        @agent.capability("demo.slow")
        def slow(payload, ctx):
            while not ctx.cancelled:
                ...
    """

    def __init__(self, envelope: Mapping[str, Any], headers: Mapping[str, str]) -> None:
        self.envelope = envelope
        self.headers = headers
        self._cancel = threading.Event()
        self._received = time.monotonic()

    @property
    def deadline(self) -> Optional[float]:
        """Seconds left of the caller's budget (``X-Agentd-Deadline-Ms`` as
        sent by the router, minus the time since it arrived), or None."""
        raw = self.headers.get("x-agentd-deadline-ms")
        try:
            budget = int(raw) / 1000.0 if raw is not None else None
        except ValueError:
            return None
        if budget is None:
            return None
        return max(0.0, budget - (time.monotonic() - self._received))

    @property
    def task_id(self) -> str:
        return str(self.envelope.get("task_id") or "")

    @property
    def capability(self) -> str:
        return str(self.envelope.get("intent") or "")

    @property
    def version(self) -> int:
        return int(self.envelope.get("intent_version") or 1)

    @property
    def tenant(self) -> str:
        return str(self.envelope.get("tenant") or "")

    @property
    def source_agent(self) -> str:
        return str(self.envelope.get("source_agent") or "")

    @property
    def route_id(self) -> Optional[str]:
        return self.headers.get("x-agentd-route-id") or self.headers.get("x-nexus-route-id")

    @property
    def cancelled(self) -> bool:
        """True once the caller cancelled (async cancel or stream disconnect)."""
        return self._cancel.is_set()

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Sleeps until cancelled or ``timeout``; returns ``cancelled``."""
        return self._cancel.wait(timeout)

    def cancel(self) -> None:
        self._cancel.set()


@dataclass
class Capability:
    """A declared capability and its registration attributes."""

    name: str
    version: int
    handler: Callable[..., Any]
    streaming: bool
    wants_context: bool
    idempotent: bool = False
    schema: Optional[Mapping[str, Any]] = None
    description: Optional[str] = None
    effect: Optional[str] = None
    region: str = "local"
    lease_seconds: int = 30
    cost_microunits: int = 0
    latency_ms: int = 0
    trust: int = 50
    load_permille: int = 0
    #: Ask the router for a public IPv6 /128 of this agent's own, reachable
    #: over TLS from outside the mesh (docs/ipv6.md). The registration
    #: succeeds whether or not one is granted; ``AgentHandle.leases()`` says.
    public_ipv6: bool = False
    extra: Dict[str, Any] = field(default_factory=dict)

    def registration(self, *, origin: str, endpoint: str, tenant: str) -> Dict[str, Any]:
        """The registration body (Nexus router protocol fields, plus the
        optional contract of DESIGN §4). ``public_ipv6: true`` only when
        asked for: a router that does not know the field lists it as
        ignored, and an agent that did not ask should not make it look."""
        body: Dict[str, Any] = {
            "intent": self.name,
            "origin": origin,
            "endpoint": endpoint,
            "tenant": tenant,
            "version": self.version,
            "region": self.region,
            "cost_microunits": self.cost_microunits,
            "latency_ms": self.latency_ms,
            "trust": self.trust,
            "load_permille": self.load_permille,
            "hop_count": 0,
            "lease_seconds": self.lease_seconds,
        }
        contract: Dict[str, Any] = {"idempotent": bool(self.idempotent)}
        if self.effect is not None:
            contract["effect"] = self.effect
        if self.schema is not None:
            contract["input_schema"] = dict(self.schema)
        if self.description:
            contract["description"] = self.description
        body["contract"] = contract
        if self.public_ipv6:
            body["public_ipv6"] = True
        body.update(self.extra)
        return body


def _wants_context(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _call(cap: Capability, payload: Any, ctx: Context) -> Any:
    args = (payload, ctx) if cap.wants_context else (payload,)
    result = cap.handler(*args)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    return result


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _event_tuple(item: Any) -> Tuple[str, Optional[str], str]:
    if isinstance(item, Event):
        name, data = item.event, item.data
    else:
        name, data = None, item
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    if not isinstance(data, str):
        data = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return ("event", name, data)


def _failure(cap: Capability, exc: BaseException) -> Tuple[int, str, str]:
    """(status, code, message) for an exception raised by a handler."""
    if isinstance(exc, AgentdError):
        status = exc.status if 400 <= exc.status <= 599 else 500
        return status, exc.code, exc.message
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    return 500, "handler_failed", f"handler of {cap.name} v{cap.version} raised {type(exc).__name__}"


# ===== agent-side async tasks =====

@dataclass
class _Task:
    task_id: str
    token: str
    cap: Capability
    ctx: Context
    status: str = "running"
    result: Any = None
    error: Optional[Dict[str, str]] = None
    events: List[Dict[str, Any]] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    finished_at: Optional[float] = None

    def public(self) -> Dict[str, Any]:
        value: Dict[str, Any] = {
            "task_id": self.task_id,
            "status": self.status,
            "created_at": self.created,
            "last_seq": len(self.events),
        }
        if self.status == "completed":
            value["result"] = self.result
        elif self.status == "failed":
            value["error"] = self.error
        return value


class _TaskTable:
    """Bounded table of async tasks run on this agent. When full, new async
    work is refused (503); accepted tasks are kept until ``retention``
    seconds after they finish, never evicted earlier."""

    def __init__(self, capacity: int = 256, retention: float = 300.0) -> None:
        self.capacity = capacity
        self.retention = retention
        self._tasks: Dict[str, _Task] = {}
        self._lock = threading.Lock()

    def _purge(self, now: float) -> None:
        for tid in [t.task_id for t in self._tasks.values() if t.finished_at and now - t.finished_at > self.retention]:
            del self._tasks[tid]

    def start(self, cap: Capability, env: Mapping[str, Any], ctx: Context) -> Optional[_Task]:
        with self._lock:
            self._purge(time.time())
            if len(self._tasks) >= self.capacity:
                return None
            task_id = str(env.get("task_id") or secrets.token_hex(16))
            if task_id in self._tasks:
                task_id = secrets.token_hex(16)
            task = _Task(task_id, secrets.token_urlsafe(24), cap, ctx)
            self._tasks[task_id] = task
        threading.Thread(target=self._run, args=(task, env), name=f"agentd-task-{task_id[:8]}", daemon=True).start()
        return task

    def _finish(self, task: _Task, status: str, result: Any = None, error: Optional[Dict[str, str]] = None) -> None:
        with self._lock:
            if task.status == "running":
                task.status, task.result, task.error = status, result, error
            task.finished_at = time.time()

    def _run(self, task: _Task, env: Mapping[str, Any]) -> None:
        try:
            if task.cap.streaming:
                args = (env.get("payload"), task.ctx) if task.cap.wants_context else (env.get("payload"),)
                gen = task.cap.handler(*args)
                try:
                    for item in gen:
                        if task.ctx.cancelled:
                            break
                        _, name, data = _event_tuple(item)
                        with self._lock:
                            task.events.append({"seq": len(task.events) + 1, "event": name or "message", "data": data})
                finally:
                    close = getattr(gen, "close", None)
                    if callable(close):
                        close()
                result: Any = {"events": len(task.events)}
            else:
                result = _call(task.cap, env.get("payload"), task.ctx)
                json.dumps(result)
            self._finish(task, "completed", result=result)
        except BaseException as exc:  # reported through status, never lost
            _, code, message = _failure(task.cap, exc)
            self._finish(task, "failed", error={"code": code, "message": message})

    def control(self, method: str, path: str, query: str, headers: Mapping[str, str]) -> Reply:
        parts = path[len("/agent/v1/tasks/"):].split("/")
        task_id, suffix = parts[0], parts[1:]
        with self._lock:
            self._purge(time.time())
            task = self._tasks.get(task_id)
        token = headers.get("x-nexus-task-token") or headers.get("x-agentd-task-token") or ""
        if task is None or not hmac.compare_digest(token.encode(), task.token.encode()):
            # The same answer for unknown ids and wrong tokens: no probing.
            return _error(404, "not_found", "no such task (or wrong task token)")
        if method == "GET" and not suffix:
            with self._lock:
                return 200, list(_JSON), _dumps(task.public())
        if method == "GET" and suffix == ["events"]:
            after = 0
            for kv in query.split("&"):
                if kv.startswith("after="):
                    try:
                        after = int(kv[6:])
                    except ValueError:
                        return _error(400, "invalid_cursor", "after must be an integer")
            if after < 0:
                return _error(400, "invalid_cursor", "after must be non-negative")
            with self._lock:
                events = [e for e in task.events if e["seq"] > after]
                body = {"task_id": task.task_id, "status": task.status, "events": events}
            return 200, list(_JSON), _dumps(body)
        if method == "DELETE" and not suffix:
            task.ctx.cancel()
            self._finish(task, "cancelled")
            with self._lock:
                return 200, list(_JSON), _dumps(task.public())
        return _error(405 if not suffix else 404, "not_found", f"no task operation {method} {path}")


# ===== Agent =====

_LIVE: "weakref.WeakSet[AgentHandle]" = weakref.WeakSet()


@atexit.register
def _close_live_handles() -> None:
    # Withdraw routes and stop native threads before the interpreter goes
    # away, so no native thread calls into a finalising interpreter.
    for handle in list(_LIVE):
        try:
            handle.close()
        except Exception:  # best effort at exit
            pass


class AgentHandle:
    """A started agent: ``close()`` (or leaving a ``with`` block) withdraws
    the routes and stops the handler endpoint. Handles still open at
    interpreter exit are closed then."""

    def __init__(self, agent: "Agent", server: "_native.Server", keeper: Optional["_native.LeaseKeeper"]) -> None:
        self.agent = agent
        self.server = server
        self.keeper = keeper
        self._closed = threading.Event()
        _LIVE.add(self)

    @property
    def port(self) -> int:
        """Port of the handler endpoint."""
        return self.server.port

    @property
    def endpoint(self) -> str:
        """The endpoint URL registered with the router."""
        return self.agent._endpoint(self.server.port)

    def leases(self) -> List[Dict[str, Any]]:
        """Per capability: route_id, generation, lease_seconds, renewals,
        reregistrations, failures, last_error, and the router's answer to
        ``public_ipv6=True`` from the last (re-)registration, while the
        route is leased:

        - ``public_ipv6``: the agent's own address (str) or None;
        - ``public_url``: ``https://[address]:port`` or None;
        - ``public_endpoint``: dict of ``address``, ``port``, ``scheme``,
          ``tls_server_name``, ``ca_bundle_id`` (what ``DirectAgent.
          from_lease`` needs) or None;
        - ``public_ipv6_status``: the router's report, dict of ``address``,
          ``served`` and, when not served, ``reason``; or None when the
          router said nothing (not asked, or an older router).

        An endpoint the router described inconsistently is left out (None)
        and ``last_error`` says why."""
        return self.keeper.status() if self.keeper is not None else []

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until closed (True) or ``timeout`` (False)."""
        return self._closed.wait(timeout)

    def close(self) -> List[str]:
        """Withdraws the routes, then stops serving. Returns withdrawal
        errors (those routes then expire with their leases)."""
        if self._closed.is_set():
            return []
        errors = self.keeper.close() if self.keeper is not None else []
        self.server.close()
        self._closed.set()
        self.agent._handle = None
        _LIVE.discard(self)
        return errors

    def __enter__(self) -> "AgentHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Agent:
    """An agent that serves capabilities and calls others.

    ``router``: ``"auto"`` (``AGENTD_ROUTER_URL``, then a router that
    announces ``_agentd._tcp`` over mDNS, then the IPv4 default gateway on
    :7446; see the README) or ``http://host:port``. ``tenant`` and ``agent_id``
    form the origin ``agent://tenant/agent_id``. ``token`` (or
    ``AGENTD_TOKEN``) is the bearer token; without one the SDK uses the
    router's trusted-LAN bootstrap when offered.

    Handler endpoint: listens on ``host`` (default: all addresses) and
    ``port`` (default: any free port); registers ``http://<advertise>:
    <port><path>``. ``advertise`` defaults to the address this host uses to
    reach the router. Loopback is refused (a router elsewhere cannot reach
    it) unless ``allow_loopback=True`` — for a router on this host or tests.
    """

    def __init__(
        self,
        router: str = "auto",
        tenant: str = "default",
        agent_id: Optional[str] = None,
        *,
        token: Optional[str] = None,
        host: Optional[str] = None,
        port: int = 0,
        advertise: Optional[str] = None,
        allow_loopback: bool = False,
        path: str = "/invoke",
        lease_seconds: int = 30,
        region: str = "local",
        timeout: float = 30.0,
        max_body: int = 1024 * 1024,
        max_connections: int = 64,
        max_tasks: int = 256,
    ) -> None:
        agent_id = agent_id or _default_agent_id()
        self.client = Client(router, tenant, agent_id, token=token, timeout=timeout)
        self.tenant = self.client.tenant
        self.agent_id = self.client.agent_id
        self.origin = self.client.origin
        if not 5 <= int(lease_seconds) <= 3600:
            raise ValueError("lease_seconds must be between 5 and 3600")
        if not path.startswith("/") or path.startswith("/agent/v1/tasks"):
            raise ValueError("path must be an absolute path outside /agent/v1/tasks")
        self.host = host
        self.port = int(port)
        self.advertise = advertise
        self.allow_loopback = bool(allow_loopback)
        self.path = path
        self.lease_seconds = int(lease_seconds)
        self.region = region
        self.max_body = int(max_body)
        self.max_connections = int(max_connections)
        self._caps: Dict[Tuple[str, int], Capability] = {}
        self._tasks = _TaskTable(capacity=max_tasks)
        self._handle: Optional[AgentHandle] = None
        self._advertise_host: Optional[str] = None

    # ----- declaring -----

    def capability(
        self,
        name: str,
        version: int = 1,
        *,
        idempotent: bool = False,
        schema: Optional[Mapping[str, Any]] = None,
        description: Optional[str] = None,
        effect: Optional[str] = None,
        region: Optional[str] = None,
        lease_seconds: Optional[int] = None,
        cost_microunits: int = 0,
        latency_ms: int = 0,
        trust: int = 50,
        load_permille: int = 0,
        public_ipv6: bool = False,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declares a capability served by the decorated function.

        The handler gets the payload (and, if it declares a second
        parameter, a ``Context``) and returns a JSON-serialisable result.
        A generator function is a streaming capability: each yielded value
        (or ``Event``) becomes one SSE event. ``async def`` handlers work
        too. Raise ``HandlerError(message, code=..., status=...)`` for a
        typed failure.

        ``public_ipv6=True`` asks the router for a public IPv6 address of
        this capability's own (see ``AgentHandle.leases()`` and
        ``DirectAgent``)."""

        if not isinstance(name, str) or not name or len(name) > 127 or not set(name) <= _NAME_CHARS:
            raise ValueError("capability name must be 1-127 characters of [A-Za-z0-9._-]")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ValueError("version must be an integer >= 1")
        if effect is not None and effect not in ("read", "write", "external"):
            raise ValueError("effect must be 'read', 'write' or 'external'")
        if schema is not None and not isinstance(schema, Mapping):
            raise ValueError("schema must be a JSON schema object")
        if not 0 <= trust <= 100 or not 0 <= load_permille <= 1000 or cost_microunits < 0 or latency_ms < 0:
            raise ValueError("trust must be 0-100, load_permille 0-1000, cost and latency >= 0")
        if not isinstance(public_ipv6, bool):
            raise ValueError("public_ipv6 must be True or False")

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            if self._handle is not None:
                raise AgentdError("declare capabilities before start()")
            key = (name, version)
            if key in self._caps:
                raise ValueError(f"capability {name} v{version} is already declared")
            self._caps[key] = Capability(
                name=name,
                version=version,
                handler=fn,
                streaming=inspect.isgeneratorfunction(fn),
                wants_context=_wants_context(fn),
                idempotent=idempotent,
                schema=schema,
                description=description or (inspect.getdoc(fn) or None),
                effect=effect,
                region=region or self.region,
                lease_seconds=int(lease_seconds or self.lease_seconds),
                cost_microunits=cost_microunits,
                latency_ms=latency_ms,
                trust=trust,
                load_permille=load_permille,
                public_ipv6=public_ipv6,
            )
            return fn

        return decorate

    @property
    def capabilities(self) -> List[Capability]:
        return list(self._caps.values())

    # ----- serving (called by the native server threads) -----

    def _on_invoke(self, mode: str, body: bytes, headers: Mapping[str, str], hangup: Any = None) -> Any:
        env = json.loads(body)
        key = (env["intent"], env["intent_version"])
        cap = self._caps.get(key)
        if cap is None:
            return _error(404, "intent_not_served", f"{key[0]} v{key[1]} is not served by {self.origin}")
        ctx = Context(env, headers)
        if hangup is not None and mode != "async":
            # The router cancels a call by closing the connection.
            hangup.on_cancel(ctx.cancel)
        if mode == "async":
            task = self._tasks.start(cap, env, ctx)
            if task is None:
                return _error(503, "task_table_full", "this agent's task table is full")
            reply_headers = list(_JSON) + [
                ("X-Nexus-Task-Id", task.task_id),
                ("X-Nexus-Task-Token", task.token),
                ("Location", f"/agent/v1/tasks/{task.task_id}"),
            ]
            return 202, reply_headers, _dumps({"task_id": task.task_id, "status": task.status})
        if mode == "stream":
            if not cap.streaming:
                return _error(406, "stream_not_supported", f"{cap.name} v{cap.version} is not a streaming capability")
            return self._stream(cap, env, ctx)
        if cap.streaming:
            return _error(406, "stream_required", f"{cap.name} v{cap.version} streams; call it with stream()")
        try:
            result = _call(cap, env.get("payload"), ctx)
        except BaseException as exc:
            status, code, message = _failure(cap, exc)
            return _error(status, code, message)
        try:
            return 200, list(_JSON), _dumps(result)
        except (TypeError, ValueError) as exc:
            return _error(500, "invalid_response", f"handler result is not JSON: {exc}")

    def _stream(self, cap: Capability, env: Mapping[str, Any], ctx: Context) -> Iterator[Tuple[str, Optional[str], str]]:
        args = (env.get("payload"), ctx) if cap.wants_context else (env.get("payload"),)
        gen = cap.handler(*args)
        try:
            for item in gen:
                try:
                    yield _event_tuple(item)
                except (TypeError, ValueError) as exc:
                    yield ("error", "invalid_event", f"stream item is not JSON: {exc}")
                    return
        except GeneratorExit:
            ctx.cancel()  # the caller went away
            raise
        except BaseException as exc:
            _, code, message = _failure(cap, exc)
            yield ("error", code, message)
        finally:
            gen.close()

    def _on_task(self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        return self._tasks.control(method, path, query, headers)

    # ----- lifecycle -----

    def _endpoint(self, port: int) -> str:
        host = self._advertise_host or "0.0.0.0"
        return _native.endpoint_url(host, port, self.path)

    def _resolve_advertise(self) -> str:
        candidate = self.advertise or os.environ.get("AGENTD_AGENT_ADDRESS") or None
        if candidate is None and self.host not in (None, "", "0.0.0.0", "::"):
            candidate = self.host
        if candidate is None:
            candidate = _route_source_address(self.client.router_url)
        if candidate is None:
            raise AgentdError(
                "cannot tell which address the router can reach this agent on; pass advertise=<LAN address>",
                code="no_advertise_address",
            )
        return _native.check_advertise(candidate, self.allow_loopback)

    def start(self, *, register: bool = True) -> AgentHandle:
        """Starts the handler endpoint and registers every capability
        (raising the router's error if it refuses one), then returns a
        handle; leases are renewed in the background until ``close()``.
        ``register=False`` only serves (tests; statically routed agents)."""

        if self._handle is not None:
            raise AgentdError("agent is already started")
        if not self._caps:
            raise AgentdError("declare at least one capability before start()")
        listen = self.host or "0.0.0.0"
        if register:
            self._advertise_host = self._resolve_advertise()
        server = _native.Server(
            listen, self.port, self.path, self._on_invoke, self._on_task,
            max_body=self.max_body, max_connections=self.max_connections,
        )
        keeper = None
        if register:
            endpoint = self._endpoint(server.port)
            regs = [
                (_dumps(c.registration(origin=self.origin, endpoint=endpoint, tenant=self.tenant)), c.lease_seconds)
                for c in self._caps.values()
            ]
            try:
                keeper = _native.LeaseKeeper(self.client.native, regs, timeout=self.client.timeout)
            except _native.CallError as exc:
                server.close()
                raise from_native(exc) from None
            except BaseException:
                server.close()
                raise
        self._handle = AgentHandle(self, server, keeper)
        return self._handle

    def run(self) -> None:
        """Starts, then blocks until SIGINT or SIGTERM, then withdraws the
        routes and stops. (Call from the main thread.)"""

        handle = self.start()
        stop = threading.Event()
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
        try:
            print(f"agentd agent {self.origin} serving {handle.endpoint}", file=sys.stderr)
            while not stop.wait(0.5):
                pass
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
            handle.close()

    # ----- calling others (as this agent) -----

    def invoke(self, capability: str, payload: Any, **kw: Any) -> Any:
        """See ``Client.invoke``."""
        return self.client.invoke(capability, payload, **kw)

    def invoke_async(self, capability: str, payload: Any, **kw: Any) -> Task:
        """See ``Client.invoke_async``."""
        return self.client.invoke_async(capability, payload, **kw)

    def stream(self, capability: str, payload: Any, **kw: Any) -> Stream:
        """See ``Client.stream``."""
        return self.client.stream(capability, payload, **kw)


def _default_agent_id() -> str:
    name = "".join(c if c.isalnum() or c in "._~-" else "-" for c in socket.gethostname().lower()).strip("-._~")
    return name[:95] or "python-agent"


def _route_source_address(router_url: str) -> Optional[str]:
    """The local address the kernel would use to reach the router."""
    from urllib.parse import urlsplit

    parts = urlsplit(router_url)
    if not parts.hostname:
        return None
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 80, 0, socket.SOCK_DGRAM)
    except OSError:
        return None
    for family, kind, proto, _, addr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.connect(addr)
                return s.getsockname()[0].split("%", 1)[0]
        except OSError:
            continue
    return None


__all__ = ["Agent", "AgentHandle", "Capability", "Context", "Event", "HandlerError"]

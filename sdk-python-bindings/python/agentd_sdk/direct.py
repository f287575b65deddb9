"""``DirectAgent``: call one agent at its own public IPv6 address.

An agent registered with ``public_ipv6=True`` may be granted a /128 of its
own (docs/ipv6.md); its router terminates TLS there and hands every call
to exactly that agent, never another one. ``AgentHandle.leases()`` reports
the endpoint; a caller outside the mesh, which cannot reach the LAN SDK
API, uses it like this::

    lease = handle.leases()[0]          # on the agent's side, passed along
    agent = DirectAgent.from_lease(lease, ca_file="agentd-ca.pem", token=tok)
    agent.invoke("demo.echo", {"text": "hi"}, tenant="lab",
                 source_agent="agent://lab/caller")

This is plain Python (``ssl`` + ``http.client``): the native module speaks
only the plain-HTTP LAN API, and one TLS call does not need a GIL-free
thread. Errors are the SDK's own classes, mapped from the router's
``{"error": {"code", "message"}}`` bodies exactly as ``Client`` maps them,
so ``NoRouteError`` means the same thing on both paths.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import socket
import ssl
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from .client import _check_id, _dumps, _envelope, _loads
from .errors import (
    AgentdError,
    DeadlineExceededError,
    ProtocolError,
    RouterUnavailableError,
    error_for,
)

PathLike = Union[str, "os.PathLike[str]"]

#: Largest reply body read; the same bound as the native router client.
#: A reply that claims or sends more is refused rather than buffered, so a
#: misbehaving peer cannot make the caller allocate without limit.
MAX_REPLY_BODY = 16 * 1024 * 1024

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
# The router caps a call's budget at 300 s (docs/sdk-api.md).
_MAX_TIMEOUT_MS = 300_000
# Bounds of the fields of an error body, as the native client clips them.
_MAX_CODE = 256
_MAX_MESSAGE = 1024


def _public_address(address: str) -> str:
    """The canonical text of a literal IPv6 address a caller can reach
    without a zone, or ValueError.

    Why so strict: the endpoint is a single /128, so a host name (resolved
    by whoever controls DNS), an IPv4 address or a zone (``%eth0``, which
    only means something on one host) cannot be what the router offered.
    Link-local, multicast, unspecified and IPv4-mapped addresses are
    refused for the same reason."""

    if not isinstance(address, str) or not address:
        raise ValueError("address must be an IPv6 address literal")
    text = address[1:-1] if address.startswith("[") and address.endswith("]") else address
    if "%" in text:
        raise ValueError(f"address {address!r} is scoped; a public IPv6 address has no zone")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"address {address!r} is not an IPv6 address literal") from None
    if not isinstance(ip, ipaddress.IPv6Address):
        raise ValueError(f"address {address!r} is not an IPv6 address")
    if ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.ipv4_mapped is not None:
        raise ValueError(f"address {address!r} is not a unicast address reachable without a zone")
    return str(ip)


def _server_name(name: str) -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 253
        or not set(name) <= _NAME_CHARS
    ):
        raise ValueError("server_name must be a DNS name (1-253 characters of [A-Za-z0-9._-])")
    return name


def _error_fields(body: bytes) -> Tuple[str, str, Optional[str], Optional[str]]:
    """(code, message, outcome, reason) of an error body: ``{"error":
    {...}}`` (the router) or the flat ``{"code", "message"}``; empty code
    when there is none (the status then decides the class)."""

    try:
        doc = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        doc = None
    if not isinstance(doc, dict):
        return "", "", None, None
    inner = doc.get("error")
    src: Mapping[str, Any] = inner if isinstance(inner, dict) else doc

    def text(key: str, limit: int) -> Optional[str]:
        value = src.get(key)
        return value[:limit] if isinstance(value, str) else None

    nested = isinstance(inner, dict)
    return (
        text("code", _MAX_CODE) or "",
        text("message", _MAX_MESSAGE) or "",
        text("outcome", _MAX_CODE) if nested else None,
        text("reason", _MAX_CODE) if nested else None,
    )


class _Connection(http.client.HTTPConnection):
    """HTTPS to a literal address with a separate TLS server name.

    ``http.client.HTTPSConnection`` verifies the certificate against the
    host it connects to; here the host is the agent's address and the
    certificate names the router (``tls_server_name``). So: connect the
    TCP socket to the address (no name resolution), then wrap it with
    ``server_hostname=server_name`` — that name is sent as SNI and is what
    the certificate must match. ``http.client`` never consults proxy
    environment variables, so the call cannot be diverted through one."""

    default_port = 443

    def __init__(
        self, address: str, port: int, server_name: str, context: ssl.SSLContext, timeout: float
    ) -> None:
        super().__init__(address, port, timeout=timeout)
        self._server_name = server_name
        self._context = context

    def connect(self) -> None:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect((self.host, self.port, 0, 0))
            self.sock = self._context.wrap_socket(sock, server_hostname=self._server_name)
        except BaseException:
            sock.close()
            raise


class DirectAgent:
    """A caller of one agent at its public IPv6 endpoint, over TLS.

    ``address``: the agent's IPv6 literal (``public_ipv6``); scoped,
    link-local and IPv4 addresses raise ValueError. ``port``: the
    endpoint's port. ``server_name``: the router's TLS name
    (``tls_server_name``), sent as SNI and checked against the certificate.
    ``ca_file``: PEM file of the CA that issued it (the one named by the
    endpoint's ``ca_bundle_id``); it is the only CA trusted, not the
    system store, because the router's certificate comes from the agentd
    CA. ``cert_file``/``key_file``: a client certificate, for routers that
    require one. ``token``: sent as ``Authorization: Bearer``. ``timeout``:
    seconds for connecting, the handshake and — without ``timeout_ms`` —
    the reply.

    TLS 1.2 is the minimum. Each call opens its own connection, so one
    ``DirectAgent`` may be shared between threads.
    """

    def __init__(
        self,
        address: str,
        *,
        port: int = 7443,
        server_name: str,
        ca_file: PathLike,
        token: Optional[str] = None,
        cert_file: Optional[PathLike] = None,
        key_file: Optional[PathLike] = None,
        timeout: float = 10.0,
    ) -> None:
        self.address = _public_address(address)
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise ValueError("port must be an integer in 1..65535")
        self.port = port
        self.server_name = _server_name(server_name)
        if token is not None and (not token or any(not (0x20 < ord(c) < 0x7F) for c in token)):
            raise ValueError("token must be visible ASCII characters (it travels in a header)")
        self._token = token
        self.timeout = float(timeout)
        if not 0 < self.timeout <= 86_400:
            raise ValueError("timeout must be in (0, 86400] seconds")
        if key_file is not None and cert_file is None:
            raise ValueError("key_file needs cert_file")
        #: The endpoint's ``ca_bundle_id`` when made ``from_lease`` (which
        #: CA ``ca_file`` must hold); informational.
        self.ca_bundle_id: Optional[str] = None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies certificate and host name
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_verify_locations(cafile=os.fspath(ca_file))
        if cert_file is not None:
            context.load_cert_chain(
                os.fspath(cert_file), None if key_file is None else os.fspath(key_file)
            )
        self._context = context

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any], **credentials: Any) -> "DirectAgent":
        """A ``DirectAgent`` for the ``public_endpoint`` of one entry of
        ``AgentHandle.leases()``. ``credentials``: ``ca_file`` (required),
        ``token``, ``cert_file``, ``key_file``, ``timeout``.

        Raises ValueError when the lease has no endpoint (the message
        carries the router's reason from ``public_ipv6_status``) or one
        that is not https."""

        endpoint = lease.get("public_endpoint")
        if not isinstance(endpoint, Mapping):
            status = lease.get("public_ipv6_status")
            reason = status.get("reason") if isinstance(status, Mapping) else None
            raise ValueError(
                "the lease has no public endpoint"
                + (f": {reason}" if reason else " (the agent did not ask, or the router did not answer)")
            )
        if endpoint.get("scheme") != "https":
            raise ValueError(f"public endpoint scheme {endpoint.get('scheme')!r} is not https")
        for key in ("address", "port", "server_name"):
            if key in credentials:
                raise TypeError(f"{key} comes from the lease; do not pass it")
        agent = cls(
            endpoint["address"],
            port=endpoint["port"],
            server_name=endpoint.get("tls_server_name") or "",
            **credentials,
        )
        agent.ca_bundle_id = endpoint.get("ca_bundle_id")
        return agent

    @property
    def url(self) -> str:
        """``https://[address]:port``, as ``public_url`` has it."""
        return f"https://[{self.address}]:{self.port}"

    def __repr__(self) -> str:  # never the token
        return f"DirectAgent({self.url!r}, server_name={self.server_name!r})"

    def invoke(
        self,
        capability: str,
        payload: Any,
        *,
        tenant: str,
        source_agent: str,
        version: int = 1,
        timeout_ms: Optional[int] = None,
    ) -> Any:
        """Invokes ``capability`` (interface ``version``) on this agent with
        ``POST /agent/v1/invoke`` and returns its JSON result.

        ``tenant`` and ``source_agent`` (``agent://tenant/id``) go into the
        envelope; the router checks them against the token. ``timeout_ms``
        is the call's whole budget, sent as ``X-Agentd-Timeout-Ms`` (capped
        at 300 000 as the router caps it); the reply is awaited that long
        plus one second.

        Raises the SDK's exception for the router's error code
        (``NoRouteError``, ``AuthError``, …), ``RouterUnavailableError``
        when no connection or TLS session could be set up
        (``not_delivered`` is then True) or the connection broke,
        ``DeadlineExceededError`` on a timeout, ``ProtocolError`` for an
        undecodable or oversized reply."""

        if (
            not isinstance(capability, str)
            or not capability
            or len(capability) > 127
            or not set(capability) <= _NAME_CHARS
        ):
            raise ValueError("capability must be 1-127 characters of [A-Za-z0-9._-]")
        _check_id(tenant, "tenant")
        if not isinstance(source_agent, str) or not source_agent or len(source_agent) > 256:
            raise ValueError("source_agent must be an agent URI such as agent://tenant/id")
        env = _envelope(capability, payload, version=version, source_agent=source_agent, tenant=tenant)
        headers: Dict[str, str] = {
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        reply_timeout = self.timeout
        if timeout_ms is not None:
            if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 1:
                raise ValueError("timeout_ms must be a positive integer")
            budget = min(timeout_ms, _MAX_TIMEOUT_MS)
            headers["X-Agentd-Timeout-Ms"] = str(budget)
            reply_timeout = budget / 1000.0 + 1.0
        status, body = self._post("/agent/v1/invoke", _dumps(env), headers, reply_timeout)
        if 200 <= status < 300:
            return _loads(body, "reply to POST /agent/v1/invoke")
        code, message, outcome, reason = _error_fields(body)
        raise error_for(status, code, message or f"HTTP {status} from {self.url}", outcome, reason)

    def _post(
        self, target: str, body: bytes, headers: Mapping[str, str], reply_timeout: float
    ) -> Tuple[int, bytes]:
        conn = _Connection(self.address, self.port, self.server_name, self._context, self.timeout)
        try:
            try:
                conn.connect()
            except ssl.SSLError as exc:
                raise RouterUnavailableError(
                    f"TLS with {self.url} (server name {self.server_name}) failed: {exc}",
                    code="tls_failed",
                    not_delivered=True,
                ) from None
            except (socket.timeout, TimeoutError):
                raise DeadlineExceededError(
                    f"no connection to {self.url} within {self.timeout} s", not_delivered=True
                ) from None
            except OSError as exc:
                raise RouterUnavailableError(f"cannot connect to {self.url}: {exc}", not_delivered=True) from None
            try:
                assert conn.sock is not None
                conn.sock.settimeout(reply_timeout)
                conn.request("POST", target, body=body, headers=dict(headers))
                resp = conn.getresponse()
                length = resp.getheader("Content-Length")
                if length is not None and length.strip().isdigit() and int(length) > MAX_REPLY_BODY:
                    raise ProtocolError(f"reply of {int(length)} bytes exceeds {MAX_REPLY_BODY}")
                raw = resp.read(MAX_REPLY_BODY + 1)
                if len(raw) > MAX_REPLY_BODY:
                    raise ProtocolError(f"reply exceeds {MAX_REPLY_BODY} bytes")
                return resp.status, raw
            except (socket.timeout, TimeoutError):
                raise DeadlineExceededError(f"no reply from {self.url} within {reply_timeout} s") from None
            except http.client.RemoteDisconnected as exc:
                raise RouterUnavailableError(f"{self.url} closed the connection: {exc}") from None
            except http.client.HTTPException as exc:
                raise ProtocolError(f"{self.url} answered something that is not HTTP/1.1: {exc!r}") from None
            except AgentdError:
                raise
            except OSError as exc:
                raise RouterUnavailableError(f"connection to {self.url} broke: {exc}") from None
        finally:
            conn.close()


__all__ = ["DirectAgent", "MAX_REPLY_BODY"]

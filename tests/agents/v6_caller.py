"""A caller outside the mesh that reaches an agent at its own IPv6
address (issue 23); runs inside the caller's network namespace (`ip netns
exec`). Reads one JSON command per stdin line and answers each with one
JSON line holding `result`; stops when stdin closes.

Commands (every one names `addr`, `port`, and for TLS `server_name` and
`ca`, optionally `token`, `cert` and `key`):

  {"op": "raw", "path": P, "body": B, "keep": bool, "tls": bool}
      One HTTP/1.1 POST (GET when B is null) over TLS verified against
      `ca` with SNI `server_name` (plain TCP when `tls` is false). `keep`
      reuses the one kept connection (opened by the first kept command).
      → {"status", "body"} or {"error": "<exception type>: <text>"}.
  {"op": "nexilume", "intent": I, "payload": P, "tenant": T, "source_agent": S}
      nexilume's own direct caller, unchanged (`DirectIPv6Agent`).
      → {"status": 200, "body": <the agent's JSON>} or {"error", "code"}.
  {"op": "sdk", "intent": I, "payload": P, "tenant": T, "source_agent": S}
      Our SDK's direct caller (`agentd_sdk.DirectAgent`), same answers.
  {"op": "hold", "n": N}
      Opens N TCP connections and starts no TLS handshake on them (a
      host holding handshake slots); kept until "drop". → {"held": N}.
  {"op": "drop"}
      Closes the held connections. → {"dropped": N}.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import sys
from typing import Any, Dict, Optional


def tls_context(cmd: Dict[str, Any]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cmd["ca"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if cmd.get("cert"):
        ctx.load_cert_chain(cmd["cert"], cmd["key"])
    return ctx


class Conn(http.client.HTTPConnection):
    """HTTP over one TCP connection to a literal IPv6 address, TLS with
    its own server name (as nexilume's direct caller does)."""

    def __init__(self, cmd: Dict[str, Any]) -> None:
        super().__init__(cmd["addr"], cmd["port"], timeout=10)
        self.cmd = cmd

    def connect(self) -> None:
        raw = socket.create_connection((self.cmd["addr"], self.cmd["port"]), timeout=10)
        if self.cmd.get("tls", True):
            raw = tls_context(self.cmd).wrap_socket(raw, server_hostname=self.cmd["server_name"])
        self.sock = raw


kept: Optional[Conn] = None
held: list = []


def hold(cmd: Dict[str, Any]) -> Dict[str, Any]:
    for _ in range(cmd["n"]):
        held.append(socket.create_connection((cmd["addr"], cmd["port"]), timeout=10))
    return {"held": len(held)}


def drop(cmd: Dict[str, Any]) -> Dict[str, Any]:
    n = len(held)
    for s in held:
        s.close()
    held.clear()
    return {"dropped": n}


def raw(cmd: Dict[str, Any]) -> Dict[str, Any]:
    global kept
    conn = kept if cmd.get("keep") and kept is not None else Conn(cmd)
    if cmd.get("keep"):
        kept = conn
    headers = {"Content-Type": "application/json"}
    if cmd.get("token"):
        headers["Authorization"] = "Bearer " + cmd["token"]
    body = cmd.get("body")
    data = None if body is None else json.dumps(body).encode()
    conn.request("GET" if body is None else "POST", cmd["path"], body=data, headers=headers)
    r = conn.getresponse()
    text = r.read()
    try:
        doc: Any = json.loads(text)
    except ValueError:
        doc = text.decode("utf-8", "replace")
    if not cmd.get("keep"):
        conn.close()
    return {"status": r.status, "body": doc}


def nexilume(cmd: Dict[str, Any]) -> Dict[str, Any]:
    from nexus_agent import DirectIPv6Agent
    from nexus_agent.errors import NexusHttpError

    agent = DirectIPv6Agent(cmd["addr"], port=cmd["port"], server_identity=cmd["server_name"],
                            token=cmd.get("token"), ca_file=cmd["ca"], cert_file=cmd.get("cert"),
                            key_file=cmd.get("key"), timeout=10)
    try:
        body = agent.invoke(cmd["intent"], cmd["payload"], tenant=cmd["tenant"], source_agent=cmd["source_agent"])
        return {"status": 200, "body": body}
    except NexusHttpError as e:
        return {"error": str(e), "status": getattr(e, "status", None), "code": getattr(e, "code", None)}


def sdk(cmd: Dict[str, Any]) -> Dict[str, Any]:
    from agentd_sdk import AgentdError, DirectAgent

    agent = DirectAgent(cmd["addr"], port=cmd["port"], server_name=cmd["server_name"], ca_file=cmd["ca"],
                        token=cmd.get("token"), cert_file=cmd.get("cert"), key_file=cmd.get("key"))
    try:
        body = agent.invoke(cmd["intent"], cmd["payload"], tenant=cmd["tenant"], source_agent=cmd["source_agent"])
        return {"status": 200, "body": body}
    except AgentdError as e:
        return {"error": str(e), "code": getattr(e, "code", None)}


OPS = {"raw": raw, "nexilume": nexilume, "sdk": sdk, "hold": hold, "drop": drop}

print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    try:
        result = OPS[cmd["op"]](cmd)
    except Exception as e:  # noqa: BLE001 - every failure is an answer
        result = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps({"result": result}), flush=True)

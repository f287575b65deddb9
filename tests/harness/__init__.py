"""Support code for the system tests: real processes, real sockets.

- `config`  — writes the UCI file both daemons read.
- `procs`   — starts agentd / agent-gw as subprocesses, waits for readiness
  by polling, stops them by PID.
- `http`    — a small raw HTTP/1.1 client (exact bytes, duplicate keys,
  oversized bodies, SSE with early disconnect).
- `backend` — a Python handler endpoint the gateway forwards to, which
  records what it received.
- `netns`   — network namespaces with a veth pair (192.0.2.0/24) for agents
  that refuse loopback addresses (nexilume).
- `jwt`     — Ed25519 (EdDSA) tokens minted in Python.
- `mesh`    — routers in namespaces (agentd + agent-gw each), ARPX links,
  LAN handlers, gateway stats.
- `peers`   — the C–B–A chain of the peer data-plane tests.
- `peer_wire` — forwarding assertions and an h2 + mTLS client holding a
  router key (a rogue router); `arpx_wire` — the same for ARPX.
- `poll`    — bounded polling: the only way tests wait for a condition.
"""

#!/usr/bin/env python3
"""`make bench` (peer part): what a call costs when it crosses routers,
against the direct call and the nginx chain a user would otherwise deploy,
measured in one run: JSON in target/bench/peer.json, a table on stdout.

Four routers in network namespaces, chained A–B–C (B a reflector) and
D beside A, all of one domain (certificates from one domain CA made with
`agentctl pki`, peer sections unpinned, as DESIGN §3's in-domain links), each
running agentd + agent-gw of the router build (`release`) with the peer
data plane listening (`gateway.peer_listen` 0.0.0.0:7447). The Rust echo
backend (`agent-gw/examples/bench_local.rs backend`) runs in A's namespace
and is registered at A; the Rust load generator (`bench_local load`) runs
in this script's namespace and reaches every router over its management
veth (203.0.113.0/24). The rows (`--rows`, default all, in this order):

  direct  load generator → backend at A
  local   → A's gateway (SDK API /agent/v1/invoke) → backend
  peer2   → B's gateway → h2+mTLS over the A–B link → A's gateway → backend
  peer3   → C's gateway → B's gateway → A's gateway → backend
  peer2s  → D's gateway → h2+mTLS over the A–D link → A's gateway →
            backend, with `peer.sign_calls '1'` on both ends: the signed
            forwarding assertions a neighbour across a boundary gets
  hyper2  → `bench_hop front` in B → h2 over mutual TLS 1.3 on the A–B
            link → `bench_hop back` in A → backend: the floor of the peer
            path's design (hyper's h2 client and server, rustls, one
            Ed25519 signature per call made in B and checked in A) with
            none of the gateway (`agent-gw/examples/bench_hop.rs`)
  hop2    → the same pair without the signature: the transport alone
  hop3    → `bench_hop front` in C → h2 over mutual TLS 1.3 on the B–C
            link → `bench_hop mid` in B (each call read whole and sent on,
            as a transit router does) → h2 over mutual TLS 1.3 on the A–B
            link → `bench_hop back` in A → backend, unsigned: the floor of
            `peer3` (two links, three proxies) with none of the gateway
  nginx2  → nginx in B (plain HTTP, like the SDK listener) → HTTP/1.1 over
            mutually authenticated TLS 1.3 on the A–B link, upstream
            keep-alive → nginx in A → backend: the same namespaces, links
            and trust (both ends verify a certificate) as peer2, built
            from Debian's nginx, one worker each like agent-gw's one thread

Before anything is measured every selected row is checked with one call
(200 and the body echoed; for the peer rows also that the gateway's route
is the peer path `…@router-a` at B, `…@router-b` at C). A row that does not
work ends the run with the reason; no numbers are printed for it.

Bodies BENCH_PEER_SIZES (128 B, 1 KiB, 8 KiB, 64 KiB: a Nexus envelope
padded to the size): p50/p95/p99 at concurrency 1 (BENCH_PEER_N1
requests) and throughput at concurrency 16 (BENCH_PEER_N16 requests).
Rows are measured interleaved in a rotating order for BENCH_PEER_ROUNDS
rounds and the JSON reports the median over rounds, so machine noise hits
every row alike; ratios are to `direct` of the same run. Also the CPU time
every proxy on a row spends per request (/proc/PID/schedstat), its
context switches per request (every thread's), and RSS
(VmRSS/VmHWM) of each gateway, agentd and nginx before and after the load.

Binaries: BENCH_PEER_BIN_DIR (default target/release, built first unless
the variable is set); the load generator and backend are the bench-release
build of the example, as in bench_local.py (BENCH_PEER_TOOL overrides).
Needs root (namespaces; nginx is installed with apt-get when missing).
Everything started here is stopped by PID and the namespaces are deleted
on exit; every load run has a fixed request count and a timeout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

import bench_local as bl  # noqa: E402  (envelopes, nginx install)
from harness.http import Http  # noqa: E402
from harness.mesh import SDK_PORT, MeshNet, MeshRouter  # noqa: E402
from harness.poll import Fatal, wait_for  # noqa: E402
from harness.procs import Binaries  # noqa: E402

ROWS = ["direct", "local", "peer2", "peer3", "peer2s", "hop2", "hop3", "hyper2", "nginx2"]
# BENCH_PEER_TRACE=syscalls: `perf trace -s` of every proxy during each
# load run (syscall counts); =record: `perf record` (profiles). Written
# to target/bench/trace/; the figures of such a run are not comparable.
TRACE = os.environ.get("BENCH_PEER_TRACE", "")
TRACE_DIR = REPO / "target" / "bench" / "trace"
PEER_ROWS = {"peer2", "peer3", "peer2s"}
# The domain the routers' certificates name (DESIGN §3: a link between two
# routers of one domain authenticates each call).
DOMAIN = "bench.example"
# Issue 21's goal for the signed row: no worse than the signed peer2 the
# issue measured before in-domain links dropped signatures (2.0–2.6x
# nginx2's p50, 0.31–0.63x its c16 throughput): the better end of each.
SIGNED_P50_GOAL = 2.0
SIGNED_RPS_GOAL = 0.63
RSS_GROWTH_GOAL_KIB = 2048
ROUNDS = int(os.environ.get("BENCH_PEER_ROUNDS", "5"))
N1 = int(os.environ.get("BENCH_PEER_N1", "1000"))
N16 = int(os.environ.get("BENCH_PEER_N16", "4000"))
SIZES = [int(x) for x in os.environ.get("BENCH_PEER_SIZES", "128 1024 8192 65536").split()]
NGINX_PORT = 8080  # nginx ingress in B (plain HTTP, next to B's SDK listener)
NGINX_TLS_PORT = 8443  # nginx in A, TLS, on A's address of the A–B link
# bench_hop front in B (plain HTTP) and back in A (h2 over mTLS on A's
# link address), per row.
HOP_PORTS = {"hyper2": (8081, 8444), "hop2": (8082, 8445)}
# hop3: bench_hop front in C (plain HTTP), mid in B (h2 over mTLS on B's
# address of the B–C link), back in A (on A's link address).
HOP3_PORTS = (8083, 8447, 8446)
ROUTE_ID = "bench-echo"
# gateway.replay_cache for the run; 0 (the default) keeps the router's: a
# sending gateway costs its receiver one replay window at any rate.
REPLAY_CACHE = int(os.environ.get("BENCH_PEER_REPLAY_CACHE", "0"))
LOAD_TIMEOUT_S = 300


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Proc:
    """A process of ours in a namespace (`ip netns exec` execs, so the PID
    is the program's own), its log and its resource figures."""

    def __init__(self, name: str, argv: List[str], log_path: Path, stdout: Any = None) -> None:
        self.name = name
        self.log_path = log_path
        self.log_file = open(log_path, "ab")
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout or self.log_file,
                                  stderr=self.log_file)

    @property
    def pid(self) -> int:
        return self.p.pid

    def alive(self) -> bool:
        return self.p.poll() is None

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self.log_file.close()

    def log_text(self, tail: int = 3000) -> str:
        try:
            return self.log_path.read_bytes()[-tail:].decode(errors="replace")
        except OSError:
            return ""


def rss_of(pid: int) -> Dict[str, int]:
    out: Dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key + "_kib"] = int(value.split()[0])
    return out


def cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
        return int(f.read().split()[0])


def ctx_switches(pid: int) -> int:
    """Context switches of every thread of the process: a wake-up per
    switch, which at concurrency 1 is most of a proxy's cost here."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return total


# ---- build ------------------------------------------------------------------


def hop_tool(tool: Path) -> Path:
    """The `hyper2` pair, built next to the load generator."""
    return tool.parent / "bench_hop"


def binaries() -> Tuple[Binaries, Path]:
    bin_dir = Path(os.environ.get("BENCH_PEER_BIN_DIR", REPO / "target" / "release"))
    tool = Path(os.environ.get("BENCH_PEER_TOOL", REPO / "target" / "bench-release" / "examples" / "bench_local"))
    if "BENCH_PEER_BIN_DIR" not in os.environ:
        argv = ["cargo", "build", "--quiet", "--release", "-p", "agentd", "-p", "agent-gw", "--bins"]
        log(f"$ {' '.join(argv)}")
        subprocess.run(argv, cwd=REPO, check=True, stdin=subprocess.DEVNULL)
    if "BENCH_PEER_TOOL" not in os.environ:
        argv = ["cargo", "build", "--quiet", "--profile", "bench-release", "-p", "agent-gw", "--example", "bench_local",
                "--example", "bench_hop"]
        log(f"$ {' '.join(argv)}")
        subprocess.run(argv, cwd=REPO, check=True, stdin=subprocess.DEVNULL)
    bins = Binaries(bin_dir / "agentd", bin_dir / "agentctl", bin_dir / "agent-gw")
    for p in (bins.agentd, bins.agentctl, bins.agent_gw, tool, hop_tool(tool)):
        if not p.is_file():
            raise SystemExit(f"bench_peer: {p} missing")
    return bins, tool


# ---- TLS material for the nginx chain ---------------------------------------


def make_certs(dir: Path, server_ip: str) -> Dict[str, Path]:
    """A throw-away CA, nginx A's server certificate (for its link address)
    and nginx B's client certificate, ECDSA P-256: mutual TLS as the
    gateways do it, in the form an nginx deployment would use."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        path.chmod(0o600)
        return path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("bench-peer CA")).issuer_name(name("bench-peer CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    out = {"ca": dir / "ca.pem"}
    out["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for who, usage, san in (
        ("server", ExtendedKeyUsageOID.SERVER_AUTH,
         [x509.DNSName("router-a.bench"), x509.IPAddress(ipaddress.ip_address(server_ip))]),
        ("client", ExtendedKeyUsageOID.CLIENT_AUTH, [x509.DNSName("router-b.bench")]),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(f"{who}.bench")).issuer_name(ca.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .add_extension(x509.SubjectAlternativeName(san), critical=False)
                .sign(ca_key, hashes.SHA256()))
        out[who] = dir / f"{who}.pem"
        out[who].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        out[who + "_key"] = write_key(key, dir / f"{who}.key")
    return out


# ---- nginx chain ------------------------------------------------------------

NGINX_COMMON = """daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
{temp}
  # Bodies up to the largest size stay in memory on both sides (nginx
  # would spill larger ones to temp files).
  client_body_buffer_size 128k;
  client_max_body_size 1m;
  proxy_buffer_size 16k;
  proxy_buffers 8 16k;
  proxy_http_version 1.1;
  proxy_set_header Connection "";
{http}
}}
"""


def nginx_conf(root: Path, http: str) -> Path:
    root.mkdir(parents=True)
    temp = "\n".join(f"  {k}_temp_path {root}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = root / "nginx.conf"
    conf.write_text(NGINX_COMMON.format(root=root, temp=temp, http=http))
    return conf


def wait_listening(p: Proc, ns: str, host: str, port: int) -> None:
    def up() -> bool:
        if not p.alive():
            err = (p.log_path.parent / "error.log")
            raise Fatal(f"{p.name} exited: {p.log_text()} {err.read_text() if err.exists() else ''}")
        probe = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c",
                                f"import socket; socket.create_connection(('{host}', {port}), 1)"],
                               capture_output=True, stdin=subprocess.DEVNULL, timeout=10)
        return probe.returncode == 0
    wait_for(f"{p.name} listening", up, timeout=15, interval=0.1)


def start_nginx_chain(binary: str, work: Path, certs: Dict[str, Path], a: MeshRouter, b: MeshRouter,
                      backend_addr: str, procs: List[Proc]) -> Tuple[Proc, Proc, str]:
    """nginx in A (TLS listener on A's link address, verifying client
    certificates, proxying to the backend) and nginx in B (plain listener
    on B's management address, proxying over TLS to nginx A, verifying its
    certificate and presenting its own). Upstream keep-alive on both hops."""
    a_link = a.net.find_link(a.name, b.name).addr_of(a.name)
    keep = "keepalive 64; keepalive_requests 1000000; keepalive_timeout 300s;"
    listen_opts = "keepalive_requests 1000000; keepalive_timeout 300s; tcp_nodelay on;"
    a_conf = nginx_conf(work / "nginx-a", f"""
  upstream backend {{ server {backend_addr}; {keep} }}
  server {{
    listen {a_link}:{NGINX_TLS_PORT} ssl;
    {listen_opts}
    ssl_protocols TLSv1.3;
    ssl_certificate {certs['server']};
    ssl_certificate_key {certs['server_key']};
    ssl_client_certificate {certs['ca']};
    ssl_verify_client on;
    ssl_session_cache shared:bench:1m;
    location / {{ proxy_pass http://backend; }}
  }}""")
    b_conf = nginx_conf(work / "nginx-b", f"""
  upstream hop {{ server {a_link}:{NGINX_TLS_PORT}; {keep} }}
  server {{
    listen {b.ns.mgmt_addr}:{NGINX_PORT};
    {listen_opts}
    location / {{
      proxy_pass https://hop;
      proxy_ssl_protocols TLSv1.3;
      proxy_ssl_verify on;
      proxy_ssl_verify_depth 2;
      proxy_ssl_trusted_certificate {certs['ca']};
      proxy_ssl_name router-a.bench;
      proxy_ssl_server_name on;
      proxy_ssl_certificate {certs['client']};
      proxy_ssl_certificate_key {certs['client_key']};
      proxy_ssl_session_reuse on;
    }}
  }}""")
    out = []
    for r, conf in ((a, a_conf), (b, b_conf)):
        root = conf.parent
        argv = r.ns.exec_argv([binary, "-p", str(root), "-e", str(root / "error.log"), "-c", str(conf)])
        p = Proc(f"nginx[{r.name}]", argv, root / "nginx.log")
        procs.append(p)
        out.append(p)
    wait_listening(out[0], a.ns.netns, a_link, NGINX_TLS_PORT)
    wait_listening(out[1], b.ns.netns, b.ns.mgmt_addr, NGINX_PORT)
    return out[0], out[1], f"http://{b.ns.mgmt_addr}:{NGINX_PORT}/invoke"


def start_hop_pair(row: str, binary: Path, work: Path, certs: Dict[str, Path], a: MeshRouter, b: MeshRouter,
                   backend_addr: str, procs: List[Proc]) -> Tuple[Proc, Proc, str]:
    """`bench_hop back` in A (h2 over mTLS on A's link address, to the
    backend) and `bench_hop front` in B (plain HTTP on B's management
    address, one warm h2 connection to A): the same certificates, links
    and listeners as the nginx chain. Row hop2 signs nothing."""
    a_link = a.net.find_link(a.name, b.name).addr_of(a.name)
    port, tls_port = HOP_PORTS[row]
    unsigned = ["unsigned"] if row == "hop2" else []
    back = Proc(f"{row}[router-a]", a.ns.exec_argv([
        str(binary), "back", f"{a_link}:{tls_port}", str(certs["server"]), str(certs["server_key"]),
        str(certs["ca"]), backend_addr, *unsigned]), work / f"{row}-a.log")
    procs.append(back)
    wait_listening(back, a.ns.netns, a_link, tls_port)
    front = Proc(f"{row}[router-b]", b.ns.exec_argv([
        str(binary), "front", f"{b.ns.mgmt_addr}:{port}", f"{a_link}:{tls_port}", "router-a.bench",
        str(certs["client"]), str(certs["client_key"]), str(certs["ca"]), *unsigned]), work / f"{row}-b.log")
    procs.append(front)
    wait_listening(front, b.ns.netns, b.ns.mgmt_addr, port)
    return back, front, f"http://{b.ns.mgmt_addr}:{port}/invoke"


def start_hop3(binary: Path, work: Path, certs: Dict[str, Path], a: MeshRouter, b: MeshRouter, c: MeshRouter,
               backend_addr: str, procs: List[Proc]) -> Tuple[Proc, Proc, Proc, str]:
    """`bench_hop back` in A, `mid` in B, `front` in C, unsigned: the
    transport of `peer3` alone. The server certificate (router-a.bench)
    serves both TLS listeners; front and mid verify that name."""
    a_link = a.net.find_link(a.name, b.name).addr_of(a.name)
    b_link = b.net.find_link(b.name, c.name).addr_of(b.name)
    port, mid_port, back_port = HOP3_PORTS
    back = Proc("hop3[router-a]", a.ns.exec_argv([
        str(binary), "back", f"{a_link}:{back_port}", str(certs["server"]), str(certs["server_key"]),
        str(certs["ca"]), backend_addr, "unsigned"]), work / "hop3-a.log")
    procs.append(back)
    wait_listening(back, a.ns.netns, a_link, back_port)
    mid = Proc("hop3[router-b]", b.ns.exec_argv([
        str(binary), "mid", f"{b_link}:{mid_port}", f"{a_link}:{back_port}", "router-a.bench",
        str(certs["server"]), str(certs["server_key"]), str(certs["client"]), str(certs["client_key"]),
        str(certs["ca"]), "unsigned"]), work / "hop3-b.log")
    procs.append(mid)
    wait_listening(mid, b.ns.netns, b_link, mid_port)
    front = Proc("hop3[router-c]", c.ns.exec_argv([
        str(binary), "front", f"{c.ns.mgmt_addr}:{port}", f"{b_link}:{mid_port}", "router-a.bench",
        str(certs["client"]), str(certs["client_key"]), str(certs["ca"]), "unsigned"]), work / "hop3-c.log")
    procs.append(front)
    wait_listening(front, c.ns.netns, c.ns.mgmt_addr, port)
    return back, mid, front, f"http://{c.ns.mgmt_addr}:{port}/invoke"


# ---- routers ----------------------------------------------------------------


def pki(bins: Binaries, *args: str) -> None:
    p = subprocess.run([str(bins.agentctl), "pki", *args], capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
    if p.returncode != 0:
        raise SystemExit(f"bench_peer: agentctl pki {' '.join(args)}: {p.stderr.decode(errors='replace')}")


def make_router(bins: Binaries, net: MeshNet, work: Path, name: str, ca: Path, reflector: bool = False) -> MeshRouter:
    """A router of the domain; the harness turns its peer data plane on
    (:7447 on every address). Its certificate is issued by the domain CA
    for its identity key. Limits lifted so the benchmark measures
    forwarding, not rate limiting."""
    lifted = {"rate_per_second": 1_000_000, "rate_burst": 1_000_000}
    gateway: Dict[str, Any] = dict(lifted)
    if REPLAY_CACHE:
        gateway["replay_cache"] = REPLAY_CACHE
    r = MeshRouter(bins, net, net.add_router(name), work / name, reflector=reflector,
                   agentd={"log_level": "warn"}, gateway=gateway,
                   tenants=[(bl.TENANT, {"name": bl.TENANT, **lifted})])
    cert = r.dir / "router.pem"
    pki(bins, "issue-router", "--ca-key", str(ca / "domain-ca.key"), "--ca-cert", str(ca / "domain-ca.pem"),
        "--router-id", name, "--domain", DOMAIN, "--key", str(r.dir / "identity.key"), "--out", str(cert))
    main = r.cfg.section("agentd").options
    main.update({"domain": DOMAIN, "domain_ca": str(ca / "domain-ca.pem"), "router_cert": str(cert)})
    return r


PEER_STATS = ("peer_conns", "peer_handshakes_out", "peer_handshakes_in", "peer_streams_refused",
              "peer_assertions_signed", "peer_signatures", "peer_assertions_verified",
              "peer_signature_checks")


def peer_stats(routers: Dict[str, MeshRouter], after: Optional[float] = None) -> Dict[str, Dict[str, int]]:
    """Each gateway's peer counters from a stats report made after `after`
    (reports come at least every 5 s)."""
    out = {}
    for n, r in routers.items():
        gw = r.gateway_stats(after=after, timeout=15)
        out[n] = {k: int(gw.get(k, 0)) for k in PEER_STATS}
    return out


def per(n: int, d: int) -> str:
    return f"{n / d:.2f}" if d else "-"


def route_at(r: MeshRouter) -> Optional[str]:
    """The route id `r`'s gateway would call first for the bench intent."""
    env = json.loads(bl.envelope_of_size(256))
    resp = r.stack.http.post("/agent/v1/route", env)
    if resp.status != 200:
        return None
    return str(resp.json()["route"]["route_id"])


def check_row(row: str, url: str, body: bytes, routers: Dict[str, MeshRouter]) -> Optional[str]:
    """Why the row does not work, or None: one call on it must answer 200
    with our body echoed, and a peer row must be routed over the peer
    path."""
    via = {"peer2": ("router-b", "router-a"), "peer3": ("router-c", "router-b"),
           "peer2s": ("router-d", "router-a")}.get(row)
    if via:
        at, hop = via

        def via_hop() -> Optional[str]:
            rid = route_at(routers[at])
            return rid if rid and rid.endswith("@" + hop) else None

        try:
            rid = wait_for(f"{at}'s gateway to route {bl.INTENT} via {hop}", via_hop, timeout=30, interval=0.1)
        except AssertionError as exc:
            return f"{exc} (route now: {route_at(routers[at])!r})"
        log(f"{row}: {at} routes {bl.INTENT} via {rid}")
    host, _, rest = url.removeprefix("http://").partition("/")
    h, _, port = host.rpartition(":")
    resp = Http(h, int(port), timeout=10).post("/" + rest, body)
    if resp.status != 200:
        return f"POST {url} answered {resp.describe()}"
    try:
        echoed = json.loads(resp.body).get("payload") == json.loads(body)["payload"]
    except (ValueError, AttributeError):
        echoed = False
    if not echoed:
        return f"POST {url} answered 200 without our body: {resp.body[:300]!r}"
    return None


# ---- measuring --------------------------------------------------------------


def load(tool: Path, url: str, body_file: Path, concurrency: int, requests: int,
         watch: Dict[str, int]) -> Dict[str, Any]:
    warmup = max(20, requests // (10 * concurrency))
    before = {k: cpu_ns(pid) for k, pid in watch.items()}
    before_cs = {k: ctx_switches(pid) for k, pid in watch.items()}
    argv = [str(tool), "load", url, str(body_file), str(concurrency), str(requests), str(warmup)]
    tracers = []
    if TRACE:
        # Diagnosis, not measurement: perf slows what it watches.
        TRACE_DIR.mkdir(parents=True, exist_ok=True)
        for k, pid in watch.items():
            name = f"{k}-c{concurrency}".replace("[", "-").replace("]", "")
            out = open(TRACE_DIR / f"{name}.txt", "w")
            cmd = ["perf", "trace", "-s", "-p", str(pid)]
            if TRACE == "record":
                cmd = ["perf", "record", "-F", "4999", "--call-graph", "dwarf,16384", "-o", str(TRACE_DIR / f"{name}.data"), "-p", str(pid)]
            tracers.append((subprocess.Popen(cmd, stdout=out, stderr=out), out))
        # perf attaches asynchronously; what it misses is warm-up.
        time.sleep(1.0)
    p = subprocess.run(argv, capture_output=True, timeout=LOAD_TIMEOUT_S, stdin=subprocess.DEVNULL)
    for t, out in tracers:
        t.send_signal(signal.SIGINT)
        t.wait(timeout=10)
        out.close()
    if p.returncode != 0:
        raise SystemExit(f"bench_peer: load generator failed on {url} (c={concurrency}): "
                         f"{p.stderr.decode(errors='replace')}")
    result = json.loads(p.stdout)
    if result["errors"]:
        raise SystemExit(f"bench_peer: {result['errors']} errors on {url} (c={concurrency}): {result['first_error']}")
    sent = concurrency * (warmup + -(-requests // concurrency))
    result["cpu_us_per_request"] = {k: (cpu_ns(pid) - before[k]) / 1000 / sent for k, pid in watch.items()}
    result["ctx_switches_per_request"] = {k: (ctx_switches(pid) - before_cs[k]) / sent for k, pid in watch.items()}
    return result


def med(xs: List[float], nd: int = 1) -> float:
    return round(statistics.median(xs), nd)


def summarise(runs: List[Tuple[Dict[str, Any], Dict[str, Any]]]) -> Dict[str, Any]:
    c1 = [r[0] for r in runs]
    c16 = [r[1] for r in runs]
    procs = list(c1[0]["cpu_us_per_request"])
    cpu = {k: {"c1": med([r["cpu_us_per_request"][k] for r in c1], 2),
               "c16": med([r["cpu_us_per_request"][k] for r in c16], 2)} for k in procs}
    proxies = [k for k in procs if k != "backend"]
    cpu["proxies"] = {c: med([sum(r["cpu_us_per_request"][k] for k in proxies) for r in rs], 2)
                      for c, rs in (("c1", c1), ("c16", c16))}
    return {
        "c1": {"p50_us": med([r["p50_us"] for r in c1]), "p95_us": med([r["p95_us"] for r in c1]),
               "p99_us": med([r["p99_us"] for r in c1]),
               "rounds_p50_us": [round(r["p50_us"], 1) for r in c1]},
        "c16": {"throughput_rps": med([r["throughput_rps"] for r in c16], 0),
                "p50_us": med([r["p50_us"] for r in c16]), "p99_us": med([r["p99_us"] for r in c16]),
                "rounds_throughput_rps": [round(r["throughput_rps"]) for r in c16]},
        "cpu_us_per_request": cpu,
        "ctx_switches_per_request": {k: {"c1": med([r["ctx_switches_per_request"][k] for r in c1], 2),
                                         "c16": med([r["ctx_switches_per_request"][k] for r in c16], 2)}
                                     for k in procs},
    }


def ratio(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, float]:
    return {"p50_c1": round(a["c1"]["p50_us"] / b["c1"]["p50_us"], 3),
            "p99_c1": round(a["c1"]["p99_us"] / b["c1"]["p99_us"], 3),
            "throughput_c16": round(a["c16"]["throughput_rps"] / b["c16"]["throughput_rps"], 3)}


def goals(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Issue 21's goals per body size, against the nginx TLS chain:
    `peer2` p50 at most 1.0x and c16 throughput at least 1.0x; `peer3`
    p50 at most 1.5x; the signed `peer2s` no worse than the signed peer2
    measured before (SIGNED_*_GOAL)."""
    out: Dict[str, Any] = {}
    for row in results:
        size = str(row["body_bytes"])
        for name in ("peer2", "peer3", "peer2s"):
            if name not in row:
                continue
            g = row[name]
            entry: Dict[str, bool] = {}
            if "nginx2" in row:
                n = row["nginx2"]
                p50_r = g["c1"]["p50_us"] / n["c1"]["p50_us"]
                rps_r = g["c16"]["throughput_rps"] / n["c16"]["throughput_rps"]
                if name == "peer2":
                    entry["p50_at_most_nginx2"] = p50_r <= 1.0
                    entry["throughput_at_least_nginx2"] = rps_r >= 1.0
                elif name == "peer3":
                    entry["p50_at_most_1.5x_nginx2"] = p50_r <= 1.5
                else:
                    entry[f"p50_at_most_{SIGNED_P50_GOAL}x_nginx2"] = p50_r <= SIGNED_P50_GOAL
                    entry[f"throughput_at_least_{SIGNED_RPS_GOAL}x_nginx2"] = rps_r >= SIGNED_RPS_GOAL
            if entry:
                out.setdefault(name, {})[size] = entry
    return out


def memory_goal(before: Dict[str, Dict[str, int]], after: Dict[str, Dict[str, int]],
                quiet: Dict[str, Dict[str, int]]) -> Dict[str, Any]:
    """Each gateway's RSS after the load at most its RSS before + 2 MiB
    (issue 21), and back within 1 MiB of it once quiet (issue 25)."""
    return {k: {"rss_after_load_within_2mib": after[k]["VmRSS_kib"] <= before[k]["VmRSS_kib"] + RSS_GROWTH_GOAL_KIB,
                "rss_when_quiet_within_1mib":
                quiet[k]["VmRSS_kib"] <= before[k]["VmRSS_kib"] + bl.RSS_RETURN_GOAL_KIB}
            for k in before if k.startswith("agent_gw[")}


def print_table(results: List[Dict[str, Any]], rows: List[str]) -> None:
    print(f"medians of {ROUNDS} interleaved rounds; c1 = concurrency 1 ({N1} req), c16 = concurrency 16 ({N16} req)")
    print(f"{'body':>6} {'row':<7} {'p50 us':>8} {'p95 us':>8} {'p99 us':>8} {'c16 req/s':>10} "
          f"{'p50/dir':>8} {'rps/dir':>8} {'p50/ngx2':>9} {'rps/ngx2':>9} {'proxy CPU us/req c1/c16':>24}")
    for row in results:
        d = row["direct"]
        n = row.get("nginx2")
        for name in rows:
            r = row[name]
            vs_n = (f"{r['c1']['p50_us'] / n['c1']['p50_us']:>9.2f} "
                    f"{r['c16']['throughput_rps'] / n['c16']['throughput_rps']:>9.2f}") if n else f"{'-':>9} {'-':>9}"
            px = r["cpu_us_per_request"]["proxies"]
            px_s = f"{px['c1']:>11.1f}/{px['c16']:<12.1f}" if name != "direct" else f"{'-':>24}"
            print(f"{row['body_bytes']:>6} {name:<7} {r['c1']['p50_us']:>8.1f} {r['c1']['p95_us']:>8.1f} "
                  f"{r['c1']['p99_us']:>8.1f} {r['c16']['throughput_rps']:>10.0f} "
                  f"{r['c1']['p50_us'] / d['c1']['p50_us']:>8.2f} "
                  f"{r['c16']['throughput_rps'] / d['c16']['throughput_rps']:>8.2f} {vs_n} {px_s}")


# ---- main -------------------------------------------------------------------


def parse_rows(text: str) -> List[str]:
    rows = [r.strip() for r in text.split(",") if r.strip()]
    bad = [r for r in rows if r not in ROWS]
    if bad:
        raise SystemExit(f"bench_peer: unknown row(s) {', '.join(bad)}; rows are {', '.join(ROWS)}")
    if "direct" not in rows:
        rows.insert(0, "direct")  # every ratio is to direct of the same run
    return [r for r in ROWS if r in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=",".join(ROWS),
                    help=f"comma-separated rows to measure (default all: {','.join(ROWS)}); direct is always included")
    args = ap.parse_args()
    rows = parse_rows(args.rows)
    if os.geteuid() != 0:
        raise SystemExit("bench_peer: needs root (network namespaces)")
    # SIGTERM (make interrupted) unwinds through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bins, tool = binaries()
    nginx_bin: Optional[str] = None
    if "nginx2" in rows:
        nginx_bin, note = bl.ensure_nginx()
        if not nginx_bin:
            raise SystemExit(f"bench_peer: row nginx2 needs nginx: {note}")

    work = Path(tempfile.mkdtemp(prefix="agentd-bench-peer-", dir="/tmp"))
    net = MeshNet()
    routers: Dict[str, MeshRouter] = {}
    procs: List[Proc] = []
    try:
        ca = work / "ca"
        ca.mkdir()
        pki(bins, "init-domain", "--domain", DOMAIN, "--out", str(ca))
        a = routers["router-a"] = make_router(bins, net, work, "router-a", ca)
        b = routers["router-b"] = make_router(bins, net, work, "router-b", ca, reflector=True)
        c = routers["router-c"] = make_router(bins, net, work, "router-c", ca)
        d = make_router(bins, net, work, "router-d", ca) if "peer2s" in rows else None
        if d:
            routers["router-d"] = d
        net.link("router-a", "router-b")
        net.link("router-b", "router-c")
        pairs = [("router-a", "router-b"), ("router-b", "router-c")]
        if d:
            net.link("router-a", "router-d")
            pairs.append(("router-a", "router-d"))
        for x, y in pairs:
            signed = {"sign_calls": "1"} if "router-d" in (x, y) else {}
            routers[x].peer_with(routers[y], pin=False, **signed)
            routers[y].peer_with(routers[x], pin=False, **signed)
        for r in routers.values():
            r.start()
        b.wait_established("router-a")
        b.wait_established("router-c")
        if d:
            d.wait_established("router-a")

        backend = Proc("backend", a.ns.exec_argv([str(tool), "backend", a.ns.mgmt_addr]), work / "backend.log",
                       stdout=subprocess.PIPE)
        procs.append(backend)
        line = backend.p.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise SystemExit(f"bench_peer: backend did not start: {line!r} {backend.log_text()}")
        backend_addr = line.split()[1]
        backend_url = f"http://{backend_addr}/invoke"
        a.stack.register({"route_id": ROUTE_ID, "intent": bl.INTENT, "version": 1,
                          "origin": f"agent://{bl.TENANT}/echo", "endpoint": backend_url,
                          "tenant": bl.TENANT, "lease_seconds": 3600})
        a.stack.wait_routable(json.loads(bl.envelope_of_size(256)))

        gw_pid = {n: r.stack.gw.pid for n, r in routers.items()}
        urls = {
            "direct": backend_url,
            "local": f"http://{a.ns.mgmt_addr}:{SDK_PORT}/agent/v1/invoke",
            "peer2": f"http://{b.ns.mgmt_addr}:{SDK_PORT}/agent/v1/invoke",
            "peer3": f"http://{c.ns.mgmt_addr}:{SDK_PORT}/agent/v1/invoke",
        }
        if d:
            urls["peer2s"] = f"http://{d.ns.mgmt_addr}:{SDK_PORT}/agent/v1/invoke"
        # Whose CPU time counts on each row: the backend and every proxy.
        watch: Dict[str, Dict[str, int]] = {
            "direct": {"backend": backend.pid},
            "local": {"backend": backend.pid, "gw[router-a]": gw_pid["router-a"]},
            "peer2": {"backend": backend.pid, "gw[router-a]": gw_pid["router-a"], "gw[router-b]": gw_pid["router-b"]},
            "peer3": {"backend": backend.pid, **{f"gw[{n}]": gw_pid[n] for n in ("router-a", "router-b", "router-c")}},
            "peer2s": {"backend": backend.pid, "gw[router-a]": gw_pid["router-a"],
                       "gw[router-d]": gw_pid.get("router-d", 0)},
        }
        daemons: Dict[str, int] = {}
        for n, r in routers.items():
            daemons[f"agent_gw[{n}]"] = r.stack.gw.pid
            daemons[f"agentd[{n}]"] = r.stack.agentd.pid
        # TLS material for the rows that are not our gateways.
        certs = (make_certs(work, a.net.find_link("router-a", "router-b").addr_of("router-a"))
                 if {"hop2", "hop3", "hyper2", "nginx2"} & set(rows) else {})
        for row in ("hop2", "hyper2"):
            if row in rows:
                ha, hb, urls[row] = start_hop_pair(row, hop_tool(tool), work, certs, a, b, backend_addr, procs)
                watch[row] = {"backend": backend.pid, f"{row}[router-a]": ha.pid, f"{row}[router-b]": hb.pid}
                daemons[f"{row}[router-a]"], daemons[f"{row}[router-b]"] = ha.pid, hb.pid
        if "hop3" in rows:
            h3 = start_hop3(hop_tool(tool), work, certs, a, b, c, backend_addr, procs)
            urls["hop3"] = h3[3]
            watch["hop3"] = {"backend": backend.pid, **{p.name: p.pid for p in h3[:3]}}
            daemons.update({p.name: p.pid for p in h3[:3]})
        if nginx_bin:
            na, nb, urls["nginx2"] = start_nginx_chain(nginx_bin, work, certs, a, b, backend_addr, procs)
            watch["nginx2"] = {"backend": backend.pid, "nginx[router-a]": na.pid, "nginx[router-b]": nb.pid}
            daemons["nginx[router-a]"], daemons["nginx[router-b]"] = na.pid, nb.pid

        # Every row is checked before anything is measured; a row that
        # does not work ends the run (all reasons at once), no numbers.
        probe = bl.envelope_of_size(SIZES[0])
        broken = {row: why for row in rows if (why := check_row(row, urls[row], probe, routers))}
        if broken:
            hint = ("\nthe peer rows need agent-gw's peer forwarding; the others alone: --rows direct,local,nginx2"
                    if PEER_ROWS & set(broken) else "")
            raise SystemExit("bench_peer: " + "\n".join(f"row {r} does not work: {why}" for r, why in broken.items())
                             + hint)
        log(f"rows working: {', '.join(rows)}")

        measure_peer = bool(PEER_ROWS & set(rows))
        stats_before = peer_stats(routers) if measure_peer else {}
        rss_before = {k: rss_of(pid) for k, pid in daemons.items()}
        results: List[Dict[str, Any]] = []
        for size in SIZES:
            body_file = work / f"body-{size}.json"
            body_file.write_bytes(bl.envelope_of_size(size))
            runs: Dict[str, List[Tuple[Dict[str, Any], Dict[str, Any]]]] = {r: [] for r in rows}
            for rnd in range(ROUNDS):
                k = rnd % len(rows)  # rotate: no row always first or last
                for name in rows[k:] + rows[:k]:
                    c1 = load(tool, urls[name], body_file, 1, N1, watch[name])
                    c16 = load(tool, urls[name], body_file, 16, N16, watch[name])
                    runs[name].append((c1, c16))
                log(f"{size:>6} B round {rnd + 1}/{ROUNDS}: " + "  ".join(
                    f"{n} {runs[n][-1][0]['p50_us']:.0f}us/{runs[n][-1][1]['throughput_rps']:.0f}rps" for n in rows))
            res: Dict[str, Any] = {"body_bytes": size}
            for name in rows:
                res[name] = summarise(runs[name])
            res["ratios_to_direct"] = {n: ratio(res[n], res["direct"]) for n in rows if n != "direct"}
            if "nginx2" in rows:
                res["ratios_to_nginx2"] = {n: ratio(res[n], res["nginx2"]) for n in rows if n not in ("direct", "nginx2")}
            res["added_p50_us"] = {n: round(res[n]["c1"]["p50_us"] - res["direct"]["c1"]["p50_us"], 1)
                                   for n in rows if n != "direct"}
            results.append(res)
        rss_after = {k: rss_of(pid) for k, pid in daemons.items()}
        stats_after = peer_stats(routers, after=time.monotonic()) if measure_peer else {}
        log(f"load over; RSS again in {bl.QUIET_S:.0f} s")
        time.sleep(bl.QUIET_S)
        rss_quiet = {k: rss_of(pid) for k, pid in daemons.items()}
        during_load = {n: {k: stats_after[n][k] - stats_before[n][k] for k in PEER_STATS if k != "peer_conns"}
                       for n in stats_after}

        out = {
            "benchmark": "bench_peer",
            "rows": rows,
            "rows_omitted": [r for r in ROWS if r not in rows],
            "topology": {
                "direct": "load generator (test namespace) -> backend in router-a's namespace (mgmt veth)",
                "local": "-> router-a agent-gw SDK API /agent/v1/invoke -> backend",
                "peer2": "-> router-b agent-gw -> h2+mTLS peer data plane over the A-B link -> router-a agent-gw -> backend",
                "peer3": "-> router-c agent-gw -> router-b agent-gw -> router-a agent-gw -> backend",
                "peer2s": "-> router-d agent-gw -> h2+mTLS over the A-D link, signed forwarding assertions "
                          "(peer.sign_calls '1' both ends) -> router-a agent-gw -> backend",
                "hop2": "the hyper2 pair without the signature: the transport alone",
                "hop3": "-> bench_hop front in router-c -> h2 over mutual TLS 1.3 on the B-C link -> bench_hop mid in "
                        "router-b (body read whole, sent on) -> h2 over mutual TLS 1.3 on the A-B link -> bench_hop "
                        "back in router-a -> backend, unsigned: peer3's transport alone",
                "hyper2": "-> bench_hop front in router-b (plain HTTP) -> h2 over mutual TLS 1.3 on the A-B link "
                          "(hyper, rustls ring, one Ed25519 signature per call) -> bench_hop back in router-a -> "
                          "backend: the design's floor, no gateway",
                "nginx2": "-> nginx in router-b (plain HTTP) -> HTTP/1.1 over mutual TLS 1.3 on the A-B link, upstream "
                          "keep-alive -> nginx in router-a -> backend (one worker each, Debian nginx)",
            },
            "binaries": str(bins.agent_gw.parent),
            "tool": str(tool),
            "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release, "loadavg_at_end": os.getloadavg()},
            "requests_per_run": {"c1": N1, "c16": N16},
            "rounds": ROUNDS,
            "statistic": "median over rounds of each run's figure; rows interleaved in rotating order every round",
            "reading": "ratios are to direct of the same run. peer2 and nginx2 cross the same two proxies, namespaces "
                       "and TLS link; peer3 adds a transit router. cpu_us_per_request.proxies is the CPU every proxy "
                       "on the row spent per request (warm-up included); c16 throughput is CPU-bound on this "
                       "machine's cores, shared by all processes.",
            "results": results,
            "goals": {**goals(results), "memory": memory_goal(rss_before, rss_after, rss_quiet)},
            "rss_kib": {"before_load": rss_before, "after_load": rss_after, "quiet": rss_quiet,
                        "quiet_after_s": bl.QUIET_S},
            "peer_stats": {"before_load": stats_before, "after_load": stats_after, "during_load": during_load},
            "config": {"gateway.rate_per_second/rate_burst and the tenant's": 1_000_000,
                       "gateway.replay_cache": REPLAY_CACHE or "router default"},
        }
        dest = REPO / "target" / "bench" / "peer.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")
        print_table(results, rows)
        print(f"RSS KiB before -> after load -> {bl.QUIET_S:.0f} s later: " + ", ".join(
            f"{k} {rss_before[k]['VmRSS_kib']}->{rss_after[k]['VmRSS_kib']}->{rss_quiet[k]['VmRSS_kib']}"
            for k in daemons))
        # goals: row -> body size (or gateway) -> goal -> held
        missed = []
        for n, by in out["goals"].items():
            names = list(next(iter(by.values())))
            for g in names:
                where = [w if n == "memory" else f"{w} B" for w, e in by.items() if not e[g]]
                if where:
                    missed.append(f"{n} {g} ({', '.join(where)})")
        if during_load:
            print("peer TLS handshakes during the load (out/in), streams refused: " + ", ".join(
                f"{n} {d['peer_handshakes_out']}/{d['peer_handshakes_in']} {d['peer_streams_refused']}"
                for n, d in during_load.items()))
            # Whole run (c1 and c16 of every size): at c1 every batch is one call.
            print("peer assertions per signature made / per verification made: " + ", ".join(
                f"{n} {per(d['peer_assertions_signed'], d['peer_signatures'])}"
                f"/{per(d['peer_assertions_verified'], d['peer_signature_checks'])}"
                for n, d in during_load.items()))
        if not PEER_ROWS & set(out["goals"]):
            print("goals: none measured (they compare the peer rows with nginx2)")
        else:
            print("goals: " + ("all met" if not missed else "missed: " + "; ".join(missed)))
        if out["rows_omitted"]:
            print(f"rows omitted (--rows): {', '.join(out['rows_omitted'])}")
        print(f"wrote {dest.relative_to(REPO)}")
        return 0
    except BaseException:
        for r in routers.values():
            log(f"---- {r.name}\n{r.stack.logs()[-2500:]}")
        for p in procs:
            log(f"---- {p.name} log\n{p.log_text(1500)}")
        raise
    finally:
        for p in reversed(procs):
            p.stop()
        for r in routers.values():
            r.stop()
        net.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

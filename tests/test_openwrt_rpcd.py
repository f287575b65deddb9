"""The rpcd exec plugin the feed installs as /usr/libexec/rpcd/agentd
(openwrt-feed/agentd/files/agentd.rpcd), run the way rpcd runs it
(rpcd's plugin.c: `PLUGIN list` with stdin and stderr on /dev/null, then
`PLUGIN call METHOD` with the arguments as one JSON object on stdin, and
the first JSON value of stdout taken as the answer, which must be an
object), against the real agentctl and a running agentd + agent-gw.

rpcd itself is not packaged here; the plugin is exercised through exactly
that documented exec protocol. AGENTCTL / AGENTD_CONFIG point the plugin
at the built agentctl and the test's config (rpcd sets neither)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from harness.poll import wait_for

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "openwrt-feed" / "agentd" / "files" / "agentd.rpcd"

# DESIGN §9: the methods of ubus object `agentd`.
METHODS = {"status", "routes", "agents", "lookup", "peers", "candidates", "approve", "revoke", "reload", "tasks", "stats"}



def plugin_env(agentctl: Path, config: Optional[Path]) -> Dict[str, str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "AGENTCTL": str(Path(agentctl).absolute())}
    if config is not None:
        env["AGENTD_CONFIG"] = str(config)
    return env


def run_plugin(env: Dict[str, str], *args: str, stdin: Optional[bytes] = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["/bin/sh", str(PLUGIN), *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        env=env,
        timeout=20,
    )


def one_object(out: bytes) -> Dict[str, Any]:
    """The whole of stdout is exactly one JSON object (rpcd would take the
    first value and drop the rest; we allow nothing else)."""
    text = out.decode("utf-8")
    value, end = json.JSONDecoder().raw_decode(text.lstrip())
    assert text.lstrip()[end:].strip() == "", f"more than one JSON value on stdout: {text!r}"
    assert isinstance(value, dict), f"not a JSON object: {text!r}"
    return value


def example_args(signature: Dict[str, Any]) -> Dict[str, Any]:
    """Valid arguments built from the signature's types (rpcd's examples:
    "str" a string, an integer width, a boolean)."""
    args: Dict[str, Any] = {}
    for name, example in signature.items():
        if isinstance(example, bool):
            args[name] = True
        elif isinstance(example, int):
            args[name] = 1
        else:
            args[name] = {"capability": "demo.echo", "tenant": "lab", "id": "router-b"}.get(name, "x")
    return args


def assert_error(v: Dict[str, Any], code: str) -> None:
    err = v.get("error")
    assert isinstance(err, dict), v
    assert err.get("code") == code, v
    assert isinstance(err.get("message"), str) and err["message"], v
    assert set(v) == {"error"}, v


def signatures(env: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    p = run_plugin(env, "list")
    assert p.returncode == 0, p.stderr
    return one_object(p.stdout)


def test_list_is_typed_and_needs_no_daemon(bins, workdir: Path) -> None:
    # A config whose socket nothing listens on: `list` must not care.
    cfg = workdir / "agentd"
    cfg.write_text(f"config agentd 'main'\n\toption ipc_socket '{workdir}/none.sock'\n", encoding="utf-8")
    sigs = signatures(plugin_env(bins.agentctl, cfg))
    assert set(sigs) == METHODS
    for method, sig in sigs.items():
        assert isinstance(sig, dict), (method, sig)
        for arg, example in sig.items():
            typed = example == "str" or isinstance(example, bool) or example in (8, 16, 32, 64)
            assert typed, f"{method}.{arg}: {example!r} is not an rpcd type example"
    assert sigs["lookup"]["capability"] == "str" and sigs["lookup"]["version"] == 32
    for m in ("approve", "revoke"):
        assert sigs[m] == {"id": "str", "version": 32}, sigs[m]


def expect_shape(method: str, v: Dict[str, Any]) -> None:
    """What each method answers (the keys LuCI reads)."""
    # Discovery (docs/discovery.md) is off in this stack: nothing is a
    # candidate, so approve and revoke are refused with their own codes.
    if method == "approve":
        assert_error(v, "candidate_not_found")
        return
    if method == "revoke":
        assert_error(v, "not_approved")
        return
    assert "error" not in v, (method, v)
    if method == "status":
        assert v["router_id"] == "systest" and isinstance(v["generation"], int), v
        assert isinstance(v["routes"]["total"], int) and isinstance(v["config"]["ok"], bool), v
        # docs/discovery.md: where the claim on nexus-router.local stands.
        assert v["nexus_alias"] == {"name": "nexus-router.local", "state": "off",
                                    "detail": "discovery.enabled is 0"}, v
    elif method == "routes":
        assert [r["capability"] for r in v["routes"]] == ["demo.echo"], v
    elif method == "agents":
        assert [a["origin"] for a in v["agents"]] == ["agent://lab/echo"], v
    elif method == "lookup":
        assert v["capability"] == "demo.echo" and v["winner"] == "static:echo", v
        assert isinstance(v["candidates"], list), v
    elif method == "candidates":
        assert v["candidates"] == [] and v["admission"] == "manual" and v["discovery"] == "off", v
    elif method == "peers":
        assert v["router_id"] == "systest" and v["peers"] == [], v
    elif method == "reload":
        assert v["reloaded"] is True and isinstance(v["generation"], int), v
    elif method == "tasks":
        assert v["reported"] is True, v
        assert v["tasks"]["held"] == 0 and v["tasks"]["capacity"] == 512, v
    elif method == "stats":
        assert isinstance(v["counters"], dict) and isinstance(v["gateway"], dict), v
    else:
        raise AssertionError(f"no expectation for {method}")


def test_every_method_answers_one_object_and_errors_when_agentd_is_down(bins, make_stack) -> None:
    routes = [("echo", {"capability": "demo.echo", "version": 1, "origin": "agent://lab/echo", "endpoint": "http://127.0.0.1:9/x"})]
    stack = make_stack(routes=routes)
    env = plugin_env(bins.agentctl, stack.cfg.path)
    sigs = signatures(env)

    # The gateway reports to agentd every few seconds; `tasks` reads that.
    def reported() -> bool:
        p = run_plugin(env, "call", "tasks", stdin=b"{}")
        return one_object(p.stdout).get("reported") is True

    wait_for("agent-gw's first report to agentd", reported, timeout=20)

    for method, sig in sorted(sigs.items()):
        # rpcd sends blobmsg_format_json of the ubus message: always an
        # object; through uhttpd (LuCI) it also holds the caller's
        # ubus_rpc_session, which uhttpd adds to every call's arguments.
        args = dict(example_args(sig), ubus_rpc_session="8d7f2f1c0b6a4e5d9c3b2a1f0e9d8c7b")
        p = run_plugin(env, "call", method, stdin=json.dumps(args).encode())
        assert p.returncode == 0, (method, p.stderr)
        expect_shape(method, one_object(p.stdout))

    # Typed refusals of bad arguments, before anything reaches the daemon.
    for method, body in [
        ("lookup", b"{}"),
        ("lookup", b'{"capability": 7}'),
        ("lookup", b'{"capability": "demo.echo", "version": 0}'),
        ("approve", b'{"id": "router-b"}'),
        ("revoke", b'{"version": 2}'),
        ("status", b"[1, 2]"),
        ("status", b"{oops"),
    ]:
        assert_error(one_object(run_plugin(env, "call", method, stdin=body).stdout), "invalid_argument")
    assert_error(one_object(run_plugin(env, "call", "frobnicate", stdin=b"{}").stdout), "unknown_method")
    assert_error(one_object(run_plugin(env, "bogus").stdout), "invalid_argument")

    stack.stop()
    for method, sig in sorted(sigs.items()):
        p = run_plugin(env, "call", method, stdin=json.dumps(example_args(sig)).encode())
        v = one_object(p.stdout)
        assert_error(v, "unreachable")
        assert str(stack.cfg.socket) in v["error"]["message"], v
    # And `list` still answers with the daemon gone.
    assert set(signatures(env)) == METHODS


@pytest.mark.parametrize("method", ["status", "routes"])
def test_call_without_any_stdin_is_an_empty_argument_object(bins, stack, method: str) -> None:
    env = plugin_env(bins.agentctl, stack.cfg.path)
    v = one_object(run_plugin(env, "call", method, stdin=b"").stdout)
    assert "error" not in v, v

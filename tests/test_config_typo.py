"""A config typo is never an outage: agentd and agent-gw started on a file
with errors in sections come up on the file's own socket and listener,
serve what is valid, and `agentctl status` names every skipped part; a bad
rule makes the policy deny everything (and says so) while the rest serves."""

from __future__ import annotations

from harness.backend import registration
from harness.config import Section
from harness.http import envelope

# A misspelt section type and a route with a bad value and no endpoint.
TYPO_SECTIONS = [
    Section("gatway", "gw2", {"auth": "none"}),
    Section("route", "broken", {"capability": "office.print", "version": 0}),
]


def _problems(stack):
    st = stack.ctl_json("status")
    return st, [(p["section"], p.get("option"), p["action"]) for p in st["config"]["problems"]]


def test_typos_in_unused_sections_still_serve_on_the_files_socket_and_port(make_stack, backend):
    """Proves that with a typo'd option in `discovery`, an unknown section
    type and an invalid route, both daemons start without command-line
    overrides on the file's `ipc_socket` and `sdk_listen` (not the
    defaults), registration and invocation work, and `agentctl status`
    lists each problem with its section and what was done."""
    stack = make_stack(start=False, cli_overrides=False)
    # An option typo and a bad value in a section no daemon uses yet.
    stack.cfg.section("discovery").options.update({"enabeld": "1", "admission": "sometimes"})
    stack.cfg.sections.extend(TYPO_SECTIONS)
    stack.cfg.write()
    stack.start()
    assert stack.cfg.socket.exists()

    _, problems = _problems(stack)
    assert ("discovery 'discovery'", "enabeld", "option_ignored") in problems, problems
    assert ("discovery 'discovery'", "admission", "option_default") in problems, problems
    assert ("gatway 'gw2'", None, "section_skipped") in problems, problems
    assert any(p[0] == "route 'broken'" and p[2] == "section_skipped" for p in problems), problems
    st = stack.ctl_json("status")
    assert st["policy"]["ok"] is True, st
    assert st["config"]["ok"] is False and st["config"]["error"] is None, st

    stack.register(registration("typo.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("typo.echo", {}))
    r = stack.http.post("/agent/v1/invoke", envelope("typo.echo", {"n": 1}))
    assert r.status == 200 and r.json()["echo"] == {"n": 1}, r.describe()
    assert "starting on the valid part of" in stack.gw.log_text(), stack.gw.log_text()


def test_a_bad_rule_denies_every_call_and_says_which_rule(make_stack, backend):
    """Proves that an invalid `rule` section is not silently dropped (a lost
    deny rule must not become an allow): the policy denies every call with
    403 `policy_denied` naming the rule, `agentctl status` says the policy
    is invalid and why, while registration keeps working."""
    stack = make_stack(
        cli_overrides=False,
        rules=[("oops", {"priorty": 100, "action": "deny", "capability": "admin.*"})],
    )
    st = stack.ctl_json("status")
    assert st["policy"]["ok"] is False, st
    assert "rule 'oops'" in st["policy"]["error"] and "priorty" in st["policy"]["error"], st
    _, problems = _problems(stack)
    assert ("rule 'oops'", "priorty", "section_skipped") in problems, problems

    stack.register(registration("deny.echo", backend.endpoint, lease_seconds=60))
    r = stack.http.post("/agent/v1/invoke", envelope("deny.echo", {}))
    assert r.status == 403, r.describe()
    err = r.json()["error"]
    assert err["code"] == "policy_denied" and "rule 'oops'" in err["message"], err
    assert backend.calls("deny.echo") == []

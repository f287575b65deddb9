"""A snapshot larger than what ARPX sends at once (chunks of 256 routes,
two unwritten at most; each next chunk goes when the TLS writer reports
the earlier ones written): router B, started after router A holds 1 300
routes, gets all of them, and routes A adds and removes while the
snapshot may still be going leave B with exactly A's set."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from harness.poll import wait_for

ROUTES = 1300


def base_ids(router):
    return {k.split("@", 1)[0] for k in router.remote_set()}


def test_a_snapshot_of_many_chunks_arrives_whole_with_the_changes_made_during_it(mesh):
    a = mesh.router("router-a", agentd={"max_routes": 4000})
    b = mesh.router("router-b", agentd={"max_routes": 4000})
    mesh.link("router-a", "router-b")
    a.start()
    with ThreadPoolExecutor(max_workers=4) as pool:
        registered = list(pool.map(lambda i: a.register(f"s{i:04}", lease=300)["route_id"], range(ROUTES)))
    ids = set(registered)
    assert len(ids) == ROUTES
    b.start()
    # While B's session comes up and A's snapshot goes out: one route
    # leaves and one arrives.
    a.unregister(registered[0])
    ids.discard(registered[0])
    ids.add(a.register("late-1", lease=300)["route_id"])
    wait_for("B to hold exactly A's routes", lambda: base_ids(b) == ids or None, timeout=60)
    peer = b.wait_established("router-a")
    assert peer["routes_in"] == len(ids), peer

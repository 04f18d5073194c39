"""Terminating pods on existing nodes, as Karpenter counts them: a pod being deleted
still holds its node's resources until it is gone (state.Cluster drops a pod's usage
only once it is terminal), its required anti-affinity still repels, but it no longer
counts in topology spread domains (scheduling.IgnoredForTopology)."""

from __future__ import annotations

from typing import Any

from scheduling_support import ZONE, node, nodepool, pod_dict, spread, term

from karpy.scheduling import Pod, Simulator


def terminating(name: str, **kwargs: Any) -> Pod:
    raw = pod_dict(name, **kwargs)
    raw["metadata"]["deletionTimestamp"] = "2026-11-26T10:00:00Z"
    return Pod.from_dict(raw)


def pending(name: str, **kwargs: Any) -> Pod:
    return Pod.from_dict(pod_dict(name, **kwargs))


def test_a_terminating_pod_still_holds_its_nodes_room() -> None:
    busy = node("n1", cpu=3, bound=[terminating("leaving", cpu="2", node_name="n1")])
    results = Simulator([nodepool()]).solve([pending("new", cpu="2")], nodes=[busy])
    assert [n.node for n in results.existing_nodes] == []
    assert [[p.name for p in c.pods] for c in results.new_nodeclaims] == [["new"]]


def test_a_terminal_pod_frees_its_nodes_room() -> None:
    raw = pod_dict("done", cpu="2", node_name="n1")
    raw["status"] = {"phase": "Succeeded"}
    free = node("n1", cpu=3, bound=[Pod.from_dict(raw)])
    results = Simulator([nodepool()]).solve([pending("new", cpu="2")], nodes=[free])
    assert {n.node: [p.name for p in n.pods] for n in results.existing_nodes} == {"n1": ["new"]}
    assert list(results.new_nodeclaims) == []


def test_terminating_pods_do_not_count_in_spread_domains() -> None:
    # Two web pods leave zone-a. Counted, they would push all three new ones out of it.
    leaving = [terminating(f"old-{i}", labels={"app": "web"}, node_name="a1") for i in range(2)]
    full = node("a1", zone="zone-a", cpu=0.2, bound=leaving)
    web = [pending(f"web-{i}", labels={"app": "web"}, spread=[spread(ZONE, {"app": "web"})])
           for i in range(3)]  # fmt: skip
    results = Simulator([nodepool()]).solve(web, nodes=[full])
    zones = sorted(next(iter(c.requirements[ZONE].values)) for c in results.new_nodeclaims
                   for _ in c.pods)  # fmt: skip
    assert zones == ["zone-a", "zone-b", "zone-c"], zones


def test_a_terminating_pods_anti_affinity_still_repels() -> None:
    guard = terminating("guard", labels={"app": "guard"}, node_name="g1",
                        anti_affinity=[term(ZONE, {"app": "web"})])  # fmt: skip
    results = Simulator([nodepool()]).solve(
        [pending("web", labels={"app": "web"})], nodes=[node("g1", zone="zone-a", cpu=0.2,
                                                             bound=[guard])])  # fmt: skip
    (claim,) = results.new_nodeclaims
    assert not claim.requirements[ZONE].has("zone-a")

"""``karpy explain node`` without a cluster: disruption's own blockers, each method's
filter and budget, and what consolidating the node would do."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from karpy.controllers.disruption import (
    PdbLimits,
    PoolCatalogue,
    Snapshot,
    WhatIf,
    disruption_budgets,
)
from karpy.controllers.disruption._drift import Drift
from karpy.controllers.disruption._emptiness import Emptiness
from karpy.controllers.disruption._singlenode import SingleNodeConsolidation
from karpy.runtime import freeze
from karpy.scheduling import InstanceType, NodePoolTemplate, Offering, Simulator
from karpy.scheduling import resources as res
from karpy.state import Cluster
from karpy.state import testing as t
from karpy.tools.explain import NodeExplanation, explain_node, render_node

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
TYPES = [
    InstanceType.build(
        f"m-{cpu}x",
        capacity={res.CPU: cpu * 1000, res.MEMORY: 4 * cpu * t.GIB, res.PODS: 110},
        offerings=[Offering(zone="zone-a", capacity_type="on-demand", price=0.05 * cpu)],
    )
    for cpu in (1, 2, 4, 8)
]


class Scene:
    def __init__(self, **disruption: Any) -> None:
        self.cluster = Cluster()
        self.pods: dict[str, list[dict[str, Any]]] = {}
        self.pdbs: list[dict[str, Any]] = []
        pool = t.nodepool("default")
        pool["spec"]["disruption"] = {"consolidateAfter": "0s",
                                      "consolidationPolicy": "WhenEmptyOrUnderutilized",
                                      **disruption}
        self.cluster.update_nodepool(freeze(pool))

    def machine(self, name: str, type_name: str, *, consolidatable: bool = True,
                annotations: Mapping[str, str] | None = None) -> None:
        cpu = type_name.removeprefix("m-").removesuffix("x")
        labels = {"node.kubernetes.io/instance-type": type_name,
                  "topology.kubernetes.io/zone": "zone-a",
                  "karpenter.sh/capacity-type": "on-demand"}
        provider_id = f"test:///{name}"
        claim = t.nodeclaim(name, provider_id=provider_id, node_name=name, labels=labels,
                            cpu=cpu, memory=f"{4 * int(cpu)}Gi", registered=True,
                            initialized=True)
        claim["metadata"]["creationTimestamp"] = "2026-11-23T10:00:00Z"
        claim["spec"]["expireAfter"] = "24h"
        if consolidatable:
            claim["status"]["conditions"].append(
                {"type": "Consolidatable", "status": "True", "reason": "Consolidatable",
                 "lastTransitionTime": "2026-11-23T11:00:00Z"})
        node = t.node(name, provider_id=provider_id, nodepool="default", labels=labels,
                      cpu=cpu, memory=f"{4 * int(cpu)}Gi")
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        if annotations:
            node["metadata"]["annotations"] = dict(annotations)
        self.cluster.update_nodeclaim(freeze(claim))
        self.cluster.update_node(freeze(node))
        self.pods.setdefault(name, [])

    def pod(self, name: str, node: str, cpu: str = "500m", **kwargs: Any) -> None:
        obj = t.pod(name, node_name=node, cpu=cpu, memory="1Gi", **kwargs)
        self.cluster.update_pod(freeze(obj))
        self.pods[node].append(obj)

    def explain(self, name: str) -> NodeExplanation:
        pools = {e.name: PoolCatalogue(e, {it.name: it for it in TYPES})
                 for e in self.cluster.nodepools()}
        snapshot = Snapshot(now=NOW, pools=pools, pdbs=PdbLimits(self.pdbs),
                            pods_on=lambda node: self.pods.get(node, []),
                            nominated=self.cluster.is_node_nominated)
        methods = [Emptiness(), Drift(), SingleNodeConsolidation()]
        budgets = {str(m.reason): disruption_budgets(self.cluster.nodepools(),
                                                     self.cluster.nodes(), m.reason, NOW)
                   for m in methods}
        templates = [NodePoolTemplate.from_nodepool_dict(e.raw, TYPES)
                     for e in self.cluster.nodepools()]
        whatif = WhatIf(simulator=Simulator(templates),
                        nodes=tuple(self.cluster.existing_nodes()))
        return explain_node(name, self.cluster.node_by_name(name), snapshot=snapshot,
                            methods=methods, budgets=budgets, whatif=whatif)


def method(answer: NodeExplanation, name: str) -> Any:
    return next(m for m in answer.methods if m.method == name)


def test_an_underutilized_node_is_a_candidate_and_would_be_replaced_cheaper() -> None:
    scene = Scene()
    scene.machine("big", "m-8x")
    scene.pod("web", "big")
    answer = scene.explain("big")
    assert answer.candidate_for == ["Underutilized"]
    action = method(answer, "Underutilized").action
    assert action["decision"] == "replace"
    assert action["replacements"][0]["instanceTypes"][0] == "m-1x"
    assert abs(action["savings"] - (0.40 - 0.05)) < 1e-9
    assert [r.code for r in method(answer, "Empty").reasons] == ["not-empty"]
    assert [r.code for r in method(answer, "Drifted").reasons] == ["not-drifted"]
    assert answer.expiration["expiresAt"] == "2026-11-24T10:00:00+00:00"
    assert "replace it with 1 cheaper node" in render_node(answer)


def test_a_node_whose_pods_fit_elsewhere_would_be_deleted() -> None:
    scene = Scene()
    scene.machine("a", "m-4x")
    scene.machine("b", "m-4x")
    scene.pod("web", "b")
    scene.pod("other", "a", cpu="2")
    action = method(scene.explain("b"), "Underutilized").action
    assert action["decision"] == "delete"
    assert abs(action["savings"] - 0.20) < 1e-9


def test_an_empty_node_is_an_emptiness_candidate() -> None:
    scene = Scene()
    scene.machine("idle", "m-2x")
    answer = scene.explain("idle")
    assert answer.candidate_for == ["Empty"]
    assert method(answer, "Empty").action["decision"] == "delete"


def test_do_not_disrupt_on_the_node_or_a_pod_blocks_every_method() -> None:
    scene = Scene()
    scene.machine("kept", "m-4x", annotations={"karpenter.sh/do-not-disrupt": "true"})
    answer = scene.explain("kept")
    assert answer.candidate_for == []
    assert answer.blockers[0].message == (
        'disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation')
    assert "cannot be disrupted" in answer.summary
    scene.machine("b", "m-4x")
    scene.pod("precious", "b")
    scene.pods["b"][0]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    answer = scene.explain("b")
    assert answer.blockers[0].message == (
        'pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/precious)')


def test_a_pdb_blocks_eviction() -> None:
    scene = Scene()
    scene.machine("a", "m-4x")
    scene.pod("web", "a", labels={"app": "web"})
    scene.pdbs.append({"metadata": {"name": "web", "namespace": "default"},
                       "spec": {"selector": {"matchLabels": {"app": "web"}}},
                       "status": {"disruptionsAllowed": 0}})
    answer = scene.explain("a")
    assert [r.message for r in answer.blockers] == [
        "pdb prevents pod evictions (PodDisruptionBudget=[default/web])"]


def test_consolidate_after_not_elapsed_and_when_empty_policy() -> None:
    scene = Scene(consolidationPolicy="WhenEmpty")
    scene.machine("fresh", "m-8x", consolidatable=False)
    scene.pod("web", "fresh")
    answer = scene.explain("fresh")
    under = method(answer, "Underutilized").reasons[0]
    assert under.code == "consolidation-policy"
    assert "WhenEmpty" in under.message
    scene = Scene()
    scene.machine("fresh", "m-8x", consolidatable=False)
    scene.pod("web", "fresh")
    reason = method(scene.explain("fresh"), "Underutilized").reasons[0]
    assert reason.code == "consolidate-after"


def test_an_exhausted_budget_is_named_with_its_numbers() -> None:
    scene = Scene(budgets=[{"nodes": "0"}])
    scene.machine("big", "m-8x")
    scene.pod("web", "big")
    reason = method(scene.explain("big"), "Underutilized").reasons[0]
    assert reason.code == "budget"
    assert reason.details == {"nodepool": "default", "reason": "Underutilized",
                              "allowed": 0, "nodes": 1, "disrupting": 0}


def test_an_unknown_or_unmanaged_node() -> None:
    scene = Scene()
    assert not scene.explain("ghost").found
    scene.cluster.update_node(freeze(t.node("plain")))
    answer = scene.explain("plain")
    assert answer.blockers[0].message == "node isn't managed by karpenter"
    assert answer.to_dict()["candidateFor"] == []


def test_a_candidate_consolidation_cannot_improve_says_why() -> None:
    scene = Scene()
    scene.machine("snug", "m-1x")
    scene.pod("web", "snug")
    verdict = method(scene.explain("snug"), "Underutilized")
    assert verdict.candidate
    assert verdict.action["decision"] == "none"
    assert [r.message for r in verdict.reasons] == ["Can't replace with a cheaper node"]

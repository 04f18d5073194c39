"""``karpy explain pod`` without a cluster: each reason a NodePool cannot host a pod is
named with its facts, and the overall answer is the provisioner's own decision."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.cloudprovider.fake import default_instance_types
from karpy.runtime import freeze
from karpy.scheduling import Pod, Simulator
from karpy.scheduling.overlay import Overlay, PoolTypes, apply_overlays
from karpy.scheduling.requirements import Requirement, Requirements
from karpy.state import Cluster
from karpy.state import testing as t
from karpy.tools.explain import PodExplanation, PoolInput, PoolVerdict, explain_pod, render_pod

ZONE = "topology.kubernetes.io/zone"


def cluster_with(*pools: dict[str, Any]) -> Cluster:
    cluster = Cluster()
    for pool in pools:
        cluster.update_nodepool(freeze(pool))
    return cluster


def explain(cluster: Cluster, raw: dict[str, Any], **pool_errors: str) -> PodExplanation:
    cluster.update_pod(freeze(raw))
    types = default_instance_types()
    pools = [PoolInput(e, error=pool_errors[e.name]) if e.name in pool_errors
             else PoolInput(e, types) for e in cluster.nodepools()]
    key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
    return explain_pod(key, freeze(raw), cluster=cluster, pools=pools)


def verdict(answer: PodExplanation, pool: str) -> PoolVerdict:
    return next(v for v in answer.nodepools if v.nodepool == pool)


def codes(answer: PodExplanation, pool: str) -> list[str]:
    return [r.code for r in verdict(answer, pool).reasons]


def test_a_taint_not_tolerated_is_named() -> None:
    cluster = cluster_with(
        t.nodepool("gpu", taints=[{"key": "nvidia.com/gpu", "value": "true",
                                   "effect": "NoSchedule"}]))
    answer = explain(cluster, t.pod("web"))
    reason = verdict(answer, "gpu").reasons[0]
    assert reason.code == "taint"
    assert reason.details["taint"] == "nvidia.com/gpu=true:NoSchedule"
    assert answer.decision == {"action": "none"}
    # the event is the provisioner's FailedScheduling text, naming the pool and taint
    assert answer.event == (
        'Failed to schedule pod, nodepool "gpu": did not tolerate taint '
        "nvidia.com/gpu=true:NoSchedule"
    )


def test_a_node_selector_conflict_names_the_key_and_both_sides() -> None:
    cluster = cluster_with(t.nodepool("team-a", labels={"team": "a"}),
                           t.nodepool("plain"))
    answer = explain(cluster, t.pod("web", node_selector={"team": "b"}))
    conflict = verdict(answer, "team-a").reasons[0]
    assert conflict.code == "requirement"
    assert conflict.details == {"key": "team", "pod": "team In [b]", "nodepool": "team In [a]"}
    undefined = verdict(answer, "plain").reasons[0]
    assert undefined.code == "requirement"
    assert undefined.details["key"] == "team" and undefined.details["nodepool"] is None
    assert "does not set label 'team'" in undefined.message


def test_a_zone_the_pool_cannot_offer_names_the_zones_it_can() -> None:
    cluster = cluster_with(t.nodepool("a", requirements=[
        {"key": ZONE, "operator": "In", "values": ["test-zone-a"]}]), t.nodepool("any"))
    answer = explain(cluster, t.pod("web", node_selector={ZONE: "mars-1"}))
    assert verdict(answer, "a").reasons[0].details["nodepool"] == f"{ZONE} In [test-zone-a]"
    offered = verdict(answer, "any").reasons[0]
    assert offered.code == "requirement"
    assert offered.details["offered"] == ["test-zone-a", "test-zone-b", "test-zone-c"]


def test_a_volume_bound_in_another_zone_is_named() -> None:
    cluster = cluster_with(t.nodepool("a", requirements=[
        {"key": ZONE, "operator": "In", "values": ["test-zone-a"]}]))
    cluster.volumes.update_claim(freeze(t.persistent_volume_claim("data", volume_name="pv-1")))
    cluster.volumes.update_volume(freeze(t.persistent_volume("pv-1", zones=["test-zone-b"])))
    answer = explain(cluster, t.pod("db", claims=["data"]))
    reason = verdict(answer, "a").reasons[0]
    assert reason.code == "volume-zone"
    assert reason.details["volume"] == [f"{ZONE} In [test-zone-b]"]
    assert reason.details["offered"] == ["test-zone-a"]


def test_a_reached_limit_names_the_resource_used_and_limit() -> None:
    cluster = cluster_with(t.nodepool("small", limits={"cpu": "4"}))
    claim = t.nodeclaim("small-1", nodepool="small", provider_id="test:///small-1",
                        node_name="small-1", cpu="4", registered=True, initialized=True)
    cluster.update_nodeclaim(freeze(claim))
    # the node is full, so the pod needs a new one, which the limit forbids
    cluster.update_node(freeze(t.node("small-1", provider_id="test:///small-1",
                                      nodepool="small", cpu="4")))
    cluster.update_pod(freeze(t.pod("hog", node_name="small-1", cpu="4")))
    answer = explain(cluster, t.pod("web"))
    reason = verdict(answer, "small").reasons[0]
    assert reason.code == "limit"
    assert reason.details == {"resource": "cpu", "used": "4", "limit": "4"}


def test_too_large_names_the_largest_compatible_type_and_what_it_lacks() -> None:
    cluster = cluster_with(t.nodepool("amd", requirements=[
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]))
    cluster.update_daemonset(freeze(t.daemonset("agent", cpu="500m")))
    answer = explain(cluster, t.pod("big", cpu="20"))
    reason = verdict(answer, "amd").reasons[0]
    assert reason.code == "resources"
    # the gpu type (8 cpu) and large (16 cpu) are amd64; the largest by cpu is named
    assert reason.details["instanceType"] == "large-instance-type"
    assert reason.details["lacking"]["cpu"] == {"requested": "20500m",
                                                "allocatable": "15900m"}
    assert reason.details["daemonsetOverhead"]["cpu"] == "500m"


def test_zonal_anti_affinity_with_a_pod_in_the_pools_only_zone_is_topology() -> None:
    cluster = cluster_with(t.nodepool("a", requirements=[
        {"key": ZONE, "operator": "In", "values": ["test-zone-a"]}]))
    cluster.update_node(freeze(t.node("n1", labels={ZONE: "test-zone-a"}, cpu="1")))
    cluster.update_pod(freeze(t.pod("db-0", node_name="n1", cpu="500m",
                                    labels={"app": "db"})))
    raw = t.pod("db-1", labels={"app": "db"})
    raw["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "db"}}}]}}
    answer = explain(cluster, raw)
    reason = verdict(answer, "a").reasons[0]
    assert reason.code == "topology"
    assert "anti-affinity" in reason.message and ZONE in reason.message


def test_a_missing_claim_or_storage_class_is_the_provisioners_validation_error() -> None:
    cluster = cluster_with(t.nodepool("a"))
    answer = explain(cluster, t.pod("db", claims=["nowhere"]))
    assert [r.code for r in answer.reasons] == ["missing-pvc"]
    assert 'persistentvolumeclaim "default/nowhere"' in answer.reasons[0].message
    assert answer.event.startswith("Failed to schedule pod, failed to validate pod, ")
    assert answer.nodepools == ()
    cluster.volumes.update_claim(freeze(t.persistent_volume_claim("data",
                                                                  storage_class="gone")))
    answer = explain(cluster, t.pod("db2", claims=["data"]))
    assert [r.code for r in answer.reasons] == ["missing-storageclass"]


def test_no_nodepool_at_all() -> None:
    answer = explain(Cluster(), t.pod("web"))
    assert [r.code for r in answer.reasons] == ["no-nodepool"]
    assert answer.status == "pending"


def test_an_unready_nodeclass_and_unlistable_types_are_the_pools_reasons() -> None:
    pool = t.nodepool("a", ready=False)
    pool["status"]["conditions"].append({"type": "NodeClassReady", "status": "False",
                                         "reason": "NodeClassNotFound",
                                         "message": "KWOKNodeClass default not found",
                                         "lastTransitionTime": "2026-11-23T20:00:00Z"})
    cluster = cluster_with(pool, t.nodepool("b"))
    answer = explain(cluster, t.pod("web"), b="no catalogue")
    assert verdict(answer, "a").reasons[0].code == "nodeclass-not-ready"
    assert "KWOKNodeClass default not found" in verdict(answer, "a").reasons[0].message
    assert verdict(answer, "b").reasons[0].code == "instance-types"
    assert [r.code for r in answer.reasons] == ["no-usable-nodepool"]


def test_a_pod_that_fits_gets_the_plan_of_the_heaviest_pool() -> None:
    light, heavy = t.nodepool("light"), t.nodepool("heavy", weight=10)
    answer = explain(cluster_with(light, heavy), t.pod("web"))
    assert answer.decision["action"] == "new-nodeclaim"
    assert answer.decision["nodepool"] == "heavy"
    assert all(v.fits for v in answer.nodepools)
    assert verdict(answer, "light").instance_types[0] == "small-instance-type"


def test_bound_nominated_and_fitting_existing_capacity() -> None:
    cluster = cluster_with(t.nodepool("a"))
    claim = t.nodeclaim("a-1", nodepool="a", provider_id="test:///a-1", node_name="a-1",
                        registered=True, initialized=True)
    cluster.update_nodeclaim(freeze(claim))
    cluster.update_node(freeze(t.node("a-1", provider_id="test:///a-1", nodepool="a")))
    bound = explain(cluster, t.pod("web", node_name="a-1"))
    assert (bound.status, bound.node, bound.nodeclaim, bound.nodepool) == (
        "bound", "a-1", "a-1", "a")
    pending = t.pod("next")
    fits = explain(cluster, pending)
    assert fits.decision == {"action": "existing-node", "node": "a-1"}
    cluster.nominate([Pod.from_dict(pending)], "a-1")
    nominated = explain(cluster, pending)
    assert (nominated.status, nominated.nodeclaim) == ("nominated", "a-1")


def test_a_pod_kube_scheduler_has_not_tried_is_waiting() -> None:
    answer = explain(cluster_with(t.nodepool("a")), t.pod("web", unschedulable=False))
    assert answer.status == "waiting"
    assert answer.reasons[0].code == "not-provisionable"


def test_the_event_is_what_the_simulator_says_for_the_same_input() -> None:
    cluster = cluster_with(t.nodepool("a", labels={"team": "a"}))
    raw = t.pod("web", node_selector={"team": "b"})
    answer = explain(cluster, raw)
    from karpy.scheduling import NodePoolTemplate

    template = NodePoolTemplate.from_nodepool_dict(cluster.nodepools()[0].raw,
                                                   default_instance_types())
    results = Simulator([template]).solve([Pod.from_dict(raw)])
    assert answer.event == f"Failed to schedule pod, {results.errors[0].reason}"
    assert verdict(answer, "a").scheduler in results.errors[0].reason


@pytest.mark.parametrize("output", ["json"])
def test_the_json_form_is_stable(output: str) -> None:
    answer = explain(cluster_with(t.nodepool("a", labels={"team": "a"})),
                     t.pod("web", node_selector={"team": "b"}))
    data = answer.to_dict()
    assert set(data) == {"kind", "pod", "status", "summary", "node", "nodeclaim", "nodepool",
                         "reasons", "decision", "event", "nodepools"}
    assert set(data["nodepools"][0]) == {"nodepool", "fits", "reasons", "scheduler",
                                         "instanceTypes", "price"}
    assert data["nodepools"][0]["reasons"][0]["code"] == "requirement"


def test_the_overlay_that_priced_the_type_is_named() -> None:
    cluster = cluster_with(t.nodepool("default"))
    raw = t.pod("web")
    cluster.update_pod(freeze(raw))
    discount = Overlay(
        name="negotiated",
        requirements=Requirements([Requirement.new(
            "node.kubernetes.io/instance-type", "In", ["default-instance-type"])]),
        price="0.001",
    )
    types = apply_overlays([discount], PoolTypes("default", {}, default_instance_types()))
    pools = [PoolInput(e, types) for e in cluster.nodepools()]
    answer = explain_pod("default/web", freeze(raw), cluster=cluster, pools=pools)
    assert verdict(answer, "default").priced_by == "negotiated"
    assert verdict(answer, "default").instance_types[0] == "default-instance-type"
    assert "priced by NodeOverlay negotiated" in answer.summary
    assert "priced by NodeOverlay negotiated" in render_pod(answer)

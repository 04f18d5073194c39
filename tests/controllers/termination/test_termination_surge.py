"""Surge before evict (karpy.controllers.surge): the eviction queue restarts an opted-in
pod's Deployment instead of evicting the pod when evicting it would leave no replica,
and evicts it (saying why) when its owner cannot surge or the surge times out."""

from __future__ import annotations

from typing import Any

import pytest
from controllers.termination import factories as f
from controllers.termination.rigging import Rig

from karpy.controllers.surge import (
    ANNOTATION_RESTARTED_AT,
    ANNOTATION_SURGE_BEFORE_EVICT,
    REASON_SURGE_NOT_POSSIBLE,
    REASON_SURGE_TIMED_OUT,
    REASON_SURGING,
    max_surge,
    opted_in,
    surge_blocker,
    surging_pods,
)
from karpy.runtime import Request, kinds
from karpy.state.kinds import NODE_POOL

WEB = Request("default", "web")


def nodepool(name: str = "default", surge: str | None = "true") -> dict[str, Any]:
    annotations = {} if surge is None else {ANNOTATION_SURGE_BEFORE_EVICT: surge}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "annotations": annotations}, "spec": {}}


def deployment(*, available: int = 1, replicas: int = 1, strategy: dict[str, Any] | None = None,
               **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "strategy": strategy or {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": {"app": "web"}}}, **spec},
        "status": {"availableReplicas": available, "replicas": replicas},
    }


def replicaset() -> dict[str, Any]:
    # The factories' pods are owned by ReplicaSet "owner" (uid "owner-ReplicaSet").
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "owner", "namespace": "default", "uid": "owner-ReplicaSet",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": "web", "uid": "d", "controller": True}]}}


def world(rig: Rig, *, pool: dict[str, Any] | None = None, dep: dict[str, Any] | None = None,
          **pod: Any) -> dict[str, Any]:
    rig.kube.add(NODE_POOL, pool or nodepool())
    rig.kube.add(kinds.NODE, f.node("a", provider_id="fake://a"))
    rig.kube.add(kinds.REPLICA_SET, replicaset())
    rig.kube.add(kinds.DEPLOYMENT, dep or deployment())
    made = rig.kube.add(kinds.POD, f.pod("web", node_name="a", labels={"app": "web"}, **pod))
    rig.queue.add([made], None, "a")
    return made


def evictions(rig: Rig) -> list[Any]:
    return [c for c in rig.kube.calls if c.verb == "evict"
            and "dryRun" not in (c.body.get("deleteOptions") or {})]


def restarts(rig: Rig) -> list[Any]:
    return [c for c in rig.kube.calls if c.verb == "patch" and c.kind == kinds.DEPLOYMENT]


def reasons(rig: Rig) -> list[str]:
    return [e.reason for e in rig.recorder.events]


async def test_the_only_replica_is_replaced_by_its_deployment_not_evicted(rig: Rig) -> None:
    world(rig)
    result = await rig.queue.reconcile(WEB)
    assert not evictions(rig)
    [patch] = restarts(rig)
    annotations = patch.body["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {ANNOTATION_RESTARTED_AT: "2024-01-01T00:00:00Z"}
    assert REASON_SURGING in reasons(rig)
    assert 0 < result.requeue_after <= 1.0
    # Looking again while the Deployment rolls: no second restart, still no eviction.
    rig.clock.advance(30)
    await rig.queue.reconcile(WEB)
    assert len(restarts(rig)) == 1 and not evictions(rig)


async def test_a_surge_that_does_not_finish_in_the_progress_deadline_evicts(rig: Rig) -> None:
    world(rig, dep=deployment(progressDeadlineSeconds=60))
    await rig.queue.reconcile(WEB)
    rig.clock.advance(61)
    await rig.queue.reconcile(WEB)
    assert len(evictions(rig)) == 1
    assert REASON_SURGE_TIMED_OUT in reasons(rig)
    assert rig.kube.peek(kinds.POD, "web", "default") is None


async def test_a_deployment_past_its_deadline_ends_the_wait_at_once(rig: Rig) -> None:
    world(rig)
    await rig.queue.reconcile(WEB)
    rig.kube.add(kinds.DEPLOYMENT, {**deployment(), "status": {"conditions": [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}})
    await rig.queue.reconcile(WEB)
    assert len(evictions(rig)) == 1


async def test_a_pod_that_did_not_opt_in_is_evicted_as_karpenter_evicts(rig: Rig) -> None:
    world(rig, pool=nodepool(surge=None))
    await rig.queue.reconcile(WEB)
    assert len(evictions(rig)) == 1 and not restarts(rig)
    assert not [c for c in rig.kube.calls if c.kind == kinds.DEPLOYMENT]


async def test_a_pod_opts_out_of_its_nodepools_choice(rig: Rig) -> None:
    world(rig)
    rig.kube.add(kinds.POD, {**rig.kube.peek(kinds.POD, "web", "default"), "metadata": {
        **rig.kube.peek(kinds.POD, "web", "default")["metadata"],
        "annotations": {ANNOTATION_SURGE_BEFORE_EVICT: "false"}}})
    await rig.queue.reconcile(WEB)
    assert len(evictions(rig)) == 1 and not restarts(rig)


async def test_a_replica_elsewhere_means_a_plain_eviction(rig: Rig) -> None:
    world(rig, dep=deployment(available=2, replicas=2))
    await rig.queue.reconcile(WEB)
    assert len(evictions(rig)) == 1 and not restarts(rig)


async def test_a_pdb_that_refuses_the_eviction_makes_it_surge(rig: Rig) -> None:
    rig.kube.add(kinds.POD_DISRUPTION_BUDGET, {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}})
    world(rig, dep=deployment(available=2, replicas=2))
    await rig.queue.reconcile(WEB)
    assert not evictions(rig)
    assert len(restarts(rig)) == 1
    assert rig.kube.peek(kinds.POD, "web", "default") is not None  # the dry run kept it


@pytest.mark.parametrize(("dep", "why"), [
    (deployment(strategy={"type": "Recreate"}), "uses the Recreate strategy"),
    (deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}),
     "has maxSurge 0"),
    (deployment(paused=True), "is paused"),
])
async def test_a_deployment_that_cannot_surge_is_evicted_with_the_reason(
    rig: Rig, dep: dict[str, Any], why: str
) -> None:
    world(rig, dep=dep)
    await rig.queue.reconcile(WEB)
    assert len(evictions(rig)) == 1 and not restarts(rig)
    [event] = [e for e in rig.recorder.events if e.reason == REASON_SURGE_NOT_POSSIBLE]
    assert event.message == f"Evicting the pod without surging first: Deployment default/web {why}"


async def test_a_statefulset_pod_is_evicted_with_the_reason(rig: Rig) -> None:
    world(rig, owner=("apps/v1", "StatefulSet"))
    await rig.queue.reconcile(WEB)
    assert len(evictions(rig)) == 1 and not restarts(rig)
    [event] = [e for e in rig.recorder.events if e.reason == REASON_SURGE_NOT_POSSIBLE]
    assert "StatefulSet" in event.message


@pytest.mark.parametrize(("value", "replicas", "pods"), [
    (None, 1, 1), ("25%", 1, 1), ("50%", 3, 2), ("0%", 4, 0), (0, 1, 0), (2, 1, 2),
    ("x%", 1, 0),
])
def test_max_surge_resolves_as_the_deployment_controller(
    value: Any, replicas: int, pods: int
) -> None:
    rolling = {} if value is None else {"maxSurge": value}
    dep = deployment(replicas=replicas, strategy={"type": "RollingUpdate",
                                                  "rollingUpdate": rolling})
    assert max_surge(dep) == pods
    assert (surge_blocker(dep) is None) == (pods > 0)


def test_opting_in() -> None:
    pod = {"metadata": {"annotations": {}}}
    assert not opted_in(pod, None)
    assert opted_in(pod, nodepool())
    assert not opted_in(pod, nodepool(surge="false"))
    assert opted_in({"metadata": {"annotations": {ANNOTATION_SURGE_BEFORE_EVICT: "true"}}}, None)


async def test_disruption_counts_only_pods_that_opted_in_are_held_and_can_surge(
    rig: Rig,
) -> None:
    held = world(rig)
    sts = f.pod("db-0", node_name="a", owner=("apps/v1", "StatefulSet"))
    plain = f.pod("other", node_name="a")
    surging = await surging_pods(
        rig.kube, [(held, nodepool()), (sts, nodepool()), (plain, nodepool(surge=None))],  # type: ignore[arg-type]
        blocked=lambda pod: True)
    assert surging == frozenset({"default/web"})
    assert await surging_pods(rig.kube, [(held, nodepool())],  # type: ignore[arg-type]
                              blocked=lambda pod: False) == frozenset()

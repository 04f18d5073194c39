"""The provisioner against the cluster model, the fake provider and a recording client."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from provisioning_support import Harness, build

from karpy.apis import NodeClaim
from karpy.cloudprovider import OfferingKey
from karpy.controllers.settings import Settings
from karpy.runtime import errors
from karpy.scheduling.defaultspread import parse_scheduler_config
from karpy.state.testing import daemonset, node, nodeclaim, nodepool, pod

LOGGER = "controller"
T = TypeVar("T")


def pending(h: Harness, count: int, *, cpu: str = "1", prefix: str = "inflate",
            **kwargs: Any) -> list[dict[str, Any]]:
    pods = [pod(f"{prefix}-{i}", cpu=cpu, memory="256Mi", **kwargs) for i in range(count)]
    for p in pods:
        h.cluster.update_pod(p)
    return pods


def records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.getMessage() == message]


async def test_pending_pods_become_nodeclaims_that_karpenter_would_recognise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = build()
    h.cluster.update_nodepool(nodepool("default", labels={"team": "a"}))
    pending(h, 10)
    caplog.set_level(logging.INFO, LOGGER)

    assert await h.provisioner.provision() == 0

    assert h.client.created, "no NodeClaim was created"
    total_pods = 0
    for claim in h.client.created:
        meta = claim["metadata"]
        assert meta["name"].startswith("default-")
        assert meta["generateName"] == "default-"
        assert meta["labels"]["karpenter.sh/nodepool"] == "default"
        assert meta["labels"]["team"] == "a"
        assert meta["labels"]["karpenter.test.sh/testnodeclass"] == "default"
        assert meta["annotations"]["karpenter.sh/nodepool-hash-version"] == "v3"
        assert meta["annotations"]["karpenter.sh/nodepool-hash"]
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["blockOwnerDeletion"]) == (
            "NodePool", "default", True)
        # Born with the termination finalizer: no machine can exist without it, and no
        # follow-up patch is needed to add it.
        assert meta["finalizers"] == ["karpenter.sh/termination"]
        spec = claim["spec"]
        assert spec["nodeClassRef"]["kind"] == "TestNodeClass"
        assert spec["expireAfter"] == "720h"
        keys = {r["key"] for r in spec["requirements"]}
        assert "node.kubernetes.io/instance-type" in keys
        assert "karpenter.sh/nodepool" in keys
        assert not keys & {"karpenter.sh/registered", "karpenter.sh/initialized"}
        assert spec["resources"]["requests"]["cpu"]
        pods = int(spec["resources"]["requests"]["pods"])
        total_pods += pods
        # The fake provider (like a real one) can launch what was asked for.
        launched = await h.provider.create(NodeClaim.from_dict(claim))
        assert launched.status.provider_id
    assert total_pods == 10
    # Every pod is nominated to the NodeClaim planned for it; none is provisionable now.
    assert h.cluster.provisionable_pods() == []
    assert all(h.cluster.is_nominated(f"default/inflate-{i}") for i in range(10))

    [found] = records(caplog, "found provisionable pod(s)")
    assert found.Pods == ("default/inflate-0, default/inflate-1, default/inflate-2, "  # type: ignore[attr-defined]
                          "default/inflate-3, default/inflate-4 and 5 other(s)")
    assert found.duration.endswith("s")  # type: ignore[attr-defined]
    [computed] = records(caplog, "computed new nodeclaim(s) to fit pod(s)")
    assert computed.nodeclaims == len(h.client.created)  # type: ignore[attr-defined]
    assert computed.pods == 10  # type: ignore[attr-defined]
    created = records(caplog, "created nodeclaim")
    assert len(created) == len(h.client.created)
    first = created[0]
    assert first.NodePool == {"name": "default"}  # type: ignore[attr-defined]
    assert first.NodeClaim["name"].startswith("default-")  # type: ignore[attr-defined]
    assert set(first.requests) >= {"cpu", "memory", "pods"}  # type: ignore[attr-defined]
    by_name = {c["metadata"]["name"]: c for c in h.client.created}
    types = _types(by_name[first.NodeClaim["name"]])  # type: ignore[attr-defined]
    assert first.__dict__["instance-types"] == ", ".join(types[:5]) + (
        f" and {len(types) - 5} other(s)" if len(types) > 5 else "")
    assert h.metric("karpenter_nodeclaims_created_total", reason="provisioned",
                    nodepool="default") == len(h.client.created)
    assert h.metric("karpenter_scheduler_scheduling_duration_seconds_count",
                    controller="provisioner") == 1
    assert h.recorder.reasons("Nominated")


async def test_a_second_round_does_not_provision_the_same_pods_again() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    pending(h, 5)
    await h.provisioner.provision()
    first = len(h.client.created)
    # The NodeClaims launch (the lifecycle controller fills in their status).
    for claim in list(h.client.created):
        launched = await h.provider.create(NodeClaim.from_dict(claim))
        h.cluster.update_nodeclaim(launched.to_dict())
    await h.provisioner.provision()
    assert len(h.client.created) == first
    # New pods use the room left on the in-flight machine before buying another.
    more = pending(h, 1, cpu="100m", prefix="small")
    await h.provisioner.provision()
    assert len(h.client.created) == first
    assert h.cluster.nomination("default/small-0") is not None
    assert more


async def test_pods_that_fit_existing_nodes_are_nominated_there() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    h.cluster.update_node(node("worker", provider_id="kind://worker", cpu="8", memory="32Gi"))
    pending(h, 3)
    await h.provisioner.provision()
    assert h.client.created == []
    assert h.cluster.nomination("default/inflate-0") == "node/worker"
    assert next(e.message for e in h.recorder.reasons("Nominated")) == (
        "Pod should schedule on: node/worker")


async def test_a_nodepool_limit_stops_provisioning_at_the_limit() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool(limits={"cpu": "4"}))
    pending(h, 10, cpu="1500m")
    await h.provisioner.provision()
    assert h.client.created, "nothing was provisioned under the limit"
    capacity = {it.name: it.capacity["cpu"] for it in h.provider.instance_types}
    # Whichever allowed instance type each NodeClaim launches as, the pool stays
    # within its 4 CPU.
    worst = sum(max(capacity[t] for t in _types(c)) for c in h.client.created)
    assert worst <= 4000
    failed = h.recorder.reasons("FailedScheduling")
    assert failed, "pods over the limit got no event"
    assert failed[0].type == "Warning"
    assert failed[0].message.startswith("Failed to schedule pod, ")


async def test_a_pool_already_over_its_limit_creates_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = build()
    h.cluster.update_nodepool(nodepool(limits={"cpu": "2"}))

    h.cluster.update_nodeclaim(nodeclaim("default-old", provider_id="fake://old", cpu="4"))
    pending(h, 2)
    caplog.set_level(logging.INFO, LOGGER)
    await h.provisioner.provision()
    assert h.client.created == []


async def test_the_heaviest_nodepool_is_used_first() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool("cheap", weight=10))
    h.cluster.update_nodepool(nodepool("preferred", weight=90))
    h.cluster.update_nodepool(nodepool("unweighted"))
    pending(h, 4)
    await h.provisioner.provision()
    assert {c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in h.client.created} == {
        "preferred"}


async def test_nodepools_that_are_not_ready_or_being_deleted_are_skipped() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool("not-ready", weight=100, ready=False))
    leaving = nodepool("leaving", weight=50)
    leaving["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    h.cluster.update_nodepool(leaving)
    h.cluster.update_nodepool(nodepool("fine"))
    pending(h, 2)
    await h.provisioner.provision()
    assert {c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in h.client.created} == {
        "fine"}


async def test_offerings_that_ran_out_of_capacity_are_not_planned() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    for zone in ("test-zone-a", "test-zone-b", "test-zone-c"):
        for ct in ("spot", "on-demand"):
            h.unavailable.mark([OfferingKey("small-instance-type", zone, ct)])
    pending(h, 1)
    await h.provisioner.provision()
    [claim] = h.client.created
    assert "small-instance-type" not in _types(claim)
    assert _types(claim)[0] == "default-instance-type"


async def test_instance_types_are_fetched_once_per_nodepool_generation() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool(generation=1))
    pending(h, 1)
    await h.provisioner.provision()
    pending(h, 1, prefix="again")
    await h.provisioner.provision()
    assert h.provisioner.inputs.instance_types.fetches == 1
    h.cluster.update_nodepool(nodepool(generation=2))
    pending(h, 1, prefix="third")
    await h.provisioner.provision()
    assert h.provisioner.inputs.instance_types.fetches == 2


async def test_daemonset_overhead_is_part_of_the_requests() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    h.cluster.update_daemonset(daemonset("agent", cpu="500m"))
    pending(h, 1, cpu="1")
    await h.provisioner.provision()
    [claim] = h.client.created
    assert claim["spec"]["resources"]["requests"]["cpu"] == "1500m"


async def test_pods_that_fit_nowhere_get_an_event_and_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    pending(h, 1, cpu="1000", prefix="huge")
    caplog.set_level(logging.INFO, LOGGER)
    await h.provisioner.provision()
    assert h.client.created == []
    [event] = h.recorder.reasons("FailedScheduling")
    assert event.name == "huge-0"
    [line] = records(caplog, "could not schedule pod")
    assert line.Pod == {"name": "huge-0", "namespace": "default"}  # type: ignore[attr-defined]
    assert event.message == f"Failed to schedule pod, {line.error}"  # type: ignore[attr-defined]
    # Retried: the same reason is not written again within minutes.
    await h.provisioner.provision()
    assert len(h.recorder.reasons("FailedScheduling")) == 1


async def test_pods_on_a_node_being_deleted_get_replacement_capacity() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    h.cluster.update_node(node("old", provider_id="fake://old", nodepool="default",
                               deleting=True))
    h.cluster.update_pod(pod("app", node_name="old", cpu="2"))
    await h.provisioner.provision()
    [claim] = h.client.created
    assert claim["spec"]["resources"]["requests"]["cpu"] == "2"
    await h.provisioner.provision()
    assert len(h.client.created) == 1


async def test_a_failed_create_leaves_the_pods_provisionable() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    pending(h, 1)
    h.client.fail_next = errors.ServerError("etcd is unhappy", status=500)
    assert await h.provisioner.provision() == 1
    assert len(h.cluster.provisionable_pods()) == 1
    assert await h.provisioner.provision() == 0
    assert h.cluster.provisionable_pods() == []


async def test_reconcile_waits_for_the_in_flight_nodeclaim_to_launch_first() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    h.cluster.update_nodeclaim(nodeclaim("default-unlaunched"))
    pending(h, 1, cpu="6")          # more than the in-flight NodeClaim will bring
    h.provisioner.trigger("default/inflate-0")
    round_ = asyncio.ensure_future(h.provisioner.reconcile())
    for _ in range(100):                          # 5 fake seconds
        await h.clock.step(0.05)
    assert not round_.done() and h.client.created == []
    h.cluster.update_nodeclaim(nodeclaim("default-unlaunched", provider_id="fake://x"))
    await drive(h, round_)
    assert len(h.client.created) == 1


async def test_reconcile_keeps_the_batch_when_the_model_does_not_sync() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    h.cluster.update_nodeclaim(nodeclaim("default-stuck"))
    pending(h, 1)
    h.provisioner.trigger("default/inflate-0")
    result = await drive(h, h.provisioner.reconcile())
    assert h.client.created == [] and result.requeue_after > 0
    # The batch is kept: once the NodeClaim launches, the next round goes ahead with no
    # new trigger and no new batch window.
    h.cluster.update_nodeclaim(nodeclaim("default-stuck", provider_id="fake://x"))
    await drive(h, h.provisioner.reconcile())
    assert h.cluster.nomination("default/inflate-0") == "nodeclaim/default-stuck"


async def test_a_launching_nodeclaim_that_asked_for_resources_is_counted_not_waited_for() -> None:
    # A NodeClaim karpy created says what it asked for; the model counts it as capacity
    # of exactly that size, so the next round need not wait for its launch, and a pod
    # nominated there that bound elsewhere leaves room a waiting pod can take.
    h = build()
    h.cluster.update_nodepool(nodepool())
    claim = nodeclaim("default-launching")
    claim["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "2Gi", "pods": "2"}}
    h.cluster.update_nodeclaim(claim)
    h.cluster.update_node(node("worker", provider_id="kind://worker", cpu="1"))
    first, second, _third = pending(h, 3)
    h.cluster.nominate([h.cluster.scheduling_pod(first), h.cluster.scheduling_pod(second)],
                       "default-launching")
    # kube-scheduler binds the first pod to another node; the third is pending.
    h.cluster.update_pod(pod("inflate-0", cpu="1", memory="256Mi", node_name="worker"))
    h.provisioner.trigger("default/inflate-2")
    await drive(h, h.provisioner.reconcile())
    assert h.client.created == []
    assert h.cluster.nomination("default/inflate-2") == "nodeclaim/default-launching"


def _cluster_limit(limits: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "karpy.dev/v1alpha1", "kind": "ClusterLimit",
            "metadata": {"name": "fleet", "generation": 1}, "spec": {"limits": limits}}


@pytest.mark.parametrize("limited_by", ["nodepool", "clusterlimit"])
async def test_a_nodepool_with_limits_still_waits_for_its_nodeclaims_to_launch(
    limited_by: str,
) -> None:
    # Limits count a machine's capacity, unknown until it launches: counting a launching
    # NodeClaim at its requests could let the next round go past the limit. A
    # ClusterLimit covering the pool counts its machines the same way.
    h = build()
    if limited_by == "nodepool":
        h.cluster.update_nodepool(nodepool(limits={"cpu": "100"}))
    else:
        h.cluster.update_nodepool(nodepool())
        h.cluster.cluster_limits.update(_cluster_limit({"cpu": "100"}))
    claim = nodeclaim("default-launching")
    claim["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "2Gi", "pods": "2"}}
    h.cluster.update_nodeclaim(claim)
    pending(h, 1, cpu="6")
    h.provisioner.trigger("default/inflate-0")
    round_ = asyncio.ensure_future(h.provisioner.reconcile())
    for _ in range(100):                          # 5 fake seconds
        await h.clock.step(0.05)
    assert not round_.done() and h.client.created == []
    h.cluster.update_nodeclaim(nodeclaim("default-launching", provider_id="fake://x"))
    await drive(h, round_)
    assert len(h.client.created) == 1


async def test_no_nodeclaim_is_created_while_a_clusterlimit_is_exceeded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Planned before the ClusterLimit existed; by creation time the pool's machines are
    # already past it, so the plan is dropped (as for a NodePool's own limits).
    h = build()
    h.cluster.update_nodepool(nodepool())
    pending(h, 1)
    results = await drive(h, h.provisioner.schedule())
    assert results is not None
    [plan] = results.new_nodeclaims
    h.cluster.update_nodeclaim(nodeclaim("default-a", provider_id="fake://a", cpu="4"))
    h.cluster.update_nodeclaim(nodeclaim("default-b", provider_id="fake://b", cpu="4"))
    h.cluster.cluster_limits.update(_cluster_limit({"nodes": "1"}))
    with caplog.at_level(logging.ERROR):
        assert await h.provisioner.create(plan) is None
    assert h.client.created == []
    [record] = records(caplog, "creating nodeclaim")
    assert getattr(record, "error", "") == (
        "ClusterLimit fleet: nodes resource usage of 2 exceeds limit of 1")


async def test_reconcile_retries_pods_left_pending_every_ten_seconds() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    h.cluster.update_node(node("worker", provider_id="kind://worker", cpu="8"))
    pending(h, 1)
    await drive(h, h.provisioner.reconcile())       # pods pending at start: a round
    assert h.cluster.nomination("default/inflate-0") == "node/worker"
    assert len(h.recorder.reasons("Nominated")) == 1
    h.clock.advance(5)
    await drive(h, h.provisioner.reconcile())       # nominated: nothing to do
    assert len(h.recorder.reasons("Nominated")) == 1
    h.clock.advance(30)                              # kube-scheduler never bound it
    assert h.cluster.nomination("default/inflate-0") is None
    await drive(h, h.provisioner.reconcile())       # retried without a new trigger
    assert h.cluster.nomination("default/inflate-0") == "node/worker"
    assert len(h.recorder.reasons("Nominated")) == 2


async def drive(h: Harness, coro: Awaitable[T]) -> T:
    """Run ``coro`` to completion, moving the fake clock while it waits."""
    task = asyncio.ensure_future(coro)
    for _ in range(10_000):
        if task.done():
            return task.result()
        await h.clock.step(0.05)
    task.cancel()
    raise AssertionError("did not finish within 500 fake seconds")


def _types(claim: dict[str, Any]) -> list[str]:
    for r in claim["spec"]["requirements"]:
        if r["key"] == "node.kubernetes.io/instance-type":
            return list(r["values"])
    return []


async def test_pods_that_avoid_managed_nodes_are_left_alone() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool())
    shy = pod("karpy-controller")
    shy["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}]}}}
    h.cluster.update_pod(shy)
    await h.provisioner.provision()
    assert h.client.created == []
    assert h.recorder.events == []


async def test_the_nodepool_hash_is_computed_once_per_nodepool_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from karpy.apis import NodePool

    hashed: list[str] = []
    real = NodePool.hash
    monkeypatch.setattr(NodePool, "hash", lambda self: (hashed.append("x"), real(self))[1])
    h = build()
    h.cluster.update_nodepool(nodepool("default", labels={"team": "a"}))
    pending(h, 40, cpu="3")  # several NodeClaims from one NodePool
    assert await h.provisioner.provision() == 0
    first = {c["metadata"]["annotations"]["karpenter.sh/nodepool-hash"] for c in h.client.created}
    assert len(h.client.created) > 1 and len(hashed) == 1 and len(first) == 1

    h.cluster.update_nodepool(nodepool("default", labels={"team": "b"}))  # a new template
    pending(h, 10, cpu="3", prefix="more")
    before = len(h.client.created)
    assert await h.provisioner.provision() == 0
    later = {c["metadata"]["annotations"]["karpenter.sh/nodepool-hash"]
             for c in h.client.created[before:]}
    assert len(hashed) == 2 and later and later.isdisjoint(first)


async def test_nodeclaims_the_cost_stage_pins_to_one_zone_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Four pods that need a node each and six zone-spread pods: the cost-improvement
    stage moves a spread pod onto a NodeClaim no zone rule looked at, pinning it to one
    zone; the provisioner says so. With the stage off nothing is narrowed."""

    def workload(h: Harness) -> None:
        for i in range(4):
            p = pod(f"solo-{i}", cpu="100m", memory="128Mi", labels={"app": "solo"})
            p["spec"]["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "solo"}},
                    "topologyKey": "kubernetes.io/hostname"}]}}
            h.cluster.update_pod(p)
        for i in range(6):
            p = pod(f"web-{i}", cpu="1", memory="1Gi", labels={"app": "web"})
            p["spec"]["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}}]
            h.cluster.update_pod(p)

    message = "narrowed nodeclaim(s) to fewer zones to lower their price"
    caplog.set_level(logging.INFO, LOGGER)
    h = build()
    h.cluster.update_nodepool(nodepool("default"))
    workload(h)
    assert await h.provisioner.provision() == 0
    [narrowed] = records(caplog, message)
    assert 1 <= narrowed.nodeclaims <= narrowed.of == len(h.client.created)  # type: ignore[attr-defined]

    caplog.clear()
    off = build(Settings(improvement_budget=0))
    off.cluster.update_nodepool(nodepool("default"))
    workload(off)
    assert await off.provisioner.provision() == 0
    assert off.client.created
    assert records(caplog, message) == []


async def test_a_scrape_during_a_solve_sees_its_unfinished_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """karpenter_scheduler_unfinished_work_seconds{controller, scheduling_id} is there
    while a solve runs, counting its seconds, and gone when it ends (as Karpenter's). The
    solve is held at its start by a hook that scrapes /metrics, as a scrape landing
    mid-solve would."""
    from prometheus_client.parser import text_string_to_metric_families

    from karpy.scheduling.simulator import Simulator

    h = build()
    h.metrics.registry.register(h.provisioner.metrics.scheduler_unfinished_work)
    h.cluster.update_nodepool(nodepool())
    pending(h, 3)

    def unfinished() -> list[tuple[dict[str, str], float]]:
        text = h.metrics.render().decode()
        return [(s.labels, s.value) for f in text_string_to_metric_families(text)
                for s in f.samples if s.name == "karpenter_scheduler_unfinished_work_seconds"]

    seen: list[list[tuple[dict[str, str], float]]] = []
    solve = Simulator.solve

    def scraped_mid_solve(self: Simulator, *args: Any, **kwargs: Any) -> Any:
        first = unfinished()
        results = solve(self, *args, **kwargs)
        seen.append(first)
        seen.append(unfinished())  # still inside the provisioner's solve call
        return results

    monkeypatch.setattr(Simulator, "solve", scraped_mid_solve)
    await h.provisioner.provision()

    [(labels, at_start)], [(same, later)] = seen
    assert labels["controller"] == "provisioner" and len(labels["scheduling_id"]) == 36
    assert same == labels and 0 < at_start < later, "the seconds it has been running"
    assert unfinished() == [], "removed when the solve ends"
    assert h.client.created


async def test_the_queue_depth_is_what_the_last_solve_left_unplaced() -> None:
    """karpenter_scheduler_queue_depth{controller, scheduling_id} stays after a solve with
    the pods it could not place, and the next solve replaces it (Karpenter's scheduler
    leaves its last value and deletes the controller's series when a solve starts)."""
    from prometheus_client.parser import text_string_to_metric_families

    h = build()
    h.metrics.registry.register(h.provisioner.metrics.scheduler_queue_depth)
    h.cluster.update_nodepool(nodepool())

    def depth() -> list[tuple[dict[str, str], float]]:
        text = h.metrics.render().decode()
        return [(s.labels, s.value) for f in text_string_to_metric_families(text)
                for s in f.samples if s.name == "karpenter_scheduler_queue_depth"]

    pending(h, 2)
    [huge] = pending(h, 1, cpu="100000", prefix="huge")  # fits no instance type
    await h.provisioner.provision()
    [(first, left)] = depth()
    assert first["controller"] == "provisioner" and len(first["scheduling_id"]) == 36
    assert left == 1, "the pod no instance type fits"

    h.cluster.delete_pod(huge)
    pending(h, 1, prefix="more")
    await h.provisioner.provision()
    [(second, left)] = depth()
    assert second["scheduling_id"] != first["scheduling_id"], "the next solve replaced it"
    assert left == 0


async def test_scheduler_config_defaults_reach_the_pending_pods_of_their_scheduler() -> None:
    config = parse_scheduler_config(
        "profiles:\n- schedulerName: batch\n  podTopologySpread:\n    defaultConstraints:\n"
        "    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, "
        "whenUnsatisfiable: DoNotSchedule}\n")
    h = build(Settings(scheduler_config=config))
    h.cluster.update_nodepool(nodepool())
    h.cluster.workloads.update_owner("ReplicaSet", {
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}}})
    for name, scheduler in (("batch-0", "batch"), ("default-0", "")):
        obj = pod(name, cpu="1", memory="256Mi", labels={"app": "web"})
        obj["metadata"]["ownerReferences"] = [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
            "controller": True, "uid": "rs-1"}]
        if scheduler:
            obj["spec"]["schedulerName"] = scheduler
        h.cluster.update_pod(obj)
    by_name = {p.name: p for p in h.provisioner.inputs.pending_pods()}
    [spread] = by_name["batch-0"].spread_constraints
    assert spread.default and spread.topology_key == "topology.kubernetes.io/zone"
    assert spread.selector.matches({"app": "web"}) and not spread.selector.matches({})
    assert by_name["default-0"].spread_constraints == ()

"""nodeclaim.disruption: the Consolidatable and Drifted conditions disruption reads."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from conftest import Events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodeclaim_factories import nodeclaim_manifest

from karpy.apis.annotations import ANNOTATION_NODEPOOL_HASH, ANNOTATION_NODEPOOL_HASH_VERSION
from karpy.cloudprovider import DriftReason, NodeClaimNotFoundError
from karpy.cloudprovider.fake import FakeCloudProvider, default_instance_types
from karpy.controllers.nodeclaim.disruptionconditions import DisruptionConditions
from karpy.controllers.nodeclaim.disruptionconditions.controller import NODEPOOL_CHANGED
from karpy.controllers.nodeclaim.disruptionconditions.drift import (
    DRIFT_RECHECK,
    instance_type_not_found,
)
from karpy.runtime import EventRecorder, Request, Result
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

T0 = "2024-01-01T00:00:00Z"
LABELS = {
    "karpenter.sh/nodepool": "default",
    "node.kubernetes.io/instance-type": "default-instance-type",
    "topology.kubernetes.io/zone": "test-zone-a",
    "karpenter.sh/capacity-type": "on-demand",
    "kubernetes.io/arch": "amd64",
}
REQUEST = Request("", "default-a")


def nodepool(
    consolidate_after: str = "30s", requirements: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "annotations": dict(annotations or {})},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass",
                                 "name": "default"},
                "requirements": requirements or [],
            }},
            "disruption": {"consolidateAfter": consolidate_after},
        },
    }


def condition(type_: str, status: str = "True", at: str = T0) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": type_, "message": "",
            "lastTransitionTime": at}


def nodeclaim(
    *, initialized: bool = True, launched: bool = True, last_pod_event: str | None = None,
    annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    claim = nodeclaim_manifest("default-a", labels=labels or LABELS, annotations=annotations)
    conditions = [condition("Launched", "True" if launched else "Unknown"),
                  condition("Registered", "True" if initialized else "Unknown"),
                  condition("Initialized", "True" if initialized else "Unknown")]
    claim["status"] = {"providerID": "fake://a", "nodeName": "node-a",
                       "conditions": conditions}
    if last_pod_event is not None:
        claim["status"]["lastPodEventTime"] = last_pod_event
    return claim


@pytest.fixture
def controller(
    kube: FakeClient, provider: FakeCloudProvider, recorder: EventRecorder, clock: FakeClock
) -> DisruptionConditions:
    return DisruptionConditions(client=kube, cloud_provider=provider,  # type: ignore[arg-type]
                                recorder=recorder, clock=clock)


async def setup(kube: FakeClient, pool: dict[str, Any], claim: dict[str, Any]) -> None:
    await kube.create(NODE_POOL, pool)
    await kube.create(NODE_CLAIM, claim)


def conditions_of(kube: FakeClient) -> dict[str, dict[str, Any]]:
    stored = kube.peek(NODE_CLAIM, "default-a")
    return {c["type"]: c for c in stored["status"]["conditions"]}


# -- Consolidatable ---------------------------------------------------------------------


async def test_consolidatable_turns_true_once_consolidate_after_has_passed(
    kube: FakeClient, controller: DisruptionConditions, clock: FakeClock, events: Events
) -> None:
    await setup(kube, nodepool("30s"), nodeclaim())
    await clock.step(10)
    result = await controller.reconcile(REQUEST)
    assert "Consolidatable" not in conditions_of(kube)
    assert result.requeue_after == pytest.approx(20.0)
    await clock.step(20)
    await controller.reconcile(REQUEST)
    assert conditions_of(kube)["Consolidatable"]["status"] == "True"
    assert ("Status condition transitioned, Type: Consolidatable, Status: Unknown -> True, "
            "Reason: Consolidatable") in await events.messages("default-a")


async def test_consolidate_after_counts_from_the_later_of_initialization_and_a_pod_event(
    kube: FakeClient, controller: DisruptionConditions, clock: FakeClock
) -> None:
    await setup(kube, nodepool("1m"), nodeclaim(last_pod_event="2024-01-01T00:00:40Z"))
    await clock.step(60)
    result = await controller.reconcile(REQUEST)
    assert "Consolidatable" not in conditions_of(kube)
    assert result.requeue_after == pytest.approx(40.0)


async def test_a_pod_event_takes_consolidatable_away_again(
    kube: FakeClient, controller: DisruptionConditions, clock: FakeClock
) -> None:
    await setup(kube, nodepool("30s"), nodeclaim())
    await clock.step(31)
    await controller.reconcile(REQUEST)
    assert conditions_of(kube)["Consolidatable"]["status"] == "True"
    kube.peek(NODE_CLAIM, "default-a")["status"]["lastPodEventTime"] = "2024-01-01T00:00:31Z"
    result = await controller.reconcile(REQUEST)
    assert "Consolidatable" not in conditions_of(kube)
    assert result.requeue_after == pytest.approx(30.0)


@pytest.mark.parametrize(("after", "initialized", "present"), [
    ("Never", True, False), ("30s", False, False), ("0s", True, True)])
async def test_never_and_uninitialized_have_no_condition_and_zero_is_at_once(
    kube: FakeClient, controller: DisruptionConditions, after: str, initialized: bool,
    present: bool,
) -> None:
    claim = nodeclaim(initialized=initialized)
    claim["status"]["conditions"].append(condition("Consolidatable"))
    await setup(kube, nodepool(after), claim)
    await controller.reconcile(REQUEST)
    assert ("Consolidatable" in conditions_of(kube)) is present


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 600), st.one_of(st.none(), st.integers(0, 600)), st.integers(0, 600),
       st.integers(0, 1200))
async def test_consolidatable_exactly_when_the_window_has_passed(
    init: int, pod: int | None, after: int, now: int
) -> None:
    clock = FakeClock()
    kube = FakeClient(clock=clock)
    provider = FakeCloudProvider()
    recorder = EventRecorder(kube, component="karpenter", host="t", clock=clock)  # type: ignore[arg-type]
    controller = DisruptionConditions(client=kube, cloud_provider=provider,  # type: ignore[arg-type]
                                      recorder=recorder, clock=clock)
    start = clock.now()
    stamp = lambda s: (start + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    claim = nodeclaim(last_pod_event=None if pod is None else stamp(pod))
    for c in claim["status"]["conditions"]:
        c["lastTransitionTime"] = stamp(init)
    await setup(kube, nodepool(f"{after}s"), claim)
    await clock.step(now)
    result = await controller.reconcile(REQUEST)
    # Karpenter v1.14.1 (IsUnderConsolidateAfter): from the last pod event when there is
    # one — even one before initialization — else from the initialization.
    ready_at = (pod if pod is not None else init) + after
    assert ("Consolidatable" in conditions_of(kube)) is (now >= ready_at)
    if now < ready_at:
        assert result.requeue_after == pytest.approx(min(ready_at - now, DRIFT_RECHECK))


async def test_a_nodeclaim_just_created_is_not_written(
    kube: FakeClient, controller: DisruptionConditions
) -> None:
    # Filling in the Unknown conditions is lifecycle's first write; this controller
    # writing them too, at the same moment, only made a conflict per new NodeClaim.
    claim = nodeclaim_manifest("default-a", labels=LABELS)
    claim.pop("status", None)
    await setup(kube, nodepool("30s"), claim)
    await controller.reconcile(REQUEST)
    assert not any(c.verb == "patch" for c in kube.calls)
    assert not (kube.peek(NODE_CLAIM, "default-a").get("status") or {}).get("conditions")


# -- Drifted ----------------------------------------------------------------------------


async def test_a_nodeclaim_not_launched_has_no_drifted_condition(
    kube: FakeClient, controller: DisruptionConditions, provider: FakeCloudProvider
) -> None:
    provider.drifted = DriftReason("AMIDrift")
    claim = nodeclaim(launched=False, initialized=False)
    claim["status"]["conditions"].append(condition("Drifted"))
    await setup(kube, nodepool(), claim)
    await controller.reconcile(REQUEST)
    assert "Drifted" not in conditions_of(kube)


@pytest.mark.parametrize(("pool_version", "claim_hash", "drifted"), [
    ("v3", "111", "NodePoolDrifted"), ("v3", "222", None), ("v2", "111", None)])
async def test_static_drift_compares_hashes_only_under_one_version(
    kube: FakeClient, controller: DisruptionConditions, pool_version: str, claim_hash: str,
    drifted: str | None,
) -> None:
    pool = nodepool(annotations={ANNOTATION_NODEPOOL_HASH: "222",
                                 ANNOTATION_NODEPOOL_HASH_VERSION: pool_version})
    claim = nodeclaim(annotations={ANNOTATION_NODEPOOL_HASH: claim_hash,
                                   ANNOTATION_NODEPOOL_HASH_VERSION: "v3"})
    await setup(kube, pool, claim)
    result = await controller.reconcile(REQUEST)
    got = conditions_of(kube).get("Drifted")
    if drifted is None:
        assert got is None
    else:
        assert got is not None
        assert (got["reason"], got["message"]) == (drifted, drifted)
    assert result.requeue_after is not None and result.requeue_after <= DRIFT_RECHECK


@pytest.mark.parametrize(("requirement", "drifted"), [
    ({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}, True),
    ({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}, False),
    ({"key": "example.com/team", "operator": "In", "values": ["a"]}, True),
    ({"key": "example.com/team", "operator": "NotIn", "values": ["a"]}, False),
    ({"key": "example.com/team", "operator": "DoesNotExist"}, False),
    ({"key": "kubernetes.io/arch", "operator": "NotIn", "values": ["amd64"]}, True),
])
async def test_requirements_drift_against_the_nodeclaims_labels(
    kube: FakeClient, controller: DisruptionConditions, requirement: dict[str, Any],
    drifted: bool,
) -> None:
    await setup(kube, nodepool(requirements=[requirement]), nodeclaim())
    await controller.reconcile(REQUEST)
    got = conditions_of(kube).get("Drifted")
    assert (got is not None and got["reason"] == "RequirementsDrifted") is drifted


async def test_an_instance_type_gone_from_the_catalogue_drifts_after_the_first_hour(
    kube: FakeClient, controller: DisruptionConditions, provider: FakeCloudProvider,
    clock: FakeClock,
) -> None:
    calls = 0
    real = provider.get_instance_types

    async def counting(pool: Any) -> Any:
        nonlocal calls
        calls += 1
        return await real(pool)

    provider.get_instance_types = counting  # type: ignore[method-assign]
    await setup(kube, nodepool(), nodeclaim())
    await clock.step(1800)
    await controller.reconcile(REQUEST)
    assert calls == 0  # young NodeClaims are not checked against the catalogue
    await clock.step(1801)
    await controller.reconcile(REQUEST)
    await controller.reconcile(REQUEST)
    assert calls == 1  # a successful check is remembered for 30 minutes
    assert "Drifted" not in conditions_of(kube)
    provider.instance_types = [it for it in provider.instance_types
                               if it.name != "default-instance-type"]
    await clock.step(1801)
    await controller.reconcile(REQUEST)
    assert conditions_of(kube)["Drifted"]["reason"] == "InstanceTypeNotFound"


async def test_provider_drift_comes_last_and_a_vanished_instance_is_not_an_error(
    kube: FakeClient, controller: DisruptionConditions, provider: FakeCloudProvider,
) -> None:
    await setup(kube, nodepool(), nodeclaim())
    provider.drifted = DriftReason("AMIDrift")
    await controller.reconcile(REQUEST)
    assert conditions_of(kube)["Drifted"]["reason"] == "AMIDrift"
    provider.drifted = None
    await controller.reconcile(REQUEST)
    assert "Drifted" not in conditions_of(kube)

    async def gone(_claim: Any) -> Any:
        raise NodeClaimNotFoundError("gone", provider_id="fake://a")

    provider.is_drifted = gone  # type: ignore[method-assign]
    await controller.reconcile(REQUEST)  # no error raised
    assert "Drifted" not in conditions_of(kube)


def test_a_reserved_nodeclaim_still_matches_its_types_on_demand_offering() -> None:
    types = default_instance_types()
    reserved = {**LABELS, "karpenter.sh/capacity-type": "reserved"}
    assert instance_type_not_found(types, reserved) is None
    assert instance_type_not_found(types, {**LABELS, "topology.kubernetes.io/zone": "mars"}) \
        == "InstanceTypeNotFound"
    assert instance_type_not_found(types, {**LABELS, "node.kubernetes.io/instance-type": "x"}) \
        == "InstanceTypeNotFound"


# -- the write --------------------------------------------------------------------------


async def test_both_conditions_go_out_in_one_locked_status_patch(
    kube: FakeClient, controller: DisruptionConditions, provider: FakeCloudProvider,
    clock: FakeClock,
) -> None:
    provider.drifted = DriftReason("AMIDrift")
    await setup(kube, nodepool("0s"), nodeclaim())
    version = kube.peek(NODE_CLAIM, "default-a")["metadata"]["resourceVersion"]
    await controller.reconcile(REQUEST)
    [(sub, patch)] = [(c.subresource, c.body) for c in kube.calls
                      if c.verb == "patch" and c.kind == NODE_CLAIM]
    assert sub == "status"
    assert patch["metadata"]["resourceVersion"] == version
    assert {c["type"] for c in patch["status"]["conditions"]} >= {"Drifted", "Consolidatable"}
    await controller.reconcile(REQUEST)  # nothing changed: nothing written
    assert len([c for c in kube.calls if c.verb == "patch" and c.kind == NODE_CLAIM]) == 1


async def test_a_concurrent_write_is_not_overwritten_but_retried(
    kube: FakeClient, controller: DisruptionConditions, provider: FakeCloudProvider,
) -> None:
    provider.drifted = DriftReason("AMIDrift")
    await setup(kube, nodepool(), nodeclaim())
    real_get = kube.get

    async def stale_get(kind: Any, name: str, **kw: Any) -> Any:
        obj = copy.deepcopy(dict(await real_get(kind, name, **kw)))
        if kind == NODE_CLAIM:
            obj["metadata"]["resourceVersion"] = "0"  # as if the cache lagged behind
        return obj

    kube.get = stale_get  # type: ignore[method-assign]
    assert await controller.reconcile(REQUEST) == Result(requeue=True)
    assert "Drifted" not in conditions_of(kube)


async def test_deleting_foreign_and_poolless_nodeclaims_are_left_alone(
    kube: FakeClient, controller: DisruptionConditions, provider: FakeCloudProvider,
) -> None:
    provider.drifted = DriftReason("AMIDrift")
    await kube.create(NODE_POOL, nodepool())
    cases = [
        ("deleting", lambda c: c["metadata"].update(deletionTimestamp=T0, finalizers=["x"])),
        ("foreign", lambda c: c["spec"]["nodeClassRef"].update(kind="Other")),
        ("poolless", lambda c: c["metadata"]["labels"].pop("karpenter.sh/nodepool")),
        ("orphan", lambda c: c["metadata"]["labels"].update({"karpenter.sh/nodepool": "gone"})),
    ]
    for name, edit in cases:
        claim = nodeclaim()
        claim["metadata"]["name"] = name
        edit(claim)
        await kube.create(NODE_CLAIM, claim)
        assert await controller.reconcile(Request("", name)) == Result()
    assert not [c for c in kube.calls if c.verb == "patch" and c.kind == NODE_CLAIM]


def test_only_a_nodepools_spec_or_annotations_wake_its_nodeclaims() -> None:
    old = nodepool()
    old["metadata"]["generation"] = 1
    counted = copy.deepcopy(old)
    counted["status"] = {"nodes": 3, "resources": {"cpu": "12"}}
    assert not NODEPOOL_CHANGED.update(old, counted)
    edited = copy.deepcopy(old)
    edited["metadata"]["generation"] = 2
    assert NODEPOOL_CHANGED.update(old, edited)
    stamped = copy.deepcopy(old)
    stamped["metadata"]["annotations"] = {ANNOTATION_NODEPOOL_HASH: "1"}
    assert NODEPOOL_CHANGED.update(old, stamped)


async def test_the_nodepool_is_parsed_once_per_version_and_its_changes_still_apply(
    kube: FakeClient, controller: DisruptionConditions, clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from karpy.apis import NodePool

    await setup(kube, nodepool("30s"), nodeclaim())
    # Reads as the manager's cache answers them: the same object until it changes.
    held: dict[str, tuple[Any, Any]] = {}
    real_get = kube.get

    async def cached_get(kind: Any, name: str, **kw: Any) -> Any:
        obj = await real_get(kind, name, **kw)
        if kind is not NODE_POOL:
            return obj
        version = obj["metadata"].get("resourceVersion")
        if name not in held or held[name][0] != version:
            held[name] = (version, obj)
        return held[name][1]

    parsed: list[str] = []
    real_parse = NodePool.from_dict
    monkeypatch.setattr(kube, "get", cached_get)
    monkeypatch.setattr(NodePool, "from_dict",
                        lambda data: (parsed.append("x"), real_parse(data))[1])
    for _ in range(3):
        await clock.step(15)
        await controller.reconcile(REQUEST)
    assert len(parsed) == 1
    assert conditions_of(kube)["Consolidatable"]["status"] == "True"

    await kube.patch(NODE_POOL, "default", {"spec": {"disruption": {"consolidateAfter": "1h"}}})
    await controller.reconcile(REQUEST)
    assert len(parsed) == 2
    assert "Consolidatable" not in conditions_of(kube)

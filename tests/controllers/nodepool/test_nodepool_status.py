"""NodePool bookkeeping: status.resources/nodes add up the pool's machines, the
NodeClassReady/ValidationSucceeded conditions make Ready, and the hash annotation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from controllers.termination import factories as f

from karpy.apis import NodePool
from karpy.apis.annotations import (
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    NODEPOOL_HASH_VERSION,
)
from karpy.cloudprovider.fake import FAKE_NODE_CLASS, FakeCloudProvider
from karpy.controllers.indexes import INDEX_NODEPOOL, index_nodepool_label
from karpy.controllers.nodepool import (
    NodePoolCounter,
    NodePoolHash,
    NodePoolReadiness,
    NodePoolValidation,
)
from karpy.runtime import Request, Result, kinds
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.cluster import Cluster
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

NODE_CLASS = FAKE_NODE_CLASS


def nodepool(name: str = "default", *, group: str = FAKE_NODE_CLASS.group,
             labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "generation": 1},
        "spec": {"template": {
            "metadata": {"labels": dict(labels or {})},
            "spec": {
                "nodeClassRef": {"group": group, "kind": FAKE_NODE_CLASS.kind, "name": "default"},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In",
                                  "values": ["amd64"]}],
            },
        }, "limits": {"cpu": "100"}},
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=datetime(2024, 1, 1, tzinfo=UTC))


@pytest.fixture
def kube(clock: FakeClock) -> FakeClient:
    return FakeClient(clock=clock, indexers={(NODE_CLAIM, INDEX_NODEPOOL): index_nodepool_label})


def conditions(kube: FakeClient, name: str = "default") -> dict[str, tuple[str, str]]:
    stored = kube.peek(NODE_POOL, name)
    assert stored is not None
    return {c["type"]: (c["status"], c["reason"]) for c in stored["status"]["conditions"]}


async def test_status_counts_the_pools_machines_but_not_those_going_away(
    kube: FakeClient, clock: FakeClock
) -> None:
    kube.add(NODE_POOL, nodepool())
    cluster = Cluster(clock=clock)
    gpu = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"}
    claims = [
        f.nodeclaim("a", provider_id="fake://a"),
        f.nodeclaim("b", provider_id="fake://b", capacity=gpu),
        f.nodeclaim("c", provider_id="fake://c"),
        f.nodeclaim("pending"),  # not launched: no capacity known yet
        f.nodeclaim("other", provider_id="fake://o", nodepool="other"),
    ]
    claims[2]["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    for claim in claims:
        cluster.update_nodeclaim(kube.add(NODE_CLAIM, claim))
    counter = NodePoolCounter(client=kube, cluster=cluster,  # type: ignore[arg-type]
                              cloud_provider=FakeCloudProvider())

    assert (await counter.reconcile(Request("", "default"))).requeue_after > 0
    status = kube.peek(NODE_POOL, "default")["status"]  # type: ignore[index]
    assert status["resources"] == {"cpu": "12", "ephemeral-storage": "0", "memory": "48Gi",
                                   "nodes": "2", "nvidia.com/gpu": "2", "pods": "220"}
    assert status["nodes"] == 2

    # The GPU machine goes: its resource leaves status.resources entirely.
    cluster.delete_nodeclaim(kube.peek(NODE_CLAIM, "b"))  # type: ignore[arg-type]
    await counter.reconcile(Request("", "default"))
    status = kube.peek(NODE_POOL, "default")["status"]  # type: ignore[index]
    assert status["resources"] == {"cpu": "4", "ephemeral-storage": "0", "memory": "16Gi",
                                   "nodes": "1", "pods": "110"}
    assert status["nodes"] == 1
    writes = len(kube.calls)
    await counter.reconcile(Request("", "default"))
    assert len(kube.calls) == writes  # nothing changed, nothing written


async def test_ready_needs_a_ready_nodeclass_and_a_valid_nodepool(
    kube: FakeClient, clock: FakeClock
) -> None:
    provider = FakeCloudProvider()
    kube.add(NODE_POOL, nodepool())
    readiness = NodePoolReadiness(client=kube, cloud_provider=provider,  # type: ignore[arg-type]
                                  clock=clock)
    validation = NodePoolValidation(client=kube, cloud_provider=provider,  # type: ignore[arg-type]
                                    clock=clock)

    assert await readiness.reconcile(Request("", "default")) == Result()
    assert conditions(kube)["NodeClassReady"] == ("False", "NodeClassNotFound")
    assert conditions(kube)["Ready"][0] == "False"

    kube.add(NODE_CLASS, {"metadata": {"name": "default"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready",
         "lastTransitionTime": "2024-01-01T00:00:00Z"}]}})
    await readiness.reconcile(Request("", "default"))
    assert conditions(kube)["NodeClassReady"] == ("True", "NodeClassReady")
    assert conditions(kube)["Ready"][0] == "Unknown"  # validation has not run yet

    await validation.reconcile(Request("", "default"))
    assert conditions(kube)["ValidationSucceeded"] == ("True", "ValidationSucceeded")
    assert conditions(kube)["Ready"] == ("True", "Ready")
    assert NodePool.from_dict(kube.peek(NODE_POOL, "default")).status_conditions().is_true(
        "Ready")


async def test_a_restricted_template_label_fails_validation(
    kube: FakeClient, clock: FakeClock
) -> None:
    kube.add(NODE_POOL, nodepool(labels={"karpenter.sh/nodepool": "x", "team": "a"}))
    validation = NodePoolValidation(client=kube, cloud_provider=FakeCloudProvider(),  # type: ignore[arg-type]
                                    clock=clock)
    await validation.reconcile(Request("", "default"))
    stored = kube.peek(NODE_POOL, "default")
    assert stored is not None
    failed = next(c for c in stored["status"]["conditions"] if c["type"] == "ValidationSucceeded")
    assert (failed["status"], failed["reason"]) == ("False", "NodePoolValidationFailed")
    assert '"karpenter.sh/nodepool" in labels, restricted' in failed["message"]


async def test_another_providers_nodepool_is_left_alone(kube: FakeClient, clock: FakeClock) -> None:
    kube.add(NODE_POOL, nodepool(group="karpenter.k8s.aws"))
    provider = FakeCloudProvider()
    for controller in (
        NodePoolReadiness(client=kube, cloud_provider=provider, clock=clock),  # type: ignore[arg-type]
        NodePoolValidation(client=kube, cloud_provider=provider, clock=clock),  # type: ignore[arg-type]
        NodePoolHash(client=kube, index=kube, cloud_provider=provider),  # type: ignore[arg-type]
    ):
        assert await controller.reconcile(Request("", "default")) == Result()
    assert kube.calls == []


async def test_the_hash_is_stamped_and_a_new_version_restamps_undrifted_nodeclaims(
    kube: FakeClient,
) -> None:
    pool = nodepool()
    # Stamped by an older karpy, whose hash was its own ("karpy-v1").
    pool["metadata"]["annotations"] = {ANNOTATION_NODEPOOL_HASH: "1",
                                       ANNOTATION_NODEPOOL_HASH_VERSION: "karpy-v1"}
    kube.add(NODE_POOL, pool)
    plain = f.nodeclaim("plain", provider_id="fake://p")
    drifted = f.nodeclaim("drifted", provider_id="fake://d", conditions=[
        {"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
         "lastTransitionTime": f.T0}])
    for claim in (plain, drifted):
        claim["metadata"]["annotations"] = {ANNOTATION_NODEPOOL_HASH: "1",
                                            ANNOTATION_NODEPOOL_HASH_VERSION: "karpy-v1"}
        kube.add(NODE_CLAIM, claim)
    hashing = NodePoolHash(client=kube, index=kube,  # type: ignore[arg-type]
                           cloud_provider=FakeCloudProvider())

    await hashing.reconcile(Request("", "default"))
    expected = NodePool.from_dict(kube.peek(NODE_POOL, "default")).hash()
    stamped = kube.peek(NODE_POOL, "default")["metadata"]["annotations"]  # type: ignore[index]
    assert stamped == {ANNOTATION_NODEPOOL_HASH: expected,
                       ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}
    plain_now = kube.peek(NODE_CLAIM, "plain")["metadata"]["annotations"]  # type: ignore[index]
    drifted_now = kube.peek(NODE_CLAIM, "drifted")["metadata"]["annotations"]  # type: ignore[index]
    assert plain_now == stamped
    # Already judged drifted: keeps its old hash so it stays drifted.
    assert drifted_now == {ANNOTATION_NODEPOOL_HASH: "1",
                           ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}
    assert kube.objects(kinds.NODE) == []


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("disruption", "budgets"), [{"nodes": "1", "schedule": "@daily",
                                      "duration": "99999999h"}],
         "spec.disruption.budgets[0].duration"),
        (("disruption", "consolidateAfter"), "2562048h", "spec.disruption.consolidateAfter"),
        (("template", "spec", "expireAfter"), "99999999h", "spec.template.spec.expireAfter"),
        (("template", "spec", "terminationGracePeriod"), "9999999999s",
         "spec.template.spec.terminationGracePeriod"),
    ],
)
async def test_a_duration_go_cannot_hold_shows_on_the_nodepools_status_naming_the_field(
    kube: FakeClient, clock: FakeClock, path: tuple[str, ...], value: Any, field: str
) -> None:
    obj = nodepool()
    target = obj["spec"]
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    kube.add(NODE_POOL, obj)
    provider = FakeCloudProvider()
    validation = NodePoolValidation(client=kube, cloud_provider=provider,  # type: ignore[arg-type]
                                    clock=clock)
    readiness = NodePoolReadiness(client=kube, cloud_provider=provider,  # type: ignore[arg-type]
                                  clock=clock)
    await validation.reconcile(Request("", "default"))
    await readiness.reconcile(Request("", "default"))
    stored = kube.peek(NODE_POOL, "default")
    assert stored is not None
    failed = next(c for c in stored["status"]["conditions"] if c["type"] == "ValidationSucceeded")
    assert (failed["status"], failed["reason"]) == ("False", "NodePoolValidationFailed")
    assert failed["message"].startswith(f"{field}: ")
    assert "Go durations end at 2562047h" in failed["message"]
    assert conditions(kube)["Ready"][0] == "False"


async def test_a_budget_schedule_that_is_not_cron_fails_validation(
    kube: FakeClient, clock: FakeClock
) -> None:
    obj = nodepool()
    obj["spec"]["disruption"] = {"budgets": [{"nodes": "1", "schedule": "a b c d e",
                                              "duration": "1h"}]}
    kube.add(NODE_POOL, obj)
    validation = NodePoolValidation(client=kube, cloud_provider=FakeCloudProvider(),  # type: ignore[arg-type]
                                    clock=clock)
    await validation.reconcile(Request("", "default"))
    assert conditions(kube)["ValidationSucceeded"] == ("False", "NodePoolValidationFailed")

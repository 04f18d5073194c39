"""NodeRegistrationHealthy on NodePools, as Karpenter writes it: True once a NodeClaim
registers, False after two of the last four fail to (with the launch error when they
never launched), Unknown again when the NodePool or its NodeClass changes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from karpy.apis import NodeClaim
from karpy.cloudprovider.fake import FAKE_NODE_CLASS, FakeCloudProvider
from karpy.controllers.nodepool import NodePoolRegistrationHealth
from karpy.controllers.nodepool.registrationhealth import record_registration
from karpy.runtime import Request
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_POOL
from karpy.state.registration_health import HealthStatus, RegistrationHealth

NODE_CLASS = FAKE_NODE_CLASS


def nodepool(generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "default", "uid": "pool-uid", "generation": generation},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": FAKE_NODE_CLASS.group, "kind": FAKE_NODE_CLASS.kind,
                             "name": "default"},
            "requirements": []}}},
    }


def nodeclaim(launched: str = "True", reason: str = "Launched", message: str = "",
              owner_uid: str = "pool-uid") -> NodeClaim:
    return NodeClaim.from_dict({
        "metadata": {"name": "default-x", "labels": {"karpenter.sh/nodepool": "default"},
                     "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                          "name": "default", "uid": owner_uid}]},
        "spec": {"nodeClassRef": {"group": FAKE_NODE_CLASS.group,
                                  "kind": FAKE_NODE_CLASS.kind, "name": "default"},
                 "requirements": []},
        "status": {"conditions": [{"type": "Launched", "status": launched, "reason": reason,
                                   "message": message,
                                   "lastTransitionTime": "2024-01-01T00:00:00Z"}]},
    })


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=datetime(2024, 1, 1, tzinfo=UTC))


@pytest.fixture
def kube(clock: FakeClock) -> FakeClient:
    return FakeClient(clock=clock)


def condition(kube: FakeClient) -> tuple[str, str, str] | None:
    stored = kube.peek(NODE_POOL, "default")
    assert stored is not None
    for c in (stored.get("status") or {}).get("conditions") or ():
        if c["type"] == "NodeRegistrationHealthy":
            return c["status"], c["reason"], c.get("message", "")
    return None


def test_two_failures_among_the_last_four_are_unhealthy() -> None:
    health = RegistrationHealth()
    assert health.status("p") is HealthStatus.UNKNOWN
    health.update("p", True)
    assert health.status("p") is HealthStatus.HEALTHY
    health.update("p", False)
    assert health.status("p") is HealthStatus.HEALTHY
    assert health.dry_run("p", False) is HealthStatus.UNHEALTHY
    assert health.status("p") is HealthStatus.HEALTHY  # a dry run records nothing
    health.update("p", False)
    assert health.status("p") is HealthStatus.UNHEALTHY
    for _ in range(3):
        health.update("p", True)
    assert health.status("p") is HealthStatus.HEALTHY  # the failures aged out


async def test_registrations_turn_the_condition_true_and_failures_false(
    kube: FakeClient, clock: FakeClock
) -> None:
    kube.add(NODE_POOL, nodepool())
    health = RegistrationHealth()
    await record_registration(kube, health, clock, nodeclaim(), registered=True)
    assert condition(kube) == ("True", "NodeRegistrationHealthy", "")

    await record_registration(kube, health, clock, nodeclaim(), registered=False)
    assert condition(kube) is not None and condition(kube)[0] == "True"  # 1 of 2: healthy
    await record_registration(kube, health, clock, nodeclaim(), registered=False)
    assert condition(kube) == ("False", "RegistrationFailed", "Failed to register node")


async def test_a_launch_failure_carries_the_launch_error(
    kube: FakeClient, clock: FakeClock
) -> None:
    kube.add(NODE_POOL, nodepool())
    health = RegistrationHealth()
    failed = nodeclaim("False", "InsufficientCapacity", "no capacity in any zone")
    for _ in range(2):
        await record_registration(kube, health, clock, failed, registered=False)
    assert condition(kube) == ("False", "InsufficientCapacity", "no capacity in any zone")


async def test_nodeclaims_another_nodepool_owns_do_not_count(
    kube: FakeClient, clock: FakeClock
) -> None:
    kube.add(NODE_POOL, nodepool())
    health = RegistrationHealth()
    for _ in range(2):
        await record_registration(kube, health, clock, nodeclaim(owner_uid="older"),
                                  registered=False)
    assert condition(kube) is None
    assert health.status("pool-uid") is HealthStatus.UNKNOWN


async def test_a_changed_nodeclass_or_nodepool_resets_the_condition(
    kube: FakeClient, clock: FakeClock
) -> None:
    kube.add(NODE_POOL, nodepool())
    kube.add(NODE_CLASS, {"metadata": {"name": "default", "generation": 3}})
    health = RegistrationHealth()
    controller = NodePoolRegistrationHealth(client=kube, cloud_provider=FakeCloudProvider(),
                                            clock=clock, health=health)
    await controller.reconcile(Request("", "default"))
    assert condition(kube) == ("Unknown", "AwaitingReconciliation",
                               "object is awaiting reconciliation")
    assert kube.peek(NODE_POOL, "default")["status"]["nodeClassObservedGeneration"] == 3

    for _ in range(2):
        await record_registration(kube, health, clock, nodeclaim(), registered=False)
    assert condition(kube) is not None and condition(kube)[0] == "False"
    await controller.reconcile(Request("", "default"))
    assert condition(kube) is not None and condition(kube)[0] == "False"  # nothing changed

    # A restart: the record is empty, re-seeded from the stored condition.
    fresh = RegistrationHealth()
    restarted = NodePoolRegistrationHealth(client=kube, cloud_provider=FakeCloudProvider(),
                                           clock=clock, health=fresh)
    await restarted.reconcile(Request("", "default"))
    assert fresh.status("pool-uid") is HealthStatus.UNHEALTHY

    # The NodeClass is fixed (a new generation): a fresh start.
    kube.peek(NODE_CLASS, "default")["metadata"]["generation"] = 4
    await restarted.reconcile(Request("", "default"))
    assert condition(kube) is not None and condition(kube)[0] == "Unknown"
    assert fresh.status("pool-uid") is HealthStatus.UNKNOWN
    assert kube.peek(NODE_POOL, "default")["status"]["nodeClassObservedGeneration"] == 4

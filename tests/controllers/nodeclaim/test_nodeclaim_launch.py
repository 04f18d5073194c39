"""The launch step of nodeclaim.lifecycle, driven through the controller's reconcile."""

from __future__ import annotations

import pytest
from nodeclaim_factories import nodeclaim_manifest

from karpy.apis.annotations import FINALIZER_TERMINATION
from karpy.cloudprovider import (
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
    OfferingKey,
    UnavailableOfferings,
)
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.nodeclaim import LifecycleController
from karpy.runtime import Request
from karpy.runtime.testing import FakeClient, FakeClock, ReconcileDriver
from karpy.state.kinds import NODE_CLAIM

NAME = "default-abcde"
REQUEST = Request("", NAME)


def condition(obj: dict, type_: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


async def test_launch_writes_the_launched_machine_onto_the_nodeclaim(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController, logs, metrics
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME, requests={"cpu": "3"}))

    await lifecycle.reconcile(REQUEST)

    assert len(provider.create_calls) == 1
    stored = kube.peek(NODE_CLAIM, NAME)
    pid = stored["status"]["providerID"]
    assert pid in provider.instances
    # the cheapest offering with 3 CPUs allocatable: default-instance-type (4 CPU), spot
    labels = stored["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "default-instance-type"
    assert labels["karpenter.sh/capacity-type"] == "spot"
    assert labels["topology.kubernetes.io/zone"].startswith("test-zone-")
    assert labels["karpenter.sh/nodepool"] == "default"
    assert stored["status"]["capacity"]["cpu"] == "4"
    assert stored["status"]["allocatable"]["cpu"] == "3900m"
    assert FINALIZER_TERMINATION in stored["metadata"]["finalizers"]
    launched = condition(stored, "Launched")
    assert (launched["status"], launched["reason"]) == ("True", "Launched")
    assert condition(stored, "Registered")["status"] == "Unknown"
    assert condition(stored, "Ready")["status"] == "Unknown"

    [line] = logs.messages("launched nodeclaim")
    assert line["logger"] == "controller"
    assert line["NodeClaim"] == {"name": NAME}
    assert line["provider-id"] == pid
    assert line["instance-type"] == "default-instance-type"
    assert line["zone"] == labels["topology.kubernetes.io/zone"]
    assert line["capacity-type"] == "spot"
    assert line["allocatable"]["cpu"] == "3900m"
    assert metrics.value("karpenter_nodeclaims_launched_total", nodepool="default") == 1


async def test_nodeclaim_labels_win_over_the_providers(
    kube: FakeClient, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME, labels={"team": "a"}))
    await lifecycle.reconcile(REQUEST)
    labels = kube.peek(NODE_CLAIM, NAME)["metadata"]["labels"]
    assert labels["team"] == "a"
    assert labels["kubernetes.io/arch"] == "amd64"


async def test_a_launched_nodeclaim_is_not_launched_again(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    await lifecycle.reconcile(REQUEST)
    await lifecycle.reconcile(REQUEST)
    await lifecycle.reconcile(REQUEST)
    assert len(provider.create_calls) == 1
    assert len(provider.instances) == 1


async def test_a_lost_status_write_does_not_launch_a_second_machine(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME, finalizer=True))
    real_patch_status = kube.patch_status

    async def failing(*args, **kwargs):
        raise ConnectionError("apiserver went away")

    kube.patch_status = failing  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await lifecycle.reconcile(REQUEST)
    kube.patch_status = real_patch_status  # type: ignore[method-assign]

    await lifecycle.reconcile(REQUEST)

    assert len(provider.create_calls) == 1
    stored = kube.peek(NODE_CLAIM, NAME)
    assert stored["status"]["providerID"] in provider.instances
    assert condition(stored, "Launched")["status"] == "True"


async def test_insufficient_capacity_deletes_the_nodeclaim_and_marks_the_offerings(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController,
    unavailable: UnavailableOfferings, clock: FakeClock, events, logs, metrics, settings,
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    refused = OfferingKey("small-instance-type", "test-zone-a", "spot")
    provider.next_create_error = InsufficientCapacityError(
        "no spot capacity in test-zone-a", offerings=[refused]
    )

    await lifecycle.reconcile(REQUEST)

    # the finalizer holds it until termination is done: deletion has started
    assert kube.peek(NODE_CLAIM, NAME)["metadata"].get("deletionTimestamp")
    assert unavailable.is_unavailable("small-instance-type", "test-zone-a", "spot")
    clock.advance(settings.insufficient_capacity_ttl + 1)
    assert not unavailable.is_unavailable("small-instance-type", "test-zone-a", "spot")
    assert "InsufficientCapacityError" in await events.reasons(NAME)
    [message] = [m for m in await events.messages(NAME) if "capacity" in m]
    assert message == f"NodeClaim {NAME} event: no spot capacity in test-zone-a"
    [line] = logs.messages("failed launching nodeclaim")
    assert line["level"] == "ERROR" and "no spot capacity" in line["error"]
    assert metrics.value(
        "karpenter_nodeclaims_disrupted_total", reason="insufficient_capacity"
    ) == 1
    # nothing else was written for a NodeClaim on its way out
    assert "providerID" not in kube.peek(NODE_CLAIM, NAME).get("status", {})


async def test_nodeclass_not_ready_deletes_the_nodeclaim(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController, events
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    provider.next_create_error = NodeClassNotReadyError("TestNodeClass default is not ready")
    await lifecycle.reconcile(REQUEST)
    assert kube.peek(NODE_CLAIM, NAME)["metadata"].get("deletionTimestamp")
    assert "NodeClassNotReady" in await events.reasons(NAME)


async def test_a_create_error_is_shown_on_launched_and_retried_with_backoff(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    provider.next_create_error = CreateError(
        "launch template lt-123 not found", reason="LaunchTemplateNotFound"
    )
    driver = ReconcileDriver(lifecycle)

    report = await driver.drive(REQUEST)

    assert report.rate_limited and report.error is not None
    stored = kube.peek(NODE_CLAIM, NAME)
    launched = condition(stored, "Launched")
    assert launched["status"] == "Unknown"
    assert launched["reason"] == "LaunchTemplateNotFound"
    assert launched["message"] == "launch template lt-123 not found"
    assert not stored["metadata"].get("deletionTimestamp")

    report = await driver.drive(REQUEST)  # the retry succeeds

    assert report.error is None
    assert condition(kube.peek(NODE_CLAIM, NAME), "Launched")["status"] == "True"


async def test_an_unexpected_error_is_launch_failed_with_a_truncated_message(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    provider.next_create_error = RuntimeError("x" * 500)
    report = await ReconcileDriver(lifecycle).drive(REQUEST)
    assert report.rate_limited
    launched = condition(kube.peek(NODE_CLAIM, NAME), "Launched")
    assert launched["reason"] == "LaunchFailed"
    assert launched["message"] == "x" * 300 + "..."


async def test_nodeclaims_of_another_providers_nodeclass_are_left_alone(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController
) -> None:
    await kube.create(
        NODE_CLAIM,
        nodeclaim_manifest(
            NAME, node_class_group="karpenter.k8s.aws", node_class_kind="EC2NodeClass"
        ),
    )
    await lifecycle.reconcile(REQUEST)
    assert provider.create_calls == []
    assert [c for c in kube.calls if c.verb == "patch"] == []


async def test_a_deleting_nodeclaim_is_not_launched(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME, finalizer=True))
    await kube.delete(NODE_CLAIM, NAME)
    await lifecycle.reconcile(REQUEST)
    assert provider.create_calls == []

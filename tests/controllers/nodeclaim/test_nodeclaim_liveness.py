"""The liveness step: NodeClaims that never launch or never register are deleted."""

from __future__ import annotations

from nodeclaim_factories import node_manifest, nodeclaim_manifest

from karpy.apis.duration import format_go_duration
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.nodeclaim import LifecycleController
from karpy.controllers.settings import Settings
from karpy.runtime import Request
from karpy.runtime.kinds import NODE
from karpy.runtime.testing import FakeClient, FakeClock, ReconcileDriver
from karpy.state.kinds import NODE_CLAIM

NAME = "default-abcde"
REQUEST = Request("", NAME)


def deleting(kube: FakeClient) -> bool:
    return bool(kube.peek(NODE_CLAIM, NAME)["metadata"].get("deletionTimestamp"))


async def test_an_unregistered_nodeclaim_is_deleted_after_the_registration_ttl(
    kube: FakeClient, lifecycle: LifecycleController, clock: FakeClock, settings: Settings,
    events, logs, metrics,
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    result = await lifecycle.reconcile(REQUEST)  # launches; no Node ever appears
    assert 0 < result.requeue_after <= settings.registration_ttl

    clock.advance(settings.registration_ttl - 60)
    result = await lifecycle.reconcile(REQUEST)
    assert not deleting(kube)
    assert result.requeue_after <= 60

    clock.advance(61)
    await lifecycle.reconcile(REQUEST)

    assert deleting(kube)
    [line] = logs.messages("terminating due to timeout")
    assert line["reason"] == "registration_timeout"
    assert line["timeout"] == "15m0s"
    assert line["NodeClaim"] == {"name": NAME}
    assert "RegistrationTimeout" in await events.reasons(NAME)
    assert metrics.value(
        "karpenter_nodeclaims_disrupted_total", reason="registration_timeout"
    ) == 1


async def test_a_nodeclaim_that_never_launches_is_deleted_after_the_launch_ttl(
    kube: FakeClient, provider: FakeCloudProvider, lifecycle: LifecycleController,
    clock: FakeClock, settings: Settings, logs,
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    driver = ReconcileDriver(lifecycle)
    provider.next_create_error = RuntimeError("cloud API unavailable")
    assert (await driver.drive(REQUEST)).rate_limited
    clock.advance(settings.launch_ttl + 1)
    provider.next_create_error = RuntimeError("cloud API unavailable")

    await driver.drive(REQUEST)

    assert deleting(kube)
    [line] = logs.messages("terminating due to timeout")
    assert (line["reason"], line["timeout"]) == ("launch_timeout", "5m0s")


async def test_a_registered_nodeclaim_is_never_timed_out(
    kube: FakeClient, lifecycle: LifecycleController, clock: FakeClock, settings: Settings
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    await lifecycle.reconcile(REQUEST)
    pid = kube.peek(NODE_CLAIM, NAME)["status"]["providerID"]
    await kube.create(NODE, node_manifest("node-1", pid))
    await lifecycle.reconcile(REQUEST)
    clock.advance(settings.registration_ttl * 10)
    result = await lifecycle.reconcile(REQUEST)
    assert not deleting(kube)
    assert result.requeue_after == 0 and not result.requeue


async def test_the_ttls_come_from_settings(
    kube: FakeClient, provider, recorder, unavailable, metrics, clock: FakeClock, logs
) -> None:
    short = Settings(registration_ttl=20.0)
    lifecycle = LifecycleController(
        client=kube, index=kube, cloud_provider=provider, recorder=recorder,
        unavailable_offerings=unavailable, settings=short, metrics=metrics.instruments,
        clock=clock,
    )
    await kube.create(NODE_CLAIM, nodeclaim_manifest(NAME))
    await lifecycle.reconcile(REQUEST)
    clock.advance(21)
    await lifecycle.reconcile(REQUEST)
    assert deleting(kube)
    assert logs.messages("terminating due to timeout")[0]["timeout"] == "20s"


def test_durations_print_like_go() -> None:
    assert [format_go_duration(s) for s in (900, 300, 20, 3600, 90.5)] == [
        "15m0s", "5m0s", "20s", "1h0m0s", "1m30.5s",
    ]

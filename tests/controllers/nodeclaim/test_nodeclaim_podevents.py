"""nodeclaim.podevents: a NodeClaim records when pods last arrived on or left its node,
at most once per 10 s however busy the node is."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nodeclaim_factories import node_manifest, nodeclaim_manifest

from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.nodeclaim.podevents import POD_EVENTS, PodEvents, is_pod_event
from karpy.runtime import Request, errors, kinds
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM

PROVIDER_ID = "fake://node-a"


def pod(
    name: str, node: str = "node-a", *, daemonset: bool = False, **status: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if daemonset:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                    "name": "ds", "uid": "u", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": dict(status or {"phase": "Running"})}


@pytest.fixture
async def world(kube: FakeClient) -> FakeClient:
    claim = nodeclaim_manifest("default-a")
    claim["status"] = {"providerID": PROVIDER_ID, "nodeName": "node-a"}
    await kube.create(NODE_CLAIM, claim)
    await kube.create(kinds.NODE, node_manifest("node-a", PROVIDER_ID))
    return kube


@pytest.fixture
def podevents(kube: FakeClient, provider: FakeCloudProvider, clock: FakeClock) -> PodEvents:
    return PodEvents(client=kube, index=kube, cloud_provider=provider, clock=clock)  # type: ignore[arg-type]


def last_pod_event(kube: FakeClient) -> str | None:
    status = kube.peek(NODE_CLAIM, "default-a").get("status") or {}
    return status.get("lastPodEventTime")  # type: ignore[no-any-return]


def status_writes(kube: FakeClient) -> int:
    return sum(1 for c in kube.calls
               if c.verb == "patch" and c.kind == NODE_CLAIM and c.subresource == "status")


async def test_a_pod_event_stamps_the_nodes_nodeclaim(
    world: FakeClient, podevents: PodEvents, clock: FakeClock
) -> None:
    await world.create(kinds.POD, pod("web"))
    await podevents.reconcile(Request("default", "web"))
    assert last_pod_event(world) == "2024-01-01T00:00:00Z"


async def test_events_within_ten_seconds_write_once_then_the_next_one_writes_again(
    world: FakeClient, podevents: PodEvents, clock: FakeClock
) -> None:
    for i in range(20):
        await world.create(kinds.POD, pod(f"web-{i}"))
        await podevents.reconcile(Request("default", f"web-{i}"))
        await clock.step(0.45)  # 20 events over 9 s
    assert status_writes(world) == 1
    await clock.step(1.5)
    await podevents.reconcile(Request("default", "web-0"))
    assert status_writes(world) == 2
    assert last_pod_event(world) == "2024-01-01T00:00:10Z"


async def test_its_own_write_dedupes_even_before_the_cache_shows_it(
    world: FakeClient, podevents: PodEvents, clock: FakeClock
) -> None:
    await world.create(kinds.POD, pod("web"))
    await podevents.reconcile(Request("default", "web"))
    # The cache still holds the NodeClaim from before the write.
    world.peek(NODE_CLAIM, "default-a")["status"].pop("lastPodEventTime")
    await clock.step(2.0)
    await podevents.reconcile(Request("default", "web"))
    assert status_writes(world) == 1


async def test_pods_of_one_node_reconciled_at_once_write_once(
    world: FakeClient, podevents: PodEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pods of a new node bind together and the workers take them concurrently:
    # each must see the write the first one is making, not only finished writes.
    release = asyncio.Event()
    patch_status = world.patch_status

    async def slow_patch_status(*args: Any, **kwargs: Any) -> Any:
        await release.wait()
        return await patch_status(*args, **kwargs)

    monkeypatch.setattr(world, "patch_status", slow_patch_status)
    for i in range(3):
        await world.create(kinds.POD, pod(f"web-{i}"))
    reconciles = asyncio.gather(
        *(podevents.reconcile(Request("default", f"web-{i}")) for i in range(3)))
    await asyncio.sleep(0)
    release.set()
    await reconciles
    assert status_writes(world) == 1


async def test_a_failed_write_lets_the_next_pod_event_write(
    world: FakeClient, podevents: PodEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch_status = world.patch_status

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise errors.RequestTimeout("PATCH timed out")

    monkeypatch.setattr(world, "patch_status", failing)
    await world.create(kinds.POD, pod("web"))
    with pytest.raises(errors.RequestTimeout):
        await podevents.reconcile(Request("default", "web"))
    monkeypatch.setattr(world, "patch_status", patch_status)
    await podevents.reconcile(Request("default", "web"))
    assert last_pod_event(world) == "2024-01-01T00:00:00Z"


async def test_daemonset_pods_and_foreign_nodes_are_ignored(
    world: FakeClient, podevents: PodEvents, provider: FakeCloudProvider
) -> None:
    await world.create(kinds.POD, pod("logs", daemonset=True))
    await world.create(kinds.NODE, node_manifest("node-b", "other://b"))
    await world.create(kinds.POD, pod("web", node="node-b"))
    await world.create(kinds.POD, pod("pending", node=""))
    for name in ("logs", "web", "pending", "gone"):
        await podevents.reconcile(Request("default", name))
    assert status_writes(world) == 0


async def test_a_nodeclaim_of_another_providers_nodeclass_is_left_alone(
    world: FakeClient, podevents: PodEvents
) -> None:
    world.peek(NODE_CLAIM, "default-a")["spec"]["nodeClassRef"]["kind"] = "OtherNodeClass"
    await world.create(kinds.POD, pod("web"))
    await podevents.reconcile(Request("default", "web"))
    assert status_writes(world) == 0


_STATES = st.sampled_from(["unbound", "running", "succeeded", "failed", "terminating"])


def _pod_in(state: str) -> dict[str, Any]:
    p = pod("p", node="" if state == "unbound" else "node-a")
    if state in ("succeeded", "failed"):
        p["status"]["phase"] = state.capitalize()
    if state == "terminating":
        p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return p


@given(_STATES, _STATES)
def test_only_binding_going_terminal_or_terminating_on_a_node_count(old: str, new: str) -> None:
    expected = new != "unbound" and (
        old == "unbound"
        or (new in ("succeeded", "failed") and old not in ("succeeded", "failed"))
        or (new == "terminating" and old != "terminating")
    )
    assert is_pod_event(_pod_in(old), _pod_in(new)) is expected
    assert POD_EVENTS.update(_pod_in(old), _pod_in(new)) is expected


def test_a_bound_pod_seen_first_counts_and_a_deleted_one_does_not() -> None:
    assert POD_EVENTS.create(_pod_in("running"))
    assert not POD_EVENTS.create(_pod_in("unbound"))
    assert not POD_EVENTS.delete(_pod_in("running"))

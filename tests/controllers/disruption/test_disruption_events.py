"""Disruption's Events are de-duplicated as Karpenter's recorder does: by reason and
the object (plus, for some, the command or reason), never by message, for 2 minutes,
15 for Unconsolidatable, 1 for a NodePool's blocking budget."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.controllers.disruption._events import DisruptionEvents
from karpy.runtime import EventRecorder, kinds
from karpy.runtime.testing import FakeClient, FakeClock


def obj(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1" if kind == "Node" else "karpenter.sh/v1", "kind": kind,
            "metadata": {"name": name, "uid": f"uid-{name}"}}


NODE, CLAIM, POOL = obj("Node", "n1"), obj("NodeClaim", "c1"), obj("NodePool", "default")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> FakeClient:
    return FakeClient(clock=clock)


@pytest.fixture
def recorder(kube: FakeClient, clock: FakeClock) -> EventRecorder:
    return EventRecorder(kube, component="karpenter", host="t", clock=clock)  # type: ignore[arg-type]


async def recorded(kube: FakeClient, recorder: EventRecorder) -> list[tuple[str, str, str]]:
    await recorder.flush()
    items = await kube.list(kinds.EVENT, namespace="default")
    return sorted((e["involvedObject"]["name"], e["reason"], e["message"]) for e in items)


async def test_a_node_blocked_for_changing_reasons_gets_one_event_per_two_minutes(
    kube: FakeClient, recorder: EventRecorder, clock: FakeClock
) -> None:
    events = DisruptionEvents(recorder, clock)
    for message in ("node is not initialized", "node is nominated for a pending pod",
                    "node has a do-not-disrupt pod"):
        events.blocked(NODE, CLAIM, message)
        await clock.step(10)
    assert await recorded(kube, recorder) == [
        ("c1", "DisruptionBlocked", "Node is not initialized"),
        ("n1", "DisruptionBlocked", "Node is not initialized"),
    ]
    await clock.step(100)  # 2 minutes after the first
    events.blocked(NODE, None, "node has a do-not-disrupt pod")
    assert ("n1", "DisruptionBlocked", "Node has a do-not-disrupt pod") in await recorded(
        kube, recorder)


async def test_unconsolidatable_waits_fifteen_minutes_whatever_the_message(
    kube: FakeClient, recorder: EventRecorder, clock: FakeClock
) -> None:
    events = DisruptionEvents(recorder, clock)
    events.unconsolidatable(NODE, None, 'NodePool "default" has consolidation disabled')
    await clock.step(14 * 60)
    events.unconsolidatable(NODE, None, "Can't replace with a cheaper node")
    assert len(await recorded(kube, recorder)) == 1
    await clock.step(61)
    events.unconsolidatable(NODE, None, "Can't replace with a cheaper node")
    assert len(await recorded(kube, recorder)) == 2


async def test_a_nodepool_budget_block_is_per_reason_and_per_minute(
    kube: FakeClient, recorder: EventRecorder, clock: FakeClock
) -> None:
    events = DisruptionEvents(recorder, clock)
    events.nodepool_blocked(POOL, "Drifted")
    events.nodepool_blocked(POOL, "Empty")
    events.nodepool_blocked(POOL, "Drifted")
    assert len(await recorded(kube, recorder)) == 2
    await clock.step(61)
    events.nodepool_blocked(POOL, "Drifted")
    await recorder.flush()
    counts = sorted(e.get("count", 1) for e in await kube.list(kinds.EVENT, namespace="default"))
    assert counts == [1, 2]  # the same message again bumps the Event's count

"""EventRecorder's filters before the queue (Karpenter's dedupe keys, client-go's
per-object budget and aggregation) and how it reports what it drops, over a FakeClient."""

from __future__ import annotations

import logging

import pytest

from karpy.runtime import EventRecorder, kinds
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}"}}


def _recorder(clock: FakeClock, **kw: object) -> tuple[EventRecorder, FakeClient]:
    client = FakeClient(clock=clock)
    return EventRecorder(client, component="karpenter", clock=clock, **kw), client  # type: ignore[arg-type]


async def _events(client: FakeClient) -> list[dict[str, object]]:
    return [dict(e) for e in await client.list(kinds.EVENT, namespace="default")]


async def test_events_sharing_a_dedupe_key_are_one_per_window() -> None:
    clock = FakeClock()
    recorder, client = _recorder(clock)
    for pod in range(40):  # the message names the pod; the key is the node's name
        recorder.warning(_node("a"), "FailedDraining", f"Failed to drain node, pod-{pod}",
                         dedupe_values=("a",))
    recorder.warning(_node("b"), "FailedDraining", "Failed to drain node, x", dedupe_values=("b",))
    await recorder.flush()
    assert sorted(e["involvedObject"]["name"] for e in await _events(client)) == ["a", "b"]  # type: ignore[index]
    assert recorder.deduplicated == 39 and recorder.dropped == 0
    clock.advance(119)
    recorder.warning(_node("a"), "FailedDraining", "Failed to drain node, y", dedupe_values=("a",))
    clock.advance(2)  # the 2-minute window (Karpenter's default) has ended
    recorder.warning(_node("a"), "FailedDraining", "Failed to drain node, z", dedupe_values=("a",))
    await recorder.flush()
    messages = [e["message"] for e in await _events(client)]
    assert "Failed to drain node, y" not in messages and "Failed to drain node, z" in messages


async def test_a_custom_dedupe_timeout_is_kept() -> None:
    clock = FakeClock()
    recorder, client = _recorder(clock)
    recorder.normal(_node("a"), "Unconsolidatable", "m1", dedupe_values=("uid-a",),
                    dedupe_timeout=900)
    clock.advance(600)
    recorder.normal(_node("a"), "Unconsolidatable", "m2", dedupe_values=("uid-a",),
                    dedupe_timeout=900)
    await recorder.flush()
    assert [e["message"] for e in await _events(client)] == ["m1"]


async def test_identical_events_waiting_in_the_queue_take_one_slot_and_keep_their_count() -> None:
    clock = FakeClock()
    recorder, client = _recorder(clock, queue_size=2)
    for _ in range(20):
        recorder.normal(_node("a"), "Evicted", "Evicted pod: Consolidation")
    recorder.normal(_node("b"), "Evicted", "Evicted pod: Consolidation")
    assert recorder.dropped == 0  # 21 events, a queue of 2, nothing lost
    await recorder.flush()
    counts = {e["involvedObject"]["name"]: e["count"] for e in await _events(client)}  # type: ignore[index]
    assert counts == {"a": 20, "b": 1}


async def test_a_full_queue_is_counted_and_logged_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    metrics = Metrics()
    recorder, _ = _recorder(clock, queue_size=5, on_drop=metrics.event_dropped)
    caplog.set_level(logging.WARNING, logger="karpy.runtime.events")
    for i in range(300):  # 300 distinct objects: no key, no budget keeps them out
        recorder.normal(_node(f"n{i}"), "Tick", "tick")
    clock.advance(61)
    recorder.normal(_node("late"), "Tick", "tick")
    text = metrics.render().decode()
    metrics.shutdown()
    lines = [r for r in caplog.records if r.getMessage() == "event queue full, dropping event"]
    assert recorder.dropped == 296
    assert len(lines) == 2 and lines[1].__dict__["dropped"] == 295
    assert ('karpy_events_dropped_total{cause="queue_full",component="karpenter"} 296.0'
            in text)


async def test_an_objects_storm_is_cut_before_the_queue() -> None:
    clock = FakeClock()
    metrics = Metrics()
    recorder, client = _recorder(clock, queue_size=1000, on_drop=metrics.event_dropped)
    for i in range(30):
        recorder.normal(_node("noisy"), "Tick", f"tick {i}")
    assert recorder._queue.qsize() == 25  # the 5 over budget never took queue room
    await recorder.flush()
    text = metrics.render().decode()
    metrics.shutdown()
    assert len(await _events(client)) == 25 and recorder.dropped == 5
    assert 'karpy_events_dropped_total{cause="rate_limited",component="karpenter"} 5.0' in text

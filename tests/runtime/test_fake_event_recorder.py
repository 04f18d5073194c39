"""karpy.runtime.testing.FakeEventRecorder keeps every Event a controller records, in
order, about which object, and writes none."""

from __future__ import annotations

from karpy.runtime import EventRecorder
from karpy.runtime.testing import FakeEventRecorder, RecordedEvent

POD = {"kind": "Pod", "metadata": {"name": "web-1", "namespace": "shop"}}
NODE = {"kind": "Node", "metadata": {"name": "node-a"}}


async def test_it_keeps_every_event_in_order_and_writes_none() -> None:
    recorder = FakeEventRecorder()
    assert isinstance(recorder, EventRecorder)  # accepted wherever a recorder is
    recorder.normal(POD, "Evicted", "Evicted pod")
    recorder.warning(NODE, "FailedDraining", "Failed to drain node")
    recorder.normal(POD, "Evicted", "Evicted pod")  # repeats are kept, not counted
    await recorder.flush()
    assert recorder.events == [
        RecordedEvent("Pod", "shop", "web-1", "Normal", "Evicted", "Evicted pod"),
        RecordedEvent("Node", "", "node-a", "Warning", "FailedDraining", "Failed to drain node"),
        RecordedEvent("Pod", "shop", "web-1", "Normal", "Evicted", "Evicted pod"),
    ]
    assert recorder.reasons() == ["Evicted", "FailedDraining", "Evicted"]
    assert recorder.reasons("node-a") == ["FailedDraining"]
    assert [e.name for e in recorder.with_reason("Evicted")] == ["web-1", "web-1"]
    assert len(recorder.about("Pod", "web-1", "shop")) == 2
    assert recorder.about("Pod", "web-1") == []
    assert recorder.dropped == 0

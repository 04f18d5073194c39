"""Termination's Events carry Karpenter's dedupe values (v1.14.1
terminator/events), so a drain that PDBs hold back records one FailedDraining per node
per 2 minutes, and each pod's Evicted once, however often the queue retries."""

from __future__ import annotations

from karpy.controllers.termination import _events as events
from karpy.runtime import EventRecorder, kinds
from karpy.runtime.testing import FakeClient, FakeClock


async def test_a_held_back_drain_records_one_failed_draining_per_node() -> None:
    clock = FakeClock()
    client = FakeClient(clock=clock)
    recorder = EventRecorder(client, component="karpenter", clock=clock)  # queue of 1000
    nodes = [{"kind": "Node", "metadata": {"name": f"n{i}", "uid": f"u{i}"}} for i in range(10)]
    pods = [{"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"pu{i}"}}
            for i in range(108)]
    for attempt in range(20):  # each pod's eviction refused by its PDB 20 times
        for i, pod in enumerate(pods):
            events.failed_to_drain(
                recorder, nodes[i % 10],
                f"evicting pod default/{pod['metadata']['name']} violates a PDB ({attempt})",
            )
    for pod in pods:
        events.evicted(recorder, pod, "Consolidation")
        events.evicted(recorder, pod, "Consolidation")
    await recorder.flush()
    written = await client.list(kinds.EVENT, namespace="default")
    by_reason: dict[str, int] = {}
    for e in written:
        by_reason[e["reason"]] = by_reason.get(e["reason"], 0) + 1
    assert by_reason == {"FailedDraining": 10, "Evicted": 108}
    assert recorder.dropped == 0

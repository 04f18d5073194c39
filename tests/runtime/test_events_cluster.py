"""EventRecorder on the local control plane: core/v1 Events with de-duplication counts."""

from __future__ import annotations

from karpy.runtime import Client, EventRecorder, kinds
from karpy.runtime.testing import FakeClock


async def test_repeated_events_bump_the_count_of_one_event(
    rt_client: Client, namespace: str
) -> None:
    cm = await rt_client.create(
        kinds.CONFIG_MAP, {"metadata": {"name": "subject", "namespace": namespace}}
    )
    recorder = EventRecorder(rt_client, component="karpy-test")
    for _ in range(3):
        recorder.normal(cm, "Labeled", "labeled with keys=0")
    recorder.warning(cm, "Failed", "something else")
    await recorder.flush()

    events = await rt_client.list(kinds.EVENT, namespace=namespace)
    by_reason = {e["reason"]: e for e in events}
    assert len(events) == 2
    labeled = by_reason["Labeled"]
    assert labeled["count"] == 3 and labeled["type"] == "Normal"
    assert labeled["involvedObject"]["uid"] == cm["metadata"]["uid"]
    assert labeled["involvedObject"]["kind"] == "ConfigMap"
    assert labeled["source"]["component"] == "karpy-test"
    assert labeled["message"] == "labeled with keys=0"
    assert by_reason["Failed"]["type"] == "Warning" and by_reason["Failed"]["count"] == 1


async def test_an_event_storm_from_one_object_is_cut_off(rt_client: Client, namespace: str) -> None:
    cm = await rt_client.create(
        kinds.CONFIG_MAP, {"metadata": {"name": "noisy", "namespace": namespace}}
    )
    clock = FakeClock()
    recorder = EventRecorder(rt_client, component="karpy-test", clock=clock)
    for i in range(30):  # distinct messages: no de-duplication possible
        recorder.normal(cm, "Tick", f"tick {i}")
    await recorder.flush()
    assert len(await rt_client.list(kinds.EVENT, namespace=namespace)) == 25
    assert recorder.dropped == 5
    clock.advance(300)  # one more token after five minutes
    recorder.normal(cm, "Tick", "later")
    await recorder.flush()
    assert len(await rt_client.list(kinds.EVENT, namespace=namespace)) == 26

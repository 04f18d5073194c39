"""The Event volume of a consolidation scale-down (not a test): what termination records
while ~10 nodes drain under PDBs, what reaches the API, what is dropped.

Run:  .venv/bin/python benchmarks/event_volume_bench.py [--writes-per-second 20]

A replay, not a cluster run: the 120 -> 12 pod scale-down that logged 977 "event queue
full" lines drained 10 nodes of 108 pods. Here termination's own event helpers
(karpy.controllers.termination._events) are driven on a simulated clock the way its
reconcilers call them — the node's drain poll every 1 s records FailedDraining with the
count of pods still waiting, and each refused eviction (a PDB: at most one pod of each of
12 Deployments away at a time, a pod takes 3 s to go) records FailedDraining and retries
after 5 s (Settings.eviction_retry); an accepted one records Evicted — through a real
EventRecorder whose writes take 1/``--writes-per-second`` s each (a FakeClient behind a
delay: the API server's pace on a loaded 2-core machine is about 20/s). One simulated
second takes ``--scale`` real seconds. It prints the events recorded, written, dropped,
de-duplicated and the "event queue full" log lines. Run it on an older checkout (with
PYTHONPATH pointing there) for the before figures.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from karpy.controllers.termination import _events as events
from karpy.runtime import EventRecorder, kinds
from karpy.runtime.testing import FakeClient, FakeClock


class SlowClient(FakeClient):
    """A FakeClient whose writes take ``delay`` seconds (the API server's pace)."""

    def __init__(self, delay: float, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.delay = delay
        self.writes = 0

    async def create(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        await asyncio.sleep(self.delay)
        self.writes += 1
        return await super().create(*args, **kwargs)

    async def patch(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        await asyncio.sleep(self.delay)
        self.writes += 1
        return await super().patch(*args, **kwargs)


class Counting(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("event queue full"):
            self.lines += 1


async def replay(writes_per_second: float, scale: float) -> dict[str, int]:
    clock = FakeClock()
    client = SlowClient(scale / writes_per_second, clock)
    recorder = EventRecorder(client, component="karpenter", clock=clock)
    counting = Counting()
    logging.getLogger("karpy.runtime.events").addHandler(counting)
    recorded = 0

    def record(call: Any, *args: Any) -> None:
        nonlocal recorded
        recorded += 1
        call(recorder, *args)

    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}",
              "uid": f"node-uid-{i}"}} for i in range(10)]  # fmt: skip
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}",
             "namespace": "default", "uid": f"pod-uid-{i}"}} for i in range(108)]  # fmt: skip
    node_of = {i: i % 10 for i in range(108)}
    group_of = {i: i % 12 for i in range(108)}
    next_try = dict.fromkeys(range(108), 0.0)
    away_until: dict[int, float] = {}  # group -> when its evicted pod is gone
    left = set(range(108))
    writer = asyncio.create_task(recorder.run())
    t = 0.0
    while left and t < 600:
        for n, node in enumerate(nodes):
            waiting = [p for p in left if node_of[p] == n]
            if waiting:
                message = f"{len(waiting)} pods are waiting to be evicted"
                record(events.failed_to_drain, node, message)
        for p in sorted(left):
            if next_try[p] > t:
                continue
            if away_until.get(group_of[p], -1.0) > t:
                record(events.failed_to_drain, nodes[node_of[p]], "evicting pod violates a PDB")
                next_try[p] = t + 5.0
                continue
            record(events.evicted, pods[p], "Consolidation")
            away_until[group_of[p]] = t + 3.0
            left.discard(p)
        await asyncio.sleep(scale)
        clock.advance(1.0)
        t += 1.0
    await asyncio.sleep(scale * 5)
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)
    stored = len(await FakeClient.list(client, kinds.EVENT, namespace="default"))
    return {
        "simulated_seconds": int(t),
        "recorded": recorded,
        "api_writes": client.writes,
        "events_stored": stored,
        "dropped": recorder.dropped,
        "deduplicated": int(getattr(recorder, "deduplicated", 0)),
        "queue_full_log_lines": counting.lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes-per-second", type=float, default=20.0)
    parser.add_argument("--scale", type=float, default=0.02)
    args = parser.parse_args()
    for key, value in asyncio.run(replay(args.writes_per_second, args.scale)).items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()

"""Metrics: one registry per manager, open to other code's instruments."""

from __future__ import annotations

from karpy.runtime import Metrics, WorkQueue
from karpy.runtime.testing import FakeClock


def test_registries_are_per_instance_and_accept_foreign_instruments() -> None:
    a, b = Metrics(), Metrics()
    counter = a.meter("karpenter").create_counter(
        "karpenter_nodeclaims_created_total", description="Number of nodeclaims created"
    )
    counter.add(2, {"nodepool": "default"})
    text_a, text_b = a.render().decode(), b.render().decode()
    assert 'karpenter_nodeclaims_created_total{nodepool="default"} 2.0' in text_a
    assert "karpenter_nodeclaims_created_total" not in text_b


def test_queue_gauges_are_read_at_scrape_time() -> None:
    metrics = Metrics()
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(name="q", clock=clock)
    queue._metrics = metrics.queue("q", queue)
    queue.add("a")
    queue.add("b")
    text = metrics.render().decode()
    assert 'workqueue_depth{controller="q",name="q"} 2.0' in text
    assert 'workqueue_adds_total{controller="q",name="q"} 2.0' in text


async def test_unfinished_work_and_longest_running_processor() -> None:
    metrics = Metrics()
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(name="q", clock=clock)
    queue._metrics = metrics.queue("q", queue)
    queue.add("a")
    queue.add("b")
    await queue.get()
    clock.advance(4)
    await queue.get()
    clock.advance(1)
    text = metrics.render().decode()
    assert 'workqueue_unfinished_work_seconds{controller="q",name="q"} 6.0' in text
    assert 'workqueue_longest_running_processor_seconds{controller="q",name="q"} 5.0' in text
    assert 'workqueue_depth{controller="q",name="q"} 0.0' in text


def test_leader_gauge() -> None:
    metrics = Metrics()
    metrics.leader("lease", True)
    assert 'leader_election_master_status{name="lease"} 1.0' in metrics.render().decode()
    metrics.leader("lease", False)
    assert 'leader_election_master_status{name="lease"} 0.0' in metrics.render().decode()

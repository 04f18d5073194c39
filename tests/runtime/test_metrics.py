"""Metrics: one registry per manager, open to other code's instruments; the work queues'
series keep client-go's names, labels and buckets and count exactly what happened."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from karpy.runtime import WorkQueue
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClock

# client-go's workqueue buckets, as Prometheus renders them.
LE = [
    "1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1",
    "1.0", "10.0", "100.0", "1000.0", "+Inf",
]  # fmt: skip
Q = (("controller", "q"), ("name", "q"))


def scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape, keyed by (sample name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def bucket(name: str, le: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (f"{name}_bucket", tuple(sorted((*Q, ("le", le)))))


def instrumented(metrics: Metrics, clock: FakeClock, name: str = "q") -> WorkQueue[str]:
    queue: WorkQueue[str] = WorkQueue(name=name, clock=clock)
    queue._metrics = metrics.queue(name, queue)
    return queue


def test_registries_are_per_instance_and_accept_foreign_instruments() -> None:
    a, b = Metrics(), Metrics()
    counter = a.meter("karpenter").create_counter(
        "karpenter_nodeclaims_created_total", description="Number of nodeclaims created"
    )
    counter.add(2, {"nodepool": "default"})
    text_a, text_b = a.render().decode(), b.render().decode()
    assert 'karpenter_nodeclaims_created_total{nodepool="default"} 2.0' in text_a
    assert "karpenter_nodeclaims_created_total" not in text_b


def test_queue_depth_and_adds_under_controller_runtimes_names() -> None:
    metrics = Metrics()
    queue = instrumented(metrics, FakeClock())
    queue.add("a")
    queue.add("b")
    queue.add("a")  # de-duplicated: not an add
    text = metrics.render().decode()
    assert "# TYPE workqueue_depth gauge" in text
    assert "# TYPE workqueue_adds_total counter" in text
    assert 'workqueue_depth{controller="q",name="q"} 2.0' in text
    assert 'workqueue_adds_total{controller="q",name="q"} 2.0' in text


async def test_depth_counts_a_key_re_added_while_it_is_processed() -> None:
    """client-go counts a key dirty during processing in the depth until a worker takes it."""
    metrics = Metrics()
    queue = instrumented(metrics, FakeClock())
    queue.add("a")
    key = await queue.get()
    assert scrape(metrics)[("workqueue_depth", Q)] == 0
    queue.add("a")
    assert scrape(metrics)[("workqueue_depth", Q)] == 1
    queue.done(key)
    await queue.get()
    samples = scrape(metrics)
    assert samples[("workqueue_depth", Q)] == 0
    assert samples[("workqueue_adds_total", Q)] == 2


async def test_queue_and_work_durations_land_in_client_gos_buckets() -> None:
    metrics = Metrics()
    clock = FakeClock()
    queue = instrumented(metrics, clock)
    queue.add("b")
    clock.advance(0.001)  # exactly on a bound (from t=0, no rounding): counted in le=0.001
    queue.done(await queue.get())
    queue.add("a")
    clock.advance(0.5)  # waited 0.5 s: le=1.0 and above
    key = await queue.get()
    clock.advance(20)  # worked 20 s: le=100.0 and above
    queue.done(key)
    samples = scrape(metrics)
    waited = [samples[bucket("workqueue_queue_duration_seconds", le)] for le in LE]
    worked = [samples[bucket("workqueue_work_duration_seconds", le)] for le in LE]
    assert waited == [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2]
    assert worked == [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2]  # "b" took no time
    assert samples[("workqueue_queue_duration_seconds_count", Q)] == 2
    assert samples[("workqueue_queue_duration_seconds_sum", Q)] == 0.501
    assert samples[("workqueue_work_duration_seconds_sum", Q)] == 20
    assert samples[("workqueue_retries_total", Q)] == 0


def test_retries_are_counted() -> None:
    metrics = Metrics()
    queue = instrumented(metrics, FakeClock())
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")
    assert scrape(metrics)[("workqueue_retries_total", Q)] == 2


async def test_unfinished_work_and_longest_running_processor() -> None:
    metrics = Metrics()
    clock = FakeClock()
    queue = instrumented(metrics, clock)
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


async def test_a_restarted_controllers_new_queue_keeps_the_counters_and_moves_the_gauges() -> None:
    metrics = Metrics()
    clock = FakeClock()
    old = instrumented(metrics, clock)
    old.add("a")
    await old.get()  # left in processing, as a stopped controller may leave it
    new = instrumented(metrics, clock)
    new.add("b")
    clock.advance(3)
    samples = scrape(metrics)
    assert samples[("workqueue_adds_total", Q)] == 2
    assert samples[("workqueue_depth", Q)] == 1
    # The gauges read the new queue, which has nothing in processing.
    assert samples[("workqueue_longest_running_processor_seconds", Q)] == 0
    del old


def test_each_queue_has_its_own_series() -> None:
    metrics = Metrics()
    clock = FakeClock()
    instrumented(metrics, clock, "one").add("a")
    two = instrumented(metrics, clock, "two")
    two.add("a")
    two.add("b")
    samples = scrape(metrics)
    assert samples[("workqueue_adds_total", (("controller", "one"), ("name", "one")))] == 1
    assert samples[("workqueue_adds_total", (("controller", "two"), ("name", "two")))] == 2


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=2000, allow_nan=False), max_size=30))
def test_histogram_buckets_match_a_direct_count(waits: list[float]) -> None:
    """Against the definition: bucket le counts the observations <= le."""
    metrics = Metrics()
    clock = FakeClock()
    queue = instrumented(metrics, clock)
    observed: list[float] = []  # the waits as the clock measures them (float rounding)

    async def scenario() -> None:
        for n, wait in enumerate(waits):
            queue.add(str(n))
            before = clock.monotonic()
            clock.advance(wait)
            observed.append(clock.monotonic() - before)
            queue.done(await queue.get())

    asyncio.run(scenario())
    samples = scrape(metrics)
    for le in LE:
        bound = float(le)
        expected = sum(1 for w in observed if w <= bound)
        assert samples[bucket("workqueue_queue_duration_seconds", le)] == expected, le
    assert samples[("workqueue_queue_duration_seconds_count", Q)] == len(waits)
    assert samples[("workqueue_queue_duration_seconds_sum", Q)] == sum(observed)
    assert samples[("workqueue_depth", Q)] == 0


def test_shutdown_removes_the_queue_series_from_the_registry() -> None:
    metrics = Metrics()
    instrumented(metrics, FakeClock()).add("a")
    metrics.shutdown()
    metrics.shutdown()
    assert "workqueue_adds_total" not in metrics.render().decode()


def test_leader_gauge() -> None:
    metrics = Metrics()
    metrics.leader("lease", True)
    assert 'leader_election_master_status{name="lease"} 1.0' in metrics.render().decode()
    metrics.leader("lease", False)
    assert 'leader_election_master_status{name="lease"} 0.0' in metrics.render().decode()

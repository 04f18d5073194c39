"""Losing the Lease stops work at once (as controller-runtime does, graceful shutdown 0).

The manager runs on a FakeClient with a FakeClock: "the API server is partitioned" means
Lease writes fail, "time passes" is a step of the fake clock, so the renew deadline is
exact however loaded the machine is. What a user would notice if this broke: two
replicas acting at once — a controller still reconciling, or a write reaching the
server, after the lease could have been taken over."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from karpy.runtime import LeaderElectionConfig, Manager, Result, errors, kinds
from karpy.runtime.leaderelection import LeaderElector
from karpy.runtime.testing import FakeClient, FakeClock, eventually

LEASE = "karpy-test"
NS = "kube-system"
# renew_deadline 2 < lease_duration 3: another replica could take over 3 s after the
# start of the last successful renewal; the leader must be done by then.
TIMING = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}


def _config() -> LeaderElectionConfig:
    return LeaderElectionConfig(
        name=LEASE, namespace=NS, identity="me", lease_duration=TIMING["lease_duration"],
        renew_deadline=TIMING["renew_deadline"], retry_period=TIMING["retry_period"],
    )


class Partitionable(FakeClient):
    """A FakeClient whose Lease writes fail while ``partitioned`` (the leader cannot reach
    the API server; other writes are what the test watches), and whose Lease updates
    wait for ``gate`` to open when it is set (a renewal in flight)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.partitioned = False
        self.gate: asyncio.Event | None = None

    async def update(self, kind: Any, obj: Any, **options: Any) -> Any:
        if kind == kinds.LEASE:
            if self.gate is not None:
                await self.gate.wait()
            if self.partitioned:
                raise errors.TransportError("PUT lease: connection timed out")
        return await super().update(kind, obj, **options)


class Blocking:
    """A reconciler stuck in an in-flight request; on cancellation it records whether the
    manager still called itself leader, and tries one last write (as cleanup code
    would)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.started = asyncio.Event()
        self.leader_when_cancelled: bool | None = None
        self.cancelled_at: float | None = None
        self.last_write: BaseException | None = None

    async def reconcile(self) -> Result:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.leader_when_cancelled = self.manager.is_leader
            self.cancelled_at = time.monotonic()
            try:
                await self.manager.client.patch(
                    kinds.CONFIG_MAP, "state", {"data": {"by": "old leader"}}, namespace=NS
                )
            except errors.NotLeader as exc:
                self.last_write = exc
            raise
        return Result()


@pytest.fixture
def fake(clock: FakeClock) -> Partitionable:
    client = Partitionable(clock)
    client.add(kinds.CONFIG_MAP, {"metadata": {"name": "state", "namespace": NS}})
    return client


def _manager(fake: Partitionable, clock: FakeClock) -> Manager:
    return Manager(
        fake,  # type: ignore[arg-type]
        leader_election=_config(),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        graceful_shutdown_timeout=30.0,  # the drain a graceful stop would get
        clock=clock,
    )


async def _partition_until_lost(fake: Partitionable, clock: FakeClock, manager: Manager) -> None:
    """Partition the leader, then let fake time pass until its renew deadline."""
    fake.partitioned = True
    while manager.is_leader:
        await clock.step(0.1)
        assert clock.monotonic() < TIMING["lease_duration"] + 1, "never gave up"


async def test_is_leader_is_false_before_anything_is_cancelled(
    fake: Partitionable, clock: FakeClock
) -> None:
    manager = _manager(fake, clock)
    busy = Blocking(manager)
    manager.singleton("busy", busy, period=60)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(busy.started.wait(), 10)
    await _partition_until_lost(fake, clock, manager)
    # The last successful renewal started at 0 (the acquisition): leadership ends at 2 s,
    # before another replica could take over at 3 s.
    assert clock.monotonic() <= TIMING["renew_deadline"] + 0.1
    with pytest.raises(errors.LeaderElectionLost):
        await asyncio.wait_for(task, 10)
    assert busy.leader_when_cancelled is False


async def test_no_write_goes_through_the_managers_client_after_the_loss(
    fake: Partitionable, clock: FakeClock
) -> None:
    manager = _manager(fake, clock)
    busy = Blocking(manager)
    manager.singleton("busy", busy, period=60)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(busy.started.wait(), 10)
    # While leading, writes go through.
    await manager.client.patch(kinds.CONFIG_MAP, "state", {"data": {"by": "leader"}},
                               namespace=NS)
    before = len(fake.calls)
    fake.partitioned = True
    clock.advance(TIMING["renew_deadline"])  # the deadline passes; no task has run yet
    with pytest.raises(errors.NotLeader):
        await manager.client.patch(
            kinds.CONFIG_MAP, "state", {"data": {"by": "too late"}}, namespace=NS
        )
    with pytest.raises(errors.NotLeader):  # Events (api_client) are fenced as well
        await manager.api_client.create(
            kinds.CONFIG_MAP, {"metadata": {"name": "event-ish", "namespace": NS}}
        )
    with pytest.raises(errors.LeaderElectionLost):
        await asyncio.wait_for(task, 10)
    assert isinstance(busy.last_write, errors.NotLeader)  # the cleanup write, refused
    assert fake.calls[before:] == []
    assert fake.peek(kinds.CONFIG_MAP, "state", NS)["data"] == {"by": "leader"}  # type: ignore[index]


async def test_the_manager_stops_at_once_without_draining(
    fake: Partitionable, clock: FakeClock
) -> None:
    manager = _manager(fake, clock)
    busy = Blocking(manager)
    # A graceful stop would give this reconcile 24 s (0.8 x graceful_shutdown_timeout).
    manager.singleton("busy", busy, period=60)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(busy.started.wait(), 10)
    fake.partitioned = True
    while clock.monotonic() < TIMING["renew_deadline"] + 0.2:  # past the deadline
        await clock.step(0.1)
    lost_at = time.monotonic()
    with pytest.raises(errors.LeaderElectionLost):
        await asyncio.wait_for(task, 10)
    ended = time.monotonic() - lost_at
    assert busy.cancelled_at is not None
    assert ended < 2.0, f"run() ended {ended:.1f}s after the loss"
    assert not manager.is_leader


async def test_a_lease_taken_by_another_candidate_ends_leadership_at_once(
    fake: Partitionable, clock: FakeClock
) -> None:
    manager = _manager(fake, clock)
    busy = Blocking(manager)
    manager.singleton("busy", busy, period=60)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(busy.started.wait(), 10)
    lease = fake.peek(kinds.LEASE, LEASE, NS)
    assert lease is not None
    lease["spec"].update(holderIdentity="usurper", leaseDurationSeconds=3600)
    fake._bump(lease)
    await clock.step(TIMING["retry_period"])  # the next renewal sees it
    with pytest.raises(errors.LeaderElectionLost, match="usurper"):
        await asyncio.wait_for(task, 10)
    assert clock.monotonic() < TIMING["renew_deadline"]
    assert busy.leader_when_cancelled is False


async def test_a_renewal_answered_after_the_deadline_does_not_count(
    fake: Partitionable, clock: FakeClock
) -> None:
    elector = LeaderElector(
        fake,  # type: ignore[arg-type]
        _config(),
        clock=clock,
    )
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(lead))
    await asyncio.wait_for(leading.wait(), 10)
    fake.gate = asyncio.Event()  # renewals hang in flight
    await clock.step(TIMING["retry_period"])  # the renewal starts at 0.5...
    clock.advance(TIMING["renew_deadline"])  # ...and the deadline (2 s) passes
    assert not elector.is_leader
    fake.gate.set()  # now its answer arrives: success, but too late
    with pytest.raises(errors.LeaderElectionLost):
        await asyncio.wait_for(task, 10)
    assert not elector.is_leader


async def test_leadership_is_measured_from_the_start_of_the_last_renewal(
    fake: Partitionable, clock: FakeClock
) -> None:
    """A renewal that took long still extends leadership only from when it was sent:
    the server stored it no earlier, so another replica may take over at that moment +
    lease_duration, and the leader must have given up before."""
    elector = LeaderElector(
        fake,  # type: ignore[arg-type]
        _config(),
        clock=clock,
    )
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(lead))
    await asyncio.wait_for(leading.wait(), 10)
    fake.gate = asyncio.Event()
    await clock.step(TIMING["retry_period"])  # a renewal sent at 0.5...
    sent = clock.monotonic()
    await clock.step(1.4)
    fake.partitioned = False
    fake.gate.set()  # ...answered (successfully) at 1.9
    await eventually(lambda: fake.peek(kinds.LEASE, LEASE, NS)["spec"]["renewTime"]  # type: ignore[index]
                     != "2024-01-01T00:00:00.000000Z", what="the renewal stored")
    fake.gate = None
    fake.partitioned = True  # then nothing gets through
    while elector.is_leader:
        await clock.step(0.1)
        assert clock.monotonic() < 10
    assert clock.monotonic() <= sent + TIMING["renew_deadline"] + 0.1
    assert clock.monotonic() < sent + TIMING["lease_duration"]
    with pytest.raises(errors.LeaderElectionLost):
        await asyncio.wait_for(task, 10)

"""A leader renews its Lease as client-go does: one unread, optimistic update per round
(the fast path), falling back to read-then-update only when that fails (the slow path),
which leader_election_slowpath_total counts. What a user would notice if this broke:
twice the Lease requests every retry period, or a slow-path alert that never fires (or
always does). A FakeClient (which refuses a stale resourceVersion with 409, as the API
server does) plays the API server; a FakeClock makes the rounds exact."""

from __future__ import annotations

from typing import Any

from karpy.runtime import LeaderElectionConfig, kinds
from karpy.runtime.leaderelection import LeaderElector
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock

LEASE = "karpy-test"
NS = "kube-system"
SLOWPATH = f'leader_election_slowpath_total{{name="{LEASE}"}}'


class LeaseCalls(FakeClient):
    """A FakeClient that records the verbs of the requests made on Leases."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.lease_calls: list[str] = []

    async def get(self, kind: Any, name: str, **options: Any) -> Any:
        if kind == kinds.LEASE:
            self.lease_calls.append("get")
        return await super().get(kind, name, **options)

    async def update(self, kind: Any, obj: Any, **options: Any) -> Any:
        if kind == kinds.LEASE:
            self.lease_calls.append("update")
        return await super().update(kind, obj, **options)


def _elector(client: LeaseCalls, clock: FakeClock, metrics: Metrics) -> LeaderElector:
    config = LeaderElectionConfig(name=LEASE, namespace=NS, identity="me")
    return LeaderElector(client, config, clock=clock, metrics=metrics)  # type: ignore[arg-type]


async def test_renewals_take_the_fast_path_until_someone_else_writes_the_lease(
    clock: FakeClock,
) -> None:
    client, metrics = LeaseCalls(clock), Metrics()
    elector = _elector(client, clock, metrics)
    assert await elector.try_acquire_or_renew()  # creates the Lease
    client.lease_calls.clear()
    for _ in range(3):
        await clock.step(2.0)
        assert await elector.try_acquire_or_renew()
    assert client.lease_calls == ["update"] * 3, "a renewal is one unread update"
    assert SLOWPATH not in metrics.render().decode()

    # Someone else writes the Lease (kubectl annotate): the leader's copy is stale, the
    # optimistic update is refused, and the leader renews through a read.
    await client.patch(kinds.LEASE, LEASE, {"metadata": {"annotations": {"by": "kubectl"}}},
                       namespace=NS)
    client.lease_calls.clear()
    await clock.step(2.0)
    assert await elector.try_acquire_or_renew()
    assert client.lease_calls == ["update", "get", "update"]
    assert f"{SLOWPATH} 1.0" in metrics.render().decode()
    lease = await client.get(kinds.LEASE, LEASE, namespace=NS)
    assert lease["spec"]["holderIdentity"] == "me"
    assert lease["metadata"]["annotations"] == {"by": "kubectl"}, "the slow path keeps it"

    client.lease_calls.clear()
    await clock.step(2.0)
    assert await elector.try_acquire_or_renew()
    assert client.lease_calls == ["update"], "back on the fast path"
    assert f"{SLOWPATH} 1.0" in metrics.render().decode()


async def test_acquiring_someone_elses_expired_lease_is_no_slow_path(clock: FakeClock) -> None:
    client, metrics = LeaseCalls(clock), Metrics()
    other = _elector(client, clock, Metrics())
    other.config = LeaderElectionConfig(name=LEASE, namespace=NS, identity="other")
    assert await other.try_acquire_or_renew()
    elector = _elector(client, clock, metrics)
    assert not await elector.try_acquire_or_renew()  # first sight of other's record
    await clock.step(16.0)  # other's record unchanged for longer than its duration
    assert await elector.try_acquire_or_renew()
    lease = await client.get(kinds.LEASE, LEASE, namespace=NS)
    assert lease["spec"]["holderIdentity"] == "me"
    assert lease["spec"]["leaseTransitions"] == 1
    assert SLOWPATH not in metrics.render().decode()

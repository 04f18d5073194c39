"""Leader election judges expiry on its own monotonic clock, not on the holder's
timestamps (which come from another machine's wall clock).

The Lease lives on the real API server; the electors' clock is a FakeClock, so "a
second passes" is a step of that clock, not a real sleep — exact however loaded the
machine is."""

from __future__ import annotations

import pytest

from karpy.runtime import Client, LeaderElectionConfig, kinds
from karpy.runtime.leaderelection import LeaderElector
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClock


async def test_a_stale_looking_lease_is_respected_for_a_full_duration(
    rt_client: Client, namespace: str, clock: FakeClock
) -> None:
    # Held by another candidate whose clock is years behind ours.
    await rt_client.create(
        kinds.LEASE,
        {
            "metadata": {"name": "skewed", "namespace": namespace},
            "spec": {
                "holderIdentity": "other",
                "leaseDurationSeconds": 2,
                "renewTime": "2000-01-01T00:00:00.000000Z",
                "acquireTime": "2000-01-01T00:00:00.000000Z",
            },
        },
    )
    elector = LeaderElector(
        rt_client,
        LeaderElectionConfig(
            name="skewed",
            namespace=namespace,
            identity="me",
            lease_duration=2,
            renew_deadline=1.5,
            retry_period=0.2,
        ),
        clock=clock,
    )
    assert not await elector.try_acquire_or_renew()  # first sight: give it 2 s
    clock.advance(1.0)
    assert not await elector.try_acquire_or_renew()
    clock.advance(0.99)
    assert not await elector.try_acquire_or_renew()  # still inside the 2 s
    clock.advance(0.02)
    assert await elector.try_acquire_or_renew()  # unchanged for 2 s on our clock
    lease = await rt_client.get(kinds.LEASE, "skewed", namespace=namespace)
    assert lease["spec"]["holderIdentity"] == "me"
    assert lease["spec"]["leaseTransitions"] == 1


async def test_a_renewing_holder_keeps_the_lease(
    rt_client: Client, namespace: str, clock: FakeClock
) -> None:
    def config(identity: str) -> LeaderElectionConfig:
        return LeaderElectionConfig(
            name="busy",
            namespace=namespace,
            identity=identity,
            lease_duration=1,
            renew_deadline=0.8,
            retry_period=0.1,
        )

    metrics = Metrics()
    holder = LeaderElector(rt_client, config("holder"), clock=clock, metrics=metrics)
    challenger = LeaderElector(rt_client, config("challenger"), clock=clock)
    assert await holder.try_acquire_or_renew()
    for _ in range(15):  # 1.5 s: longer than the lease, but it keeps being renewed
        clock.advance(0.1)
        assert await holder.try_acquire_or_renew()
        assert not await challenger.try_acquire_or_renew()
    # Every renewal was one unread update the API server accepted (client-go's fast
    # path): the challenger's reads do not touch the Lease's resourceVersion.
    assert "leader_election_slowpath_total{" not in metrics.render().decode()
    # Once the holder stops renewing, the challenger takes over after one lease duration.
    clock.advance(0.9)
    assert not await challenger.try_acquire_or_renew()
    clock.advance(0.2)
    assert await challenger.try_acquire_or_renew()


def test_timings_must_nest() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline > retry_period"):
        LeaderElectionConfig(name="x", namespace="y", lease_duration=5, renew_deadline=10)

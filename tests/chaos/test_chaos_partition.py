"""Chaos scenario: the leader is cut off from the API server while it provisions, another
replica takes the Lease, the partition heals — and no write of the old leader reaches
the server after the moment the Lease could be taken over.

karpy runs as ``karpy run`` (leader election on, the Lease's default timings: 15 s
duration, 10 s renew deadline) talking to the API server only through tests/chaos/proxy.py,
which records every request it hands to the server. The test scales a workload, waits
for the leader to create NodeClaims, and partitions the proxy. A second replica — a
LeaderElector of its own identity over a direct connection, as a standby would run —
polls the Lease and takes it once the record stayed unchanged for the lease duration
on its own clock; then the partition heals, and anything the old leader's connections
still held would be delivered. The figures: the old leader's last successful renewal
(the renewTime of its last Lease record), its last write that reached the server, the
takeover, and how karpy ended (it must exit non-zero, by itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fleet import ACQUIRED, CREATED
from harness import karpy_process
from kube import connect
from proxy import PartitionProxy
from workload import Workload

from karpy.runtime import LeaderElectionConfig, kinds
from karpy.runtime.leaderelection import LeaderElector

# soak: about 3 minutes (a 15 s Lease to outlast, the heal watched, karpy drained), so
# it runs from scripts/chaos.sh (scenario 7), not in the test command's 35-minute budget.
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.soak]

LEASE = "karpenter-leader-election"
LEASE_DURATION = 15.0  # what karpy run uses (client-go's defaults)
RENEW_DEADLINE = 10.0
HEALED_FOR = 5.0  # how long the test watches for held writes after the heal


async def test_a_partitioned_leader_writes_nothing_after_the_lease_could_be_taken(
    cluster: Any, namespace: str, kwok_crd: None, tmp_path: Path
) -> None:
    env = {"SYSTEM_NAMESPACE": namespace}
    async with connect(cluster) as client, \
            PartitionProxy.for_cluster(cluster, tmp_path) as proxy:
        work = await Workload(client, namespace, "chaos-partition").__aenter__()
        try:
            async with karpy_process(cluster, "--cloud-provider", "kwok", env=env,
                                     kubeconfig=proxy.kubeconfig(tmp_path / "kubeconfig"),
                                     leader_election=True) as old:
                await old.wait_for_log(ACQUIRED, timeout=60)
                await work.scale(12)
                await old.wait_for_log(CREATED, timeout=60)
                proxy.partition()
                partitioned_at = time.time()
                last_renewal, taken_at = await _take_over(client, namespace)
                proxy.heal()
                healed_at = time.time()
                await asyncio.sleep(HEALED_FOR)  # whatever was held arrives now
                exited = old.returncode
                lost = old.messages("failed to renew lease, leadership lost")
        finally:
            await _release(client, namespace)
            async with karpy_process(cluster, "--cloud-provider", "kwok", env=env,
                                     leader_election=True) as cleaner:
                await cleaner.wait_for_log(ACQUIRED, timeout=60)
                await work.__aexit__(None, None, None)

    could_take_over = last_renewal + LEASE_DURATION
    writes = proxy.writes()
    last_write = max(r.at for r in writes)
    late = [r for r in writes if r.at >= could_take_over]
    during = proxy.writes(since=partitioned_at)
    gave_up = _log_time(lost[0]) - last_renewal if lost else float("nan")
    print(f"\npartition: last renewal +{partitioned_at - last_renewal:.1f}s partitioned; "
          f"old leader's last write reached the server at +{last_write - last_renewal:.1f}s "
          f"(lease could be taken over at +{LEASE_DURATION:g}s, was at "
          f"+{taken_at - last_renewal:.1f}s, healed at +{healed_at - last_renewal:.1f}s); "
          f"it gave up at +{gave_up:.1f}s and exited {exited}; {len(writes)} writes in all, "
          f"{len(during)} after the partition began, {len(late)} after the lease could be "
          f"taken over, {proxy.dropped} held connections reset by karpy")
    assert late == [], f"writes after the lease could be taken over: {late}"
    assert exited not in (None, 0), f"karpy did not exit non-zero by itself: {exited}"
    assert lost, "karpy did not log losing the lease"
    assert gave_up < RENEW_DEADLINE + 1.0, gave_up
    assert work.forced == [], f"termination left these behind: {work.forced}"
    assert work.left_in_cloud == [], f"instances left in the cloud: {work.left_in_cloud}"


async def _take_over(client: Any, namespace: str) -> tuple[float, float]:
    """Campaign as a second replica until the Lease is ours; return the old holder's last
    renewTime and when we took it (wall clock)."""
    thief = LeaderElector(client, LeaderElectionConfig(
        name=LEASE, namespace=namespace, identity="chaos-second-replica",
        lease_duration=LEASE_DURATION, renew_deadline=RENEW_DEADLINE, retry_period=0.2))
    last_renewal = 0.0
    async with asyncio.timeout(LEASE_DURATION * 3):
        while True:
            lease = await client.get(kinds.LEASE, LEASE, namespace=namespace, live=True)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != "chaos-second-replica":
                last_renewal = _parse(spec["renewTime"])
            if await thief.try_acquire_or_renew():
                return last_renewal, time.time()
            await asyncio.sleep(0.2)


async def _release(client: Any, namespace: str) -> None:
    """Give the Lease up (empty holder, as a leader shutting down does), so the clean-up
    replica leads at once."""
    with contextlib.suppress(Exception):
        lease = await client.get(kinds.LEASE, LEASE, namespace=namespace, live=True)
        lease["spec"].update(holderIdentity="", leaseDurationSeconds=1)
        await client.update(kinds.LEASE, lease)


def _parse(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _log_time(record: dict[str, Any]) -> float:
    return _parse(str(record["time"]))

"""Chaos scenario 3: the leader is SIGKILLed while it is provisioning; the standby
takes over within 20 s, and at no moment do two replicas act.

Two replicas run; each round the Deployment grows, the test waits until the leader has
created a NodeClaim for it, kills the leader and starts a new standby. From the JSON
logs: the next leader's "successfully acquired lease" comes < 20 s after the kill; every
"created nodeclaim" line comes from a replica that held the lease at that moment (after
its own acquisition, before its death, and not while another replica held it); every
NodeClaim in the cluster was logged by at most one replica, and one that nobody logged
was created (by its creationTimestamp) just before a kill: a SIGKILL between the API
server accepting a create and the log line being written loses the line, as it would
for Karpenter, but such a NodeClaim must come from the leader that died.

Short: 45 pods, 2 kills. KARPY_CHAOS=full: 300 pods, 6 kills.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from audit import settled
from fleet import ACQUIRED, CREATED, Fleet, log_time
from harness import RunningKarpy
from kube import connect, eventually
from workload import Workload

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TAKEOVER_LIMIT = 20.0


async def test_the_standby_takes_over_and_two_leaders_never_act(
    cluster: Any, namespace: str, kwok_crd: None, scale: Any
) -> None:
    pods, kills = scale.pick(45, 300), scale.pick(2, 6)
    # replica -> (acquired, died) wall times; died is None while it lives
    terms: dict[int, tuple[datetime, datetime | None]] = {}
    takeovers: list[float] = []
    async with connect(cluster) as client, Fleet(cluster, lease_namespace=namespace) as fleet:
        async with Workload(client, namespace, "chaos-leader") as work:
            await fleet.start()
            await fleet.start()
            for step in range(kills):
                leader = await fleet.leader(timeout=60)
                before = len(leader.messages(CREATED))
                await work.scale(pods * (step + 1) // (kills + 1))

                async def provisioning(replica: RunningKarpy = leader, n: int = before) -> bool:
                    return len(replica.messages(CREATED)) > n

                await eventually(provisioning, timeout=60, what="the leader creating NodeClaims",
                                 every=0.05)
                await fleet.kill(leader)
                killed = datetime.now(UTC)
                terms[id(leader)] = (log_time(leader.messages(ACQUIRED)[0]), killed)
                await fleet.start()
                successor = await fleet.leader(timeout=60)
                takeovers.append(
                    (log_time(successor.messages(ACQUIRED)[0]) - killed).total_seconds())
            await work.scale(pods)
            found = await settled(client, pools=[work.pool], namespace=namespace,
                                  app=work.name, pods=pods, timeout=240)
            created = {c["metadata"]["name"]: c["metadata"]["creationTimestamp"]
                       for c in await work.nodeclaims()}
            for replica in fleet.replicas:
                acquired = replica.messages(ACQUIRED)
                if acquired and id(replica) not in terms:
                    terms[id(replica)] = (log_time(acquired[0]), None)
            acting = _outside_leadership(fleet.replicas, terms)
            logged = [r["NodeClaim"]["name"] for r in fleet.messages(CREATED)
                      if r.get("NodePool", {}).get("name") == work.pool]
            print(f"\nscenario 3: {found.line(kills, 'leader kills')}; takeover after "
                  f"{', '.join(f'{t:.1f}' for t in takeovers)} s; {len(logged)} NodeClaims "
                  f"created by {len(fleet.replicas)} replicas, "
                  f"{len(acting)} outside leadership")
            assert found.clean, found.details()
            assert max(takeovers) < TAKEOVER_LIMIT, takeovers
            assert acting == [], f"NodeClaims created by a replica not leading: {acting}"
            assert len(logged) == len(set(logged))
            unlogged = {n: t for n, t in created.items() if n not in set(logged)}
            assert _created_at_a_kill(unlogged, terms) == [], (
                f"NodeClaims nobody logged, not created just before a kill: {unlogged}")
        assert work.forced == [], f"termination left these behind: {work.forced}"
        assert work.left_in_cloud == [], f"instances left in the cloud: {work.left_in_cloud}"


def _created_at_a_kill(
    unlogged: dict[str, str], terms: dict[int, tuple[datetime, datetime | None]]
) -> list[str]:
    """The NodeClaims in ``unlogged`` (name -> creationTimestamp) not created inside the
    last second of a killed leader's term: the only place a lost log line can come from.
    creationTimestamp has whole seconds, so the window is widened by one each side."""
    kills = [(start, end) for start, end in terms.values() if end is not None]
    bad = []
    for name, stamp in unlogged.items():
        t = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        if not any(max(start, end - timedelta(seconds=2)) - timedelta(seconds=1) <= t <= end
                   for start, end in kills):
            bad.append(name)
    return bad


def _outside_leadership(
    replicas: list[RunningKarpy], terms: dict[int, tuple[datetime, datetime | None]]
) -> list[str]:
    """"created nodeclaim" lines written outside their replica's leadership, or while
    another replica's leadership overlapped (the log's clock is the test's clock)."""
    slack = timedelta(milliseconds=5)  # log timestamps are cut to milliseconds
    bad = []
    for replica in replicas:
        start, end = terms.get(id(replica), (None, None))
        for r in replica.messages(CREATED):
            t = log_time(r)
            name = r["NodeClaim"]["name"]
            if start is None or t < start - slack or (end is not None and t > end + slack):
                bad.append(f"{name} (not leader)")
                continue
            for other in replicas:
                if other is replica or id(other) not in terms:
                    continue
                o_start, o_end = terms[id(other)]
                if o_start <= t and (o_end is None or t <= o_end):
                    bad.append(f"{name} (two leaders)")
    return bad

"""The audit every chaos scenario ends with: does the cloud agree with the cluster?

It reads the cloud (the kwok provider's instances: Nodes it launched plus the records of
instances still booting, read live by a provider of the test's own) and the cluster
(NodeClaims, Nodes, the workload's pods), and counts what a user would call a failure:

- **leaked**: a cloud instance no NodeClaim carries (money spent on nothing);
- **duplicated**: a providerID carried by more than one NodeClaim, plus (after a
  scale-up, ``packed=True``) whole nodes of spare capacity beyond what the workload
  needs (a machine bought twice; after a scale-down spare room is expected until
  consolidation removes it);
- **stranded**: a workload pod that is not Running;
- **stuck**: a NodeClaim whose Launched condition is not True for longer than the
  launch timeout;
- **orphan nodes**: a Node with a kwok providerID and no NodeClaim;
- **vanished**: a launched NodeClaim whose instance the cloud does not have;
- **disrupted without a command**: a Node carrying ``karpenter.sh/disrupted`` whose
  NodeClaim is not being deleted (at rest, a disruption command either deleted its
  candidates or took the taint off again).

:func:`settled` polls the audit until it is clean or a deadline passes, since the
scenarios end with karpy still repairing what the faults broke (garbage collection of a
leaked instance takes up to its period plus grace).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from karpy.apis.taints import TAINT_DISRUPTED
from karpy.cloudprovider.kwok import PROVIDER_ID_PREFIX, KwokCloudProvider
from karpy.runtime import Client, kinds
from karpy.scheduling import resources as res
from karpy.state.kinds import NODE_CLAIM

__all__ = ["Audit", "audit", "settled"]

POOL_LABEL = "karpenter.sh/nodepool"


@dataclass
class Audit:
    """What the audit found (names of the offending objects)."""

    instances: int = 0
    nodeclaims: int = 0
    pods: int = 0
    leaked: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    stranded: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    orphan_nodes: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    disrupted: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Nothing leaked, duplicated, stranded, stuck, orphaned, vanished or tainted."""
        return not (self.leaked or self.duplicated or self.stranded or self.stuck
                    or self.orphan_nodes or self.vanished or self.disrupted)

    def line(self, faults: int, what: str) -> str:
        """The report line: "N <what> injected, L leaked, D duplicated, S stranded"."""
        extra = [f"{len(v)} {k.replace('_', ' ')}" for k, v in (
            ("stuck", self.stuck), ("orphan_nodes", self.orphan_nodes),
            ("vanished", self.vanished), ("disrupted_without_command", self.disrupted),
        ) if v]
        text = (f"{faults} {what} injected, {len(self.leaked)} leaked, "
                f"{len(self.duplicated)} duplicated, {len(self.stranded)} stranded "
                f"({self.instances} instances, {self.nodeclaims} NodeClaims, "
                f"{self.pods} pods)")
        return text + ("; " + ", ".join(extra) if extra else "")

    def details(self) -> str:
        """Every finding with the names, for a failing assertion."""
        return "\n".join(f"{k}: {v}" for k, v in vars(self).items() if isinstance(v, list) and v)


async def audit(
    client: Client,
    *,
    pools: Sequence[str],
    namespace: str,
    app: str,
    pod_cpu: str = "1",
    launch_timeout: float = 300.0,
    packed: bool = True,
) -> Audit:
    """Audit the NodePools ``pools`` and the workload ``app`` (see the module doc)."""
    cloud = KwokCloudProvider(client)
    try:
        instances = [i for i in await cloud.list()
                     if i.metadata.labels.get(POOL_LABEL) in pools]
    finally:
        await cloud.aclose()
    claims = [c for c in await client.list(NODE_CLAIM)
              if (c["metadata"].get("labels") or {}).get(POOL_LABEL) in pools]
    nodes = [n for n in await client.list(kinds.NODE)
             if str((n.get("spec") or {}).get("providerID", "")).startswith(PROVIDER_ID_PREFIX)
             and (n["metadata"].get("labels") or {}).get(POOL_LABEL) in pools]
    pods = await client.list(kinds.POD, namespace=namespace, label_selector={"app": app})
    found = Audit(instances=len(instances), nodeclaims=len(claims), pods=len(pods))

    carried = Counter(pid for c in claims if (pid := _provider_id(c)))
    cloud_ids = {i.status.provider_id for i in instances}
    found.leaked = sorted(str(i.status.provider_id) for i in instances
                          if i.status.provider_id not in carried)
    found.duplicated = sorted(pid for pid, n in carried.items() if n > 1)
    if packed:
        found.duplicated += _surplus(nodes, pods, pod_cpu)
    found.stranded = sorted(p["metadata"]["name"] for p in pods
                            if (p.get("status") or {}).get("phase") != "Running"
                            and not p["metadata"].get("deletionTimestamp"))
    now = datetime.now(UTC)
    for c in claims:
        name = c["metadata"]["name"]
        launched = _condition(c, "Launched")
        age = (now - datetime.fromisoformat(c["metadata"]["creationTimestamp"])).total_seconds()
        if launched != "True" and age > launch_timeout:
            found.stuck.append(name)
        pid = _provider_id(c)
        if launched == "True" and pid and pid not in cloud_ids \
                and not c["metadata"].get("deletionTimestamp"):
            found.vanished.append(name)
    claimed_nodes = set(carried)
    by_pid = {_provider_id(c): c for c in claims}
    for n in nodes:
        pid = n["spec"]["providerID"]
        if pid not in claimed_nodes:
            found.orphan_nodes.append(n["metadata"]["name"])
        tainted = any(t.get("key") == TAINT_DISRUPTED for t in n["spec"].get("taints") or ())
        claim = by_pid.get(pid)
        if tainted and (claim is None or not claim["metadata"].get("deletionTimestamp")):
            found.disrupted.append(n["metadata"]["name"])
    return found


async def settled(
    client: Client,
    *,
    pools: Sequence[str],
    namespace: str,
    app: str,
    pods: int,
    timeout: float,  # noqa: ASYNC109 - a deadline for the polling, not an I/O timeout
    pod_cpu: str = "1",
    packed: bool = True,
) -> Audit:
    """Audit every 2 s until clean with exactly ``pods`` pods of the workload (right
    after a scale, the Deployment may not have made or removed them yet, and no pods
    audit clean), or return the last audit once ``timeout`` passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await audit(client, pools=pools, namespace=namespace, app=app,
                            pod_cpu=pod_cpu, packed=packed)
        if (found.clean and found.pods == pods) or loop.time() > deadline:
            return found
        await asyncio.sleep(2.0)


def _provider_id(obj: dict[str, Any]) -> str:
    return str((obj.get("status") or {}).get("providerID") or "")


def _condition(obj: dict[str, Any], kind: str) -> str:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return str(c.get("status"))
    return "Unknown"


def _surplus(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]],
             pod_cpu: str) -> list[str]:
    """Nodes of spare capacity: the free pod slots, in units of the largest node, that
    the workload does not need. Named after the emptiest nodes."""
    if not nodes or not pods:
        return []
    need = res.to_canonical("cpu", pod_cpu)
    slots = {n["metadata"]["name"]: math.floor(
        res.to_canonical("cpu", (n.get("status") or {}).get("allocatable", {}).get("cpu", "0"))
        / need) for n in nodes}
    running = Counter(str((p.get("spec") or {}).get("nodeName") or "") for p in pods)
    free = sum(slots.values()) - len(pods)
    widest = max(slots.values()) or 1
    spare = max(0, free // widest)
    emptiest = sorted(slots, key=lambda n: (running.get(n, 0), n))
    return [f"surplus node {n}" for n in emptiest[:spare]]

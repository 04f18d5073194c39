"""End to end: karpy takes over from the real Karpenter and hands back, with no churn
(issue 34).

The real Karpenter is sigs.k8s.io/karpenter v1.15.0's kwok controller
(tests/e2e/karpenter.py); karpy runs as ``karpy run`` with its kwok provider. Both read
one instance-type catalogue file and the same CRDs (karpy's crds/kwok, which the
cluster fixture installs), and both use Karpenter's defaults (batch windows, a 10 s
disruption poll).

1. Karpenter provisions a Deployment of six one-CPU pods on a NodePool that
   consolidates (WhenEmptyOrUnderutilized, nodes of at most 4 vCPU: two nodes).
2. karpy takes over. For longer than two consolidation periods no NodeClaim is created
   or deleted, no node is tainted, no NodeClaim is marked Drifted, no pod restarts or
   moves, and karpy rewrites none of the NodeClaims' or Nodes' labels, annotations,
   finalizers or taints. Half-way through, the KWOKNodeClass changes: Karpenter's kwok
   provider hashes no NodeClass and never drifts on one, so karpy must not either.
3. A NodePool template change drifts Karpenter's nodes: karpy marks each Drifted and
   replaces it, as Karpenter would, and the pods end up Running on the new nodes.
4. Karpenter takes back karpy's nodes: the same quiet window (with a NodeClass change),
   then the next template change, which Karpenter drifts the same way.

The handover runs two ways, both in the one test:

- overlapping (steps 2 and 4): both run with leader election on the one Lease,
  ``kube-system/karpenter-leader-election``. The successor starts first and must stand
  by while the predecessor holds the Lease (it leads nothing: no controllers start);
  the predecessor stops (releasing the Lease) and the successor takes over.
- sequential (step 5): leader election off; the predecessor stops before the successor
  starts, as a user swapping Deployments would, once each way, each with the quiet window.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from harness import RunningKarpy, karpy_process
from karpenter import karpenter_process, write_catalogue
from kube import (
    KWOK_NODE_CLASS,
    clean_up,
    connect,
    deployment,
    eventually,
    nodepool,
    pool_objects,
    ready_node_class,
)

from karpy.runtime import KubeClient, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "takeover-e2e"
POOL = "takeover-e2e"
APP = "takeover-e2e"
SELECT = "karpy-e2e"
REPLICAS = 6
#: The disruption poll of both controllers (Karpenter's is fixed at 10 s; karpy's
#: default is the same): each poll is one consolidation pass over nodes older than
#: consolidateAfter.
CONSOLIDATION_PERIOD = 10.0
QUIET = 2.5 * CONSOLIDATION_PERIOD
LEASE = ("kube-system", "karpenter-leader-election")
DISRUPTED_TAINT = "karpenter.sh/disrupted"

#: What may change on a NodeClaim or Node while nothing happens: bookkeeping of the API
#: server and of the kubelet (kwok) — not what a controller decides.
_VOLATILE_META = ("resourceVersion", "managedFields", "generation")


def consolidating_pool(round_: int) -> dict[str, Any]:
    """The NodePool: on-demand c-family nodes of at most 4 vCPU that consolidate;
    ``round_`` is a template label, so raising it drifts every node (the NodePool hash)."""
    pool = nodepool(POOL, node_class=NODE_CLASS,
                    labels={SELECT: POOL, "takeover-round": str(round_)}, requirements=[
        {"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": ["c"]},
        {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": ["5"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ])
    pool["spec"]["disruption"] = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5s",
        "budgets": [{"nodes": "100%"}],
    }
    return pool


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k not in _VOLATILE_META}
    return {"metadata": meta, "taints": (obj.get("spec") or {}).get("taints") or []}


def _conditions(claim: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (claim.get("status") or {}).get("conditions") or []}


class Fleet:
    """The pool's NodeClaims, Nodes and the app's pods as one snapshot."""

    def __init__(self, claims: list[Any], nodes: list[Any], pods: list[Any]) -> None:
        self.claims = {c["metadata"]["name"]: c for c in claims}
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = {p["metadata"]["uid"]: p for p in pods}

    @classmethod
    async def read(cls, client: KubeClient, namespace: str) -> Fleet:
        claims = await pool_objects(client, NODE_CLAIM, [POOL])
        nodes = await pool_objects(client, kinds.NODE, [POOL])
        pods = await client.list(kinds.POD, namespace=namespace, label_selector={"app": APP})
        return cls(claims, nodes, pods)

    def running(self) -> list[Any]:
        return [p for p in self.pods.values()
                if (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]

    def settled(self) -> bool:
        """Every pod Running, every NodeClaim Initialized with its Node, none leaving."""
        return (len(self.running()) == REPLICAS == len(self.pods)
                and bool(self.claims)
                and all(_conditions(c).get("Initialized") == "True"
                        and not c["metadata"].get("deletionTimestamp")
                        for c in self.claims.values())
                and len(self.nodes) == len(self.claims))

    def placement(self) -> dict[str, str]:
        return {uid: p["spec"].get("nodeName", "") for uid, p in self.pods.items()}


async def settled(client: KubeClient, namespace: str, what: str,
                  timeout: float) -> Fleet:  # noqa: ASYNC109 - a polling deadline
    async def check() -> Fleet | None:
        fleet = await Fleet.read(client, namespace)
        return fleet if fleet.settled() else None

    return await eventually(check, timeout=timeout, what=what)


async def assert_quiet(client: KubeClient, namespace: str, before: Fleet, *,
                       who: str, midway: Callable[[], Awaitable[None]]) -> None:
    """For :data:`QUIET` seconds: no NodeClaim or Node created or deleted, nothing tainted
    disrupted or marked Drifted, no pod restarted or moved; and at the end no label,
    annotation, finalizer or taint of a NodeClaim or Node differs from ``before``.
    ``midway`` runs half-way through (the NodeClass change)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    changed = False
    churn: list[str] = []
    while (elapsed := loop.time() - start) < QUIET:
        if not changed and elapsed > QUIET / 2:
            await midway()
            changed = True
        now = await Fleet.read(client, namespace)
        at = f"{who}, {elapsed:.0f}s in"
        if set(now.claims) != set(before.claims):
            churn.append(f"{at}: NodeClaims {sorted(before.claims)} -> {sorted(now.claims)}")
        if set(now.nodes) != set(before.nodes):
            churn.append(f"{at}: Nodes {sorted(before.nodes)} -> {sorted(now.nodes)}")
        for name, claim in now.claims.items():
            if _conditions(claim).get("Drifted") == "True":
                churn.append(f"{at}: NodeClaim {name} marked Drifted")
            if claim["metadata"].get("deletionTimestamp"):
                churn.append(f"{at}: NodeClaim {name} deleting")
        for name, node in now.nodes.items():
            if any(t["key"] == DISRUPTED_TAINT for t in node["spec"].get("taints") or []):
                churn.append(f"{at}: Node {name} tainted {DISRUPTED_TAINT}")
        if now.placement() != before.placement() or len(now.running()) != REPLICAS:
            churn.append(f"{at}: pods moved or not Running: {now.placement()}")
        if churn:
            break
        await asyncio.sleep(0.5)
    assert not churn, "churn after the handover:\n" + "\n".join(churn)
    after = await Fleet.read(client, namespace)
    rewritten = [
        f"{kind} {name}: {_meta(old)} -> {_meta(new[name])}"
        for kind, old_set, new in (("NodeClaim", before.claims, after.claims),
                                   ("Node", before.nodes, after.nodes))
        for name, old in old_set.items()
        if name in new and _meta(old) != _meta(new[name])
    ]
    assert not rewritten, f"{who} rewrote what its predecessor wrote:\n" + "\n".join(rewritten)


async def drift_and_replace(client: KubeClient, namespace: str, before: Fleet,
                            round_: int, *, who: str) -> Fleet:
    """Raise the template label; every old NodeClaim must be seen Drifted, then go, and
    as many new ones (same instance types) must carry the new label with the pods."""
    await client.patch(NODE_POOL, POOL, {"spec": {"template": {"metadata": {"labels": {
        "takeover-round": str(round_)}}}}})
    seen_drifted: set[str] = set()

    async def replaced() -> Fleet | None:
        fleet = await Fleet.read(client, namespace)
        seen_drifted.update(n for n, c in fleet.claims.items()
                            if n in before.claims and _conditions(c).get("Drifted") == "True")
        if set(fleet.claims) & set(before.claims) or not fleet.settled():
            return None
        return fleet

    after = await eventually(replaced, timeout=120, every=0.5,
                             what=f"{who} to replace the drifted nodes")
    assert seen_drifted == set(before.claims), (
        f"{who} replaced NodeClaims it never marked Drifted: "
        f"{sorted(set(before.claims) - seen_drifted)}")
    types = sorted(c["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                   for c in after.claims.values())
    old_types = sorted(c["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                       for c in before.claims.values())
    assert types == old_types, f"{who} replaced {old_types} with {types}"
    assert all(n["metadata"]["labels"].get("takeover-round") == str(round_)
               for n in after.nodes.values()), "a replacement lacks the new template label"
    return after


async def change_node_class(client: KubeClient, delay: str) -> None:
    """A KWOKNodeClass spec change (Karpenter kwok hashes no NodeClass: no drift)."""
    await client.patch(KWOK_NODE_CLASS, NODE_CLASS, {"spec": {"nodeRegistrationDelay": delay}})


async def lease_holder(client: KubeClient) -> str:
    lease = await client.get(kinds.LEASE, LEASE[1], namespace=LEASE[0])
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _leading(running: RunningKarpy, *, karpenter: bool) -> bool:
    message = "Starting workers" if karpenter else "starting controllers"
    return bool(running.messages(message))


class Run:
    """A controller process started and stopped by hand (stop is idempotent), so a
    handover can overlap two of them."""

    def __init__(self, name: str, context: AbstractAsyncContextManager[RunningKarpy]) -> None:
        self.name = name
        self._context = context
        self._running: RunningKarpy | None = None

    async def start(self) -> RunningKarpy:
        self._running = await self._context.__aenter__()
        return self._running

    async def stop(self) -> None:
        if self._running is not None:
            running, self._running = self._running, None
            await self._context.__aexit__(None, None, None)
            if keep := os.environ.get("KARPY_TAKEOVER_LOGS"):
                # a directory to keep each controller's whole log in, for a closer look
                _keep_log(Path(keep) / f"{self.name}-{running.pid}.log", running.lines)


def _keep_log(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


async def handover(old: Run, new: Run, *, overlap: bool, new_is_karpenter: bool) -> RunningKarpy:
    """Stop ``old`` and start ``new``; with ``overlap``, start ``new`` first and check it
    stands by (starts no controllers) while ``old`` holds the Lease."""
    if not overlap:
        await old.stop()
        return await new.start()
    running = await new.start()
    # The successor is up (caches synced, or the process started) and must not lead:
    # a few of the Lease's 2 s retry periods.
    await asyncio.sleep(5.0)
    assert not _leading(running, karpenter=new_is_karpenter), (
        "the successor started its controllers while its predecessor held the Lease:\n"
        + running.tail())
    await old.stop()
    message = "Starting workers" if new_is_karpenter else "starting controllers"
    await running.wait_for_log(message, timeout=60.0)
    return running


def karpy(cluster: Any, catalogue: Path, *, leader_election: bool) -> Any:
    return karpy_process(cluster, "--provider-setting", f"instanceTypesFile={catalogue}",
                         leader_election=leader_election)


def karpenter(cluster: Any, catalogue: Path, *, leader_election: bool,
              wait_leading: bool) -> Any:
    return karpenter_process(cluster, instance_types=catalogue,
                             leader_election=leader_election, wait_leading=wait_leading)


async def test_takeover_and_hand_back(cluster: Any, namespace: str, kwok_crd: None,
                                      tmp_path: Path) -> None:
    catalogue = write_catalogue(tmp_path / "instance_types.json")
    started = time.monotonic()
    async with connect(cluster) as client:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, consolidating_pool(1))
        await client.create(kinds.DEPLOYMENT, deployment(
            APP, node_selector={SELECT: POOL}, replicas=REPLICAS, cpu="1"), namespace=namespace)
        runs = [Run("karpenter", karpenter(cluster, catalogue, leader_election=True,
                                           wait_leading=True))]
        try:
            await runs[0].start()
            # 1. Karpenter provisions.
            fleet = await settled(client, namespace, "Karpenter to provision the pods", 90)
            assert len(fleet.claims) == 2, f"Karpenter made {sorted(fleet.claims)}"
            assert await lease_holder(client), "Karpenter leads without the Lease"
            # 2. karpy takes over, both running on the one Lease: quiet, a NodeClass
            # change included.
            runs.append(Run("karpy", karpy(cluster, catalogue, leader_election=True)))
            await handover(runs[0], runs[1], overlap=True, new_is_karpenter=False)
            await assert_quiet(client, namespace, fleet, who="karpy",
                               midway=lambda: change_node_class(client, "1s"))
            # 3. karpy drifts Karpenter's nodes and replaces them.
            fleet = await drift_and_replace(client, namespace, fleet, 2, who="karpy")
            # 4. Karpenter takes back karpy's nodes the same way: quiet, then its own
            # drift of them.
            runs.append(Run("karpenter", karpenter(cluster, catalogue, leader_election=True,
                                                   wait_leading=False)))
            await handover(runs[1], runs[2], overlap=True, new_is_karpenter=True)
            await assert_quiet(client, namespace, fleet, who="Karpenter",
                               midway=lambda: change_node_class(client, "0s"))
            fleet = await drift_and_replace(client, namespace, fleet, 3, who="Karpenter")
            # 5. Sequentially, as a user swapping Deployments without leader election:
            # Karpenter stops, karpy starts on Karpenter's nodes, and back again — each
            # quiet, a NodeClass change included (drift after a handover is 3 and 4).
            runs.append(Run("karpy", karpy(cluster, catalogue, leader_election=False)))
            await handover(runs[2], runs[3], overlap=False, new_is_karpenter=False)
            await assert_quiet(client, namespace, fleet, who="karpy (sequential)",
                               midway=lambda: change_node_class(client, "1s"))
            runs.append(Run("karpenter", karpenter(cluster, catalogue, leader_election=False,
                                                   wait_leading=True)))
            await handover(runs[3], runs[4], overlap=False, new_is_karpenter=True)
            await assert_quiet(client, namespace, fleet, who="Karpenter (sequential)",
                               midway=lambda: change_node_class(client, "0s"))
            forced = await clean_up(client, namespace, APP, [POOL], timeout=60)
            assert not forced, f"had to force {forced}"
        finally:
            for run in reversed(runs):
                await run.stop()
            with contextlib.suppress(errors.NotFound):
                await client.delete(NODE_POOL, POOL)
            with contextlib.suppress(errors.NotFound):
                await client.delete(KWOK_NODE_CLASS, NODE_CLASS)
    print(f"takeover e2e: {time.monotonic() - started:.0f}s")

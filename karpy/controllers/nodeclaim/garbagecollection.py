"""The ``nodeclaim.garbagecollection`` controller: machines without NodeClaims, and
NodeClaims without machines.

A periodic singleton (every ``settings.garbage_collection_period``) that reconciles the
cloud's view with the cluster's, in both directions:

- **Leaked machines** (Karpenter's cloud providers do this in their own
  ``garbagecollection`` controllers): a machine ``CloudProvider.list`` returns whose
  providerID no NodeClaim carries is deleted with ``CloudProvider.delete`` — together
  with its Node, if one registered — once it is older than
  ``settings.garbage_collection_grace``. A launch writes the providerID onto its
  NodeClaim a moment after the machine exists, so age alone is not trusted: the machine
  must also have been seen unclaimed for the whole grace period, and a live (uncached)
  list of NodeClaims must confirm it just before deleting. Only the collector's first
  round (a new leader's, after a restart or failover) counts a machine as unclaimed since
  it was created, as Karpenter's age rule does: no launch of this process can be behind a
  machine that existed before it led, and a leader killed between a cloud create and its
  status write would otherwise restart the wait with every failover, keeping a doubled
  machine for as long as leaders keep dying. This is the one place besides termination
  that deletes machines.
- **Vanished machines** (Karpenter's core ``nodeclaim/garbagecollection``): a
  *registered* NodeClaim whose machine is no longer listed, and for which
  ``CloudProvider.get`` says NodeClaimNotFoundError, is deleted — unless its Node is
  still Ready (the kubelet is evidently running) — so that termination cleans up and
  provisioning replaces it. A NodeClaim that launched but has not registered is left
  alone, as Karpenter does: cloud lists are eventually consistent (EC2's
  DescribeInstances may not show an instance for a while after RunInstances returned
  it), so its absence from the list proves nothing yet; if the machine really is gone,
  the registration timeout (liveness) deletes the NodeClaim.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable, Sequence
from datetime import datetime

from karpy.apis import NodeClaim
from karpy.apis.conditions import condition_is_true
from karpy.apis.v1.nodeclaim import CONDITION_REGISTERED
from karpy.cloudprovider import CloudProvider, NodeClaimNotFoundError
from karpy.controllers.disrupted import disrupted_labels
from karpy.controllers.indexes import Index, nodes_for_provider_id
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim._managed import is_managed_object
from karpy.controllers.nodeclaim.lifecycle._base import log
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Clock, Object, Result, errors, logging_context
from karpy.runtime.kinds import NODE
from karpy.state.kinds import NODE_CLAIM

__all__ = ["PARALLELISM", "GarbageCollector"]

PARALLELISM = 20
"""Deletions in flight at once (Karpenter's ParallelizeUntil width)."""


class GarbageCollector:
    """Deletes leaked machines and NodeClaims whose machine is gone (module docstring)."""

    name = "nodeclaim.garbagecollection"

    def __init__(
        self,
        *,
        client: Client,
        index: Index,
        cloud_provider: CloudProvider,
        settings: Settings,
        metrics: KarpenterMetrics,
        clock: Clock,
    ) -> None:
        self._client = client
        self._index = index
        self._provider = cloud_provider
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        # providerID -> monotonic time it was first seen with no NodeClaim.
        self._unclaimed_since: dict[str, float] = {}
        self._rounds = 0

    async def reconcile(self) -> Result:
        """One round: collect leaked machines, then NodeClaims whose machine vanished."""
        # List the cloud first: a NodeClaim created after this list cannot make one of
        # these machines look leaked, because the machine would not be in the list.
        machines = [m for m in await self._provider.list() if m.metadata.deletion_timestamp is None]
        # Read as stored; only the few suspects are parsed into models (parsing every
        # NodeClaim each round took seconds of the event loop at a thousand of them).
        objects = await self._client.list(NODE_CLAIM)
        claimed = {pid for o in objects if (pid := _provider_id(o))}
        next_round = await self._collect_machines(machines, claimed)
        listed = {m.status.provider_id for m in machines}
        suspects = [
            NodeClaim.from_dict(o) for o in objects
            if _vanished(o, listed) and is_managed_object(o, self._provider)
        ]
        await _bounded(self._collect_nodeclaim(nc) for nc in suspects)
        return Result(requeue_after=min(next_round, self._settings.garbage_collection_period))

    # -- leaked machines -----------------------------------------------------------------

    async def _collect_machines(self, machines: Sequence[NodeClaim], claimed: set[str]) -> float:
        """Delete ripe leaked machines (those no NodeClaim of ``claimed`` provider IDs
        carries); return the seconds until the next one ripens."""
        now = self._clock.monotonic()
        unclaimed = {
            pid: m for m in machines
            if (pid := m.status.provider_id) and pid not in claimed
        }
        first_round = self._rounds == 0
        self._rounds += 1
        self._unclaimed_since = {
            pid: self._unclaimed_since.get(pid, self._first_seen(m, now, first_round))
            for pid, m in unclaimed.items()
        }
        grace = self._settings.garbage_collection_grace
        ripe: list[NodeClaim] = []
        next_ripe = float("inf")
        for pid, machine in unclaimed.items():
            left = max(
                grace - (now - self._unclaimed_since[pid]),
                grace - self._age(machine.metadata.creation_timestamp),
            )
            if left <= 0:
                ripe.append(machine)
            else:
                next_ripe = min(next_ripe, left)
        if ripe:
            # The cache may lag a launch that just wrote its providerID: ask the server.
            live = await self._client.list(NODE_CLAIM, live=True)
            claimed_now = {(o.get("status") or {}).get("providerID") for o in live}
            ripe = [m for m in ripe if m.status.provider_id not in claimed_now]
            await _bounded(self._delete_machine(m) for m in ripe)
        return next_ripe

    def _first_seen(self, machine: NodeClaim, now: float, first_round: bool) -> float:
        """When an unclaimed machine counts as first seen: now, except in the first round,
        where a machine of known age counts as unclaimed since it was created."""
        age = self._age(machine.metadata.creation_timestamp)
        return now - age if first_round and age != float("inf") else now

    def _age(self, created: datetime | None) -> float:
        if created is None:
            return float("inf")  # unknown: rely on how long it has been seen unclaimed
        return (self._clock.now() - created).total_seconds()

    async def _delete_machine(self, machine: NodeClaim) -> None:
        provider_id = machine.status.provider_id or ""
        with logging_context(**{"provider-id": provider_id}):
            # NotFound: gone, or its deletion just completed; either way collected.
            with contextlib.suppress(NodeClaimNotFoundError):
                await self._provider.delete(machine)
            self._unclaimed_since.pop(provider_id, None)
            log.info("garbage collected cloudprovider instance")
            # Delete its Node too, so the scheduler stops counting on it at once.
            for node in nodes_for_provider_id(self._index, provider_id):
                name = node["metadata"]["name"]
                try:
                    await self._client.delete(NODE, name)
                except errors.NotFound:
                    continue
                log.info("garbage collected node", extra={"Node": {"name": name}})

    # -- vanished machines ---------------------------------------------------------------

    async def _collect_nodeclaim(self, nodeclaim: NodeClaim) -> None:
        provider_id = nodeclaim.status.provider_id or ""
        try:
            await self._provider.get(provider_id)
        except NodeClaimNotFoundError:
            pass
        else:
            return  # listed late, but there: not gone
        nodes = nodes_for_provider_id(self._index, provider_id)
        if any(condition_is_true(n, "Ready") for n in nodes):
            # The cloud says gone, yet a kubelet reports Ready: trust the kubelet.
            return
        try:
            await self._client.delete(
                NODE_CLAIM, nodeclaim.metadata.name or "", uid=nodeclaim.metadata.uid
            )
        except (errors.NotFound, errors.Conflict):
            return
        log.info(
            "garbage collecting nodeclaim with no cloudprovider representation",
            extra={
                "NodeClaim": {"name": nodeclaim.metadata.name},
                "Node": {"name": nodeclaim.status.node_name or ""},
                "provider-id": provider_id,
            },
        )
        self._metrics.nodeclaims_disrupted.add(1, disrupted_labels(
            "garbage_collected", nodeclaim.metadata.labels,
            nodeclaim.spec.termination_grace_period_timedelta))


def _provider_id(obj: Object) -> str:
    return str((obj.get("status") or {}).get("providerID") or "")


def _vanished(obj: Object, listed: set[str | None]) -> bool:
    """A registered NodeClaim, not being deleted, whose machine the cloud did not list
    (only registered ones: see the module docstring)."""
    provider_id = _provider_id(obj)
    return (
        not obj["metadata"].get("deletionTimestamp")
        and bool(provider_id)
        and provider_id not in listed
        and condition_is_true(obj, CONDITION_REGISTERED)
    )


async def _bounded(jobs: Iterable[Awaitable[None]]) -> None:
    """Run ``jobs`` at most PARALLELISM at a time; raise the first failure after all ran."""
    limit = asyncio.Semaphore(PARALLELISM)
    failures: list[BaseException] = []

    async def run(job: Awaitable[None]) -> None:
        async with limit:
            try:
                await job
            except Exception as err:  # one failed deletion must not stop the others
                failures.append(err)

    async with asyncio.TaskGroup() as group:
        for number, job in enumerate(jobs):
            group.create_task(run(job), name=f"nodeclaim.garbagecollection:{number}")
    if failures:
        raise failures[0]

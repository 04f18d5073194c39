"""The eviction queue: removes the pods a drain hands it, one pod per reconcile.

Draining a node only decides *which* pods must go; this queue makes them go. Each pod is
either evicted through the Eviction API (``POST pods/<name>/eviction``, so the API server
enforces its PodDisruptionBudgets) or, once the NodeClaim's terminationGracePeriod leaves
the pod just enough time to shut down, deleted outright with a grace period that ends
at the node's deadline (bypassing PDBs and ``karpenter.sh/do-not-disrupt``).

Outcomes of an eviction, as Karpenter treats them:

* 2xx — evicted: an ``Evicted`` event on the pod, the pod leaves the queue;
* 404 (pod gone) or 409 (another pod of that name) — nothing left to do;
* 429 (a PDB allows no disruption now) or "more than one PodDisruptionBudget" —
  a ``FailedDraining`` event on the node and another try after ``eviction_retry``;
* anything else — an error, retried with backoff.

Entries are keyed by pod UID, so a pod re-created under the same name is never evicted
on behalf of its predecessor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from karpy.apis.pods import is_active, is_terminating
from karpy.apis.v1 import CONDITION_DISRUPTION_REASON
from karpy.controllers.indexes import Index
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.surge import SurgeBeforeEvict
from karpy.controllers.termination import _events as events
from karpy.controllers.termination._objects import nodeclaims_for_node, pods_on_node
from karpy.runtime import Client, Clock, Object, Request, Result, errors, kinds, parse_time
from karpy.state.pods import do_not_disrupt_active, is_evictable

__all__ = [
    "FORCEFUL_TERMINATION",
    "MULTIPLE_PDBS_MESSAGE",
    "EvictionQueue",
    "evict",
    "needs_force_delete",
]

log = logging.getLogger("controller")

#: The eviction reason of a pod whose NodeClaim carries no DisruptionReason.
FORCEFUL_TERMINATION: Final = "Forceful Termination"
#: The API server's message when a pod is covered by more than one PDB (a 500).
MULTIPLE_PDBS_MESSAGE: Final = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
    "not support."
)
_MIN_RETRY: Final = 0.1


async def evict(client: Client, pod: Mapping[str, Any]) -> None:
    """POST a policy/v1 Eviction for ``pod`` (precondition: its UID)."""
    meta = pod["metadata"]
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }
    if meta.get("uid"):
        body["deleteOptions"] = {"preconditions": {"uid": meta["uid"]}}
    # A PDB that allows no disruption now answers 429: errors.TooManyRequests.
    await client.create(kinds.POD, body, namespace=meta["namespace"], subresource="eviction")


def needs_force_delete(
    pod: Mapping[str, Any], termination_time: datetime | None, now: datetime
) -> bool:
    """Whether the pod must be deleted now to be gone by the node's ``termination_time``.

    A pod already terminating needs it when its deletion would end after the deadline;
    any other pod once the deadline is no further away than its own grace period.
    """
    if termination_time is None:
        return False
    if is_terminating(pod):
        deleted = parse_time(pod["metadata"].get("deletionTimestamp"))
        return deleted is not None and deleted > termination_time
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if grace is None:
        return False
    return now > termination_time - timedelta(seconds=int(grace))


@dataclass(slots=True)
class _Entry:
    termination_time: datetime | None
    node_name: str


def _earlier(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


class EvictionQueue:
    """Pods waiting to leave draining nodes, and the reconciler that removes them.

    ``add`` is called by the drain; ``enqueue`` (set by ``register``) puts the pod's
    Request on the ``eviction-queue`` controller's work queue.
    """

    name = "eviction-queue"

    def __init__(
        self,
        *,
        client: Client,
        index: Index,
        recorder: events.Recorder,
        clock: Clock,
        metrics: KarpenterMetrics,
        retry: float,
        enqueue: Callable[[Request], None] | None = None,
        surge: SurgeBeforeEvict | None = None,
    ) -> None:
        self._client = client
        self._index = index
        self._recorder = recorder
        self._clock = clock
        self._metrics = metrics
        self._retry = retry
        self.enqueue: Callable[[Request], None] = enqueue or (lambda _request: None)
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self._surge = surge

    # -- what the drain calls ------------------------------------------------------------

    def add(
        self, pods: Iterable[Mapping[str, Any]], termination_time: datetime | None,
        node_name: str,
    ) -> None:
        """Queue ``pods`` for removal. Re-adding keeps the earlier deadline: a later drain
        may tighten it but never relax it."""
        for pod in pods:
            key = _key(pod)
            entry = self._entries.get(key)
            if entry is None:
                self._entries[key] = _Entry(termination_time, node_name)
                self.enqueue(Request(key[0], key[1]))
            else:
                entry.termination_time = _earlier(entry.termination_time, termination_time)

    def has(self, pod: Mapping[str, Any]) -> bool:
        """Whether ``pod`` (this UID) is queued."""
        return _key(pod) in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    # -- the reconciler ------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        """Evict or delete one queued pod (see the module docs)."""
        try:
            pod = await self._client.get(kinds.POD, request.name, namespace=request.namespace)
        except errors.NotFound:
            self._drop(request)
            return Result()
        key = _key(pod)
        entry = self._entries.get(key)
        if entry is None:
            return Result()  # a different pod of the same name, or already handled
        now = self._clock.now()
        if needs_force_delete(pod, entry.termination_time, now):
            return await self._force_delete(pod, key, entry, now)
        if not is_active(pod):
            self._remove(key)
            return Result()
        if not is_evictable(pod, now):
            # do-not-disrupt: look again later, and in time for the forced deletion.
            return Result(requeue_after=self._retry_delay(pod, entry, now))
        if self._surge is not None:
            wait = await self._surge.before_evict(
                pod, await self._node_ref(entry.node_name),
                pods_on_node(self._index, entry.node_name), now)
            if wait is not None:
                return Result(requeue_after=min(wait, self._retry_delay(pod, entry, now)))
        return await self._evict(pod, key, entry, now)

    def _retry_delay(self, pod: Mapping[str, Any], entry: _Entry, now: datetime) -> float:
        delay = self._retry
        if entry.termination_time is not None:
            grace = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0)
            until = (entry.termination_time - timedelta(seconds=grace) - now).total_seconds()
            delay = min(delay, until)
        return max(delay, _MIN_RETRY)

    async def _evict(
        self, pod: Object, key: tuple[str, str, str], entry: _Entry, now: datetime
    ) -> Result:
        try:
            await evict(self._client, pod)
        except errors.ApiError as exc:
            self._metrics.pods_eviction_requests.add(1, {"code": str(exc.status)})
            if isinstance(exc, errors.NotFound | errors.Conflict):
                self._remove(key)  # gone, or another pod of that name
                return Result()
            if isinstance(exc, errors.TooManyRequests) or exc.message == MULTIPLE_PDBS_MESSAGE:
                why = (
                    "eviction does not support multiple PDBs"
                    if exc.message == MULTIPLE_PDBS_MESSAGE
                    else "evicting pod violates a PDB"
                )
                events.failed_to_drain(self._recorder, await self._node_ref(entry.node_name), why)
                return Result(requeue_after=self._retry_delay(pod, entry, now))
            raise
        self._metrics.pods_eviction_requests.add(1, {"code": "200"})
        reason = await self._reason(entry.node_name)
        events.evicted(self._recorder, pod, reason)
        self._metrics.pods_drained.add(1, {"reason": reason})
        self._remove(key)
        return Result()

    async def _force_delete(
        self, pod: Object, key: tuple[str, str, str], entry: _Entry, now: datetime
    ) -> Result:
        deadline = entry.termination_time
        assert deadline is not None  # needs_force_delete is False without one
        # At least 1 s: a grace period of 0 would remove the pod from etcd at once,
        # before its containers stopped (two copies of one pod could then run).
        grace = max(int((deadline - now).total_seconds()), 1)
        events.disrupt_pod_delete(self._recorder, pod, grace, deadline)
        meta = pod["metadata"]
        try:
            await self._client.delete(
                kinds.POD, meta["name"], namespace=meta["namespace"],
                grace_period_seconds=grace, uid=meta.get("uid") or None,
            )
        except errors.NotFound:
            self._remove(key)
            return Result()
        log.debug("deleting pod", extra={
            "Pod": {"name": meta["name"], "namespace": meta["namespace"]},
            "pod.terminationGracePeriodSeconds":
                (pod.get("spec") or {}).get("terminationGracePeriodSeconds"),
            "delete.gracePeriodSeconds": grace,
            "nodeclaim.terminationTime": deadline.isoformat(),
            "do-not-disrupt": do_not_disrupt_active(pod, now),
        })
        self._metrics.pods_drained.add(1, {"reason": await self._reason(entry.node_name)})
        self._remove(key)
        return Result()

    # -- helpers ---------------------------------------------------------------------------

    def _remove(self, key: tuple[str, str, str]) -> None:
        self._entries.pop(key, None)
        if self._surge is not None:
            self._surge.forget(key[2])

    def _drop(self, request: Request) -> None:
        for key in [k for k in self._entries if (k[0], k[1]) == (request.namespace, request.name)]:
            self._remove(key)

    async def _node_ref(self, node_name: str) -> Mapping[str, Any]:
        try:
            return await self._client.get(kinds.NODE, node_name)
        except errors.NotFound:
            return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name}}

    async def _reason(self, node_name: str) -> str:
        """The NodeClaim's DisruptionReason, else "Forceful Termination"."""
        node = await self._node_ref(node_name)
        claims = nodeclaims_for_node(self._index, node)
        if len(claims) != 1:
            return FORCEFUL_TERMINATION
        for cond in (claims[0].get("status") or {}).get("conditions") or ():
            if cond.get("type") == CONDITION_DISRUPTION_REASON and cond.get("status") == "True":
                return str(cond.get("reason") or FORCEFUL_TERMINATION)
        return FORCEFUL_TERMINATION


def _key(pod: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = pod["metadata"]
    return (meta.get("namespace") or "", meta["name"], meta.get("uid") or "")

"""``nodeclaim.podevents``: the NodeClaim's ``status.lastPodEventTime``.

Karpenter's ``nodeclaim/podevents``: when a pod is bound to a node, goes terminal
(Succeeded/Failed) on it, or starts terminating on it, the node's NodeClaim records
the time. ``consolidateAfter`` counts from that moment (see ``nodeclaim.disruption``),
so a node whose pods keep churning is not consolidated. DaemonSet pods do not count.

Pods come and go far more often than anything else changes, so the writes are
deduplicated: nothing is written while the recorded time is less than
:data:`DEDUPE_TIMEOUT` old. That is shorter than disruption's 15 s validation, so a
consolidation decided during a burst of pod events still sees the burst's last write
before it acts. The controller also remembers its own writes, since the cache it reads
may not show them yet when the next pod of the burst arrives.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

from karpy.apis.pods import is_owned_by_daemonset, is_terminal, is_terminating
from karpy.cloudprovider import CloudProvider
from karpy.controllers.indexes import Index, nodeclaims_for_provider_id
from karpy.controllers.nodeclaim._managed import is_managed_object
from karpy.runtime import (
    Client,
    Clock,
    Object,
    Predicate,
    Request,
    Result,
    errors,
    format_time,
    kinds,
    parse_time,
)
from karpy.state.kinds import NODE_CLAIM

__all__ = ["DEDUPE_TIMEOUT", "POD_EVENTS", "PodEvents", "is_pod_event"]

DEDUPE_TIMEOUT: Final = timedelta(seconds=10)
"""No new write while the recorded time is younger than this (Karpenter's 10 s)."""


def _node_name(pod: Object) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def is_pod_event(old: Object, new: Object) -> bool:
    """Whether a pod update is one the NodeClaim records: newly bound, newly terminal
    or newly terminating on a node."""
    if not _node_name(new):
        return False
    return (
        not _node_name(old)
        or (is_terminal(new) and not is_terminal(old))
        or (is_terminating(new) and not is_terminating(old))
    )


POD_EVENTS: Final = Predicate(
    # A pod seen for the first time already bound (a start-up list, a static pod)
    # counts, as in Karpenter; a deleted pod has nothing left to look up.
    create=lambda pod: bool(_node_name(pod)),
    update=is_pod_event,
    delete=lambda _pod: False,
)
"""The pod events that reach the reconciler."""


class PodEvents:
    """The ``nodeclaim.podevents`` reconciler (see the module docs)."""

    name = "nodeclaim.podevents"

    def __init__(
        self, *, client: Client, index: Index, cloud_provider: CloudProvider, clock: Clock
    ) -> None:
        self._client = client
        self._index = index
        self._provider = cloud_provider
        self._clock = clock
        # NodeClaim uid -> the time this process last wrote (the cache may lag behind).
        self._written: dict[str, datetime] = {}

    async def reconcile(self, request: Request) -> Result:
        """Stamp the pod's NodeClaim with the time of this pod event (deduplicated)."""
        try:
            pod = await self._client.get(kinds.POD, request.name, namespace=request.namespace)
        except errors.NotFound:
            return Result()
        node_name = _node_name(pod)
        if not node_name or is_owned_by_daemonset(pod):
            return Result()
        try:
            node = await self._client.get(kinds.NODE, node_name)
        except errors.NotFound:
            return Result()
        claims = nodeclaims_for_provider_id(self._index, (node.get("spec") or {}).get("providerID"))
        if len(claims) != 1:
            return Result()  # not karpy's node, or an ambiguous one: Karpenter ignores both
        nodeclaim = claims[0]
        if not is_managed_object(nodeclaim, self._provider):
            return Result()
        now = self._clock.now()
        meta = nodeclaim["metadata"]
        uid = str(meta.get("uid") or "")
        recorded = parse_time((nodeclaim.get("status") or {}).get("lastPodEventTime"))
        last = _latest(recorded, self._written.get(uid))
        if last is not None and now - last < DEDUPE_TIMEOUT:
            return Result()
        patch: dict[str, Any] = {"status": {"lastPodEventTime": format_time(now)}}
        # Claimed before the write, not after: the pods of one node bind together and
        # the workers take them at once, so each would otherwise see no write yet and
        # send its own (three pods per node made 2.3 writes per NodeClaim).
        previous = self._written.get(uid)
        self._written[uid] = now
        try:
            await self._client.patch_status(NODE_CLAIM, meta["name"], patch)
        except errors.NotFound:
            self._written.pop(uid, None)
            return Result()
        except BaseException:
            # Not written: the next pod event of this node must try again.
            if previous is None:
                self._written.pop(uid, None)
            else:
                self._written[uid] = previous
            raise
        self._forget_old(now)
        return Result()

    def _forget_old(self, now: datetime) -> None:
        # Entries older than the dedupe window decide nothing any more.
        if len(self._written) > 1024:
            self._written = {k: v for k, v in self._written.items()
                             if now - v < DEDUPE_TIMEOUT}


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)

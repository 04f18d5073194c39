"""``node.termination``: finalizes a deleted Node that karpy manages.

A Node carrying ``karpenter.sh/termination`` and a deletionTimestamp is taken down in
order, each step repeated until done (Karpenter's pkg/controllers/node/termination):

1. its NodeClaim is deleted too (a user deleting the Node deletes the machine);
2. if the Node is not Ready and the provider says its instance is gone, there is
   nothing to drain: the finalizer goes at once;
3. taint ``karpenter.sh/disrupted:NoSchedule`` so nothing new lands on it;
4. drain (``Drained``), wait for volumes to detach (``VolumesDetached``), then delete the
   instance until the provider says it is gone (``InstanceTerminating``) — the
   NodeClaim's conditions record each step;
5. remove the finalizer; the NodeClaim's own finalizer goes after (nodeclaim.termination).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from karpy.apis import NodeClaim
from karpy.apis.annotations import (
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP,
    FINALIZER_TERMINATION,
)
from karpy.apis.conditions import condition_is_true
from karpy.apis.labels import LABEL_NODEPOOL, LABEL_ZONE
from karpy.apis.v1 import (
    CONDITION_DRAINED,
    CONDITION_INSTANCE_TERMINATING,
    CONDITION_VOLUMES_DETACHED,
)
from karpy.cloudprovider import CloudProvider, NodeClaimNotFoundError
from karpy.controllers.indexes import Index
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.termination import _events as events
from karpy.controllers.termination._objects import (
    is_managed_node,
    nodeclaims_for_node,
)
from karpy.controllers.termination._status import conditions_of, parse_nodeclaim, patch_conditions
from karpy.controllers.termination._terminator import DrainError, Terminator
from karpy.controllers.termination._volumes import pending_volume_attachments
from karpy.runtime import (
    Client,
    Clock,
    Object,
    Request,
    Result,
    errors,
    kinds,
    logging_context,
    parse_time,
)
from karpy.state.kinds import NODE_CLAIM

__all__ = ["MIN_DRAIN_TIME", "NodeTermination", "node_termination_time"]

log = logging.getLogger("controller")

#: Drained is not set before this long after draining started, so that pods the
#: scheduler bound just before it saw the taint are drained too.
MIN_DRAIN_TIME: Final = timedelta(seconds=5)
_DRAIN_POLL: Final = 1.0
_INSTANCE_POLL: Final = 5.0


def node_termination_time(nodeclaim: Mapping[str, Any] | None) -> datetime | None:
    """When the NodeClaim's terminationGracePeriod ends (its annotation), or None."""
    if nodeclaim is None:
        return None
    annotations = (nodeclaim.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP)
    if not value:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise errors.TerminalError(
            f"NodeClaim {nodeclaim['metadata']['name']}: annotation "
            f"{ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP}={value!r} is not an RFC 3339 time"
        ) from exc


class NodeTermination:
    """The ``node.termination`` reconciler (see the module docs)."""

    name = "node.termination"

    def __init__(
        self,
        *,
        client: Client,
        index: Index,
        cloud_provider: CloudProvider,
        terminator: Terminator,
        recorder: events.Recorder,
        clock: Clock,
        metrics: KarpenterMetrics,
    ) -> None:
        self._client = client
        self._index = index
        self._provider = cloud_provider
        self._terminator = terminator
        self._recorder = recorder
        self._clock = clock
        self._metrics = metrics
        self._announced: set[str] = set()  # nodes told about their grace period's end

    async def reconcile(self, request: Request) -> Result:
        """Finalize the Node if it is being deleted (see the module docs)."""
        try:
            node = await self._client.get(kinds.NODE, request.name)
        except errors.NotFound:
            return Result()
        meta = node["metadata"]
        if not meta.get("deletionTimestamp"):
            return Result()
        if FINALIZER_TERMINATION not in (meta.get("finalizers") or ()):
            return Result()
        if not is_managed_node(node, self._provider, self._index):
            return Result()
        # With several NodeClaims for one providerID there is no single source of truth:
        # act as if there were none (Karpenter does the same).
        claims = nodeclaims_for_node(self._index, node)
        nodeclaim = claims[0] if len(claims) == 1 else None
        # controller-runtime's fields for a Node controller, as Karpenter's lines carry.
        fields: dict[str, Any] = {
            "controllerGroup": "", "controllerKind": "Node", "Node": {"name": meta["name"]},
        }
        if nodeclaim is not None:
            fields["NodeClaim"] = {"name": nodeclaim["metadata"]["name"]}
        with logging_context(**fields):
            return await self._finalize(node, nodeclaim)

    async def _finalize(self, node: Object, nodeclaim: Object | None) -> Result:
        if nodeclaim is not None and not nodeclaim["metadata"].get("deletionTimestamp"):
            with contextlib.suppress(errors.NotFound):
                deleted = await self._client.delete(NODE_CLAIM, nodeclaim["metadata"]["name"])
                # The finalizer keeps it: the server returns it as now stored, which the
                # conditions written below must be based on.
                if deleted is not None and deleted.get("kind") == "NodeClaim":
                    nodeclaim = deleted
        if not condition_is_true(node, "Ready"):
            # A NotReady node whose instance is gone has no kubelet left to drain.
            try:
                await self._provider.get((node.get("spec") or {}).get("providerID") or "")
            except NodeClaimNotFoundError:
                removed = await self._remove_finalizer(node)
                return Result() if removed else Result(requeue=True)
        termination_time = node_termination_time(nodeclaim)
        if termination_time is not None:
            self._announce(node, nodeclaim)
        try:
            await self._terminator.taint(node)
        except errors.Conflict:
            return Result(requeue=True)

        model = parse_nodeclaim(nodeclaim) if nodeclaim is not None else None
        result: Result | None = None
        failure: Exception | None = None
        try:
            result = await self._await_drain(node, model, termination_time)
            if result is None:
                result = await self._await_volume_detachment(node, model, termination_time)
            if result is None:
                result = await self._await_instance_termination(model)
        except Exception as exc:  # recorded below, then raised: steps reached still count
            failure = exc
        conflict = False
        if nodeclaim is not None and model is not None:
            conflict = await self._write_conditions(nodeclaim, model) is False
        if failure is not None:
            raise failure
        if conflict:
            return Result(requeue=True)  # the NodeClaim changed: read it again
        if result is not None:
            return result
        if not await self._remove_finalizer(node):
            return Result(requeue=True)
        return Result()

    def _announce(self, node: Object, nodeclaim: Object | None) -> None:
        uid = node["metadata"].get("uid") or node["metadata"]["name"]
        if uid in self._announced or nodeclaim is None:
            return
        self._announced.add(uid)
        value = nodeclaim["metadata"]["annotations"][ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP]
        events.termination_grace_period_expiring(self._recorder, node, value)

    async def _write_conditions(self, stored: Object, model: NodeClaim) -> bool | None:
        """Patch the conditions; False on a conflict, None when not found or unchanged."""
        was_drained = conditions_of(parse_nodeclaim(stored), self._clock).is_true(
            CONDITION_DRAINED
        )
        try:
            patched = await patch_conditions(self._client, stored, model)
        except errors.NotFound:
            return None
        except errors.Conflict:
            return False
        if patched is None:
            return None
        if not was_drained and conditions_of(model, self._clock).is_true(CONDITION_DRAINED):
            # Counted only once the condition is stored, so a retry cannot count twice.
            self._metrics.nodes_drained.add(
                1, {"nodepool": model.metadata.labels.get(LABEL_NODEPOOL, "")}
            )
        return True

    async def _await_drain(
        self, node: Object, model: NodeClaim | None, termination_time: datetime | None
    ) -> Result | None:
        conditions = conditions_of(model, self._clock) if model is not None else None
        if conditions is not None and conditions.get(CONDITION_DRAINED) is None:
            conditions.set_unknown(CONDITION_DRAINED, "Draining", "Draining")
        try:
            self._terminator.drain(node, termination_time)
        except DrainError as exc:
            events.failed_to_drain(self._recorder, node, str(exc))
            return Result(requeue_after=_DRAIN_POLL)
        if conditions is not None:
            drained = conditions.get(CONDITION_DRAINED)
            if drained is not None and drained.status == "Unknown" and (
                self._clock.now() - drained.last_transition_time < MIN_DRAIN_TIME
            ):
                return Result(requeue_after=_DRAIN_POLL)
            conditions.set_true(CONDITION_DRAINED)
        return None

    async def _await_volume_detachment(
        self, node: Object, model: NodeClaim | None, termination_time: datetime | None
    ) -> Result | None:
        conditions = conditions_of(model, self._clock) if model is not None else None
        now = self._clock.now()
        pending = await pending_volume_attachments(self._client, self._index, node, now)
        if not pending:
            if conditions is not None:
                conditions.set_true(CONDITION_VOLUMES_DETACHED)
            return None
        if termination_time is None or now <= termination_time:
            events.awaiting_volume_detachment(
                self._recorder, node, [va["metadata"]["name"] for va in pending]
            )
            if conditions is not None:
                conditions.set_unknown(
                    CONDITION_VOLUMES_DETACHED, "AwaitingVolumeDetachment",
                    "AwaitingVolumeDetachment",
                )
            return Result(requeue_after=_DRAIN_POLL)
        if conditions is not None:
            conditions.set_false(
                CONDITION_VOLUMES_DETACHED, "TerminationGracePeriodElapsed",
                "TerminationGracePeriodElapsed",
            )
        return None

    async def _await_instance_termination(self, model: NodeClaim | None) -> Result | None:
        if model is None:
            return None
        gone = False
        try:
            await self._provider.delete(model)
        except NodeClaimNotFoundError:
            gone = True
        conditions_of(model, self._clock).set_true(CONDITION_INSTANCE_TERMINATING)
        return None if gone else Result(requeue_after=_INSTANCE_POLL)

    async def _remove_finalizer(self, node: Object) -> bool:
        """Remove the finalizer; False on a conflict (read the Node again)."""
        meta = node["metadata"]
        finalizers = [f for f in meta.get("finalizers") or () if f != FINALIZER_TERMINATION]
        try:
            await self._client.patch(kinds.NODE, meta["name"], {"metadata": {
                "resourceVersion": meta.get("resourceVersion"), "finalizers": finalizers,
            }})
        except errors.NotFound:
            return True
        except errors.Conflict:
            return False
        labels = meta.get("labels") or {}
        nodepool = labels.get(LABEL_NODEPOOL, "")
        self._metrics.nodes_terminated.add(
            1, {"nodepool": nodepool, "zone": labels.get(LABEL_ZONE, "")}
        )
        deleted = parse_time(meta.get("deletionTimestamp"))
        if deleted is not None:
            self._metrics.node_termination_duration.record(
                max((self._clock.now() - deleted).total_seconds(), 0.0), {"nodepool": nodepool}
            )
        created = parse_time(meta.get("creationTimestamp"))
        if created is not None:
            self._metrics.nodes_lifetime_duration.record(
                max((self._clock.now() - created).total_seconds(), 0.0), {"nodepool": nodepool}
            )
        self._announced.discard(meta.get("uid") or meta["name"])
        log.info("deleted node")
        return True

"""``nodeclaim.termination``: finalizes a deleted NodeClaim that karpy manages.

A managed NodeClaim always carries ``karpenter.sh/termination`` (added here if the
provisioner did not), so deleting it — by a user, by disruption, by liveness or garbage
collection — comes through here (Karpenter does this in its lifecycle controller's
finalize step):

1. if the NodeClaim has a terminationGracePeriod, annotate when it ends
   (``karpenter.sh/nodeclaim-termination-timestamp``: deletion time + period), which
   node.termination turns into forced pod deletions;
2. delete its Node(s) and wait until they are gone (node.termination drains them);
3. delete the instance until the provider says it is gone (``InstanceTerminating``);
4. remove the finalizer.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Final

from karpy.apis.annotations import (
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP,
    FINALIZER_TERMINATION,
)
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from karpy.apis.v1 import CONDITION_INSTANCE_TERMINATING
from karpy.cloudprovider import CloudProvider, NodeClaimNotFoundError
from karpy.controllers.indexes import Index
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.termination import _events as events
from karpy.controllers.termination._objects import (
    is_managed_nodeclaim,
    nodes_for_nodeclaim,
)
from karpy.controllers.termination._status import conditions_of, parse_nodeclaim, patch_conditions
from karpy.runtime import (
    Client,
    Clock,
    Object,
    Request,
    Result,
    errors,
    format_time,
    kinds,
    logging_context,
    parse_time,
)
from karpy.state.kinds import NODE_CLAIM

__all__ = ["NodeClaimTermination"]

log = logging.getLogger("controller")

_INSTANCE_POLL: Final = 5.0
# A safety net: the Node's deletion event brings the NodeClaim back at once, but should
# that event be missed the NodeClaim is looked at again after this long.
_NODE_POLL: Final = 10.0


class NodeClaimTermination:
    """The ``nodeclaim.termination`` reconciler (see the module docs)."""

    name = "nodeclaim.termination"

    def __init__(
        self,
        *,
        client: Client,
        index: Index,
        cloud_provider: CloudProvider,
        recorder: events.Recorder,
        clock: Clock,
        metrics: KarpenterMetrics,
    ) -> None:
        self._client = client
        self._index = index
        self._provider = cloud_provider
        self._recorder = recorder
        self._clock = clock
        self._metrics = metrics

    async def reconcile(self, request: Request) -> Result:
        """Add the finalizer to a live NodeClaim; finalize a deleted one."""
        try:
            nodeclaim = await self._client.get(NODE_CLAIM, request.name)
        except errors.NotFound:
            return Result()
        if not is_managed_nodeclaim(nodeclaim, self._provider):
            return Result()
        meta = nodeclaim["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        if not meta.get("deletionTimestamp"):
            if FINALIZER_TERMINATION in finalizers:
                return Result()
            return await self._patch_meta(nodeclaim, {"finalizers": [
                *finalizers, FINALIZER_TERMINATION]})
        if FINALIZER_TERMINATION not in finalizers:
            return Result()
        fields: dict[str, Any] = {
            "controllerGroup": "karpenter.sh", "controllerKind": "NodeClaim",
            "NodeClaim": {"name": meta["name"]},
        }
        status = nodeclaim.get("status") or {}
        if status.get("providerID"):
            fields["provider-id"] = status["providerID"]
        if status.get("nodeName"):
            fields["Node"] = {"name": status["nodeName"]}
        with logging_context(**fields):
            return await self._finalize(nodeclaim)

    async def _patch_meta(self, nodeclaim: Object, changes: Mapping[str, Any]) -> Result:
        meta = nodeclaim["metadata"]
        try:
            await self._client.patch(NODE_CLAIM, meta["name"], {"metadata": {
                "resourceVersion": meta.get("resourceVersion"), **changes}})
        except errors.NotFound:
            return Result()
        except errors.Conflict:
            return Result(requeue=True)
        return Result()

    async def _finalize(self, nodeclaim: Object) -> Result:
        annotated = await self._annotate_termination_time(nodeclaim)
        if annotated is not None:
            if isinstance(annotated, Result):
                return annotated
            nodeclaim = annotated
        nodes = nodes_for_nodeclaim(self._index, nodeclaim)
        for node in nodes:
            if node["metadata"].get("deletionTimestamp"):
                continue
            with contextlib.suppress(errors.NotFound):
                await self._client.delete(kinds.NODE, node["metadata"]["name"])
        if nodes:
            return Result(requeue_after=_NODE_POLL)  # node.termination drains them first
        if (nodeclaim.get("status") or {}).get("providerID"):
            # Empty before launch: nothing was created, so nothing to delete.
            result, nodeclaim = await self._terminate_instance(nodeclaim)
            if result is not None:
                return result
        return await self._remove_finalizer(nodeclaim)

    async def _annotate_termination_time(self, nodeclaim: Object) -> Object | Result | None:
        meta = nodeclaim["metadata"]
        annotations = meta.get("annotations") or {}
        if ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP in annotations:
            return None
        spec = parse_nodeclaim(nodeclaim).spec
        try:
            period = spec.termination_grace_period_timedelta
        except ValueError as err:
            # Beyond Go's limit (NodePools refuse it; only a hand-written NodeClaim has
            # one): drain without a deadline rather than stop terminating.
            log.error("ignoring terminationGracePeriod", extra={"error": str(err)})
            return None
        deleted = parse_time(meta.get("deletionTimestamp"))
        if period is None or deleted is None:
            return None
        when = format_time(deleted + period)
        try:
            patched = await self._client.patch(NODE_CLAIM, meta["name"], {"metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "annotations": {ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: when},
            }})
        except errors.NotFound:
            return Result()
        except errors.Conflict:
            return Result(requeue=True)
        log.info("annotated nodeclaim", extra={ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: when})
        events.termination_grace_period_expiring(self._recorder, nodeclaim, when)
        return patched

    async def _terminate_instance(self, nodeclaim: Object) -> tuple[Result | None, Object]:
        """Delete the instance; (None, the NodeClaim as now stored) once it is gone."""
        model = parse_nodeclaim(nodeclaim)
        gone = False
        try:
            await self._provider.delete(model)
        except NodeClaimNotFoundError:
            gone = True
        conditions = conditions_of(model, self._clock)
        conditions.set_true(CONDITION_INSTANCE_TERMINATING)
        try:
            patched = await patch_conditions(self._client, nodeclaim, model)
        except errors.NotFound:
            return Result(), nodeclaim
        except errors.Conflict:
            return Result(requeue=True), nodeclaim
        if patched is not None:
            nodeclaim = patched
        if not gone:
            return Result(requeue_after=_INSTANCE_POLL), nodeclaim
        condition = conditions.get(CONDITION_INSTANCE_TERMINATING)
        if condition is not None:
            self._metrics.instance_termination_duration.record(
                max((self._clock.now() - condition.last_transition_time).total_seconds(), 0.0),
                {"nodepool": model.metadata.labels.get(LABEL_NODEPOOL, "")},
            )
        return None, nodeclaim

    async def _remove_finalizer(self, nodeclaim: Object) -> Result:
        meta = nodeclaim["metadata"]
        finalizers = [f for f in meta.get("finalizers") or () if f != FINALIZER_TERMINATION]
        try:
            await self._client.patch(NODE_CLAIM, meta["name"], {"metadata": {
                "resourceVersion": meta.get("resourceVersion"), "finalizers": finalizers}})
        except errors.NotFound:
            return Result()
        except errors.Conflict:
            return Result(requeue=True)
        log.info("deleted nodeclaim")
        labels = meta.get("labels") or {}
        nodepool = labels.get(LABEL_NODEPOOL, "")
        deleted = parse_time(meta.get("deletionTimestamp"))
        if deleted is not None:
            self._metrics.nodeclaim_termination_duration.record(
                max((self._clock.now() - deleted).total_seconds(), 0.0), {"nodepool": nodepool}
            )
        self._metrics.nodeclaims_terminated.add(1, {
            "nodepool": nodepool,
            "capacity_type": labels.get(LABEL_CAPACITY_TYPE, ""),
            "zone": labels.get(LABEL_ZONE, ""),
        })
        return Result()

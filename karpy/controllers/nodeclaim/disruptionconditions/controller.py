"""The ``nodeclaim.disruption`` controller: Drifted and Consolidatable, written once.

Karpenter's ``nodeclaim/disruption`` controller. One reconcile reads the NodeClaim and
its NodePool (named by the ``karpenter.sh/nodepool`` label) from the cache, runs the two
steps (:mod:`.drift`, :mod:`.consolidatable`) on the same in-memory NodeClaim, and
writes the status back in one merge patch carrying the resourceVersion: the conditions
list is replaced whole, so a concurrent write (the lifecycle's, podevents') makes ours
fail with a conflict and the reconcile is retried instead of dropping theirs. Each
condition whose status changed gets Karpenter's "Status condition transitioned" Event.

NodeClaims of another provider's NodeClass, deleting ones and ones without a NodePool
are left alone. Besides its NodeClaims' own events, the controller wakes for their
NodePool's spec and annotation changes (a template change drifts them, a new
consolidateAfter moves the moment they become consolidatable; status updates are
ignored) and their NodeClass's (provider drift).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.cloudprovider import CloudProvider
from karpy.controllers.nodeclaim._managed import is_managed
from karpy.controllers.nodeclaim._mergepatch import merge_patch
from karpy.controllers.nodeclaim.conditionevents import condition_transitions, record_transitions
from karpy.controllers.nodeclaim.disruptionconditions._step import Step, conditions
from karpy.controllers.nodeclaim.disruptionconditions.consolidatable import Consolidatable
from karpy.controllers.nodeclaim.disruptionconditions.drift import Drift
from karpy.runtime import (
    Cache,
    Client,
    Clock,
    Controller,
    EventRecorder,
    Manager,
    Object,
    Predicate,
    Request,
    Result,
    errors,
    logging_context,
)
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

__all__ = [
    "INDEX_NODECLASS_REF",
    "INDEX_NODEPOOL",
    "NODEPOOL_CHANGED",
    "DisruptionConditions",
    "index_nodeclass_ref",
    "index_nodepool",
]

INDEX_NODEPOOL: Final = "karpy.nodeclaim/nodepool"
INDEX_NODECLASS_REF: Final = "karpy.nodeclaim/nodeClassRef"
_WORKERS: Final = 10


def index_nodepool(obj: Object) -> Iterable[str]:
    """Index value of a NodeClaim: its ``karpenter.sh/nodepool`` label."""
    pool = (obj["metadata"].get("labels") or {}).get(LABEL_NODEPOOL)
    return (pool,) if pool else ()


def index_nodeclass_ref(obj: Object) -> Iterable[str]:
    """Index value of a NodeClaim: ``group/kind/name`` of its nodeClassRef."""
    ref = (obj.get("spec") or {}).get("nodeClassRef") or {}
    return (f"{ref.get('group', '')}/{ref.get('kind', '')}/{ref.get('name', '')}",)


def _judged(obj: Object) -> tuple[Any, Any]:
    meta = obj.get("metadata") or {}
    return meta.get("generation"), meta.get("annotations")


NODEPOOL_CHANGED: Final = Predicate(update=lambda old, new: _judged(old) != _judged(new))
"""NodePool updates that can change its NodeClaims' conditions: the spec (a new
generation) or the annotations (the hash). Status updates — nodepool.counter writes one
whenever a node comes or goes — would otherwise wake every NodeClaim of the pool."""


class DisruptionConditions:
    """Keeps each NodeClaim's Drifted and Consolidatable current (module docstring)."""

    name = "nodeclaim.disruption"

    def __init__(
        self,
        *,
        client: Client,
        cloud_provider: CloudProvider,
        recorder: EventRecorder,
        clock: Clock,
    ) -> None:
        self._client = client
        self._provider = cloud_provider
        self._recorder = recorder
        self._clock = clock
        self.drift = Drift(cloud_provider=cloud_provider, clock=clock)
        self.consolidatable = Consolidatable(clock=clock)
        self._steps: tuple[Step, ...] = (self.drift, self.consolidatable)
        # NodePool name -> (the cached object, its parsed model). Every NodeClaim write
        # wakes this controller; parsing the NodePool each time cost more than the rest
        # of the reconcile. Cached objects are replaced on change, so identity says when.
        self._nodepools: dict[str, tuple[Object, NodePool]] = {}

    # -- wiring --------------------------------------------------------------------------

    def register(self, manager: Manager) -> Controller[Request]:
        """Add the controller to ``manager``: NodeClaims, their NodePools and NodeClasses."""
        cache = manager.cache
        cache.informer(NODE_CLAIM, indexers={
            INDEX_NODEPOOL: index_nodepool, INDEX_NODECLASS_REF: index_nodeclass_ref,
        })
        builder = (
            manager.controller(self.name)
            .for_(NODE_CLAIM)
            .watches(NODE_POOL, _nodeclaims_by(cache, INDEX_NODEPOOL, _name),
                     predicate=NODEPOOL_CHANGED)
        )
        for node_class in self._provider.supported_node_classes():
            builder = builder.watches(
                node_class, _nodeclaims_by(cache, INDEX_NODECLASS_REF, _ref_of(node_class.group,
                                                                         node_class.kind))
            )
        return builder.complete(self, workers=_WORKERS)

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        """Bring Drifted and Consolidatable up to date (see the module docstring)."""
        try:
            obj = await self._client.get(NODE_CLAIM, request.name)
        except errors.NotFound:
            return Result()
        nodeclaim = NodeClaim.from_dict(obj)
        if nodeclaim.metadata.deletion_timestamp is not None:
            self.drift.forget([nodeclaim.metadata.uid or ""])
            return Result()
        if not is_managed(nodeclaim, self._provider):
            return Result()
        pool_name = nodeclaim.metadata.labels.get(LABEL_NODEPOOL)
        if not pool_name:
            return Result()
        try:
            nodepool = self._parsed(await self._client.get(NODE_POOL, pool_name))
        except errors.NotFound:
            self._nodepools.pop(pool_name, None)
            return Result()
        except ValidationError:
            # An invalid NodePool (nodepool.validation says why on its status) gives no
            # consolidateAfter or template to judge by: leave its NodeClaims as they are.
            return Result()
        fields: dict[str, Any] = {
            "controllerGroup": NODE_CLAIM.group, "controllerKind": NODE_CLAIM.kind,
            "NodeClaim": {"name": request.name},
        }
        if nodeclaim.status.node_name:
            fields["Node"] = {"name": nodeclaim.status.node_name}
        with logging_context(**fields):
            return await self._reconcile(obj, nodepool, nodeclaim)

    def _parsed(self, obj: Object) -> NodePool:
        name = str(obj["metadata"]["name"])
        cached = self._nodepools.get(name)
        if cached is None or cached[0] is not obj:
            cached = self._nodepools[name] = (obj, NodePool.from_dict(obj))
        return cached[1]

    async def _reconcile(self, stored: Object, nodepool: NodePool, nodeclaim: NodeClaim) -> Result:
        # The condition set fills in the missing Ready/Launched/... as Unknown; that alone
        # is lifecycle's first write, not a reason for this controller to write (at once,
        # against lifecycle's own, on every new NodeClaim: a conflict and a retry each).
        conditions(nodeclaim, self._clock)
        before = nodeclaim.to_dict()
        before_conditions = [c.model_copy() for c in nodeclaim.status.conditions]
        delays: list[float] = []
        failures: list[Exception] = []
        for step in self._steps:
            try:
                delay = await step.reconcile(nodepool, nodeclaim)
            except Exception as err:  # one step's failure must not lose the other's work
                failures.append(err)
                continue
            if delay is not None:
                delays.append(delay)
        after = nodeclaim.to_dict()
        status = merge_patch(before.get("status") or {}, after.get("status") or {})
        if status:
            try:
                await self._client.patch_status(NODE_CLAIM, stored["metadata"]["name"], {
                    "metadata": {"resourceVersion": stored["metadata"].get("resourceVersion")},
                    "status": status,
                })
            except errors.NotFound:
                return Result()
            except errors.Conflict:
                return Result(requeue=True)
            record_transitions(self._recorder, after, condition_transitions(
                before_conditions, nodeclaim.status.conditions))
        if failures:
            raise failures[0]
        return Result(requeue_after=max(min(delays), 0.001)) if delays else Result()


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _ref_of(group: str, kind: str) -> Callable[[Object], str]:
    """The nodeClassRef index value naming a NodeClass object of this kind."""
    return lambda obj: f"{group}/{kind}/{_name(obj)}"


def _nodeclaims_by(
    cache: Cache, index: str, value: Callable[[Object], str]
) -> Callable[[Object], Iterable[Request]]:
    def nodeclaims(obj: Object) -> Iterable[Request]:
        return [Request("", nc["metadata"]["name"])
                for nc in cache.by_index(NODE_CLAIM, index, value(obj))]

    return nodeclaims

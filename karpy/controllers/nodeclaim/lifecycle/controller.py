"""The ``nodeclaim.lifecycle`` controller: launch, register, initialize — or give up.

One reconcile reads the NodeClaim from the cache and runs the four steps in order
(launch, registration, initialization, liveness; one module each), each editing the
same in-memory NodeClaim. The parent then writes what changed once: a merge patch of
the metadata (labels, annotations) and one of the status subresource, and records an
Event for each condition whose status changed. A step that fails does not stop the
others; its error is raised after the write so the controller retries with backoff.

Before anything is launched the NodeClaim gets the ``karpenter.sh/termination``
finalizer (an optimistic-lock patch), so a machine can never outlive its NodeClaim
unnoticed. Deleting NodeClaims belong to termination; NodeClaims of another provider's
NodeClass are ignored.

A NodeClaim already *settled* — finalizer on, not deleting, Launched, Registered,
Initialized and Ready all True for its current generation — has nothing left for any
step, yet every write to it (podevents, disruption conditions, the kwok heartbeat of
its Node before it initialized) wakes this controller. Such a reconcile returns after
looking at the cached dict, without parsing the NodeClaim into its model and back,
which at a thousand NodeClaims was most of this controller's CPU time.

Reading our own writes: the cache may still hold the version from before our last
patch when the next event arrives. Rather than sleep after writing (Karpenter sleeps a
second), the controller remembers the resourceVersions it superseded and skips a
reconcile that would act on one of them; the event of the newer version follows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from karpy.apis import NodeClaim
from karpy.apis.annotations import FINALIZER_TERMINATION
from karpy.apis.conditions import condition_is_true
from karpy.apis.v1.nodeclaim import (
    CONDITION_INITIALIZED,
    CONDITION_LAUNCHED,
    CONDITION_REGISTERED,
    NodeClaimCondition,
)
from karpy.cloudprovider import CloudProvider, UnavailableOfferings
from karpy.controllers.indexes import Index, nodeclaims_for_provider_id
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim._managed import is_managed
from karpy.controllers.nodeclaim._mergepatch import merge_patch
from karpy.controllers.nodeclaim.conditionevents import (
    condition_transitions,
    record_transitions,
)
from karpy.controllers.nodeclaim.lifecycle._base import Outcome, SubReconciler
from karpy.controllers.nodeclaim.lifecycle.initialization import Initialization
from karpy.controllers.nodeclaim.lifecycle.launch import Launch
from karpy.controllers.nodeclaim.lifecycle.liveness import Liveness
from karpy.controllers.nodeclaim.lifecycle.registration import Registration
from karpy.controllers.settings import Settings
from karpy.runtime import (
    Client,
    Clock,
    EventRecorder,
    Object,
    Request,
    Result,
    errors,
    logging_context,
)
from karpy.state.kinds import NODE_CLAIM
from karpy.state.registration_health import RegistrationHealth

__all__ = ["STALE_RETRY", "WORKERS", "LifecycleController", "settled"]

WORKERS = 100
"""Concurrent reconciles: launches wait on the cloud, so many run at once."""
STALE_RETRY = 1.0
"""Seconds before looking again at a NodeClaim whose cached copy predates our write."""


class LifecycleController:
    """Drives each NodeClaim from creation to an initialized Node (module docstring)."""

    name = "nodeclaim.lifecycle"

    def __init__(
        self,
        *,
        client: Client,
        index: Index,
        cloud_provider: CloudProvider,
        recorder: EventRecorder,
        unavailable_offerings: UnavailableOfferings,
        settings: Settings,
        metrics: KarpenterMetrics,
        clock: Clock,
        registration_health: RegistrationHealth | None = None,
        dra_drivers_on: Callable[[str], frozenset[str]] | None = None,
    ) -> None:
        health = registration_health if registration_health is not None \
            else RegistrationHealth()
        self._client = client
        self._index = index
        self._provider = cloud_provider
        self._recorder = recorder
        self.launch = Launch(
            client=client, cloud_provider=cloud_provider, recorder=recorder,
            unavailable_offerings=unavailable_offerings, settings=settings,
            metrics=metrics, clock=clock,
        )
        self.registration = Registration(
            client=client, index=index, recorder=recorder, metrics=metrics, clock=clock,
            health=health,
        )
        self.initialization = Initialization(
            client=client, index=index, metrics=metrics, clock=clock,
            dra_drivers_on=dra_drivers_on,
        )
        self.liveness = Liveness(
            client=client, recorder=recorder, settings=settings, metrics=metrics, clock=clock,
            health=health,
        )
        self._steps: tuple[SubReconciler, ...] = (
            self.launch, self.registration, self.initialization, self.liveness,
        )
        # NodeClaim name -> resourceVersions our own writes superseded.
        self._superseded: dict[str, set[str]] = {}

    # -- wiring --------------------------------------------------------------------------

    def nodeclaims_for_node(self, node: Object) -> Iterable[Request]:
        """The NodeClaims a Node event concerns: those with its providerID that are not
        initialized yet (an initialized NodeClaim has nothing left to learn from its
        Node, and kubelet heartbeats would otherwise wake every one of them)."""
        provider_id = (node.get("spec") or {}).get("providerID")
        return [
            Request("", nc["metadata"]["name"])
            for nc in nodeclaims_for_provider_id(self._index, provider_id)
            if not condition_is_true(nc, CONDITION_INITIALIZED)
        ]

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        """Advance one NodeClaim through its lifecycle (see the module docstring)."""
        try:
            obj = await self._client.get(NODE_CLAIM, request.name)
        except errors.NotFound:
            self._superseded.pop(request.name, None)
            return Result()
        if settled(obj):
            self._superseded.pop(request.name, None)
            return Result()
        nodeclaim = NodeClaim.from_dict(obj)
        if not is_managed(nodeclaim, self._provider):
            return Result()
        if nodeclaim.metadata.deletion_timestamp is not None:
            self.launch.forget(nodeclaim.metadata.uid or "")
            self._superseded.pop(request.name, None)
            return Result()
        superseded = self._superseded.get(request.name)
        if superseded is not None:
            if nodeclaim.metadata.resource_version in superseded:
                return Result(requeue_after=STALE_RETRY)
            del self._superseded[request.name]
        fields: dict[str, Any] = {
            "controllerGroup": NODE_CLAIM.group,
            "controllerKind": NODE_CLAIM.kind,
            "NodeClaim": {"name": request.name},
        }
        if nodeclaim.status.provider_id:
            fields["provider-id"] = nodeclaim.status.provider_id
        if nodeclaim.status.node_name:
            fields["Node"] = {"name": nodeclaim.status.node_name}
        with logging_context(**fields):
            return await self._reconcile(nodeclaim)

    async def _reconcile(self, nodeclaim: NodeClaim) -> Result:
        name = nodeclaim.metadata.name or ""
        if FINALIZER_TERMINATION not in nodeclaim.metadata.finalizers:
            # Never launch without the finalizer: termination must see the NodeClaim's
            # deletion to remove the machine. The lock keeps the list edit safe.
            try:
                updated = await self._client.patch(NODE_CLAIM, name, {"metadata": {
                    "finalizers": [*nodeclaim.metadata.finalizers, FINALIZER_TERMINATION],
                    "resourceVersion": nodeclaim.metadata.resource_version,
                }})
            except errors.Conflict:
                return Result(requeue=True)
            except errors.NotFound:
                return Result()
            self._supersede(name, nodeclaim.metadata.resource_version)
            nodeclaim.metadata.finalizers = list(updated["metadata"].get("finalizers") or [])
            nodeclaim.metadata.resource_version = updated["metadata"].get("resourceVersion")
        before = nodeclaim.to_dict()
        before_conditions = [c.model_copy() for c in nodeclaim.status.conditions]
        outcomes: list[Outcome] = []
        failures: list[Exception] = []
        for step in self._steps:
            try:
                outcome = await step.reconcile(nodeclaim)
            except Exception as err:  # any step's failure retries the whole reconcile
                failures.append(err)
                continue
            if outcome.deleted:
                return Result()
            outcomes.append(outcome)
        after = nodeclaim.to_dict()
        if after != before:
            try:
                await self._write(nodeclaim, before, after)
            except errors.NotFound:
                return Result()
            self._record(after, before_conditions, nodeclaim.status.conditions)
        if failures:
            raise failures[0]
        return _combine(outcomes)

    async def _write(
        self, nodeclaim: NodeClaim, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        name = nodeclaim.metadata.name or ""
        version = nodeclaim.metadata.resource_version
        metadata = merge_patch(before.get("metadata") or {}, after.get("metadata") or {})
        if metadata:
            updated = await self._client.patch(NODE_CLAIM, name, {"metadata": metadata})
            self._supersede(name, version)
            version = updated["metadata"].get("resourceVersion")
        status = merge_patch(before.get("status") or {}, after.get("status") or {})
        if status:
            await self._client.patch_status(NODE_CLAIM, name, {"status": status})
            self._supersede(name, version)

    def _supersede(self, name: str, version: str | None) -> None:
        if version:
            self._superseded.setdefault(name, set()).add(version)

    def _record(
        self,
        obj: dict[str, Any],
        before: Sequence[NodeClaimCondition],
        after: Sequence[NodeClaimCondition],
    ) -> None:
        record_transitions(self._recorder, obj, condition_transitions(before, after))


_SETTLED_CONDITIONS = ("Ready", CONDITION_LAUNCHED, CONDITION_REGISTERED, CONDITION_INITIALIZED)


def settled(obj: Object) -> bool:
    """Whether no lifecycle step has anything left to do on this NodeClaim: it keeps
    the finalizer, is not being deleted, and Ready, Launched, Registered and Initialized
    are True for its current generation (module docstring)."""
    meta = obj["metadata"]
    if meta.get("deletionTimestamp") or FINALIZER_TERMINATION not in (
        meta.get("finalizers") or ()
    ):
        return False
    generation = meta.get("generation")
    found = {
        c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or ()
        if c.get("type") in _SETTLED_CONDITIONS
    }
    return len(found) == len(_SETTLED_CONDITIONS) and all(
        c.get("status") == "True" and c.get("observedGeneration") == generation
        for c in found.values()
    )


def _combine(outcomes: Sequence[Outcome]) -> Result:
    if any(o.requeue for o in outcomes):
        return Result(requeue=True)
    delays = [o.requeue_after for o in outcomes if o.requeue_after is not None]
    return Result(requeue_after=max(min(delays), 0.001)) if delays else Result()

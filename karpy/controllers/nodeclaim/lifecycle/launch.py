"""Launch: ask the cloud provider for the NodeClaim's machine, exactly once.

Karpenter's ``lifecycle/launch.go``, step by step:

- Launched already decided → nothing to do (the condition is re-set so that it carries
  the current generation).
- ``CloudProvider.create``; on success the NodeClaim takes the launched machine's
  labels (the NodeClaim's own win), annotations, providerID, imageID, capacity and
  allocatable, and Launched turns True. The result is kept in memory for an hour, keyed
  by UID: if writing the status fails, or the next reconcile reads a stale cached copy,
  the machine is not launched twice.
- InsufficientCapacityError: the offerings it names are marked unavailable for
  ``settings.insufficient_capacity_ttl``, a Warning Event is recorded and the NodeClaim is
  deleted — the provisioner then plans its pods onto another offering.
- NodeClassNotReadyError: the NodeClaim is deleted as well.
- CreateError and anything else: Launched stays Unknown with the error's reason and
  message, and the reconcile fails so that it is retried with backoff (liveness gives up
  after ``settings.launch_ttl``).
"""

from __future__ import annotations

from karpy.apis import NodeClaim
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from karpy.apis.v1.nodeclaim import CONDITION_LAUNCHED
from karpy.cloudprovider import (
    CloudProvider,
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
    UnavailableOfferings,
)
from karpy.controllers.disrupted import disrupted_labels
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim.lifecycle._base import (
    Outcome,
    conditions,
    log,
)
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Clock, EventRecorder, errors
from karpy.state.kinds import NODE_CLAIM

__all__ = [
    "LAUNCH_CACHE_TTL",
    "Launch",
    "LaunchError",
    "populate_launched",
    "truncate_message",
]

LAUNCH_CACHE_TTL = 3600.0
"""Seconds a launch result is remembered in case writing it back to the NodeClaim fails."""

# Karpenter's event reasons (pkg/events/reason.go).
REASON_INSUFFICIENT_CAPACITY = "InsufficientCapacityError"
REASON_NODE_CLASS_NOT_READY = "NodeClassNotReady"


class LaunchError(Exception):
    """The provider failed to launch; the NodeClaim's Launched condition says why."""


def truncate_message(message: str) -> str:
    """Messages on conditions and events are cut at 300 characters, as Karpenter does."""
    return message if len(message) < 300 else message[:300] + "..."


class Launch:
    """The launch step (see the module docstring)."""

    def __init__(
        self,
        *,
        client: Client,
        cloud_provider: CloudProvider,
        recorder: EventRecorder,
        unavailable_offerings: UnavailableOfferings,
        settings: Settings,
        metrics: KarpenterMetrics,
        clock: Clock,
    ) -> None:
        self._client = client
        self._provider = cloud_provider
        self._recorder = recorder
        self._unavailable = unavailable_offerings
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._launched: dict[str, tuple[float, NodeClaim]] = {}

    async def reconcile(self, nodeclaim: NodeClaim) -> Outcome:
        """Launch the machine unless Launched is already True or False."""
        conds = conditions(nodeclaim, self._clock)
        launched = conds.get(CONDITION_LAUNCHED)
        assert launched is not None  # ConditionSet adds every dependent condition
        uid = nodeclaim.metadata.uid or ""
        if launched.status != "Unknown":
            conds.set(launched.type, launched.status, launched.reason, launched.message)
            if launched.status == "True":
                self.forget(uid)
            return Outcome()
        created = self._remembered(uid)
        if created is None:
            created = await self._create(nodeclaim)
            if created is None:
                return Outcome(deleted=True)
            self._remember(uid, created)
        populate_launched(nodeclaim, created)
        conds.set_true(CONDITION_LAUNCHED)
        return Outcome()

    def forget(self, uid: str) -> None:
        """Drop the remembered launch of NodeClaim ``uid`` (launched, or gone)."""
        self._launched.pop(uid, None)

    async def _create(self, nodeclaim: NodeClaim) -> NodeClaim | None:
        conds = conditions(nodeclaim, self._clock)
        try:
            created = await self._provider.create(nodeclaim.model_copy(deep=True))
        except InsufficientCapacityError as err:
            self._unavailable.mark(err.offerings, ttl=self._settings.insufficient_capacity_ttl)
            self._recorder.warning(
                nodeclaim.to_dict(),
                REASON_INSUFFICIENT_CAPACITY,
                f"NodeClaim {nodeclaim.metadata.name} event: {truncate_message(str(err))}",
                dedupe_values=(str(nodeclaim.metadata.uid or nodeclaim.metadata.name),),
            )
            log.error("failed launching nodeclaim", extra={"error": str(err)})
            await self._delete(nodeclaim, "insufficient_capacity")
            return None
        except NodeClassNotReadyError as err:
            self._recorder.warning(
                nodeclaim.to_dict(),
                REASON_NODE_CLASS_NOT_READY,
                f"NodeClaim {nodeclaim.metadata.name} event: {truncate_message(str(err))}",
                dedupe_values=(str(nodeclaim.metadata.uid or nodeclaim.metadata.name),),
            )
            log.error("failed launching nodeclaim", extra={"error": str(err)})
            await self._delete(nodeclaim, "nodeclass_not_ready")
            return None
        except CreateError as err:
            conds.set_unknown(CONDITION_LAUNCHED, err.reason, truncate_message(err.message))
            raise LaunchError(f"launching nodeclaim, {err}") from err
        except Exception as err:
            conds.set_unknown(CONDITION_LAUNCHED, "LaunchFailed", truncate_message(str(err)))
            raise LaunchError(f"launching nodeclaim, {err}") from err
        labels = created.metadata.labels
        log.info(
            "launched nodeclaim",
            extra={
                "provider-id": created.status.provider_id or "",
                "instance-type": labels.get(LABEL_INSTANCE_TYPE, ""),
                "zone": labels.get(LABEL_ZONE, ""),
                "capacity-type": labels.get(LABEL_CAPACITY_TYPE, ""),
                "allocatable": dict(created.status.allocatable),
            },
        )
        self._metrics.nodeclaims_launched.add(
            1, {"nodepool": nodeclaim.metadata.labels.get(LABEL_NODEPOOL, "")}
        )
        return created

    async def _delete(self, nodeclaim: NodeClaim, reason: str) -> None:
        try:
            await self._client.delete(
                NODE_CLAIM, nodeclaim.metadata.name or "", uid=nodeclaim.metadata.uid
            )
        except (errors.NotFound, errors.Conflict):
            return  # gone already, or a newer NodeClaim of that name: not ours
        self._metrics.nodeclaims_disrupted.add(1, disrupted_labels(
            reason, nodeclaim.metadata.labels,
            nodeclaim.spec.termination_grace_period_timedelta))

    def _remembered(self, uid: str) -> NodeClaim | None:
        entry = self._launched.get(uid)
        if entry is None:
            return None
        expires, created = entry
        if expires <= self._clock.monotonic():
            del self._launched[uid]
            return None
        return created.model_copy(deep=True)

    def _remember(self, uid: str, created: NodeClaim) -> None:
        now = self._clock.monotonic()
        expired = [k for k, (until, _) in self._launched.items() if until <= now]
        for key in expired:
            del self._launched[key]
        self._launched[uid] = (now + LAUNCH_CACHE_TTL, created)


def populate_launched(nodeclaim: NodeClaim, created: NodeClaim) -> None:
    """Copy what the launch resolved onto ``nodeclaim``; its own labels take precedence
    over the provider's, the provider's annotations over its own (as in Karpenter)."""
    meta = nodeclaim.metadata
    meta.labels = {**created.metadata.labels, **meta.labels}
    meta.annotations = {**meta.annotations, **created.metadata.annotations}
    status = nodeclaim.status
    status.provider_id = created.status.provider_id
    status.image_id = created.status.image_id
    status.capacity = dict(created.status.capacity)
    status.allocatable = dict(created.status.allocatable)

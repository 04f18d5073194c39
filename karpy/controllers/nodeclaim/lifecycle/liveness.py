"""Liveness: give up on a NodeClaim that does not launch or whose Node never registers.

Karpenter's ``lifecycle/liveness.go``: a NodeClaim whose Launched condition is not True
``settings.launch_ttl`` after it last changed (5 minutes in Karpenter), or whose
Registered condition is not True ``settings.registration_ttl`` after it last changed
(15 minutes) — in practice after the NodeClaim was created — is deleted. Termination then
removes its machine, and the provisioner makes a new NodeClaim for the pods still pending.
"""

from __future__ import annotations

from datetime import datetime

from karpy.apis import NodeClaim
from karpy.apis.duration import format_go_duration
from karpy.apis.v1.nodeclaim import CONDITION_LAUNCHED, CONDITION_REGISTERED
from karpy.controllers.disrupted import disrupted_labels
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim.lifecycle._base import (
    Outcome,
    conditions,
    log,
)
from karpy.controllers.nodepool.registrationhealth import record_registration
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Clock, EventRecorder, errors
from karpy.state.kinds import NODE_CLAIM
from karpy.state.registration_health import RegistrationHealth

__all__ = ["LAUNCH_TIMEOUT_REASON", "REGISTRATION_TIMEOUT_REASON", "Liveness"]

LAUNCH_TIMEOUT_REASON = "launch_timeout"
REGISTRATION_TIMEOUT_REASON = "registration_timeout"

# Event reasons: Karpenter only logs these deletions; the Events are karpy's addition so
# that `kubectl describe nodeclaim` (and `kubectl get events`) show why it went away.
_EVENT_REASONS = {
    LAUNCH_TIMEOUT_REASON: "LaunchTimeout",
    REGISTRATION_TIMEOUT_REASON: "RegistrationTimeout",
}


class Liveness:
    """The liveness step (see the module docstring)."""

    def __init__(
        self,
        *,
        client: Client,
        recorder: EventRecorder,
        settings: Settings,
        metrics: KarpenterMetrics,
        clock: Clock,
        health: RegistrationHealth | None = None,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._health = health if health is not None else RegistrationHealth()

    async def reconcile(self, nodeclaim: NodeClaim) -> Outcome:
        """Delete the NodeClaim if it timed out; otherwise come back at the deadline."""
        conds = conditions(nodeclaim, self._clock)
        registered = conds.get(CONDITION_REGISTERED)
        launched = conds.get(CONDITION_LAUNCHED)
        assert registered is not None and launched is not None
        if registered.status == "True":
            return Outcome()
        if launched.status != "True":
            left = self._left(launched.last_transition_time, self._settings.launch_ttl)
            if left > 0:
                return Outcome(requeue_after=left)
            return await self._delete(nodeclaim, self._settings.launch_ttl, LAUNCH_TIMEOUT_REASON)
        left = self._left(registered.last_transition_time, self._settings.registration_ttl)
        if left > 0:
            return Outcome(requeue_after=left)
        return await self._delete(
            nodeclaim, self._settings.registration_ttl, REGISTRATION_TIMEOUT_REASON
        )

    def _left(self, since: datetime, ttl: float) -> float:
        return ttl - (self._clock.now() - since).total_seconds()

    async def _delete(self, nodeclaim: NodeClaim, ttl: float, reason: str) -> Outcome:
        try:
            await self._client.delete(
                NODE_CLAIM, nodeclaim.metadata.name or "", uid=nodeclaim.metadata.uid
            )
        except (errors.NotFound, errors.Conflict):
            return Outcome(deleted=True)  # gone already, or a newer NodeClaim of that name
        log.info(
            "terminating due to timeout",
            extra={"timeout": format_go_duration(ttl), "reason": reason},
        )
        self._recorder.warning(
            nodeclaim.to_dict(),
            _EVENT_REASONS[reason],
            f"NodeClaim {nodeclaim.metadata.name} deleted: not "
            f"{'launched' if reason == LAUNCH_TIMEOUT_REASON else 'registered'} "
            f"within {format_go_duration(ttl)}",
        )
        self._metrics.nodeclaims_disrupted.add(1, disrupted_labels(
            reason, nodeclaim.metadata.labels,
            nodeclaim.spec.termination_grace_period_timedelta))
        try:
            await record_registration(self._client, self._health, self._clock, nodeclaim,
                                      registered=False)
        except errors.ClientError as exc:
            log.warning("failed updating nodepool registration health",
                        extra={"error": str(exc)})
        return Outcome(deleted=True)

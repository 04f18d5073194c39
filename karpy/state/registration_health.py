"""Whether a NodePool's recent NodeClaims registered: Karpenter's nodepoolhealth.State.

Each NodePool (by uid) keeps the outcome of its last four NodeClaims: True when one
registered its Node, False when one was deleted for not launching or not registering
in time. Two failures among the last four make the NodePool unhealthy; any other
non-empty record is healthy; no record is unknown. The NodePool's
``NodeRegistrationHealthy`` condition is written from it (the nodeclaim lifecycle flips
it when an outcome changes the verdict; nodepool.registrationhealth resets it when the
NodePool or its NodeClass changes), and a restart re-seeds the record from the
condition as stored.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Final

__all__ = ["BUFFER_SIZE", "HealthStatus", "RegistrationHealth"]

BUFFER_SIZE: Final = 4
_THRESHOLD_FALSE: Final = 0.5


class HealthStatus(enum.Enum):
    """The verdict on a NodePool's recent registrations."""

    UNKNOWN = "Unknown"
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


def _verdict(outcomes: deque[bool]) -> HealthStatus:
    if not outcomes:
        return HealthStatus.UNKNOWN
    failures = sum(1 for ok in outcomes if not ok)
    if failures / BUFFER_SIZE >= _THRESHOLD_FALSE:
        return HealthStatus.UNHEALTHY
    return HealthStatus.HEALTHY


class RegistrationHealth:
    """The record of every NodePool (see the module docs). Single event loop: no locks."""

    def __init__(self) -> None:
        self._outcomes: dict[str, deque[bool]] = {}

    def _of(self, uid: str) -> deque[bool]:
        outcomes = self._outcomes.get(uid)
        if outcomes is None:
            outcomes = self._outcomes[uid] = deque(maxlen=BUFFER_SIZE)
        return outcomes

    def status(self, uid: str) -> HealthStatus:
        """The NodePool's verdict now."""
        return _verdict(self._of(uid))

    def update(self, uid: str, registered: bool) -> None:
        """Record one NodeClaim's outcome."""
        self._of(uid).append(registered)

    def dry_run(self, uid: str, registered: bool) -> HealthStatus:
        """The verdict :meth:`update` would lead to, without recording it."""
        outcomes = deque(self._of(uid), maxlen=BUFFER_SIZE)
        outcomes.append(registered)
        return _verdict(outcomes)

    def set_status(self, uid: str, status: HealthStatus) -> None:
        """Reset the record to the least that gives ``status``."""
        outcomes = self._of(uid)
        outcomes.clear()
        if status is HealthStatus.HEALTHY:
            outcomes.append(True)
        elif status is HealthStatus.UNHEALTHY:
            outcomes.extend([False] * int(BUFFER_SIZE * _THRESHOLD_FALSE))

    def forget(self, uid: str) -> None:
        """Drop a deleted NodePool's record."""
        self._outcomes.pop(uid, None)

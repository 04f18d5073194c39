"""The NodeOverlays a running karpy has put in force, applied to a tool's catalogue
(``karpy top`` prices its nodes with it).

A tool cannot see the running karpy's ``NodeOverlay`` gate, but it can see its work: an
overlay the nodeoverlay controller judged carries ``ValidationSucceeded``. Those with
``ValidationSucceeded=True`` are judged again here against the tool's catalogue (the
same pure judgement, so the same overlays win) and applied to it; with the gate off
none carries the condition and the catalogue stays the cloud's. Overlays are listed
again at most every ``every`` seconds; a cluster without the CRD, or credentials that
may not read it, has none; a failed list keeps the last overlays and is tried again at
the next refresh.
"""

from __future__ import annotations

import logging

from karpy.apis.conditions import condition_is_true
from karpy.apis.v1alpha1.nodeoverlay import CONDITION_VALIDATION_SUCCEEDED
from karpy.controllers.inputs.instancetypes import InstanceTypeCache
from karpy.controllers.nodeoverlay import judge
from karpy.runtime import Client, Clock, Object, errors
from karpy.state import Cluster, OverlayStore
from karpy.state.kinds import NODE_OVERLAY

__all__ = ["InForceOverlays", "in_force"]

log = logging.getLogger(__name__)


def in_force(overlay: Object) -> bool:
    """Whether the nodeoverlay controller put ``overlay`` in force."""
    return condition_is_true(overlay, CONDITION_VALIDATION_SUCCEEDED)


class InForceOverlays:
    """Keeps ``store`` (the one the tool's InstanceTypeCache applies) holding the
    overlays in force (see the module docstring)."""

    def __init__(
        self, client: Client, store: OverlayStore, clock: Clock, *, every: float = 60.0
    ) -> None:
        self._client = client
        self._store = store
        self._clock = clock
        self._every = every
        self._listed_at: float | None = None

    async def refresh(self, cluster: Cluster, instance_types: InstanceTypeCache) -> None:
        """List the overlays when due, judge those in force against ``cluster``'s
        NodePools and put the winners in ``store``."""
        now = self._clock.monotonic()
        if self._listed_at is not None and now - self._listed_at < self._every:
            return
        try:
            listed = await self._client.list(NODE_OVERLAY)
        except (errors.NotFound, errors.Forbidden):  # no CRD, or not ours to read
            listed = []
        except errors.ClientError as err:
            log.warning("listing NodeOverlays failed, keeping the last ones: %s", err)
            return
        self._listed_at = now
        verdict = await judge([o for o in listed if in_force(o)], cluster, instance_types)
        self._store.update(verdict.applied, verdict.evaluated)

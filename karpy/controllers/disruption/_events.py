"""The Events disruption records, worded and reasoned as Karpenter's
(pkg/controllers/disruption/events).

Blocked and Unconsolidatable events are recorded on every pass that finds the same
reason; like Karpenter, each (object, reason, message) is recorded once per dedupe
window rather than every 10 seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.runtime import Clock, EventRecorder

__all__ = [
    "DEDUPE_SECONDS",
    "REASON_BLOCKED",
    "REASON_LAUNCHING",
    "REASON_TERMINATING",
    "REASON_UNCONSOLIDATABLE",
    "REASON_WAITING_READINESS",
    "DisruptionEvents",
    "sentence",
]

REASON_LAUNCHING: Final = "DisruptionLaunching"
REASON_WAITING_READINESS: Final = "DisruptionWaitingReadiness"
REASON_TERMINATING: Final = "DisruptionTerminating"
REASON_BLOCKED: Final = "DisruptionBlocked"
REASON_UNCONSOLIDATABLE: Final = "Unconsolidatable"
REASON_CANDIDATE: Final = "ConsolidationCandidate"
REASON_REJECTED: Final = "ConsolidationRejected"

DEDUPE_SECONDS: Final = 15 * 60.0


def sentence(text: str) -> str:
    """Karpenter's pretty.Sentence: the first letter capitalised."""
    return text[:1].upper() + text[1:]


def _title(reason: str) -> str:
    return reason[:1].upper() + reason[1:]


class DisruptionEvents:
    """Records disruption's Events through ``recorder`` (see the module docstring)."""

    def __init__(self, recorder: EventRecorder, clock: Clock) -> None:
        self._recorder = recorder
        self._clock = clock
        self._seen: dict[tuple[str, str, str], float] = {}

    def _deduped(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or (obj.get("metadata") or {}).get("name"))
        key = (uid, reason, message)
        now = self._clock.monotonic()
        last = self._seen.get(key)
        if last is not None and now - last < DEDUPE_SECONDS:
            return
        if len(self._seen) > 10_000:  # bound memory: forget windows that have passed
            self._seen = {k: t for k, t in self._seen.items() if now - t < DEDUPE_SECONDS}
        self._seen[key] = now
        self._recorder.normal(obj, reason, message)

    def _both(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
              reason: str, message: str, *, dedupe: bool) -> None:
        for obj in (node, nodeclaim):
            if obj is None:
                continue
            if dedupe:
                self._deduped(obj, reason, message)
            else:
                self._recorder.normal(obj, reason, message)

    def blocked(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                message: str) -> None:
        """DisruptionBlocked on the Node and its NodeClaim."""
        self._both(node, nodeclaim, REASON_BLOCKED, sentence(message), dedupe=True)

    def nodepool_blocked(self, nodepool: Mapping[str, Any], reason: str) -> None:
        """DisruptionBlocked on a NodePool whose budgets allow nothing for ``reason``."""
        self._deduped(
            nodepool, REASON_BLOCKED,
            f"No allowed disruptions for disruption reason {reason} due to blocking budget",
        )

    def unconsolidatable(self, node: Mapping[str, Any] | None,
                         nodeclaim: Mapping[str, Any] | None, message: str) -> None:
        """Unconsolidatable on the Node and its NodeClaim."""
        self._both(node, nodeclaim, REASON_UNCONSOLIDATABLE, message, dedupe=True)

    def candidate(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                  command: str, savings: float) -> None:
        """ConsolidationCandidate: this node is part of a command awaiting validation."""
        self._both(node, nodeclaim, REASON_CANDIDATE,
                   f"Consolidation candidate: {command}, estimated savings ${savings:.2f}/h",
                   dedupe=True)

    def rejected(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                 command: str, why: str) -> None:
        """ConsolidationRejected: validation dropped the command."""
        self._both(node, nodeclaim, REASON_REJECTED,
                   f"Consolidation rejected ({why}): {command}", dedupe=True)

    def launching(self, nodeclaim: Mapping[str, Any], reason: str) -> None:
        """DisruptionLaunching on a replacement NodeClaim."""
        self._deduped(nodeclaim, REASON_LAUNCHING, f"Launching NodeClaim: {_title(reason)}")

    def waiting_readiness(self, nodeclaim: Mapping[str, Any]) -> None:
        """DisruptionWaitingReadiness on a replacement that is not initialized yet."""
        self._deduped(nodeclaim, REASON_WAITING_READINESS,
                      "Waiting on readiness to continue disruption")

    def terminating(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                    reason: str) -> None:
        """DisruptionTerminating on a candidate being deleted."""
        if node is not None:
            self._recorder.normal(node, REASON_TERMINATING, f"Disrupting Node: {_title(reason)}")
        if nodeclaim is not None:
            self._recorder.normal(
                nodeclaim, REASON_TERMINATING, f"Disrupting NodeClaim: {_title(reason)}"
            )

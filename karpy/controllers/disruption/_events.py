"""The Events disruption records, worded and reasoned as Karpenter's
(pkg/controllers/disruption/events).

Blocked and Unconsolidatable events are recorded on every pass that finds the same
reason. Like Karpenter's recorder, an event is dropped while another with the same
reason and the same *dedupe values* (the object's uid, for some events also the command
or the disruption reason, never the message) was recorded within its dedupe timeout:
2 minutes by default, 15 for Unconsolidatable, 1 for a NodePool's blocking budget. So
a node whose blocking reason changes from pass to pass (not initialized, then
nominated, then ...) gets one DisruptionBlocked event per window, not one per message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.runtime import Clock, EventRecorder

__all__ = [
    "DEDUPE_SECONDS",
    "REASON_BLOCKED",
    "REASON_LAUNCHING",
    "REASON_NODE_REPAIR_BLOCKED",
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
REASON_NODE_REPAIR_BLOCKED: Final = "NodeRepairBlocked"
_REPAIR_BLOCKED_DEDUPE_SECONDS: Final = 15 * 60.0
REASON_CANDIDATE: Final = "ConsolidationCandidate"
REASON_REJECTED: Final = "ConsolidationRejected"
REASON_APPROVED: Final = "ConsolidationApproved"

DEDUPE_SECONDS: Final = 2 * 60.0
"""Karpenter's default dedupe timeout."""
_UNCONSOLIDATABLE_DEDUPE_SECONDS: Final = 15 * 60.0
_NODEPOOL_BLOCKED_DEDUPE_SECONDS: Final = 60.0


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
        # (reason, uid, *values) -> when the window ends (monotonic seconds)
        self._seen: dict[tuple[str, ...], float] = {}

    def _deduped(self, obj: Mapping[str, Any], reason: str, message: str,
                 *values: str, timeout: float = DEDUPE_SECONDS, warning: bool = False) -> None:
        """Record unless (reason, uid, *values) was recorded less than ``timeout`` ago."""
        meta = obj.get("metadata") or {}
        key = (reason, str(meta.get("uid") or meta.get("name")), *values)
        now = self._clock.monotonic()
        expires = self._seen.get(key)
        if expires is not None and now < expires:
            return
        if len(self._seen) > 10_000:  # bound memory: forget windows that have passed
            self._seen = {k: t for k, t in self._seen.items() if now < t}
        self._seen[key] = now + timeout
        if warning:
            self._recorder.warning(obj, reason, message)
        else:
            self._recorder.normal(obj, reason, message)

    def _both(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
              reason: str, message: str, *values: str,
              timeout: float = DEDUPE_SECONDS) -> None:
        for obj in (node, nodeclaim):
            if obj is not None:
                self._deduped(obj, reason, message, *values, timeout=timeout)

    def blocked(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                message: str) -> None:
        """DisruptionBlocked on the Node and its NodeClaim."""
        self._both(node, nodeclaim, REASON_BLOCKED, sentence(message))

    def repair_blocked(self, node: Mapping[str, Any] | None,
                       nodeclaim: Mapping[str, Any] | None, nodepool: Mapping[str, Any] | None,
                       message: str) -> None:
        """NodeRepairBlocked (Warning) on the Node, its NodeClaim and its NodePool, at
        most every 15 minutes each (Karpenter v1.15.0 disruption events)."""
        for obj in (node, nodeclaim, nodepool):
            if obj is not None:
                self._deduped(obj, REASON_NODE_REPAIR_BLOCKED, message,
                              timeout=_REPAIR_BLOCKED_DEDUPE_SECONDS, warning=True)

    def nodepool_blocked(self, nodepool: Mapping[str, Any], reason: str) -> None:
        """DisruptionBlocked on a NodePool whose budgets allow nothing for ``reason``."""
        self._deduped(
            nodepool, REASON_BLOCKED,
            f"No allowed disruptions for disruption reason {reason} due to blocking budget",
            reason, timeout=_NODEPOOL_BLOCKED_DEDUPE_SECONDS,
        )

    def unconsolidatable(self, node: Mapping[str, Any] | None,
                         nodeclaim: Mapping[str, Any] | None, message: str) -> None:
        """Unconsolidatable on the Node and its NodeClaim."""
        self._both(node, nodeclaim, REASON_UNCONSOLIDATABLE, message,
                   timeout=_UNCONSOLIDATABLE_DEDUPE_SECONDS)

    def candidate(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                  command: str, savings: float) -> None:
        """ConsolidationCandidate: this node is part of a command awaiting validation."""
        self._both(node, nodeclaim, REASON_CANDIDATE,
                   f"Consolidation candidate: {command}, estimated savings ${savings:.2f}/h",
                   command)

    def approved(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                 message: str) -> None:
        """ConsolidationApproved: the Balanced policy approved a one-node move (on the
        Node and its NodeClaim, as Karpenter's balanced evaluator)."""
        self._both(node, nodeclaim, REASON_APPROVED, message)

    def nodepool_approved(self, nodepool: Mapping[str, Any], message: str) -> None:
        """ConsolidationApproved on a NodePool whose share of a multi-node move the
        Balanced policy approved."""
        self._deduped(nodepool, REASON_APPROVED, message)

    def rejected(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                 command: str, why: str) -> None:
        """ConsolidationRejected: validation dropped the command."""
        self._both(node, nodeclaim, REASON_REJECTED,
                   f"Consolidation rejected ({why}): {command}", command, why)

    def launching(self, nodeclaim: Mapping[str, Any], reason: str) -> None:
        """DisruptionLaunching on a replacement NodeClaim."""
        self._deduped(nodeclaim, REASON_LAUNCHING, f"Launching NodeClaim: {_title(reason)}",
                      reason)

    def waiting_readiness(self, nodeclaim: Mapping[str, Any]) -> None:
        """DisruptionWaitingReadiness on a replacement that is not initialized yet."""
        self._deduped(nodeclaim, REASON_WAITING_READINESS,
                      "Waiting on readiness to continue disruption")

    def terminating(self, node: Mapping[str, Any] | None, nodeclaim: Mapping[str, Any] | None,
                    reason: str) -> None:
        """DisruptionTerminating on a candidate being deleted."""
        if node is not None:
            self._deduped(node, REASON_TERMINATING, f"Disrupting Node: {_title(reason)}", reason)
        if nodeclaim is not None:
            self._deduped(
                nodeclaim, REASON_TERMINATING, f"Disrupting NodeClaim: {_title(reason)}", reason
            )

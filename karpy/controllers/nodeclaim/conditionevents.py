"""Karpenter's condition-transition Events, as ``kubectl describe nodeclaim`` shows them.

Karpenter's status library (awslabs/operatorpkg) records a Normal Event whose reason is
the condition type each time a condition's status changes (``kubectl describe``)::

    Normal  Launched  Status condition transitioned, Type: Launched,
                      Status: Unknown -> True, Reason: Launched

It finds the changes by comparing what it saw of an object before with what it sees
now; a condition it had not seen counts as Unknown (its ConditionSet starts every
condition as Unknown). :func:`condition_transitions` makes that comparison between the
conditions a controller read and the ones it wrote, and :func:`record_transitions`
records the Events, so each transition a controller persists is reported once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy.apis import Condition, Transition
from karpy.runtime import EventRecorder

__all__ = ["condition_transitions", "record_transitions"]


def condition_transitions(
    before: Iterable[Condition], after: Iterable[Condition]
) -> list[Transition]:
    """Conditions in ``after`` whose status differs from ``before`` (missing = Unknown).

    ``old_status`` is None for a condition that was missing; its event reads
    ``Unknown -> <status>`` as Karpenter's does.
    """
    seen = {c.type: c.status for c in before}
    out: list[Transition] = []
    for condition in after:
        old = seen.get(condition.type)
        if (old or "Unknown") == condition.status:
            continue
        out.append(
            Transition(condition.type, old, condition.status, condition.reason, condition.message)
        )
    return out


def record_transitions(
    recorder: EventRecorder, obj: Mapping[str, Any], transitions: Sequence[Transition]
) -> None:
    """Record one Normal Event per transition on ``obj`` (reason: the condition type)."""
    for transition in transitions:
        recorder.normal(obj, transition.type, transition.event_message)

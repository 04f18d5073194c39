"""Status conditions: set one, learn whether it transitioned, keep ``Ready`` in step.

This follows the condition semantics of Karpenter's status library (awslabs/operatorpkg):
a kind names a root condition (``Ready``) and the dependent conditions it summarises;
setting a dependent recomputes the root; ``lastTransitionTime`` only moves when the
status changes; every condition records the ``metadata.generation`` it was computed
from. Each change reports its transitions, so that a controller can emit Karpenter's
event ``Status condition transitioned, Type: X, Status: Unknown -> True, Reason: X``.

Example::

    conditions = nodeclaim.status_conditions(now=clock.now)
    change = conditions.set_true(CONDITION_LAUNCHED)
    for transition in change.events:
        recorder.normal(nodeclaim, transition.type, transition.event_message)
    if change:
        await client.patch_status(nodeclaim)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Generic, Protocol, TypeVar

from karpy.apis.core import Condition, ConditionStatus

__all__ = [
    "CONDITION_READY",
    "Change",
    "ConditionSet",
    "Transition",
    "condition_is_true",
    "set_condition",
    "utc_now",
]

CONDITION_READY: Final = "Ready"
_AWAITING_REASON: Final = "AwaitingReconciliation"
_AWAITING_MESSAGE: Final = "object is awaiting reconciliation"


def utc_now() -> datetime:
    """The current time in UTC, to the second as Kubernetes stores it."""
    return datetime.now(UTC).replace(microsecond=0)


@dataclass(frozen=True)
class Transition:
    """A condition whose status changed (or that appeared, when ``old_status`` is None)."""

    type: str
    old_status: ConditionStatus | None
    new_status: ConditionStatus
    reason: str
    message: str

    @property
    def event_message(self) -> str:
        """The text of Karpenter's event for this transition."""
        old = self.old_status or "Unknown"
        text = (
            f"Status condition transitioned, Type: {self.type}, "
            f"Status: {old} -> {self.new_status}, Reason: {self.reason}"
        )
        return f"{text}, Message: {self.message}" if self.message else text


@dataclass(frozen=True)
class Change:
    """What one ``set`` did. True when the conditions were modified at all."""

    modified: bool
    transitions: tuple[Transition, ...] = ()

    def __bool__(self) -> bool:
        return self.modified

    @property
    def events(self) -> tuple[Transition, ...]:
        """Transitions of conditions that existed before: those Karpenter emits events for."""
        return tuple(t for t in self.transitions if t.old_status is not None)

    def __add__(self, other: Change) -> Change:
        return Change(self.modified or other.modified, self.transitions + other.transitions)


_UNCHANGED: Final = Change(False)

C = TypeVar("C", bound=Condition)


class ObjectMetaLike(Protocol):
    """The parts of an object's metadata a condition set reads."""

    @property
    def generation(self) -> int | None: ...
    @property
    def creation_timestamp(self) -> datetime | None: ...
    @property
    def deletion_timestamp(self) -> datetime | None: ...


class ConditionSet(Generic[C]):
    """A view over an object's ``status.conditions`` list that keeps the root in step.

    The list is changed in place. On construction the root and every dependent that is
    missing is added as Unknown (``AwaitingReconciliation``), as Karpenter does.
    """

    def __init__(
        self,
        conditions: list[C],
        condition_type: type[C],
        *,
        root: str = CONDITION_READY,
        dependents: Iterable[str] = (),
        generation: int | None = None,
        created: datetime | None = None,
        deleting: bool = False,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self._conditions = conditions
        self._condition_type = condition_type
        self.root = root
        self.dependents: tuple[str, ...] = tuple(dict.fromkeys(d for d in dependents if d != root))
        self._generation = generation or 0
        self._created = created
        self._deleting = deleting
        self._now = now
        for type_ in (root, *self.dependents):
            if self.get(type_) is None:
                self.set_unknown(type_)

    @classmethod
    def of(
        cls,
        metadata: ObjectMetaLike,
        conditions: list[C],
        condition_type: type[C],
        *,
        dependents: Iterable[str],
        now: Callable[[], datetime] = utc_now,
    ) -> ConditionSet[C]:
        """The condition set of an object whose ``Ready`` summarises ``dependents``:
        generation, creation and deletion come from the object's ``metadata``."""
        return cls(
            conditions,
            condition_type,
            dependents=dependents,
            generation=metadata.generation,
            created=metadata.creation_timestamp,
            deleting=metadata.deletion_timestamp is not None,
            now=now,
        )

    # reading -----------------------------------------------------------------------

    def get(self, type_: str) -> C | None:
        """The condition of this type, or None."""
        return next((c for c in self._conditions if c.type == type_), None)

    def list(self) -> Sequence[C]:
        """All conditions, root last."""
        return tuple(self._conditions)

    def is_true(self, *types: str) -> bool:
        """Whether every condition named is present and True."""
        return all((c := self.get(t)) is not None and c.status == "True" for t in types)

    def root_condition(self) -> C:
        """The root condition (always present)."""
        condition = self.get(self.root)
        assert condition is not None  # added in __init__ and never cleared
        return condition

    # writing -----------------------------------------------------------------------

    def set_true(self, type_: str, reason: str | None = None, message: str = "") -> Change:
        """Set a condition True; the reason defaults to the type, as in Karpenter."""
        return self.set(type_, "True", reason or type_, message)

    def set_false(self, type_: str, reason: str, message: str = "") -> Change:
        """Set a condition False with a reason."""
        return self.set(type_, "False", reason, message)

    def set_unknown(
        self, type_: str, reason: str = _AWAITING_REASON, message: str = _AWAITING_MESSAGE
    ) -> Change:
        """Set a condition Unknown."""
        return self.set(type_, "Unknown", reason, message)

    def set(self, type_: str, status: ConditionStatus, reason: str, message: str = "") -> Change:
        """Set one condition; recompute the root when a dependent changed."""
        change = self._set_one(type_, status, reason, message)
        if change and type_ != self.root:
            change += self._recompute_root()
        return change

    def clear(self, type_: str) -> Change:
        """Remove a condition that is neither the root nor a dependent."""
        if type_ == self.root or type_ in self.dependents:
            raise ValueError(f"condition {type_} is part of {self.root} and cannot be cleared")
        before = len(self._conditions)
        self._conditions[:] = [c for c in self._conditions if c.type != type_]
        return Change(len(self._conditions) != before)

    # internals ---------------------------------------------------------------------

    def _set_one(self, type_: str, status: ConditionStatus, reason: str, message: str) -> Change:
        now = self._now()
        existing = self.get(type_)
        if existing is not None:
            last = existing.last_transition_time if existing.status == status else now
            transition_from: ConditionStatus | None = existing.status
        else:
            tracked = type_ == self.root or type_ in self.dependents
            last = self._created if (tracked and self._created is not None) else now
            transition_from = None
        new = self._condition_type(
            type=type_,
            status=status,
            reason=reason,
            message=message,
            observed_generation=self._generation,
            last_transition_time=last,
        )
        if existing is not None and existing == new:
            return _UNCHANGED
        others = [c for c in self._conditions if c.type != type_]
        if self._deleting:
            others = [
                c.model_copy(update={"observed_generation": self._generation}) for c in others
            ]
        ordered = sorted(
            [*others, new], key=lambda c: (c.type == self.root, c.last_transition_time)
        )
        self._conditions[:] = ordered
        if transition_from == status:
            return Change(True)
        return Change(True, (Transition(type_, transition_from, status, reason, message),))

    def _recompute_root(self) -> Change:
        unhealthy = [
            c
            for c in self._conditions
            if c.type in self.dependents
            and (c.status != "True" or c.observed_generation != self._generation)
        ]
        if not unhealthy:
            return self._set_one(self.root, "True", self.root, "")
        unhealthy.sort(key=lambda c: c.last_transition_time, reverse=True)
        failed = any(
            c.status == "False" and c.observed_generation == self._generation for c in unhealthy
        )
        return self._set_one(
            self.root,
            "False" if failed else "Unknown",
            "UnhealthyDependents" if failed else "ReconcilingDependents",
            ", ".join(f"{c.type}={c.status}" for c in unhealthy),
        )


def condition_is_true(obj: Mapping[str, Any] | None, type_: str) -> bool:
    """Whether the raw object's ``status.conditions`` has ``type_`` with status "True".

    The first entry of that type decides, as :meth:`ConditionSet.get` reads it (the API
    keeps one per type: ``conditions`` is a list map keyed by ``type``).
    """
    for condition in ((obj or {}).get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_:
            return bool(condition.get("status") == "True")
    return False


def set_condition(
    conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str,
    *, generation: int, now: str,
) -> None:
    """meta/v1 SetStatusCondition on raw condition dicts: the entry of ``type_`` is
    updated in place (or appended); ``lastTransitionTime`` becomes ``now`` (an RFC 3339
    timestamp) only when the status changes."""
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != status:
                cond["lastTransitionTime"] = now
            cond.update(status=status, reason=reason, message=message,
                        observedGeneration=generation)  # fmt: skip
            return
    conditions.append({"type": type_, "status": status, "reason": reason, "message": message,
                       "observedGeneration": generation, "lastTransitionTime": now})

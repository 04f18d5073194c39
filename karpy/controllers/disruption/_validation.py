"""Validating a command before it runs (Karpenter's disruption/validation.go).

Emptiness and consolidation commands are decided on one moment's state; a
:class:`Validator` re-checks them before the queue starts them. The controller's own,
:class:`FreshStateValidator`, waits ``Settings.disruption_validation_delay`` and then
re-builds the candidates, the budgets and (for consolidation) the simulation from fresh
state, as Karpenter's EmptinessValidator and ConsolidationValidator do. A read-only view
that answers "what would disruption do now" injects :data:`ACCEPT` instead, which
passes every command at once: nothing runs, so there is nothing to wait for.

A dropped command comes back as a :class:`ValidationFailure` whose kind is one of
Karpenter's (``budget``, ``scheduling``, ``churn``): the ConsolidationRejected event
and ``karpenter_disruption_failed_validations_total``'s callers read it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._budgets import Budgets
from karpy.controllers.disruption._candidates import Candidate, Snapshot
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._whatif import WhatIf, consolidate
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.settings import Settings
from karpy.runtime import Clock

if TYPE_CHECKING:
    from karpy.controllers.disruption._method import Method

__all__ = [
    "ACCEPT",
    "FailureKind",
    "FreshState",
    "FreshStateValidator",
    "ValidationFailure",
    "Validator",
]


class FailureKind(enum.StrEnum):
    """Why validation dropped a command (Karpenter's getValidationFailureReason)."""

    BUDGET = "budget"
    """A candidate was nominated for a pod, or its budget has no room left."""
    SCHEDULING = "scheduling"
    """The fresh simulation decides differently."""
    CHURN = "churn"
    """A candidate is no longer one (pods came or went, it is being deleted, ...)."""


@dataclass(frozen=True, slots=True)
class ValidationFailure:
    """A dropped command: the kind of failure and Karpenter's message for it."""

    kind: FailureKind
    message: str

    def __str__(self) -> str:
        return self.message


class Validator(Protocol):
    """Re-checks a command before it runs (see the module docstring)."""

    async def validate(self, command: Command, method: Method) -> Command | ValidationFailure:
        """The command to run (its candidates possibly trimmed), or why it is dropped."""
        ...


class FreshState(Protocol):
    """What :class:`FreshStateValidator` re-reads: the disruption controller's views."""

    async def snapshot(self) -> Snapshot:
        """The pools, PDBs and pod lookups of this moment."""
        ...

    def candidates(
        self, method: Method, snapshot: Snapshot, *, record: bool = True
    ) -> tuple[list[Candidate], list[Candidate]]:
        """(every candidate of the method's class, those the method wants)."""
        ...

    def budgets(self, reason: DisruptionReason, *, record: bool = True) -> Budgets:
        """The budgets for ``reason`` now."""
        ...

    async def whatif(self) -> WhatIf:
        """The cluster as a what-if simulation sees it now."""
        ...

    def is_node_nominated(self, provider_id: str) -> bool:
        """Whether kube-scheduler or the provisioner nominated pods to this machine."""
        ...


class _Accept:
    """Every command passes at once."""

    async def validate(self, command: Command, method: Method) -> Command | ValidationFailure:
        return command


ACCEPT: Validator = _Accept()
"""The validator of a read-only view (see the module docstring)."""


class FreshStateValidator:
    """Karpenter's validators: wait the validation delay, then re-check the command
    against fresh state (see the module docstring)."""

    def __init__(
        self, state: FreshState, *, clock: Clock, settings: Settings, metrics: KarpenterMetrics
    ) -> None:
        self._state = state
        self._clock = clock
        self._settings = settings
        self._metrics = metrics

    async def validate(self, command: Command, method: Method) -> Command | ValidationFailure:
        await self._clock.sleep(self._settings.disruption_validation_delay)
        snapshot = await self._state.snapshot()
        _, fresh = self._state.candidates(method, snapshot, record=False)
        by_name = {c.name: c for c in fresh}
        budgets = self._state.budgets(method.reason, record=False)
        if method.consolidation_type == "empty":
            return self._empty(command, method, by_name, budgets)
        current = [by_name.get(c.name) for c in command.candidates]
        candidates = [c for c in current if c is not None]
        if len(candidates) != len(current):
            return self._failed(command, method, FailureKind.CHURN,
                                f"{len(current) - len(candidates)} candidates are no longer "
                                "valid")
        for c in candidates:
            if self._state.is_node_nominated(c.provider_id):
                return self._failed(command, method, FailureKind.BUDGET,
                                    "a candidate was nominated during validation")
            if not budgets.take(c.nodepool):
                return self._failed(command, method, FailureKind.BUDGET,
                                    "a candidate can no longer be disrupted without "
                                    "violating budgets")
        again = consolidate(
            await self._state.whatif(), candidates,
            spot_to_spot=self._settings.feature_gates.spot_to_spot_consolidation,
            split=(
                self._settings.split_consolidation if command.consolidation_type == "single"
                else self._settings.multi_node_split_consolidation
            ),
            consolidation_type=command.consolidation_type,
            exclude_own_types=command.consolidation_type == "multi",
        )
        if isinstance(again, str):
            return self._failed(command, method, FailureKind.SCHEDULING, again)
        if not _same_outcome(command, again):
            return self._failed(command, method, FailureKind.SCHEDULING,
                                "scheduling simulation produced new results")
        command.candidates = candidates
        return command

    def _empty(
        self, command: Command, method: Method, fresh: dict[str, Candidate], budgets: Budgets
    ) -> Command | ValidationFailure:
        """Karpenter's EmptinessValidator: keep the candidates still empty, not
        nominated and within budget; the command fails only when none is left."""
        kept = [
            fresh[c.name] for c in command.candidates
            if c.name in fresh and fresh[c.name].empty
            and not self._state.is_node_nominated(c.provider_id)
            and budgets.take(c.nodepool)
        ]
        dropped = len(command.candidates) - len(kept)
        if dropped:
            self._count(method, dropped)
        if not kept:
            return ValidationFailure(
                FailureKind.CHURN, f"{len(command.candidates)} candidates are no longer valid"
            )
        command.candidates = kept
        return command

    def _failed(
        self, command: Command, method: Method, kind: FailureKind, message: str
    ) -> ValidationFailure:
        self._count(method, len(command.candidates))
        return ValidationFailure(kind, message)

    def _count(self, method: Method, candidates: int) -> None:
        self._metrics.disruption_failed_validations.add(
            candidates, {"consolidation_type": method.consolidation_type}
        )


def _same_outcome(command: Command, again: Command) -> bool:
    """Karpenter's validateCommand: the same decision, and every replacement type the
    command would launch is still among the ones the fresh simulation allows."""
    if len(again.replacements) != len(command.replacements):
        return False
    for old, new in zip(
        sorted(command.replacements, key=lambda p: p.price),
        sorted(again.replacements, key=lambda p: p.price),
        strict=True,
    ):
        if not set(old.instance_type_names) <= set(new.instance_type_names):
            return False
    return True


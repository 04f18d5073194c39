"""What a disruption method is, and what it is given.

Karpenter's methods are strategies (emptiness, drift, multi- and single-node
consolidation): each filters the candidates it cares about, then computes commands
within the budgets. They share one :class:`Context` — the what-if simulation of the
pass, the budgets, events, settings and the validation step the controller provides.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from karpy.apis.v1.nodepool import DisruptionReason
from karpy.controllers.disruption._budgets import Budgets
from karpy.controllers.disruption._candidates import Candidate, DisruptionClass
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._events import DisruptionEvents
from karpy.controllers.disruption._validation import ValidationFailure
from karpy.controllers.disruption._whatif import WhatIf
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.settings import Settings
from karpy.runtime import Clock

__all__ = ["Context", "Method", "Validate"]

Validate = Callable[[Command, "Method"], Awaitable["Command | ValidationFailure"]]
"""The controller's validator (``_validation.Validator.validate``): the (possibly
trimmed) command, or why it was dropped."""


@dataclass(slots=True)
class Context:
    """One method's evaluation: the pass's view and the controller's services."""

    whatif: WhatIf
    candidates: list[Candidate]
    """Candidates this method wants (after its ``should_disrupt``)."""
    budgets: Budgets
    events: DisruptionEvents
    clock: Clock
    settings: Settings
    validate: Validate
    all_candidates: list[Candidate] = field(default_factory=list)
    """Every candidate of the pass, before the method's filter (Balanced totals)."""
    pool_totals: Mapping[str, tuple[float, float]] | None = None
    """Per NodePool over all its nodes: (cost, disruption cost), the Balanced score's
    denominators (``_consolidation.pool_totals``); None: the candidates' own sums."""
    metrics: KarpenterMetrics | None = None
    """Where consolidation moves and their Balanced scores are counted."""


class Method(Protocol):
    """A disruption strategy (see the module docstring)."""

    reason: DisruptionReason
    """The disruption reason its commands carry (and whose budgets apply)."""
    disruption_class: DisruptionClass
    consolidation_type: str
    """``empty``, ``multi``, ``single`` or "" (the metrics' label)."""

    def should_disrupt(self, candidate: Candidate) -> bool | str:
        """Whether the method considers ``candidate``: True, False (silently not), or
        the reason it does not (recorded as an Unconsolidatable event)."""
        ...

    async def compute(self, context: Context) -> Sequence[Command]:
        """The commands to execute now (usually at most one)."""
        ...

"""Label selectors (``matchLabels`` + ``matchExpressions``) compiled into hashable
matchers. (The ``a=b,c in (x)`` query strings of a list call are
``karpy.runtime.indexes.LabelQuery``.)"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LabelMatcher", "SelectorTerm"]


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """One expression: ``key`` In/NotIn ``values``, or ``key`` Exists/DoesNotExist."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this expression."""
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return False

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({', '.join(sorted(self.values))})"


@dataclass(frozen=True, slots=True)
class LabelMatcher:
    """A Kubernetes ``metav1.LabelSelector`` compiled for matching. ``nothing`` is the
    selector of an absent (null) ``labelSelector`` in a spread constraint or affinity
    term, which selects no pod; an empty selector selects every pod."""

    terms: frozenset[SelectorTerm] = frozenset()
    nothing: bool = False

    @classmethod
    def from_dict(cls, selector: Mapping[str, Any] | None) -> LabelMatcher:
        """From a ``labelSelector`` dict; None gives the select-nothing selector."""
        if selector is None:
            return cls(nothing=True)
        terms = [
            SelectorTerm(key, "In", frozenset((value,)))
            for key, value in (selector.get("matchLabels") or {}).items()
        ]
        for expression in selector.get("matchExpressions") or ():
            operator = expression["operator"]
            if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise ValueError(
                    f"label selector on {expression['key']}: unknown operator {operator!r}"
                )
            terms.append(
                SelectorTerm(expression["key"], operator, frozenset(expression.get("values") or ()))
            )
        return cls(frozenset(terms))

    def with_terms(self, terms: Iterable[SelectorTerm]) -> LabelMatcher:
        """This selector AND more expressions (``matchLabelKeys`` turn into these)."""
        if self.nothing:
            return self
        return LabelMatcher(self.terms | frozenset(terms))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod with ``labels`` is selected."""
        if self.nothing:
            return False
        return all(term.matches(labels) for term in self.terms)

    def __str__(self) -> str:
        if self.nothing:
            return "<none>"
        return ", ".join(sorted(str(t) for t in self.terms)) or "<all>"

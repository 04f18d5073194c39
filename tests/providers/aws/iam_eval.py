"""The smallest IAM policy evaluator that can judge karpy's requests against Karpenter's
controller policy (iam_policy.py), conditions included.

Why hand-written: of the maintained evaluators, none on PyPI evaluates conditions
against a request context one supplies (policyuniverse expands and matches actions and
ARNs only; parliament lints; moto's own IAM enforcement ignores ``Condition``); the
complete ones are JavaScript (@cloud-copilot/iam-simulate) or Rust (iam-rs).

What it does, following the IAM evaluation logic for identity-based policies:

* a request is one (action, resource ARN, context) triple; an AWS call that touches
  several resources (CreateFleet: fleet, instances, volumes, launch template, image, ...)
  is several requests, all of which must be allowed (iam_check.py builds them);
* an explicit ``Deny`` that applies wins; otherwise some ``Allow`` must apply;
* ``Action``: case-insensitive, ``*`` and ``?`` wildcards; ``Resource``: ARN with
  wildcards (a request on ``*`` matches only ``"Resource": "*"``);
* ``Condition``: every operator and every key must hold; for one key any listed value
  may match. Operators: ``StringEquals``, ``StringNotEquals``, ``StringLike``,
  ``StringNotLike``, ``Bool``, ``Null``, each with ``IfExists``, and the set prefixes
  ``ForAllValues:`` / ``ForAnyValue:`` for multi-valued keys (``aws:TagKeys``).
  Condition key names are case-insensitive (tag keys in ``aws:RequestTag/<key>`` too, as
  IAM documents); values are case-sensitive.

What it does not do: ``NotAction``/``NotResource``/``Principal``, policy variables,
numeric/date/IP/ARN operators. A statement using any of them raises ``ValueError`` when
evaluated, so a policy update that needs them is noticed, not half-judged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = ["Decision", "Request", "StatementResult", "evaluate"]

ContextValue = str | Sequence[str]

_SUPPORTED_ELEMENTS = {"Sid", "Effect", "Action", "Resource", "Condition"}
_STRING_OPERATORS = {"StringEquals", "StringNotEquals", "StringLike", "StringNotLike", "Bool"}


@dataclass(frozen=True)
class Request:
    """One authorization: ``action`` (``service:Operation``) on ``resource`` (an ARN or
    ``*``) with the request context's keys (``aws:RequestTag/<key>``, ``aws:TagKeys``,
    ``aws:ResourceTag/<key>``, ``ec2:CreateAction``, ...)."""

    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=dict)

    def value(self, key: str) -> ContextValue | None:
        """The context value of ``key`` (case-insensitive), None when absent."""
        wanted = key.lower()
        for k, v in self.context.items():
            if k.lower() == wanted:
                return v
        return None


@dataclass(frozen=True)
class StatementResult:
    """How one statement whose action matched judged the request: ``why`` is empty when
    it applies, else the first thing that kept it from applying."""

    sid: str
    effect: str
    why: str

    @property
    def applies(self) -> bool:
        return not self.why


@dataclass(frozen=True)
class Decision:
    """The verdict on one request, with every statement that was considered (those whose
    ``Action`` names the request's action)."""

    request: Request
    allowed: bool
    considered: tuple[StatementResult, ...]

    def explain(self) -> str:
        """A human-readable account of the decision (for a test failure)."""
        verdict = "allowed" if self.allowed else "DENIED"
        lines = [f"{self.request.action} on {self.request.resource}: {verdict}"]
        if not self.considered:
            lines.append("  no statement of the policy names this action")
        for s in self.considered:
            lines.append(
                f"  {s.effect} {s.sid}: " + ("applies" if s.applies else f"does not apply: {s.why}")
            )
        return "\n".join(lines)


@lru_cache(maxsize=1024)
def _pattern(glob: str, *, ignore_case: bool) -> re.Pattern[str]:
    """An IAM wildcard pattern (``*`` any run, ``?`` one character) as a regex."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(f"^{body}$", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _action_matches(statement: Mapping[str, Any], action: str) -> bool:
    return any(_pattern(a, ignore_case=True).match(action) for a in _as_list(statement["Action"]))


def _resource_matches(statement: Mapping[str, Any], resource: str) -> bool:
    for pattern in _as_list(statement["Resource"]):
        if pattern == "*":
            return True
        if resource != "*" and _pattern(pattern, ignore_case=False).match(resource):
            return True
    return False


def _one_value(operator: str, actual: str, expected: str) -> bool:
    if operator == "StringEquals":
        return actual == expected
    if operator == "StringNotEquals":
        return actual != expected
    if operator == "StringLike":
        return _pattern(expected, ignore_case=False).match(actual) is not None
    if operator == "StringNotLike":
        return _pattern(expected, ignore_case=False).match(actual) is None
    if operator == "Bool":
        return actual.lower() == expected.lower()
    raise ValueError(f"unsupported condition operator {operator!r}")


def _key_holds(operator: str, key: str, expected: list[str], request: Request) -> str:
    """Empty when the condition on ``key`` holds, else why not."""
    qualifier, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists") and base != "Null"
    if if_exists:
        base = base[: -len("IfExists")]
    actual = request.value(key)
    if base == "Null":
        wants_absent = [e.lower() for e in expected] == ["true"]
        if (actual is None) == wants_absent:
            return ""
        return f"Null {key}: key is {'present' if actual is not None else 'absent'}"
    if base not in _STRING_OPERATORS:
        raise ValueError(f"unsupported condition operator {operator!r}")
    negated = base.startswith("StringNot")

    def matches(value: str) -> bool:
        # a negated operator holds when the value matches none of the listed ones
        results = [_one_value(base, value, e) for e in expected]
        return all(results) if negated else any(results)

    if qualifier == "ForAllValues":
        values = [] if actual is None else _as_list(actual)
        bad = [v for v in values if not matches(v)]
        return f"{operator} {key}: {bad} not among {expected}" if bad else ""
    if qualifier == "ForAnyValue":
        values = [] if actual is None else _as_list(actual)
        if any(matches(v) for v in values):
            return ""
        return f"{operator} {key}: none of {values} among {expected}"
    if qualifier:
        raise ValueError(f"unsupported condition set operator {operator!r}")
    if actual is None:
        # an absent key matches no value: a negated operator then holds
        return "" if if_exists or negated else f"{operator} {key}: the request has no such key"
    if not isinstance(actual, str):
        return f"{operator} {key}: multi-valued key needs ForAllValues/ForAnyValue"
    if matches(actual):
        return ""
    return f"{operator} {key}: {actual!r} does not match {expected}"


def _statement_why(statement: Mapping[str, Any], request: Request) -> str:
    unknown = set(statement) - _SUPPORTED_ELEMENTS
    if unknown:
        raise ValueError(f"statement {statement.get('Sid')}: unsupported elements {unknown}")
    if not _resource_matches(statement, request.resource):
        return f"resource {request.resource} is not one of {_as_list(statement['Resource'])}"
    for operator, keys in (statement.get("Condition") or {}).items():
        for key, expected in keys.items():
            why = _key_holds(operator, key, [str(e) for e in _as_list(expected)], request)
            if why:
                return why
    return ""


def evaluate(statements: Sequence[Mapping[str, Any]], request: Request) -> Decision:
    """Judge ``request`` against identity-policy ``statements`` (see module doc)."""
    considered = tuple(
        StatementResult(
            sid=str(s.get("Sid", f"statement {i}")),
            effect=str(s["Effect"]),
            why=_statement_why(s, request),
        )
        for i, s in enumerate(statements)
        if _action_matches(s, request.action)
    )
    denied = any(r.applies and r.effect == "Deny" for r in considered)
    allowed = not denied and any(r.applies and r.effect == "Allow" for r in considered)
    return Decision(request=request, allowed=allowed, considered=considered)

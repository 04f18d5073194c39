"""Which repair policy a node's conditions call for, and how urgently: Karpenter v1.15.0's
repair policy matcher (pkg/controllers/node/health/policy.go), written for karpy.

A provider's :class:`~karpy.cloudprovider.RepairPolicy` set is checked once, at start-up
(:class:`RepairPolicyMatcher` raises ``ValueError`` naming the bad policy). For each
condition of a node, the policies of its (type, status) whose ``reason_regex`` matches
its reason apply; when none does, the set's fallback (a policy with no regex) applies.
A policy is *eligible* once its toleration has passed since the condition's transition
(never counted from before the node was created). Of the eligible ones:

- the **action** is the most disruptive (ReplaceNode over RebootNode), then the highest
  priority, the earliest eligible, the condition type's name;
- the **drain bound** is the shortest ``termination_grace_period`` any of them sets;
- the **score** that orders repair across nodes is the priority's dense rank plus the
  time since eligibility in units of 30 minutes, so a long-waiting low-priority node
  eventually goes before a fresh high-priority one.

Differs from upstream in one place: upstream refuses a policy set with more than one
policy without a regex (there is one fallback for every condition). karpy takes a
regex-less policy as the fallback of its own (type, status), and the set's first one for
the others, so a provider written against v1.14 (every policy regex-less) keeps working.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from karpy.apis.duration import format_go_duration
from karpy.cloudprovider import RepairPolicy
from karpy.runtime import parse_time

__all__ = ["AGING", "RepairPolicyMatcher", "RepairResult"]

AGING: Final = timedelta(minutes=30)
"""Eligibility age worth one priority rank (Karpenter's agingConstant)."""
_ACTION_RANK: Final = {"RebootNode": 0, "ReplaceNode": 1}


@dataclass(frozen=True, slots=True)
class RepairResult:
    """The repair a node's eligible policies call for at one moment."""

    action: str
    """``ReplaceNode`` or ``RebootNode``."""
    condition: str
    condition_status: str
    reason: str
    reason_regex: str
    eligible_at: datetime
    """When the selected policy became eligible."""
    termination_grace_period: timedelta | None
    """The shortest drain bound of the eligible policies (None: inherit the NodeClaim's)."""
    rank: int
    score_eligible_at: datetime

    def score_at(self, now: datetime) -> float:
        """Higher repairs first: priority rank plus age since eligibility / 30 minutes."""
        return self.rank + (now - self.score_eligible_at) / AGING

    def log_values(self) -> dict[str, Any]:
        """The fields of Karpenter's "selected repair policy" log line."""
        values: dict[str, Any] = {
            "condition": self.condition,
            "status": self.condition_status,
            "reason": self.reason,
            "reason-regex": self.reason_regex,
            "fallback": self.reason_regex == "",
            "action": self.action,
            "eligible-at": self.eligible_at.isoformat(),
        }
        if self.termination_grace_period is not None:
            values["termination-grace-period"] = format_go_duration(self.termination_grace_period)
        return values


@dataclass(frozen=True, slots=True)
class _Compiled:
    policy: RepairPolicy
    regex: re.Pattern[str] | None


class RepairPolicyMatcher:
    """The provider's policies, validated and indexed (see the module docstring)."""

    def __init__(self, policies: Sequence[RepairPolicy]) -> None:
        if not policies:
            raise ValueError("node repair needs the cloud provider's repair policies; it has none")
        self._groups: dict[tuple[str, str], list[_Compiled]] = {}
        self._fallbacks: dict[tuple[str, str], _Compiled] = {}
        first_fallback: _Compiled | None = None
        for i, policy in enumerate(policies):
            compiled = _compile(i, policy)
            key = (policy.condition_type, policy.condition_status)
            self._groups.setdefault(key, [])
            if compiled.regex is None:
                if policy.action != "ReplaceNode":
                    raise ValueError(
                        f"repair policy[{i}] ({_describe(policy)}) is a fallback (no "
                        "reason_regex) and must use action ReplaceNode"
                    )
                self._fallbacks.setdefault(key, compiled)
                first_fallback = first_fallback or compiled
            else:
                self._groups[key].append(compiled)
        if first_fallback is None:
            raise ValueError(
                "the repair policies define no fallback (a policy with no reason_regex)"
            )
        self._fallback = first_fallback
        priorities = sorted({p.priority for p in policies})
        self._ranks = {priority: rank for rank, priority in enumerate(priorities)}

    def matches(self, condition: Mapping[str, Any]) -> bool:
        """Whether a policy covers this condition's type and status (the breaker counts
        such nodes unhealthy whatever their reason or toleration)."""
        return (str(condition.get("type")), str(condition.get("status"))) in self._groups

    def resolve(self, node: Mapping[str, Any], now: datetime) -> RepairResult | None:
        """The repair ``node`` calls for at ``now``; None if no policy is eligible."""
        created = parse_time((node.get("metadata") or {}).get("creationTimestamp"))
        best: tuple[tuple[int, int, datetime, str], RepairResult] | None = None
        bound: tuple[timedelta, datetime, str] | None = None
        score: tuple[float, int, datetime] | None = None
        for cond in (node.get("status") or {}).get("conditions") or ():
            key = (str(cond.get("type")), str(cond.get("status")))
            if key not in self._groups:
                continue
            since = parse_time(cond.get("lastTransitionTime")) or created
            if since is None:
                continue
            if created is not None and since < created:
                since = created
            reason = str(cond.get("reason") or "")
            chosen = [c for c in self._groups[key] if c.regex and c.regex.search(reason)]
            if not chosen:
                chosen = [self._fallbacks.get(key, self._fallback)]
            for compiled in chosen:
                policy = compiled.policy
                eligible = since + policy.toleration
                if eligible > now:
                    continue
                rank = self._ranks[policy.priority]
                value = rank + (now - eligible) / AGING
                if score is None or value > score[0]:
                    score = (value, rank, eligible)
                tgp = policy.termination_grace_period
                if tgp is not None and (bound is None or (tgp, eligible, key[0]) < bound):
                    bound = (tgp, eligible, key[0])
                # Selected first: the most disruptive action, then the highest priority,
                # the earliest eligible, the condition type's name (see the module docs).
                order = (-_ACTION_RANK[policy.action], -policy.priority, eligible, key[0])
                if best is None or order < best[0]:
                    best = (order, RepairResult(
                        action=policy.action, condition=key[0], condition_status=key[1],
                        reason=reason, reason_regex=policy.reason_regex, eligible_at=eligible,
                        termination_grace_period=None, rank=0, score_eligible_at=eligible,
                    ))
        if best is None or score is None:
            return None
        return replace(best[1], termination_grace_period=bound[0] if bound else None,
                       rank=score[1], score_eligible_at=score[2])

def _describe(policy: RepairPolicy) -> str:
    return f"{policy.condition_type}={policy.condition_status}"


def _compile(index: int, policy: RepairPolicy) -> _Compiled:
    where = f"repair policy[{index}] ({_describe(policy)})"
    if not policy.condition_type:
        raise ValueError(f"{where} has an empty condition type")
    if policy.condition_status not in ("True", "False", "Unknown"):
        raise ValueError(f"{where} has condition status {policy.condition_status!r}")
    if policy.toleration < timedelta(0):
        raise ValueError(f"{where} has a negative toleration {policy.toleration}")
    tgp = policy.termination_grace_period
    if tgp is not None and tgp < timedelta(0):
        raise ValueError(f"{where} has a negative termination grace period {tgp}")
    if not 0 <= policy.priority <= 100:
        raise ValueError(f"{where} has priority {policy.priority} outside [0, 100]")
    if policy.action not in _ACTION_RANK:
        raise ValueError(f"{where} has unsupported action {policy.action!r}")
    if not policy.reason_regex:
        return _Compiled(policy, None)
    try:
        return _Compiled(policy, re.compile(policy.reason_regex))
    except re.error as exc:
        raise ValueError(f"{where} has an invalid reason_regex: {exc}") from None

"""PodDisruptionBudgets as disruption reads them (Karpenter's ``pdb.Limits``).

Disruption never asks the API whether an eviction would pass: it reads every PDB from
the cache once per pass and answers two questions per pod — would evicting it now be
refused (``disruptionsAllowed`` is 0, or more than one PDB covers it, which the
eviction API refuses outright), and does a PDB block it *for good* (maxUnavailable 0
or minAvailable 100 %, which no amount of waiting changes)?
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.scheduling import LabelMatcher

__all__ = ["PdbLimits"]

log = logging.getLogger("karpy.disruption")


@dataclass(frozen=True, slots=True)
class _Budget:
    key: str
    namespace: str
    selector: LabelMatcher
    disruptions_allowed: int
    fully_blocking: bool
    always_evict_unhealthy: bool


def _fully_blocking(spec: Mapping[str, Any]) -> bool:
    max_unavailable = spec.get("maxUnavailable")
    min_available = spec.get("minAvailable")
    return max_unavailable in (0, "0%") or min_available == "100%"


def _unready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "False" for c in conditions)


class PdbLimits:
    """Every PodDisruptionBudget of the cluster, indexed by namespace."""

    def __init__(self, pdbs: Iterable[Mapping[str, Any]]) -> None:
        self._by_namespace: dict[str, list[_Budget]] = {}
        for pdb in pdbs:
            meta = pdb.get("metadata") or {}
            spec = pdb.get("spec") or {}
            selector = spec.get("selector")
            if selector is None:
                continue  # policy/v1: a null selector selects no pods
            namespace = str(meta.get("namespace") or "default")
            try:
                parsed = LabelMatcher.from_dict(selector)
            except (ValueError, KeyError) as exc:
                # The API server validates selectors; one that fails here is not ours to
                # fix, and one bad PDB must not stop disruption for the whole cluster.
                log.error("ignoring poddisruptionbudget with an invalid selector",
                          extra={"PodDisruptionBudget": {"namespace": namespace,
                                                         "name": meta.get("name")},
                                 "error": str(exc)})
                continue
            budget = _Budget(
                key=f"{namespace}/{meta.get('name')}",
                namespace=namespace,
                selector=parsed,
                disruptions_allowed=int((pdb.get("status") or {}).get("disruptionsAllowed") or 0),
                fully_blocking=_fully_blocking(spec),
                always_evict_unhealthy=spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow",
            )
            self._by_namespace.setdefault(namespace, []).append(budget)

    def _matching(self, pod: Mapping[str, Any]) -> list[_Budget]:
        meta = pod.get("metadata") or {}
        budgets = self._by_namespace.get(str(meta.get("namespace") or "default"), ())
        labels = meta.get("labels") or {}
        return [b for b in budgets if b.selector.matches(labels)]

    def __bool__(self) -> bool:
        """Whether any PodDisruptionBudget is known."""
        return bool(self._by_namespace)

    def blocking(self, pod: Mapping[str, Any], *, fully: bool = False) -> list[str]:
        """The keys of the PDBs that would refuse evicting ``pod`` now ([] if none).

        More than one PDB covering a pod blocks it (the eviction API refuses such pods);
        ``fully=True`` asks only about PDBs that can never allow an eviction.
        """
        matching = self._matching(pod)
        if len(matching) > 1:
            return sorted(b.key for b in matching)
        for budget in matching:
            if budget.always_evict_unhealthy and _unready(pod):
                return []
            blocked = budget.fully_blocking if fully else budget.disruptions_allowed == 0
            if blocked:
                return [budget.key]
        return []
